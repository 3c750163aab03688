package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// policyRouter sets one policy on every call and routes nothing away.
type policyRouter struct{ p *extension.CallPolicy }

func (r policyRouter) Route(ivs []kernel.Invoker, _ *kernel.URL, _ *kernel.Invocation) []kernel.Invoker {
	return ivs
}
func (r policyRouter) Priority() int                                                    { return 0 }
func (r policyRouter) CallPolicy(*kernel.URL, *kernel.Invocation) *extension.CallPolicy { return r.p }

func joinWithPolicy(t *testing.T, consumerURL string, ps []*fakeInvoker, p *extension.CallPolicy) kernel.Invoker {
	t.Helper()
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", Random)
	lbs.Register(Random, func() (extension.LoadBalance, error) { return NewRandom(), nil }, nil)
	ivs := make([]kernel.Invoker, len(ps))
	for i, p := range ps {
		ivs[i] = p
	}
	dir := NewStaticDirectory(kernel.MustParseURL(consumerURL), ivs, quiet)
	dir.SetRouters([]extension.Router{policyRouter{p}})
	iv, err := NewFailover(lbs, quiet).Join(dir)
	if err != nil {
		t.Fatal(err)
	}
	return iv
}

func tries(ps []*fakeInvoker) (n int64) {
	for _, p := range ps {
		n += p.calls.Load()
	}
	return n
}

// TestRouterPolicyRetries: a router's retry policy replaces the
// reference's retries and which failures are retried.
func TestRouterPolicyRetries(t *testing.T) {
	unavailable := func(i int, _ context.Context) error { return kernel.Errorf(kernel.CodeNetwork, "provider %d down", i) }
	isNetwork := func(err error) bool { return kernel.CodeOf(err) == kernel.CodeNetwork }
	never := func(error) bool { return false }
	for _, tc := range []struct {
		name  string
		retry *extension.RetryPolicy
		want  int64
	}{
		{"the reference's retries=2", nil, 3},
		{"the route's one retry", &extension.RetryPolicy{Retries: 1, On: isNetwork, BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond}, 2},
		{"the route retries other codes", &extension.RetryPolicy{Retries: 3, On: never}, 1},
	} {
		ps := providers(4, unavailable)
		_, err := joinWithPolicy(t, "consumer://h/S?retries=2", ps, &extension.CallPolicy{Retry: tc.retry}).
			Invoke(context.Background(), kernel.NewInvocation("m"))
		if kernel.CodeOf(err) != kernel.CodeNetwork {
			t.Fatalf("%s: err %v", tc.name, err)
		}
		if got := tries(ps); got != tc.want {
			t.Errorf("%s: %d tries, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRouterPolicyTimeoutBoundsTheWholeCall: a route's timeout replaces
// the reference's per-try `timeout` and bounds the call, retries included.
func TestRouterPolicyTimeoutBoundsTheWholeCall(t *testing.T) {
	hang := func(_ int, ctx context.Context) error {
		<-ctx.Done()
		return kernel.Errorf(kernel.CodeTimeout, "timed out")
	}
	ps := providers(3, hang)
	retryAll := &extension.RetryPolicy{Retries: 4, On: func(error) bool { return true }, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	iv := joinWithPolicy(t, "consumer://h/S?retries=2&timeout=5000", ps, &extension.CallPolicy{Timeout: 100 * time.Millisecond, Retry: retryAll})
	start := time.Now()
	_, err := iv.Invoke(context.Background(), kernel.NewInvocation("m"))
	took := time.Since(start)
	if kernel.CodeOf(err) != kernel.CodeTimeout {
		t.Fatalf("err %v, want a timeout", err)
	}
	// The whole call ends at the route's 100 ms: not 5 s per try, nor
	// five tries of 100 ms. The upper bound leaves a busy machine room.
	if took < 100*time.Millisecond || took > 400*time.Millisecond {
		t.Errorf("the call took %v; the route's timeout is 100ms", took)
	}
	if n := tries(ps); n != 1 {
		t.Errorf("%d tries after the call's deadline passed, want 1", n)
	}
}
