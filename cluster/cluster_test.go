package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fakeInvoker struct {
	url   *kernel.URL
	calls atomic.Int64
	fn    func(ctx context.Context) error
}

func (f *fakeInvoker) URL() *kernel.URL  { return f.url }
func (f *fakeInvoker) IsAvailable() bool { return true }
func (f *fakeInvoker) Destroy()          {}
func (f *fakeInvoker) Invoke(ctx context.Context, _ *kernel.Invocation) (kernel.Result, error) {
	f.calls.Add(1)
	if err := f.fn(ctx); err != nil {
		return kernel.Result{}, err
	}
	return kernel.Result{Value: f.url.Address()}, nil
}

func providers(n int, fn func(i int, ctx context.Context) error) []*fakeInvoker {
	out := make([]*fakeInvoker, n)
	for i := range out {
		out[i] = &fakeInvoker{url: kernel.MustParseURL(fmt.Sprintf("dubbo://127.0.0.1:%d/S", 20880+i)), fn: func(ctx context.Context) error { return fn(i, ctx) }}
	}
	return out
}

func join(t *testing.T, name, consumerURL string, ps []*fakeInvoker) kernel.Invoker {
	t.Helper()
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", Random)
	lbs.Register(Random, func() (extension.LoadBalance, error) { return NewRandom(), nil }, nil)
	var c extension.Cluster
	if name == Failover {
		c = NewFailover(lbs, quiet)
	} else {
		c = NewFailfast(lbs, quiet)
	}
	ivs := make([]kernel.Invoker, len(ps))
	for i, p := range ps {
		ivs[i] = p
	}
	iv, err := c.Join(NewStaticDirectory(kernel.MustParseURL(consumerURL), ivs, quiet))
	if err != nil {
		t.Fatal(err)
	}
	return iv
}

func TestFailoverTriesEachProviderOnce(t *testing.T) {
	down := errors.New("connection refused")
	ps := providers(3, func(i int, _ context.Context) error {
		if i < 2 {
			return kernel.Wrap(kernel.CodeNetwork, down, "provider %d", i)
		}
		return nil
	})
	for range 50 {
		res, err := join(t, Failover, "consumer://h/S?retries=2", ps).Invoke(context.Background(), kernel.NewInvocation("m"))
		if err != nil || res.Value != "127.0.0.1:20882" {
			t.Fatalf("res %v err %v", res.Value, err)
		}
	}
	// With retries=2 and two failing providers, each failing one is tried at
	// most once per call, so the healthy one is always reached.
	if ps[0].calls.Load() > 50 || ps[1].calls.Load() > 50 || ps[2].calls.Load() != 50 {
		t.Fatalf("calls %d %d %d", ps[0].calls.Load(), ps[1].calls.Load(), ps[2].calls.Load())
	}
}

func TestFailoverNeverRetriesBizErrors(t *testing.T) {
	ps := providers(3, func(int, context.Context) error { return kernel.BizError(errors.New("insufficient funds")) })
	_, err := join(t, Failover, "consumer://h/S?retries=2", ps).Invoke(context.Background(), kernel.NewInvocation("m"))
	if !kernel.IsBiz(err) {
		t.Fatalf("err %v, want the biz error", err)
	}
	total := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load()
	if total != 1 {
		t.Fatalf("provider methods ran %d times, want 1", total)
	}
}

func TestFailoverGivesUpNamingProviders(t *testing.T) {
	ps := providers(2, func(i int, _ context.Context) error { return kernel.Errorf(kernel.CodeNetwork, "down %d", i) })
	_, err := join(t, Failover, "consumer://h/S?retries=5", ps).Invoke(context.Background(), kernel.NewInvocation("m"))
	if kernel.CodeOf(err) != kernel.CodeNetwork {
		t.Fatalf("code %v", kernel.CodeOf(err))
	}
	if n := ps[0].calls.Load() + ps[1].calls.Load(); n != 6 {
		t.Fatalf("%d attempts, want 1 + 5 retries", n)
	}
}

