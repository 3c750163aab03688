package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/protoc-gen-weft/internal/testpb"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

// TestGeneratedFilesAreCurrent runs protoc (Debian's protobuf-compiler)
// with this plugin and protoc-gen-go on the repository's .proto files and
// compares the output with the files checked in.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc is not installed; .ci/run installs protobuf-compiler")
		}
		t.Skip("no protoc")
	}
	bin := t.TempDir()
	for pkg, name := range map[string]string{".": "protoc-gen-weft", "google.golang.org/protobuf/cmd/protoc-gen-go": "protoc-gen-go"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	for _, dir := range []string{"internal/testpb", "../examples/echo/echopb"} {
		protos, _ := filepath.Glob(filepath.Join(dir, "*.proto"))
		for _, p := range protos {
			out := t.TempDir()
			cmd := exec.Command(protoc, "--plugin=protoc-gen-weft="+filepath.Join(bin, "protoc-gen-weft"),
				"--plugin=protoc-gen-go="+filepath.Join(bin, "protoc-gen-go"),
				"-I", dir, "--go_out="+out, "--go_opt=paths=source_relative",
				"--weft_out="+out, "--weft_opt=paths=source_relative", filepath.Base(p))
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("protoc %s: %v\n%s", p, err, b)
			}
			gen, _ := filepath.Glob(filepath.Join(out, "*.go"))
			if len(gen) != 2 {
				t.Fatalf("%s: generated %v, want the messages and the weft file", p, gen)
			}
			for _, g := range gen {
				want, err := os.ReadFile(filepath.Join(dir, filepath.Base(g)))
				if err != nil {
					t.Fatalf("%s is not checked in: %v", filepath.Base(g), err)
				}
				got, _ := os.ReadFile(g)
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from what protoc generates now: regenerate it (see %s)", filepath.Join(dir, filepath.Base(g)), p)
				}
			}
		}
	}
}

// kinds implements the generated KindsServer.
type kinds struct{}

var _ testpb.KindsServer = kinds{}

func (kinds) Unary(ctx context.Context, in *testpb.Req) (*testpb.Resp, error) {
	return &testpb.Resp{Text: in.GetText(), Count: 1}, nil
}

// List answers three times.
func (kinds) List(ctx context.Context, in *testpb.Req, out *proxy.ServerStream[*testpb.Resp]) error {
	for i := range int32(3) {
		if err := out.Send(&testpb.Resp{Text: in.GetText(), Count: i + 1}); err != nil {
			return err
		}
	}
	return nil
}

func (kinds) Count(ctx context.Context, in *proxy.ClientStream[*testpb.Req]) (*testpb.Resp, error) {
	n := int32(0)
	for {
		if _, err := in.Recv(); err != nil {
			return &testpb.Resp{Count: n}, nil
		}
		n++
	}
}

// Chat answers each request as it comes, numbered, until the consumer's
// last.
func (kinds) Chat(ctx context.Context, st *proxy.BidiStream[*testpb.Req, *testpb.Resp]) error {
	for n := int32(1); ; n++ {
		in, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testpb.Resp{Text: "re: " + in.GetText(), Count: n}); err != nil {
			return err
		}
	}
}

// TestGeneratedServiceServesAndIsCalled: an implementation of the generated
// interface is a weft service with its streaming kinds, and the generated
// stub calls each of its methods over Triple, the three streaming kinds
// through their generated consumer funcs.
func TestGeneratedServiceServesAndIsCalled(t *testing.T) {
	iv, err := proxy.NewServiceInvoker(kernel.NewURL("tri", "", 0, testpb.KindsName, nil), kinds{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]kernel.StreamKind{"List": kernel.ServerStreaming, "Count": kernel.ClientStreaming, "Chat": kernel.BidiStreaming}
	for m, k := range want {
		if got := iv.StreamKinds()[m]; got != k {
			t.Errorf("%s: kind %v, want %v", m, got, k)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	quiet := weft.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	provider, err := weft.New(weft.WithoutEnv(), quiet, weft.WithService("kinds", kinds{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("protocols: {tri: {port: %d}}\nprovider: {services: {kinds: {interface: %s, protocol: tri}}}\n", port, testpb.KindsName))))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer provider.Stop(context.Background())
	var c testpb.KindsClient
	consumer, err := weft.New(weft.WithoutEnv(), quiet, weft.WithReference("kinds", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf("consumer: {references: {kinds: {interface: %s, url: \"tri://127.0.0.1:%d\"}}}\n", testpb.KindsName, port))))
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer consumer.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Unary(ctx, &testpb.Req{Text: "hi"})
	if err != nil || res.GetText() != "hi" || res.GetCount() != 1 {
		t.Fatalf("Unary: %v %v", res, err)
	}

	// Server streaming: the three answers, then io.EOF.
	list, err := c.List(ctx, &testpb.Req{Text: "item"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for i := int32(1); ; i++ {
		r, err := list.Recv()
		if err == io.EOF {
			if i != 4 {
				t.Fatalf("List: io.EOF after %d answers, want 3", i-1)
			}
			break
		}
		if err != nil || r.GetText() != "item" || r.GetCount() != i {
			t.Fatalf("List answer %d: %v %v", i, r, err)
		}
	}

	// Client streaming: five requests, one answer counting them.
	count, err := c.Count(ctx)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	for i := range 5 {
		if err := count.Send(&testpb.Req{Text: fmt.Sprint(i)}); err != nil {
			t.Fatalf("Count: send %d: %v", i, err)
		}
	}
	if r, err := count.CloseAndRecv(); err != nil || r.GetCount() != 5 {
		t.Fatalf("Count: %v %v, want a count of 5", r, err)
	}

	// Bidirectional: each request answered before the next is sent, then
	// io.EOF once the consumer has closed its side.
	chat, err := c.Chat(ctx)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	for i := int32(1); i <= 3; i++ {
		text := fmt.Sprint("hello ", i)
		if err := chat.Send(&testpb.Req{Text: text}); err != nil {
			t.Fatalf("Chat: send %d: %v", i, err)
		}
		r, err := chat.Recv()
		if err != nil || r.GetText() != "re: "+text || r.GetCount() != i {
			t.Fatalf("Chat: answer %d: %v %v", i, r, err)
		}
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatalf("Chat: CloseSend: %v", err)
	}
	if r, err := chat.Recv(); err != io.EOF {
		t.Fatalf("Chat after CloseSend: %v %v, want io.EOF", r, err)
	}
}
