package exception

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

func TestPasses(t *testing.T) {
	const iface = "org.example.api.Users"
	for class, want := range map[string]bool{
		"java.lang.IllegalStateException":                true,
		"javax.validation.ValidationException":           true,
		"jakarta.validation.ValidationException":         true,
		"org.apache.dubbo.rpc.RpcException":              true,
		"com.alibaba.dubbo.rpc.service.GenericException": true,
		"org.example.api.NoSuchUser":                     true,
		"org.example.api.errors.NoSuchUser":              true,
		"org.example.apix.NoSuchUser":                    false,
		"org.example.NoSuchUser":                         false,
		"com.internal.DbException":                       false,
		"javafake.Exception":                             false,
	} {
		if got := Passes(class, iface); got != want {
			t.Errorf("Passes(%q, %q) = %v, want %v", class, iface, got, want)
		}
	}
	if !Passes("com.internal.DbException", "Users") {
		t.Error("an interface without a package cannot be compared with: Java passes")
	}
}

type fixed struct {
	err error
}

func (f fixed) URL() *kernel.URL {
	return kernel.NewURL("dubbo", "127.0.0.1", 20880, "org.example.api.Users", nil)
}
func (fixed) IsAvailable() bool { return true }
func (fixed) Destroy()          {}
func (f fixed) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, f.err
}

// One line per service, method and class per interval; the next line after
// the interval says how many were left out.
func TestReportIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil))).(*filter)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	foreign := fixed{err: &kernel.Error{Code: kernel.CodeBiz, Class: "com.internal.DbException", Msg: "locked"}}
	inv := &kernel.Invocation{Method: "get", RemoteAddr: "10.0.0.1:5000"}
	for range 5 {
		_, err := f.Invoke(context.Background(), foreign, inv)
		var ke *kernel.Error
		if !errors.As(err, &ke) || ke.Class != RuntimeException || ke.Msg != "com.internal.DbException: locked" {
			t.Fatalf("got %v", err)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("5 within the interval: %d lines, want 1:\n%s", n, buf.String())
	}
	now = now.Add(LogInterval)
	f.Invoke(context.Background(), foreign, inv)
	if !strings.Contains(buf.String(), "suppressed=4") || !strings.Contains(buf.String(), "remote=10.0.0.1:5000") {
		t.Fatalf("after the interval: %s", buf.String())
	}
	// Framework errors and plain errors are not the filter's business.
	for _, err := range []error{kernel.Errorf(kernel.CodeTimeout, "late"), kernel.BizError(errors.New("plain"))} {
		if _, got := f.Invoke(context.Background(), fixed{err: err}, inv); got != err {
			t.Errorf("%v changed into %v", err, got)
		}
	}
}