// Each try has its own timeout, as in Dubbo: three frozen providers cost
// three timeouts; the caller's own deadline still bounds the whole call.
func TestFailoverTimeoutPerTry(t *testing.T) {
	frozen := func(_ int, ctx context.Context) error {
		<-ctx.Done()
		return kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "frozen")
	}
	ps := providers(3, frozen)
	start := time.Now()
	_, err := join(t, Failover, "consumer://h/S?retries=2&m.timeout=100", ps).Invoke(context.Background(), kernel.NewInvocation("m"))
	took := time.Since(start)
	if kernel.CodeOf(err) != kernel.CodeTimeout || took < 300*time.Millisecond || took > 600*time.Millisecond {
		t.Fatalf("err %v after %v, want a timeout after 3 tries of 100ms", err, took)
	}
	if n := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load(); n != 3 {
		t.Fatalf("%d tries, want 3", n)
	}
	ps = providers(3, frozen)
	start = time.Now() // before the deadline is set: it counts from here
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = join(t, Failover, "consumer://h/S?retries=2&m.timeout=100", ps).Invoke(ctx, kernel.NewInvocation("m"))
	took = time.Since(start)
	if kernel.CodeOf(err) != kernel.CodeTimeout || took < 150*time.Millisecond || took > 400*time.Millisecond {
		t.Fatalf("err %v after %v, want a timeout at the caller's 150ms", err, took)
	}
	if n := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load(); n != 2 {
		t.Fatalf("%d tries, want 2 (the second cut by the caller's deadline)", n)
	}
}

// One frozen provider of two: every call succeeds, the frozen one costs a
// try's timeout.
func TestFailoverGetsPastAHungProvider(t *testing.T) {
	ps := providers(2, func(i int, ctx context.Context) error {
		if i == 0 {
			<-ctx.Done()
			return kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "frozen")
		}
		return nil
	})
	iv := join(t, Failover, "consumer://h/S?retries=2&m.timeout=50", ps)
	for i := range 10 {
		if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("m")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// Only what another provider could answer is retried.
func TestFailoverRetriesOnlyRetryable(t *testing.T) {
	for code, want := range map[kernel.Code]int64{
		kernel.CodeNetwork: 3, kernel.CodeTimeout: 3, kernel.CodeLimitExceeded: 3, kernel.CodeShuttingDown: 3, kernel.CodeServiceNotFound: 3,
		kernel.CodeForbidden: 1, kernel.CodeSerialization: 1, kernel.CodeMethodNotFound: 1, kernel.CodeUnknown: 1,
	} {
		ps := providers(3, func(int, context.Context) error { return kernel.Errorf(code, "x") })
		_, err := join(t, Failover, "consumer://h/S?retries=2", ps).Invoke(context.Background(), kernel.NewInvocation("m"))
		if kernel.CodeOf(err) != code {
			t.Fatalf("%v: code %v", code, kernel.CodeOf(err))
		}
		if n := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load(); n != want {
			t.Errorf("%v: %d tries, want %d", code, n, want)
		}
	}
}

func TestFailfastOneAttempt(t *testing.T) {
	ps := providers(3, func(int, context.Context) error { return kernel.Errorf(kernel.CodeNetwork, "down") })
	if _, err := join(t, Failfast, "consumer://h/S", ps).Invoke(context.Background(), kernel.NewInvocation("m")); err == nil {
		t.Fatal("want error")
	}
	if n := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load(); n != 1 {
		t.Fatalf("%d attempts", n)
	}
}

func TestNoProviderError(t *testing.T) {
	_, err := join(t, Failover, "consumer://h/org.example.S", nil).Invoke(context.Background(), kernel.NewInvocation("m"))
	if kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("err %v", err)
	}
}

func TestRandomFollowsWeights(t *testing.T) {
	ivs := []kernel.Invoker{
		&fakeInvoker{url: kernel.MustParseURL("dubbo://a:1/S?weight=100")},
		&fakeInvoker{url: kernel.MustParseURL("dubbo://b:1/S?weight=300")},
	}
	lb := NewRandom()
	inv := kernel.NewInvocation("m")
	hits := map[kernel.Invoker]int{}
	const n = 100000
	for range n {
		hits[lb.Select(ivs, nil, inv)]++
	}
	if share := float64(hits[ivs[1]]) / n; share < 0.73 || share > 0.77 {
		t.Fatalf("weight-300 provider got %.3f of picks, want 0.75", share)
	}
	if a := testing.AllocsPerRun(1000, func() { lb.Select(ivs, nil, inv) }); a != 0 {
		t.Fatalf("Select allocates %v times", a)
	}
}

// A business error after a retry is returned as it is: it is the answer,
// not a failure of the cluster to wrap.
func TestFailoverBizErrorAfterRetryUnwrapped(t *testing.T) {
	ps := providers(2, func(i int, _ context.Context) error {
		if i == 0 {
			return kernel.Errorf(kernel.CodeNetwork, "down")
		}
		return kernel.BizError(errors.New("insufficient funds"))
	})
	iv := join(t, Failover, "consumer://h/S?retries=2", ps)
	for range 10 {
		_, err := iv.Invoke(context.Background(), kernel.NewInvocation("m"))
		if !kernel.IsBiz(err) || err.Error() != "insufficient funds" {
			t.Fatalf("err %q, want the business error as it is", err)
		}
	}
}
