package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func joinWith(t *testing.T, c extension.Cluster, consumerURL string, ps []*fakeInvoker) *clusterInvoker {
	t.Helper()
	ivs := make([]kernel.Invoker, len(ps))
	for i, p := range ps {
		ivs[i] = p
	}
	iv, err := c.Join(NewStaticDirectory(kernel.MustParseURL(consumerURL), ivs, quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iv.Destroy)
	return iv.(*clusterInvoker)
}

func roundRobinLBs() *kernel.Loader[extension.LoadBalance] {
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", RoundRobin)
	lbs.Register(RoundRobin, func() (extension.LoadBalance, error) { return NewRoundRobin(), nil }, nil)
	return lbs
}

func TestRetryBudgetCapsFailover(t *testing.T) {
	ps := providers(3, func(int, context.Context) error { return kernel.Errorf(kernel.CodeNetwork, "refused") })
	c := joinWith(t, NewFailover(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?loadbalance=roundrobin&retries=2&retry.budget.percent=20&retry.budget.min=5", ps)
	var last error
	for range 100 {
		_, last = c.Invoke(context.Background(), kernel.NewInvocation("m"))
	}
	reached := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load()
	// 100 first attempts and at most 20% more (and the minimum of 5):
	// without the budget, 300.
	if reached < 100 || reached > 121 {
		t.Fatalf("providers saw %d attempts for 100 calls, want 100 + at most 20%%", reached)
	}
	if !strings.Contains(last.Error(), "retry budget spent") || !strings.Contains(last.Error(), "retry.budget.percent 20") {
		t.Errorf("last error %q does not say the budget stopped the retries", last)
	}
	if allowed, denied := c.budget.tally(); allowed != reached-100 || denied == 0 {
		t.Errorf("budget counts allowed=%d denied=%d, with %d extra attempts made", allowed, denied, reached-100)
	}
}

func TestRetryBudgetLetsRetriesThroughWhenCallsSucceed(t *testing.T) {
	var n atomic.Int64
	ps := providers(3, func(i int, _ context.Context) error {
		if i == 0 {
			return kernel.Errorf(kernel.CodeNetwork, "refused") // a third of the first tries fail
		}
		n.Add(1)
		return nil
	})
	c := joinWith(t, NewFailover(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?loadbalance=roundrobin&retries=2&retry.budget.percent=50", ps)
	for i := range 300 {
		if _, err := c.Invoke(context.Background(), kernel.NewInvocation("m")); err != nil {
			t.Fatalf("call %d: %v (a 50%% budget covers retries of a third of the calls)", i, err)
		}
	}
}

func TestRetryBudgetCapsForks(t *testing.T) {
	ps := providers(3, func(int, context.Context) error { return nil })
	c := joinWith(t, NewForking(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?loadbalance=roundrobin&forks=3&retry.budget.percent=10&retry.budget.min=0", ps)
	for range 100 {
		if _, err := c.Invoke(context.Background(), kernel.NewInvocation("m")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the slower forks end
	reached := ps[0].calls.Load() + ps[1].calls.Load() + ps[2].calls.Load()
	if reached < 100 || reached > 111 {
		t.Fatalf("providers saw %d forks for 100 calls with a 10%% budget, want 100..110", reached)
	}
}

func TestBadRetryBudgetIsOffAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	b := newRetryBudget(kernel.MustParseURL("consumer://127.0.0.1/S?retry.budget.percent=lots"), slog.New(slog.NewTextHandler(&logs, nil)))
	if b != nil || !strings.Contains(logs.String(), "retry.budget.percent") || !strings.Contains(logs.String(), "0..100") {
		t.Fatalf("budget %v, log %s", b, logs.String())
	}
}

func TestHedgingSendsABackupAfterTheDelay(t *testing.T) {
	// Provider 0 is slow (200 ms), the others answer at once; round robin
	// sends the first attempt to 0 every third call.
	ps := providers(3, func(i int, ctx context.Context) error {
		if i == 0 {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	c := joinWith(t, NewHedging(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?loadbalance=roundrobin&hedging.delay=20&timeout=1000", ps)
	var slowest time.Duration
	for range 9 {
		start := time.Now()
		res, err := c.Invoke(context.Background(), kernel.NewInvocation("m"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Value == ps[0].url.Address() {
			t.Fatal("the slow provider's answer won over a backup 180 ms earlier")
		}
		slowest = max(slowest, time.Since(start))
	}
	if slowest > 150*time.Millisecond {
		t.Fatalf("slowest call %v: the backup after 20 ms should have answered", slowest)
	}
	if n := ps[0].calls.Load(); n < 2 {
		t.Fatalf("the slow provider got %d first attempts, want about 3", n)
	}
}

func TestHedgingMovesOnAtOnceAfterAFailure(t *testing.T) {
	ps := providers(2, func(i int, _ context.Context) error {
		if i == 0 {
			return kernel.Errorf(kernel.CodeNetwork, "refused")
		}
		return nil
	})
	c := joinWith(t, NewHedging(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?loadbalance=roundrobin&hedging.delay=500", ps)
	for range 4 {
		start := time.Now()
		if _, err := c.Invoke(context.Background(), kernel.NewInvocation("m")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Fatalf("a failed attempt waited %v for the delay before the next", d)
		}
	}
}

func TestHedgingBusinessErrorIsTheAnswer(t *testing.T) {
	ps := providers(2, func(int, context.Context) error { return kernel.BizError(errors.New("insufficient funds")) })
	c := joinWith(t, NewHedging(roundRobinLBs(), quiet), "consumer://127.0.0.1/S?hedging.delay=500", ps)
	_, err := c.Invoke(context.Background(), kernel.NewInvocation("m"))
	if !kernel.IsBiz(err) || ps[0].calls.Load()+ps[1].calls.Load() != 1 {
		t.Fatalf("got %v after %d attempts: a business error is an answer, sent once", err, ps[0].calls.Load()+ps[1].calls.Load())
	}
}

func TestHedgingDelayFromObservedLatencies(t *testing.T) {
	c := &clusterInvoker{lat: &latencies{}, log: quiet, dir: NewStaticDirectory(kernel.MustParseURL("consumer://127.0.0.1/S"), nil, quiet)}
	u := kernel.MustParseURL("consumer://127.0.0.1/S?hedging.delay=p90")
	if d := c.hedgeDelay(u, "m", time.Second); d != 500*time.Millisecond {
		t.Fatalf("with no samples the delay is %v, want half the timeout", d)
	}
	for i := 1; i <= 100; i++ {
		c.lat.record(time.Duration(i) * time.Millisecond)
	}
	if d := c.hedgeDelay(u, "m", time.Second); d < 89*time.Millisecond || d > 92*time.Millisecond {
		t.Fatalf("p90 of 1..100 ms is %v", d)
	}
	var logs bytes.Buffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.hedgeDelay(kernel.MustParseURL("consumer://127.0.0.1/S?hedging.delay=soon"), "m", time.Second)
	c.hedgeDelay(kernel.MustParseURL("consumer://127.0.0.1/S?hedging.delay=soon"), "m", time.Second)
	if n := strings.Count(logs.String(), "hedging.delay not usable"); n != 1 {
		t.Fatalf("reported %d times: %s", n, logs.String())
	}
}
