package accesslog

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// A file rotates when the day changes (path.YYYYMMDD, Dubbo's) and when it
// reaches its size limit (path.YYYYMMDD-HHMMSS); no line is lost.
func TestFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	f := New(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	now := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	var mu sync.Mutex
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f.maxSize = 1000
	u := kernel.MustParseURL("injvm://127.0.0.1/S?interface=S&accesslog=" + path)
	call := func(n int) {
		for range n {
			if _, err := f.Invoke(context.Background(), okInvoker{u}, kernel.NewInvocation("m", strings.Repeat("x", 50))); err != nil {
				t.Fatal(err)
			}
		}
		// The writer is asynchronous: wait until it took every line.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			f.mu.Lock()
			s := f.files[path]
			f.mu.Unlock()
			if s == nil || len(s.lines) == 0 || time.Now().After(deadline) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	call(3)
	mu.Lock()
	now = now.Add(2 * time.Minute) // the next day
	mu.Unlock()
	call(30) // about 3 KB: the size limit rotates within the day too
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	lines := 0
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		lines += strings.Count(string(data), "\n")
		if len(data) > 1000 {
			t.Errorf("%s has %d bytes, over the limit", e.Name(), len(data))
		}
	}
	if lines != 33 {
		t.Fatalf("%d lines in %v, want 33", lines, names)
	}
	if _, err := os.Stat(path + ".20261201"); err != nil {
		t.Fatalf("no file of the previous day in %v", names)
	}
	if len(names) < 4 {
		t.Fatalf("files %v: want the day's, the current and size rotations", names)
	}
}
