package adaptivesvc

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// dubbo-go's hill_climbing_test.go vectors, with the figures its asserts
// leave open worked out by hand from its formulas.
func TestHillClimbingDubboGoVectors(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newHillClimbing(now)
	l.limitation.Store(100)
	l.inflight.Store(50)
	if !l.Acquire(now) {
		t.Fatal("limit 100, 50 in flight: refused")
	}
	l.limitation.Store(50)
	l.inflight.Store(50)
	if l.Acquire(now) {
		t.Fatal("limit 50, 50 in flight: admitted")
	}
	l.limitation.Store(100)
	l.inflight.Store(30)
	if r := l.Remaining(); r != 70 {
		t.Fatalf("remaining %d, want 70", r)
	}
	l.inflight.Store(120)
	if r := l.Remaining(); r != 0 {
		t.Fatalf("remaining %d, want 0", r)
	}
	// adjustLimitation: 50 + 0.8·ln 50 = 53.13 → 53; then Shrink from the
	// best limitation (0) clamps to 1; ExtendPlus from 50: 50 + 1.5·ln 50
	// = 55.87 → 55.
	l.limitation.Store(50)
	l.adjust(hcExtend)
	if got := l.Limit(); got != 53 {
		t.Fatalf("extend from 50: %d, want 53", got)
	}
	l.adjust(hcShrink)
	if got := l.Limit(); got != 1 {
		t.Fatalf("shrink to best 0: %d, want 1", got)
	}
	l.limitation.Store(50)
	l.adjust(hcExtendPlus)
	if got := l.Limit(); got != 55 {
		t.Fatalf("extend plus from 50: %d, want 55", got)
	}
	// In the 2 s round (after one shrink) the step is divided by
	// log2(2) = 1; in 8 s by 3.
	l.limitation.Store(50)
	l.updateInterval = 8 * time.Second
	l.adjust(hcExtendPlus)
	if got, want := l.Limit(), int64(50+1.5*math.Log(50)/3); got != want {
		t.Fatalf("extend plus in an 8 s round: %d, want %d", got, want)
	}
	l.limitation.Store(499)
	l.adjust(hcExtendPlus)
	if got := l.Limit(); got != hcMaxLimitation {
		t.Fatalf("past the maximum: %d, want %d", got, hcMaxLimitation)
	}
}

// A round ends after its interval, or at once when it has no average yet
// (dubbo-go's first call): with no best round yet the limit is extended;
// the best round is remembered.
func TestHillClimbingRounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := newHillClimbing(t0)
	now := t0
	l.Acquire(now)
	l.Release(now.Add(-4*time.Millisecond), now, true)
	if got := l.Limit(); got != 55 {
		t.Fatalf("limit after the first call %d, want 55 (extend plus: 50 + 1.5·ln 50)", got)
	}
	for i := range 200 {
		now = t0.Add(time.Duration(i) * 5 * time.Millisecond)
		l.Acquire(now)
		l.Release(now.Add(-4*time.Millisecond), now, true)
	}
	now = t0.Add(1100 * time.Millisecond)
	l.Acquire(now)
	l.Release(now.Add(-4*time.Millisecond), now, true)
	if got := l.Limit(); got != 61 {
		t.Fatalf("limit after the first round %d, want 61 (extend plus: 55 + 1.5·ln 55)", got)
	}
	if l.bestTPS != 200 || l.bestLimitation != 55 {
		t.Fatalf("best round not kept: tps %v, limitation %d", l.bestTPS, l.bestLimitation)
	}
	if l.Inflight() != 0 {
		t.Fatalf("%d in flight after all released", l.Inflight())
	}
}

func gradientSettingsDefault() gradientSettings {
	return gradientSettings{update: 100 * time.Millisecond, percentile: 0.5, maxLimit: 1000, minRTTEvery: time.Minute,
		minRTTCalls: 50, jitter: 0.15, minLimit: 3, buffer: 0.25}
}

// Envoy's calculateNewLimit: gradient = clamp(minRTT·1.25/sample, 0.5, 2),
// limit·gradient + √(limit·gradient), within [min, max].
func TestGradientNewLimit(t *testing.T) {
	for _, c := range []struct {
		limit            int64
		minRTT, sample   float64
		want             int64
		consecutiveAtMin int
	}{
		{100, 10, 12.5, 110, 0}, // gradient 1: 100 + 10
		{100, 10, 50, 57, 0},    // 0.25 → 0.5: 50 + 7.07
		{100, 10, 1, 214, 0},    // 12.5 → 2: 200 + 14.1
		{900, 10, 1, 1000, 0},   // the maximum
		{3, 10, 100, 3, 0},      // 1.5 + 1.22 = 2 → the minimum
		{2, 10, 100, 3, 0},
	} {
		g := newGradient(gradientSettingsDefault(), time.Unix(0, 0))
		g.limit.Store(c.limit)
		g.minRTT = c.minRTT
		if got := g.newLimit(c.sample); got != c.want {
			t.Errorf("limit %d, minRTT %v, sample %v: %d, want %d", c.limit, c.minRTT, c.sample, got, c.want)
		}
	}
}

