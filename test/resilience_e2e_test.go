package test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
)

// sick is a provider of org.weft.Node that hangs past its consumers'
// timeout while ill is set: the failure a circuit breaker is for.
type sick struct {
	name  string
	ill   atomic.Bool
	slow  atomic.Int64 // ns each call takes, while not ill
	calls atomic.Int64
}

func (s *sick) Who(ctx context.Context, _ string) (string, error) {
	s.calls.Add(1)
	if d := time.Duration(s.slow.Load()); d > 0 && !s.ill.Load() {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	if s.ill.Load() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return s.name, nil
}

// sickCluster starts three providers of org.weft.Node over proto, all
// well, and a consumer App calling them with failover (retries 2, round
// robin unless ref sets loadbalance) and the reference settings ref (with
// its timeout); top is
// prepended to the consumer's config.
func sickCluster(t *testing.T, proto, ref string, top ...string) ([]*sick, *weft.App, func(ctx context.Context, s string) (string, error)) {
	t.Helper()
	var nodes []*sick
	var urls []string
	for i := range 3 {
		n := &sick{name: fmt.Sprintf("n%d", i)}
		addr := freePort(t)
		app := startNodeP(t, proto, n, addr, "")
		t.Cleanup(func() { app.Stop(context.Background()) })
		nodes, urls = append(nodes, n), append(urls, proto+"://"+addr)
	}
	if !strings.Contains(ref, "loadbalance:") {
		ref = ", loadbalance: roundrobin" + ref
	}
	var c struct {
		Who func(ctx context.Context, s string) (string, error)
	}
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(strings.Join(top, "\n")+fmt.Sprintf(`
consumer:
  references:
    node: {interface: org.weft.Node, url: "%s", retries: 2%s}
`, strings.Join(urls, ";"), ref))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return nodes, app, c.Who
}

const breakerRef = `, timeout: 100, params: {circuitbreaker: "true", circuitbreaker.min.calls: "5", circuitbreaker.window: "2000", circuitbreaker.open: "300", circuitbreaker.halfopen.calls: "2"}`

// TestCircuitBreakerCutsOffAnIllProviderAndTakesItBack: 16 callers on
// three providers, one hanging past the 100 ms timeout. Without a breaker,
// a third of the calls wait out that timeout before failover sends them on;
// with one, the ill provider gets a handful of calls (the ones that opened
// it and one probe batch per open period) and the callers no such waits.
// Once it is well again, the probes pass and it gets its share back.
func TestCircuitBreakerCutsOffAnIllProviderAndTakesItBack(t *testing.T) {
	forEachProtocol(t, testCircuitBreaker)
}

func testCircuitBreaker(t *testing.T, proto string) {
	const callers, phase = 16, 900 * time.Millisecond
	run := func(who func(ctx context.Context, s string) (string, error)) (calls, failed int64, last string) {
		l := startLoad(callers, 0, func() error {
			_, err := who(context.Background(), "x")
			return err
		})
		time.Sleep(phase)
		return l.stop()
	}

	// The control: the same cluster without a breaker.
	plain, _, plainWho := sickCluster(t, proto, ", timeout: 100")
	plain[0].ill.Store(true)
	plainCalls, plainFailed, last := run(plainWho)
	if plainFailed > 0 {
		t.Fatalf("without a breaker: %d of %d calls failed (failover should have saved them): %s", plainFailed, plainCalls, last)
	}

	nodes, app, who := sickCluster(t, proto, breakerRef)
	nodes[0].ill.Store(true)
	calls, failed, last := run(who)
	if failed > 0 {
		t.Fatalf("with a breaker: %d of %d calls failed: %s", failed, calls, last)
	}
	illPlain, ill := plain[0].calls.Load(), nodes[0].calls.Load()
	t.Logf("%s, %d callers for %v: without a breaker %d calls, %d of them to the ill provider; with one %d calls, %d to it",
		proto, callers, phase, plainCalls, illPlain, calls, ill)
	// Opening takes min.calls failures (up to the callers' in flight at
	// once), then each open period of 300 ms lets 2 probes through.
	if limit := int64(callers + 5 + 2*(int(phase/(300*time.Millisecond))+1)); ill > limit {
		t.Errorf("the ill provider got %d calls with the breaker, want at most %d", ill, limit)
	}
	if ill*3 > illPlain {
		t.Errorf("the ill provider got %d calls with the breaker and %d without: want at most a third", ill, illPlain)
	}
	if calls < 2*plainCalls {
		t.Errorf("with the breaker %d calls went through, without %d: the callers still waited on the ill provider", calls, plainCalls)
	}

	// Well again: within an open period and a probe batch it is back.
	nodes[0].ill.Store(false)
	time.Sleep(400 * time.Millisecond)
	before := [3]int64{nodes[0].calls.Load(), nodes[1].calls.Load(), nodes[2].calls.Load()}
	calls, failed, last = run(who)
	if failed > 0 {
		t.Fatalf("after recovery: %d of %d calls failed: %s", failed, calls, last)
	}
	back := nodes[0].calls.Load() - before[0]
	if back*5 < calls { // round robin gives it a third; a fifth at least
		t.Errorf("after recovery the provider got %d of %d calls: the breaker did not close", back, calls)
	}

	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := rec.Body.String()
	for _, want := range []string{"weft_circuitbreaker_opened_total", "weft_circuitbreaker_closed_total", "weft_circuitbreaker_rejected_total", "weft_circuitbreaker_open"} {
		v, ok := metricValue(m, want)
		if !ok {
			t.Errorf("/metrics lacks %s", want)
			continue
		}
		if want != "weft_circuitbreaker_open" && v < 1 {
			t.Errorf("%s = %v, want ≥ 1", want, v)
		}
		if want == "weft_circuitbreaker_open" && v != 0 {
			t.Errorf("%s = %v after recovery, want 0", want, v)
		}
	}
}

const outlierRef = `, timeout: 100, params: {outlier: "true", outlier.consecutive.errors: "3", outlier.base.ejection: "400", outlier.max.percent: "50"}`

// TestOutlierEjectionUnderLoad: 16 callers on three providers, one hanging
// past the 100 ms timeout. Outlier detection ejects it after 3 timeouts in
// a row; while it is out it gets no calls (QoS's ls and the metrics say
// so); each time it comes back ill it gets 3 calls and is out for longer
// (400 ms, 800 ms, ...); once well, it is back for good.
func TestOutlierEjectionUnderLoad(t *testing.T) { forEachProtocol(t, testOutlierEjection) }

func testOutlierEjection(t *testing.T, proto string) {
	nodes, app, who := sickCluster(t, proto, outlierRef, "qos: {port: 0}")
	nodes[0].ill.Store(true)
	l := startLoad(16, 0, func() error {
		_, err := who(context.Background(), "x")
		return err
	})
	defer l.stop()
	ill := nodes[0]
	// Ejected within the first calls: 3 in a row that time out.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(lsOf(t, app), "ejected") {
		if time.Now().After(deadline) {
			t.Fatalf("not ejected within 5 s: %d calls to it; ls:\n%s", ill.calls.Load(), lsOf(t, app))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ls := lsOf(t, app)
	t.Logf("ls while ejected:\n%s", ls)
	if !strings.Contains(ls, "failures in a row") {
		t.Errorf("ls does not say why: %s", ls)
	}
	// While out it gets nothing: a window well inside the 400 ms.
	n := ill.calls.Load()
	time.Sleep(250 * time.Millisecond)
	if got := ill.calls.Load() - n; got > 0 && strings.Contains(lsOf(t, app), "ejected") {
		t.Errorf("the ejected provider got %d calls while out", got)
	}
	// It comes back ill, takes its 3 calls, and is out again, for longer.
	time.Sleep(1500 * time.Millisecond)
	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if v, ok := metricValue(rec.Body.String(), "weft_outlier_ejections_total"); !ok || v < 2 {
		t.Errorf("weft_outlier_ejections_total = %v (%v), want ≥ 2 after 1.75 s of an ill provider", v, ok)
	}
	// Well again: back when its ejection ends, and it stays.
	ill.ill.Store(false)
	time.Sleep(2 * time.Second) // the longest ejection so far is under 1.6 s
	before, total := ill.calls.Load(), l.calls.Load()
	time.Sleep(500 * time.Millisecond)
	calls, failed, last := l.stop()
	if failed > 0 {
		t.Fatalf("%d of %d calls failed (failover should have saved them): %s", failed, calls, last)
	}
	if got, all := ill.calls.Load()-before, l.calls.Load()-total; got*5 < all {
		t.Errorf("after recovery the provider got %d of %d calls: not back", got, all)
	}
	if strings.Contains(lsOf(t, app), "ejected") {
		t.Errorf("still ejected after recovery: %s", lsOf(t, app))
	}
}

func lsOf(t *testing.T, app *weft.App) string {
	t.Helper()
	_, body := qosGet(t, app.QoSAddr(), "/ls")
	return body
}

// TestHedgingBoundsTheTail: 16 callers on three providers, one of which
// takes 150 ms per call while the others answer at once. With failover
// (no error, so no retry) a third of the calls wait the 150 ms; with
// hedging after 20 ms a backup answers them. The p99 of both is logged.
func TestHedgingBoundsTheTail(t *testing.T) { forEachProtocol(t, testHedging) }

func testHedging(t *testing.T, proto string) {
	p99 := func(cluster, params string) (time.Duration, int64) {
		nodes, _, who := sickCluster(t, proto, `, cluster: `+cluster+`, timeout: 1000, params: {`+params+`}`)
		nodes[0].slow.Store(int64(150 * time.Millisecond))
		var mu sync.Mutex
		var lat []time.Duration
		l := startLoad(16, 0, func() error {
			start := time.Now()
			_, err := who(context.Background(), "x")
			mu.Lock()
			lat = append(lat, time.Since(start))
			mu.Unlock()
			return err
		})
		time.Sleep(time.Second)
		calls, failed, last := l.stop()
		if failed > 0 {
			t.Fatalf("%s: %d of %d calls failed: %s", cluster, failed, calls, last)
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100], calls
	}
	plain, plainCalls := p99("failover", "")
	hedged, hedgedCalls := p99("hedging", `hedging.delay: "20"`)
	t.Logf("%s, 16 callers, one provider of three 150 ms slow: p99 %v with failover (%d calls in 1 s), %v with hedging after 20 ms (%d calls)",
		proto, plain.Round(time.Millisecond), plainCalls, hedged.Round(time.Millisecond), hedgedCalls)
	if plain < 150*time.Millisecond {
		t.Fatalf("p99 without hedging is %v: the slow provider did not slow anything", plain)
	}
	if hedged > plain/2 {
		t.Errorf("p99 with hedging %v, without %v: want at most half", hedged, plain)
	}
}

// TestRetryBudgetWhenEveryProviderFails: every provider hangs past the
// 50 ms timeout. Failover with retries 2 sends each call three times;
// with retry.budget.percent 20 the providers see at most 1.2 times the
// calls (and the budget's minimum).
func TestRetryBudgetWhenEveryProviderFails(t *testing.T) {
	var app *weft.App
	run := func(params string) (calls, reached, spent int64) {
		nodes, a, who := sickCluster(t, "dubbo", `, timeout: 50`+params)
		app = a
		for _, n := range nodes {
			n.ill.Store(true)
		}
		var budgetSaid atomic.Int64
		l := startLoad(8, 0, func() error {
			_, err := who(context.Background(), "x")
			if err != nil && strings.Contains(err.Error(), "retry budget spent") {
				budgetSaid.Add(1)
			}
			return err
		})
		time.Sleep(time.Second)
		calls, _, _ = l.stop()
		for _, n := range nodes {
			reached += n.calls.Load()
		}
		return calls, reached, budgetSaid.Load()
	}
	calls, reached, _ := run("")
	t.Logf("no budget: %d calls, %d attempts reached the providers (%.2f per call)", calls, reached, float64(reached)/float64(calls))
	if reached < 2*calls {
		t.Fatalf("without a budget %d attempts for %d calls: failover did not retry", reached, calls)
	}
	calls, reached, spent := run(`, params: {retry.budget.percent: "20", retry.budget.min: "5"}`)
	t.Logf("20%% budget: %d calls, %d attempts reached the providers (%.2f per call); %d failures said the budget was spent",
		calls, reached, float64(reached)/float64(calls), spent)
	if reached > calls+calls/5+5+8 { // 8: attempts in flight when the load stopped
		t.Errorf("with a 20%% budget %d attempts for %d calls", reached, calls)
	}
	if spent == 0 {
		t.Error("no failure said the retry budget stopped its retries")
	}
	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var allowed, denied float64
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "weft_retry_budget_attempts_total{") {
			v, _ := metricValue(line, "weft_retry_budget_attempts_total")
			if strings.Contains(line, `result="denied"`) {
				denied = v
			} else {
				allowed = v
			}
		}
	}
	if denied < float64(spent) || allowed < 5 || allowed > float64(reached-calls) {
		t.Errorf("weft_retry_budget_attempts_total allowed=%v denied=%v, with %d extra attempts made and %d calls refused a retry",
			allowed, denied, reached-calls, spent)
	}
}

// metricValue is the value of the first sample of family name in a
// Prometheus text exposition.
func metricValue(exposition, name string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			return v, true
		}
	}
	return 0, false
}
