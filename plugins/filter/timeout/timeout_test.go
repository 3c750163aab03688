package timeout

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

type slowInvoker struct {
	url   *kernel.URL
	sleep time.Duration
	sawDL bool
}

func (s *slowInvoker) URL() *kernel.URL  { return s.url }
func (s *slowInvoker) IsAvailable() bool { return true }
func (s *slowInvoker) Destroy()          {}
func (s *slowInvoker) Invoke(ctx context.Context, _ *kernel.Invocation) (kernel.Result, error) {
	_, s.sawDL = ctx.Deadline()
	time.Sleep(s.sleep)
	return kernel.Result{Value: "late"}, nil
}

func TestSlowCallBecomesServerSideTimeout(t *testing.T) {
	var logs bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&logs, nil)))
	inv := &slowInvoker{url: kernel.MustParseURL("injvm://h/S?timeout=1000&slow.timeout=20"), sleep: 40 * time.Millisecond}
	_, err := f.Invoke(context.Background(), inv, kernel.NewInvocation("slow"))
	var e *kernel.Error
	if !errorsAs(err, &e) || e.Code != kernel.CodeTimeout || !e.ServerSide {
		t.Fatalf("err = %v, want a server-side timeout", err)
	}
	if !inv.sawDL {
		t.Fatal("implementation saw no deadline")
	}
	if !strings.Contains(logs.String(), "ran past its deadline") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	// A fast method of the same service is untouched.
	inv.sleep = 0
	if res, err := f.Invoke(context.Background(), inv, kernel.NewInvocation("fast")); err != nil || res.Value != "late" {
		t.Fatalf("fast call: %v %v", res, err)
	}
}

func errorsAs(err error, e **kernel.Error) bool {
	k, ok := err.(*kernel.Error)
	*e = k
	return ok
}