// The controller's life: minRTT measured at the minimum limit, the limit
// growing while latency stays near it and falling when it grows, and
// minRTT measured again after five windows at the minimum.
func TestGradientControllerWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := newGradient(gradientSettingsDefault(), t0)
	if got := g.Limit(); got != 3 {
		t.Fatalf("limit while measuring minRTT %d, want 3", got)
	}
	now := t0
	call := func(rtt time.Duration) {
		if !g.Acquire(now) {
			t.Fatalf("refused with %d in flight, limit %d", g.Inflight(), g.Limit())
		}
		g.Release(now.Add(-rtt), now, true)
	}
	for range 50 {
		now = now.Add(time.Millisecond)
		call(10 * time.Millisecond)
	}
	if g.sampling || g.minRTT != 10 {
		t.Fatalf("after 50 calls: sampling %v, minRTT %v; want done, 10", g.sampling, g.minRTT)
	}
	// Latency at minRTT: each window grows the limit (gradient 1.25 →
	// 3·1.25 + √3.75 = 5, then 5·1.25+2.5 = 8, ...).
	limits := []int64{}
	for range 4 {
		now = now.Add(100 * time.Millisecond)
		call(10 * time.Millisecond)
		limits = append(limits, g.Limit())
	}
	if limits[0] != 5 || limits[1] != 8 || limits[3] <= limits[2] {
		t.Fatalf("limits while fast %v, want 5, 8, growing", limits)
	}
	// Latency four times minRTT: the gradient is clamped to 0.5 and the
	// limit falls to the minimum...
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		call(40 * time.Millisecond)
	}
	if got := g.Limit(); got != 3 {
		t.Fatalf("limit while slow %d, want 3", got)
	}
	// ...where five windows in a row start a new minRTT measurement,
	// which finds the new idle latency.
	if !g.sampling {
		t.Fatal("five windows at the minimum did not start measuring minRTT again")
	}
	for range 50 {
		now = now.Add(time.Millisecond)
		call(40 * time.Millisecond)
	}
	if g.sampling || g.minRTT != 40 {
		t.Fatalf("minRTT %v (sampling %v), want 40 measured again", g.minRTT, g.sampling)
	}
}

type fakeNext struct {
	url   *kernel.URL
	delay time.Duration
	calls int
	mu    sync.Mutex
}

func (f *fakeNext) URL() *kernel.URL  { return f.url }
func (f *fakeNext) IsAvailable() bool { return true }
func (f *fakeNext) Destroy()          {}
func (f *fakeNext) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	time.Sleep(f.delay)
	return kernel.Result{Value: "ok"}, nil
}

// A shed call fails with limit exceeded (status 100) and dubbo-go's text,
// without reaching the service; a call asking for the report gets
// remaining and in flight back.
func TestFilterShedsAndReports(t *testing.T) {
	f := New(nil)
	next := &fakeNext{url: kernel.MustParseURL("dubbo://127.0.0.1:20880/org.example.Greeter?limiter=gradient&limiter.min.concurrency=2"), delay: 50 * time.Millisecond}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			_, err := f.Invoke(context.Background(), next, &kernel.Invocation{Method: "sayHello"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var shed int
	for err := range errs {
		if err == nil {
			continue
		}
		shed++
		if kernel.CodeOf(err) != kernel.CodeLimitExceeded || !errors.Is(err, ErrShed) {
			t.Fatalf("shed with %v (code %v), want limit exceeded caused by ErrShed", err, kernel.CodeOf(err))
		}
		t.Logf("shed: %v", err)
	}
	if shed != 1 || next.calls != 2 || f.Shed() != 1 {
		t.Fatalf("%d shed, %d reached the service, Shed() %d; want 1, 2, 1 (limit 2 while measuring minRTT)", shed, next.calls, f.Shed())
	}
	inv := &kernel.Invocation{Method: "sayHello"}
	inv.SetAttachment(extension.KeyAdaptiveService, "1")
	res, err := f.Invoke(context.Background(), next, inv)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attachments[extension.KeyAdaptiveRemaining] != "2" || res.Attachments[extension.KeyAdaptiveInflight] != "0" {
		t.Fatalf("report %v, want remaining 2, inflight 0", res.Attachments)
	}
	var seen int
	f.Limits(func(service, method string, limit, inflight int64) {
		seen++
		if service != "org.example.Greeter" || method != "sayHello" || limit != 2 {
			t.Fatalf("limits: %s %s %d", service, method, limit)
		}
	})
	if seen != 1 {
		t.Fatalf("%d limiters listed, want 1", seen)
	}
}

func TestFilterUnknownLimiterPassesAndSaysSo(t *testing.T) {
	f := New(nil)
	next := &fakeNext{url: kernel.MustParseURL("dubbo://127.0.0.1:20880/S?limiter=bbr")}
	for range 3 {
		if _, err := f.Invoke(context.Background(), next, &kernel.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, warned := f.warned.Load(KeyLimiter + "=bbr"); !warned {
		t.Fatal("an unknown limiter was not reported")
	}
}
