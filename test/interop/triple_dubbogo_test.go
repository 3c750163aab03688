package interop_test

// Triple between weft and a real dubbo-go v3.3.1 (cmd/dubbogo-tri, its own
// process), both directions, IDL (protobuf) and non-IDL (hessian2 in
// TripleRequestWrapper). What dubbo-go does differently on Triple is in
// cmd/dubbogo-tri's package doc.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/echo/echopb"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// buildDubbogoTri builds cmd/dubbogo-tri.
func buildDubbogoTri(t *testing.T) string {
	t.Helper()
	return goBuild(t, ".", "./cmd/dubbogo-tri")
}

// weftIDLEcho is weftbench.echo.EchoService on weft.
type weftIDLEcho struct{}

func (weftIDLEcho) Echo(ctx context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) {
	if in.GetMsg() == "fail" {
		return nil, errors.New("fail: idl")
	}
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		if x := inv.AttachmentString("x-req"); x != "" {
			kernel.SetReplyAttachment(ctx, "x-resp", "resp-"+x)
		}
	}
	return &echopb.EchoReply{Msg: in.GetMsg()}, nil
}

// dubbogoTriResult is what `dubbogo-tri -mode call` prints.
type dubbogoTriResult struct {
	Echo            string            `json:"echo"`
	EchoAttachments map[string]string `json:"echo_attachments"`
	User            *struct {
		ID    int64
		Name  string
		Tags  []string
		Score float64
	} `json:"user"`
	FailError string `json:"fail_error"`
}

func runDubbogoTriCall(t *testing.T, bin, addr, kind, msg string) dubbogoTriResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-mode", "call", "-addr", addr, "-kind", kind, "-msg", msg, "-att", "42")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dubbo-go %s call: %v\n%s", kind, err, stderr.String())
	}
	var r dubbogoTriResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("dubbo-go %s call printed %q: %v", kind, out, err)
	}
	return r
}

// TestDubboGoTripleConsumerToWeftProvider: dubbo-go's Triple consumer
// calls a weft App exporting the non-IDL and the IDL service on tri.
func TestDubboGoTripleConsumerToWeftProvider(t *testing.T) {
	bin := buildDubbogoTri(t)
	addr, port := freeAddr(t)
	svc := &weftEcho{}
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {tri: {port: %d}}
provider:
  services:
    echo: {interface: %s, protocol: tri}
    idl: {interface: weftbench.echo.EchoService, protocol: tri}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc), weft.WithService("idl", weftIDLEcho{}))

	t.Run("nonidl", func(t *testing.T) {
		r := runDubbogoTriCall(t, bin, addr, "nonidl", "héllo")
		if r.Echo != "héllo" {
			t.Errorf("Echo: %q", r.Echo)
		}
		if r.EchoAttachments["x-resp"] != "resp-42" {
			t.Errorf("Echo's reply attachments %v, want x-resp: resp-42", r.EchoAttachments)
		}
		if u := r.User; u == nil || u.ID != 7 || u.Name != "user-7" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 10.5 {
			t.Errorf("GetUser(7): %+v", u)
		}
		// dubbo-go's triple error text: "<code name>: <grpc-message>".
		if r.FailError != "unknown: fail: héllo" {
			t.Errorf("Fail: %q, want weft's business error as UNKNOWN with its text", r.FailError)
		}
		if n := svc.echoes.Load(); n != 1 {
			t.Errorf("weft's Echo ran %d times", n)
		}
		if n := svc.fails.Load(); n != 1 {
			t.Errorf("weft's Fail ran %d times (dubbo-go must not retry it)", n)
		}
	})
	t.Run("idl", func(t *testing.T) {
		r := runDubbogoTriCall(t, bin, addr, "idl", "proto ☺")
		if r.Echo != "proto ☺" {
			t.Errorf("Echo: %q", r.Echo)
		}
		if r.FailError != "unknown: fail: idl" {
			t.Errorf(`Echo("fail"): %q, want weft's business error as UNKNOWN with its text`, r.FailError)
		}
		if r.EchoAttachments["x-resp"] != "resp-42" {
			t.Errorf("Echo's reply attachments %v, want x-resp: resp-42", r.EchoAttachments)
		}
	})
}

// triEchoClient is a weft stub of dubbo-go's non-IDL
// org.weft.bench.EchoService. dubbo-go serves a non-IDL method under its Go
// name only, so the tags give the Go names.
type triEchoClient struct {
	Echo    func(ctx context.Context, v string) (string, error)        `weft:"Echo"`
	GetUser func(ctx context.Context, id int64) (*dubbogo.User, error) `weft:"GetUser"`
	Fail    func(ctx context.Context, msg string) error                `weft:"Fail"`
	// JavaEcho is the Java-style name weft (and Java) use by default.
	JavaEcho func(ctx context.Context, v string) (string, error) `weft:"echo"`
}

