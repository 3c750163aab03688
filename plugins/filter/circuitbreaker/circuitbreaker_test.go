package circuitbreaker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// provider answers with whatever err is set to, counting the calls that
// reach it, and takes took on the test's clock.
type provider struct {
	url   *kernel.URL
	clock *clock
	mu    sync.Mutex
	err   error
	took  time.Duration
	calls int
}

func (p *provider) URL() *kernel.URL  { return p.url }
func (p *provider) IsAvailable() bool { return true }
func (p *provider) Destroy()          {}
func (p *provider) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.clock.advance(p.took)
	return kernel.Result{Value: "ok"}, p.err
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func setup(t *testing.T, params string) (*Filter, *provider, *clock, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&logs, nil)))
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	f.now = c.now
	u := kernel.MustParseURL("dubbo://127.0.0.1:20880/org.example.Greeter?circuitbreaker=true&" + params)
	return f, &provider{url: u, clock: c}, c, &logs
}

func call(f *Filter, p *provider) error {
	_, err := f.Invoke(context.Background(), p, kernel.NewInvocation("sayHello"))
	return err
}

var failure = kernel.Errorf(kernel.CodeNetwork, "connection reset")

func TestOpensAtTheDocumentedPoint(t *testing.T) {
	f, p, c, logs := setup(t, "circuitbreaker.min.calls=10&circuitbreaker.error.ratio=0.5")
	// 5 successes, then failures: the 5th failure is 5 of 10 = 0.5.
	for i := range 5 {
		if err := call(f, p); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i := range 4 {
		p.err = failure
		if err := call(f, p); !errors.Is(err, failure) {
			t.Fatalf("failure %d: got %v", i, err)
		}
	}
	if p.calls != 9 {
		t.Fatalf("calls = %d", p.calls)
	}
	call(f, p) // 5 of 10 failed: opens
	before := p.calls
	err := call(f, p)
	if !errors.Is(err, ErrOpen) || kernel.CodeOf(err) != kernel.CodeLimitExceeded || !kernel.Retryable(err) {
		t.Fatalf("open breaker answered %v (code %v): want a retryable limit-exceeded error", err, kernel.CodeOf(err))
	}
	if p.calls != before {
		t.Fatal("an open breaker sent the call")
	}
	for _, want := range []string{"127.0.0.1:20880", "org.example.Greeter.sayHello", "5 of the last 10 calls", "failover tries another provider", "another 5s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(logs.String(), "circuit breaker open") {
		t.Errorf("no log of the opening: %s", logs)
	}
	opened, _, rejected, open := f.Counts()
	if opened != 1 || rejected != 1 || open != 1 {
		t.Errorf("counts opened=%d rejected=%d open=%d, want 1 1 1", opened, rejected, open)
	}
	_ = c
}

func TestNotBelowMinCalls(t *testing.T) {
	f, p, _, _ := setup(t, "circuitbreaker.min.calls=10")
	p.err = failure
	for i := range 9 {
		if err := call(f, p); errors.Is(err, ErrOpen) {
			t.Fatalf("opened after %d calls, min.calls is 10", i)
		}
	}
	if err := call(f, p); !errors.Is(err, failure) {
		t.Fatalf("10th call: %v", err)
	}
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatalf("11th call after 10 failures: %v, want open", err)
	}
}

func TestOnlyProviderFailuresCount(t *testing.T) {
	f, p, _, _ := setup(t, "circuitbreaker.min.calls=4")
	for _, err := range []error{
		kernel.BizError(errors.New("no such user")),
		kernel.Errorf(kernel.CodeForbidden, "token"),
		kernel.Errorf(kernel.CodeSerialization, "bad argument"),
		kernel.Errorf(kernel.CodeMethodNotFound, "what"),
	} {
		p.err = err
		for range 10 {
			if e := call(f, p); errors.Is(e, ErrOpen) {
				t.Fatalf("opened on %v, which says nothing of the provider's health", err)
			}
		}
	}
	// A canceled call is no verdict either.
	p.err = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if _, e := f.Invoke(ctx, p, kernel.NewInvocation("sayHello")); errors.Is(e, ErrOpen) {
			t.Fatal("opened on canceled calls")
		}
	}
	for _, err := range []error{
		kernel.Errorf(kernel.CodeTimeout, "slow"),
		kernel.Errorf(kernel.CodeLimitExceeded, "status 100"),
		kernel.Errorf(kernel.CodeShuttingDown, "bye"),
	} {
		f2, p2, _, _ := setup(t, "circuitbreaker.min.calls=4")
		p2.err = err
		for range 4 {
			call(f2, p2)
		}
		if e := call(f2, p2); !errors.Is(e, ErrOpen) {
			t.Errorf("4 calls failing with %v did not open it: %v", err, e)
		}
	}
}

