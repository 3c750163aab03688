package accesslog

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

type okInvoker struct{ url *kernel.URL }

func (o okInvoker) URL() *kernel.URL  { return o.url }
func (o okInvoker) IsAvailable() bool { return true }
func (o okInvoker) Destroy()          {}
func (o okInvoker) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{Value: "ok"}, nil
}

func TestWritesDubboFormatToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	f := New(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	u := kernel.MustParseURL("injvm://127.0.0.1/org.example.Greeter?interface=org.example.Greeter&group=g&version=1.0&accesslog=" + path)
	for i := 0; i < 3; i++ {
		inv := kernel.NewInvocation("sayHello", "world")
		inv.ParamTypes = "Ljava/lang/String;"
		inv.RemoteAddr = "127.0.0.1:5000"
		if res, err := f.Invoke(context.Background(), okInvoker{u}, inv); err != nil || res.Value != "ok" {
			t.Fatalf("invoke: %v %v", res, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), data)
	}
	want := `] 127.0.0.1:5000 -> g/org.example.Greeter:1.0 sayHello(Ljava/lang/String;) ["world"]`
	if !strings.HasPrefix(lines[0], "[") || !strings.HasSuffix(lines[0], want) {
		t.Fatalf("line %q, want suffix %q", lines[0], want)
	}
}

func TestTrueLogsThroughLogger(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil)))
	u := kernel.MustParseURL("injvm://127.0.0.1/org.example.Greeter?accesslog=true")
	if _, err := f.Invoke(context.Background(), okInvoker{u}, kernel.NewInvocation("sayHello", "x")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `sayHello() [\"x\"]`) {
		t.Fatalf("logger got %q", buf.String())
	}
	f.Close()
}

func TestUnwritableFileDoesNotFailTheCall(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil)))
	u := kernel.MustParseURL("injvm://127.0.0.1/org.example.Greeter?accesslog=/nonexistent-dir/x.log")
	if res, err := f.Invoke(context.Background(), okInvoker{u}, kernel.NewInvocation("m")); err != nil || res.Value != "ok" {
		t.Fatalf("call failed because of the access log: %v", err)
	}
	if !strings.Contains(buf.String(), "nonexistent-dir") {
		t.Fatalf("error not logged: %q", buf.String())
	}
	f.Close()
}