// triIDLClient is a weft stub of dubbo-go's IDL weftbench.echo.EchoService;
// dubbo-go serves an IDL method under both first-letter cases.
type triIDLClient struct {
	Echo     func(ctx context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) `weft:"Echo"`
	JavaEcho func(ctx context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) `weft:"echo"`
}

// TestWeftConsumerToDubboGoTripleProvider: a weft App's references over
// tri:// call dubbo-go's Triple provider.
func TestWeftConsumerToDubboGoTripleProvider(t *testing.T) {
	// The POJO's Go type for the replies (hessian's registry is
	// process-wide; registering again is a no-op).
	hessian2.RegisterPOJO(&dubbogo.User{})
	bin := buildDubbogoTri(t)
	addr, _ := freeAddr(t)
	startDubbogoProvider(t, bin, addr) // cmd/dubbogo-tri prints "listening" as dubbogo-echo does
	var c triEchoClient
	var idl triIDLClient
	app := startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "tri://%s", timeout: 5000, retries: 0}
    idl: {interface: weftbench.echo.EchoService, url: "tri://%[2]s", timeout: 5000, retries: 0}
`, dubbogo.Interface, addr))),
		weft.WithReference("echo", &c), weft.WithReference("idl", &idl))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	t.Run("nonidl", func(t *testing.T) {
		if got, err := c.Echo(ctx, "héllo"); err != nil || got != "héllo" {
			t.Fatalf("Echo: %q %v", got, err)
		}
		u, err := c.GetUser(ctx, 9)
		if err != nil || u.ID != 9 || u.Name != "user-9" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 13.5 {
			t.Fatalf("GetUser: %+v %v", u, err)
		}
		err = c.Fail(ctx, "boom")
		if !kernel.IsBiz(err) || err.Error() != "fail: boom" {
			t.Fatalf("Fail: %v (biz %t), want the business error %q", err, kernel.IsBiz(err), "fail: boom")
		}
		// The Java-style name is not served: dubbo-go's HTTP mux answers
		// its 404 page, which is gRPC's UNIMPLEMENTED.
		if _, err := c.JavaEcho(ctx, "x"); kernel.CodeOf(err) != kernel.CodeMethodNotFound {
			t.Fatalf(`"echo" on dubbo-go's non-IDL provider: %v (code %v), want method not found`, err, kernel.CodeOf(err))
		}
		// Attachments both ways, through the generic invoker.
		ref, err := app.Reference("echo")
		if err != nil {
			t.Fatal(err)
		}
		inv := kernel.NewInvocation("Echo", "att")
		inv.SetAttachment("x-req", "42")
		res, err := ref.Invoke(ctx, inv)
		if err != nil || res.Value != "att" || res.Attachments["x-resp"] != "resp-42" {
			t.Fatalf("attachments: %v %v %v", res.Value, res.Attachments, err)
		}
		// dubbo-go's non-IDL provider sends the request's headers back.
		if res.Attachments["x-req"] != "42" {
			t.Errorf("reply attachments %v: dubbo-go no longer echoes the request's", res.Attachments)
		}
		concurrent(t, func(i int) error {
			want := fmt.Sprintf("c-%d", i)
			got, err := c.Echo(ctx, want)
			if err == nil && got != want {
				err = fmt.Errorf("got %q", got)
			}
			return err
		})
	})
	t.Run("idl", func(t *testing.T) {
		for name, call := range map[string]func(context.Context, *echopb.EchoRequest) (*echopb.EchoReply, error){
			"Echo": idl.Echo, "echo": idl.JavaEcho} {
			if got, err := call(ctx, &echopb.EchoRequest{Msg: "proto ☺"}); err != nil || got.GetMsg() != "proto ☺" {
				t.Fatalf("%s: %v %v", name, got, err)
			}
		}
		// dubbo-go sends an IDL method's error as grpc-status 17 (its
		// CodeBizError; gRPC's codes end at 16) without
		// tri-exception-code. Java Dubbo fails on 17 too
		// (TriRpcStatus.Code.fromCode throws), so weft does not read it as
		// a business error: it is an unknown error with the text and the
		// status.
		_, err := idl.Echo(ctx, &echopb.EchoRequest{Msg: "fail"})
		if err == nil || kernel.IsBiz(err) || kernel.CodeOf(err) != kernel.CodeUnknown ||
			!strings.Contains(err.Error(), "fail: idl") || !strings.Contains(err.Error(), "gRPC status 17") {
			t.Fatalf(`Echo("fail"): %v (code %v), want an unknown error with the text and gRPC status 17`, err, kernel.CodeOf(err))
		}
		ref, err := app.Reference("idl")
		if err != nil {
			t.Fatal(err)
		}
		inv := kernel.NewInvocation("Echo", &echopb.EchoRequest{Msg: "att"})
		inv.SetAttachment("x-req", "42")
		res, err := ref.Invoke(ctx, inv)
		if err != nil || res.Attachments["x-resp"] != "resp-42" {
			t.Fatalf("attachments: %v %v", res.Attachments, err)
		}
	})
}