func TestHalfOpenProbesCloseOrReopen(t *testing.T) {
	f, p, c, logs := setup(t, "circuitbreaker.min.calls=4&circuitbreaker.open=1000&circuitbreaker.halfopen.calls=2")
	p.err = failure
	for range 4 {
		call(f, p)
	}
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatal("not open")
	}
	c.advance(999 * time.Millisecond)
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatal("closed before circuitbreaker.open passed")
	}
	c.advance(time.Millisecond)
	// Half-open: a failing probe opens it again for a full period.
	n := p.calls
	if err := call(f, p); !errors.Is(err, failure) || p.calls != n+1 {
		t.Fatalf("probe: %v (calls %d -> %d)", err, n, p.calls)
	}
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatalf("after a failed probe: %v, want open", err)
	}
	c.advance(time.Second)
	p.err = nil
	// Two probes at once are let through, a third waits for their verdict.
	b := f.get(p.url, "sayHello")
	g1, err1 := b.allow(c.now(), f)
	g2, err2 := b.allow(c.now(), f)
	_, err3 := b.allow(c.now(), f)
	if err1 != nil || err2 != nil || g1 == 0 || g2 == 0 || !errors.Is(err3, ErrOpen) {
		t.Fatalf("half-open let through: %v %v %v", err1, err2, err3)
	}
	if !strings.Contains(err3.Error(), "while its probes are answered") {
		t.Errorf("half-open refusal says %q", err3)
	}
	b.record(c.now(), time.Millisecond, false, g1, f)
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatalf("closed after 1 of 2 probes: %v", err)
	}
	b.record(c.now(), time.Millisecond, false, g2, f)
	for i := range 10 {
		if err := call(f, p); err != nil {
			t.Fatalf("call %d after the probes passed: %v", i, err)
		}
	}
	opened, closedN, _, open := f.Counts()
	if opened != 2 || closedN != 1 || open != 0 {
		t.Errorf("counts opened=%d closed=%d open=%d, want 2 1 0", opened, closedN, open)
	}
	if !strings.Contains(logs.String(), "circuit breaker closed") {
		t.Errorf("no log of the closing: %s", logs)
	}
}

func TestWindowSlides(t *testing.T) {
	f, p, c, _ := setup(t, "circuitbreaker.min.calls=4&circuitbreaker.window=1000")
	p.err = failure
	for range 3 {
		call(f, p)
	}
	// The three failures leave the window; three fresh ones are not 4.
	c.advance(1100 * time.Millisecond)
	for range 3 {
		if err := call(f, p); errors.Is(err, ErrOpen) {
			t.Fatal("old failures counted after they left the window")
		}
	}
	call(f, p)
	if err := call(f, p); !errors.Is(err, ErrOpen) {
		t.Fatalf("4 failures inside the window: %v, want open", err)
	}
}

func TestSlowCallsOpen(t *testing.T) {
	f, p, _, _ := setup(t, "circuitbreaker.min.calls=4&circuitbreaker.slow.rt=100&circuitbreaker.slow.ratio=0.75")
	p.took = 150 * time.Millisecond
	for range 3 {
		call(f, p)
	}
	p.took = time.Millisecond
	call(f, p) // 3 of 4 slow: 0.75 only counts when a slow call ends
	if err := call(f, p); err != nil {
		t.Fatalf("opened on a fast call: %v", err)
	}
	p.took = 150 * time.Millisecond
	call(f, p) // 4 of 6 slow = 0.67 < 0.75
	if err := call(f, p); err != nil {
		t.Fatalf("5 of 7 slow opened it (0.71 < 0.75): %v", err)
	}
	call(f, p) // 6 of 8 = 0.75
	err := call(f, p)
	if !errors.Is(err, ErrOpen) || !strings.Contains(err.Error(), "took over 100ms") {
		t.Fatalf("6 of 8 slow: %v, want open, saying why", err)
	}
}

func TestBadSettingsUseDefaultsAndSaySo(t *testing.T) {
	f, p, _, logs := setup(t, "circuitbreaker.error.ratio=50%25&circuitbreaker.min.calls=-1")
	call(f, p)
	call(f, p)
	out := logs.String()
	for _, want := range []string{"circuitbreaker.error.ratio", "value=50%", "want a share in (0, 1]", "default=0.5", "circuitbreaker.min.calls", "default=20"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q: %s", want, out)
		}
	}
	if n := strings.Count(out, "circuitbreaker.error.ratio value"); n != 1 {
		t.Errorf("reported %d times, want once", n)
	}
	b := f.get(p.url, "sayHello")
	if b.s.errorRatio != DefaultErrorRatio || b.s.minCalls != DefaultMinCalls {
		t.Errorf("settings %+v", b.s)
	}
}

func TestOffPerMethod(t *testing.T) {
	f, p, _, _ := setup(t, "circuitbreaker.min.calls=1&sayHello.circuitbreaker=false")
	p.err = failure
	for range 5 {
		if err := call(f, p); errors.Is(err, ErrOpen) {
			t.Fatal("a method with circuitbreaker=false was broken")
		}
	}
}

func TestConcurrentCallsKeepCounts(t *testing.T) {
	f, p, _, _ := setup(t, "circuitbreaker.min.calls=1000000")
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				call(f, p)
			}
		}()
	}
	wg.Wait()
	b := f.get(p.url, "sayHello")
	calls, _, _ := b.totals(p.clock.now())
	if calls != 8000 {
		t.Fatalf("window holds %d calls, want 8000", calls)
	}
}

// BenchmarkClosedBreaker is the filter's cost per call when on and closed:
// what a reference with circuitbreaker set pays on every call.
func BenchmarkClosedBreaker(b *testing.B) {
	f := New(slog.New(slog.DiscardHandler))
	p := nop{kernel.MustParseURL("dubbo://127.0.0.1:20880/org.example.Greeter?circuitbreaker=true")}
	inv := kernel.NewInvocation("sayHello")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f.Invoke(ctx, p, inv)
		}
	})
}

type nop struct{ url *kernel.URL }

func (n nop) URL() *kernel.URL  { return n.url }
func (n nop) IsAvailable() bool { return true }
func (n nop) Destroy()          {}
func (n nop) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, nil
}
