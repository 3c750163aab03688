package tps

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

type counting struct {
	url   *kernel.URL
	calls atomic.Int64
}

func (c *counting) URL() *kernel.URL { return c.url }
func (c *counting) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	c.calls.Add(1)
	return kernel.Result{}, nil
}
func (c *counting) IsAvailable() bool { return true }
func (c *counting) Destroy()          {}

// tps=3 per 1000 ms: 3 calls pass, the rest of the window is rejected as
// limit exceeded, and the next window takes 3 again; concurrent callers
// never get more than the rate; other services have windows of their own.
func TestTPSWindows(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &filter{now: func() time.Time { return now }}
	svc := &counting{url: kernel.MustParseURL("dubbo://h:1/S?tps=3&tps.interval=1000")}
	other := &counting{url: kernel.MustParseURL("dubbo://h:1/Other?tps=1")}
	call := func(iv kernel.Invoker) error {
		_, err := f.Invoke(context.Background(), iv, kernel.NewInvocation("m"))
		return err
	}
	for i := range 5 {
		err := call(svc)
		if i < 3 && err != nil || i >= 3 && kernel.CodeOf(err) != kernel.CodeLimitExceeded {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := call(other); err != nil {
		t.Fatalf("another service shares the window: %v", err)
	}
	now = now.Add(999 * time.Millisecond)
	if err := call(svc); err == nil {
		t.Fatal("a call before the window ended passed")
	}
	now = now.Add(time.Millisecond)
	var wg sync.WaitGroup
	var passed atomic.Int64
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if call(svc) == nil {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	if passed.Load() != 3 || svc.calls.Load() != 6 {
		t.Fatalf("new window: %d passed, %d calls in all", passed.Load(), svc.calls.Load())
	}
	// Without tps the filter passes everything.
	free := &counting{url: kernel.MustParseURL("dubbo://h:1/Free")}
	for range 100 {
		if err := call(free); err != nil {
			t.Fatal(err)
		}
	}
}
