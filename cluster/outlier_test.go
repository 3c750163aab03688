package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// outlierDir is a static directory of n providers with outlier detection
// set by params, on a clock the test moves.
func outlierDir(t *testing.T, n int, params string) (*StaticDirectory, []*fakeInvoker, *testClock, *bytes.Buffer) {
	t.Helper()
	ps := providers(n, func(int, context.Context) error { return nil })
	ivs := make([]kernel.Invoker, n)
	for i, p := range ps {
		ivs[i] = p
	}
	d := NewStaticDirectory(kernel.MustParseURL("consumer://127.0.0.1/S?outlier=true&"+params), ivs, nil)
	var logs bytes.Buffer
	c := &testClock{t: time.Unix(1_700_000_000, 0)}
	d.outlier.log = slog.New(slog.NewTextHandler(&logs, nil))
	d.outlier.now = c.now
	d.outlier.nextEval.Store(c.now().Add(d.outlier.s.interval).UnixNano())
	return d, ps, c, &logs
}

func listed(t *testing.T, d *StaticDirectory) []string {
	t.Helper()
	list, err := d.List(context.Background(), kernel.NewInvocation("m"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, iv := range list {
		out = append(out, iv.URL().Address())
	}
	return out
}

var refused = kernel.Errorf(kernel.CodeNetwork, "connection refused")

func TestOutlierEjectsAfterConsecutiveFailuresAndTakesItBack(t *testing.T) {
	d, ps, c, logs := outlierDir(t, 3, "outlier.consecutive.errors=3&outlier.base.ejection=1000&outlier.max.percent=50")
	bad := ps[0]
	d.Observe(bad, refused)
	d.Observe(bad, refused)
	d.Observe(bad, nil) // a success breaks the run
	d.Observe(bad, refused)
	d.Observe(bad, refused)
	if got := listed(t, d); len(got) != 3 {
		t.Fatalf("ejected after 2 failures in a row: %v", got)
	}
	d.Observe(bad, refused)
	got := listed(t, d)
	if len(got) != 2 || strings.Contains(strings.Join(got, ","), bad.url.Address()) {
		t.Fatalf("after 3 failures in a row the list is %v", got)
	}
	e, out := d.Ejected(bad)
	if !out || e.Times != 1 || !strings.Contains(e.Why, "3 failures in a row") || !strings.Contains(e.Why, "connection refused") {
		t.Fatalf("Ejected = %+v, %v", e, out)
	}
	if !strings.Contains(logs.String(), "provider ejected") {
		t.Errorf("no log of the ejection: %s", logs)
	}
	c.advance(999 * time.Millisecond)
	if len(listed(t, d)) != 2 {
		t.Fatal("back before outlier.base.ejection")
	}
	c.advance(time.Millisecond)
	if len(listed(t, d)) != 3 {
		t.Fatal("not back after outlier.base.ejection")
	}
	if !strings.Contains(logs.String(), "ejected provider is back") {
		t.Errorf("no log of the return: %s", logs)
	}
	// Ejected again at once: twice the base time.
	for range 3 {
		d.Observe(bad, refused)
	}
	if e, out := d.Ejected(bad); !out || e.Times != 2 || e.Until.Sub(c.now()) != 2*time.Second {
		t.Fatalf("second ejection %+v, %v: want 2 s", e, out)
	}
	if total, now := d.Ejections(); total != 2 || now != 1 {
		t.Errorf("Ejections = %d, %d", total, now)
	}
}

func TestOutlierMaxEjectionCapsTheTime(t *testing.T) {
	d, ps, c, _ := outlierDir(t, 2, "outlier.consecutive.errors=1&outlier.base.ejection=1000&outlier.max.ejection=2500")
	for i := range 4 {
		d.Observe(ps[0], refused)
		e, _ := d.Ejected(ps[0])
		want := min(time.Duration(i+1)*time.Second, 2500*time.Millisecond)
		if got := e.Until.Sub(c.now()); got != want {
			t.Fatalf("ejection %d lasts %v, want %v", i+1, got, want)
		}
		c.advance(want)
		listed(t, d) // lets it back
	}
}

func TestOutlierNeverEjectsMoreThanMaxPercent(t *testing.T) {
	// 10% of 4 providers is 0: one may still be out, never two.
	d, ps, _, logs := outlierDir(t, 4, "outlier.consecutive.errors=2")
	for _, p := range ps[:2] {
		d.Observe(p, refused)
		d.Observe(p, refused)
	}
	if got := listed(t, d); len(got) != 3 {
		t.Fatalf("list %v: want one ejected", got)
	}
	if !strings.Contains(logs.String(), "outlier.max.percent") {
		t.Errorf("the second provider's refused ejection is not logged: %s", logs)
	}
	// Every provider failing leaves at least the others in.
	for _, p := range ps {
		for range 5 {
			d.Observe(p, refused)
		}
	}
	if got := listed(t, d); len(got) != 3 {
		t.Fatalf("all failing: list %v, want 3 of 4 still in", got)
	}
}

func TestOutlierOnlyProviderFailuresCount(t *testing.T) {
	d, ps, _, _ := outlierDir(t, 2, "outlier.consecutive.errors=2")
	for _, err := range []error{kernel.BizError(errors.New("no funds")), kernel.Errorf(kernel.CodeForbidden, "token"),
		kernel.Errorf(kernel.CodeMethodNotFound, "x"), context.Canceled} {
		for range 5 {
			d.Observe(ps[0], err)
		}
	}
	if len(listed(t, d)) != 2 {
		t.Fatal("ejected for failures that say nothing of the provider")
	}
}

func TestOutlierFailurePercentOverAnInterval(t *testing.T) {
	d, ps, c, _ := outlierDir(t, 5, "outlier.consecutive.errors=0&outlier.interval=1000&outlier.failure.volume=10&outlier.failure.min.hosts=5&outlier.max.percent=20")
	// ps[0] fails 9 of 10 (90% ≥ 85%), never twice in a row a success
	// breaks; the others fail 1 of 10.
	for i := range 10 {
		for j, p := range ps {
			var err error
			if (j == 0 && i%10 != 0) || (j > 0 && i == 3) {
				err = refused
			}
			d.Observe(p, err)
		}
	}
	if len(listed(t, d)) != 5 {
		t.Fatal("ejected before the interval ended")
	}
	c.advance(time.Second)
	d.Observe(ps[1], nil) // the first call after the interval evaluates it
	got := listed(t, d)
	if len(got) != 4 {
		t.Fatalf("after the interval: %v, want ps[0] out", got)
	}
	if e, out := d.Ejected(ps[0]); !out || !strings.Contains(e.Why, "9 of its 10 calls") {
		t.Fatalf("Ejected = %+v, %v", e, out)
	}
	// Too few providers with enough calls: nobody is judged.
	d2, ps2, c2, _ := outlierDir(t, 5, "outlier.consecutive.errors=0&outlier.interval=1000&outlier.failure.volume=10&outlier.failure.min.hosts=5&outlier.max.percent=20")
	for range 10 {
		d2.Observe(ps2[0], refused)
	}
	c2.advance(time.Second)
	d2.Observe(ps2[1], nil)
	if len(listed(t, d2)) != 5 {
		t.Fatal("judged with one provider of enough volume, min.hosts 5")
	}
}

func TestOutlierForgetsProvidersThatLeft(t *testing.T) {
	d, ps, c, _ := outlierDir(t, 3, "outlier.consecutive.errors=1&outlier.max.percent=50&outlier.interval=1000")
	d.Observe(ps[0], refused)
	if _, n := d.Ejections(); n != 1 {
		t.Fatal("not ejected")
	}
	// The provider leaves the directory.
	rest := []kernel.Invoker{ps[1], ps[2]}
	d.invokers.Store(&rest)
	c.advance(time.Second)
	d.Observe(ps[1], nil)
	if _, n := d.Ejections(); n != 0 {
		t.Fatalf("%d out after the ejected provider left", n)
	}
	n := 0
	d.outlier.hosts.Range(func(k, _ any) bool { n++; return true })
	if n != 2 {
		t.Fatalf("%d providers remembered, want 2", n)
	}
}

func TestOutlierOffCostsNothing(t *testing.T) {
	ps := providers(3, func(int, context.Context) error { return nil })
	ivs := []kernel.Invoker{ps[0], ps[1], ps[2]}
	d := NewStaticDirectory(kernel.MustParseURL("consumer://127.0.0.1/S"), ivs, nil)
	if d.outlier != nil {
		t.Fatal("outlier detection on without the key")
	}
	inv := kernel.NewInvocation("m")
	if n := testing.AllocsPerRun(100, func() {
		d.Observe(ps[0], refused)
		d.List(context.Background(), inv)
	}); n != 0 {
		t.Fatalf("%v allocations per call with outlier detection off", n)
	}
}

func TestOutlierBadSettingsSaySo(t *testing.T) {
	var logs bytes.Buffer
	o := newOutlier(kernel.MustParseURL("consumer://127.0.0.1/S?outlier=true&outlier.max.percent=150&outlier.interval=soon"),
		slog.New(slog.NewTextHandler(&logs, nil)))
	if o.s.maxPercent != DefaultOutlierMaxPercent || o.s.interval != DefaultOutlierInterval*time.Millisecond {
		t.Fatalf("settings %+v", o.s)
	}
	for _, want := range []string{"outlier.max.percent", "value=150", "0..100", "outlier.interval", "value=soon"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs.String())
		}
	}
}

// TestOutlierGroupsFromProviderURLs: providers whose URLs ask for outlier
// detection by group (a mesh cluster's outlier_detection) are judged
// within their group, with its settings; a group whose settings stay
// keeps its ejections across notifications.
func TestOutlierGroupsFromProviderURLs(t *testing.T) {
	refer := func(u *kernel.URL) (kernel.Invoker, error) { return &fakeInvoker{url: u}, nil }
	dir := NewRegistryDirectory(kernel.MustParseURL("consumer://h/S"), refer, quiet)
	mesh := "?outlier=true&outlier.group=%s&outlier.consecutive.errors=2&outlier.max.percent=50"
	urls := []*kernel.URL{
		kernel.MustParseURL("tri://a:1/S" + fmt.Sprintf(mesh, "v1")),
		kernel.MustParseURL("tri://b:1/S" + fmt.Sprintf(mesh, "v1")),
		kernel.MustParseURL("tri://c:1/S" + fmt.Sprintf(mesh, "v2")),
		kernel.MustParseURL("tri://d:1/S"), // no detector
	}
	dir.Notify(urls)
	ivs := dir.Invokers()
	fail := kernel.Errorf(kernel.CodeNetwork, "down")
	dir.Observe(ivs[0], fail)
	dir.Observe(ivs[0], fail)
	dir.Observe(ivs[2], fail) // one failure: c stays
	for range 3 {
		dir.Observe(ivs[3], fail) // d has no detector
	}
	list, _ := dir.List(context.Background(), kernel.NewInvocation("m"))
	if got := urlsOf(list); got != "b:1,c:1,d:1" {
		t.Fatalf("after a's two failures in a row: %s; want a out of its group v1 only", got)
	}
	if total, out := dir.Ejections(); total != 1 || out != 1 {
		t.Errorf("ejections %d, out %d", total, out)
	}
	dir.Notify(urls[:3])
	if list, _ := dir.List(context.Background(), kernel.NewInvocation("m")); urlsOf(list) != "b:1,c:1" {
		t.Fatalf("the same settings notified again: %s; want a still out", urlsOf(list))
	}
	changed := kernel.MustParseURL("tri://a:1/S" + fmt.Sprintf(mesh, "v1") + "&outlier.interval=20000")
	dir.Notify([]*kernel.URL{changed, urls[1], urls[2]})
	// The group's settings changed (they are its first provider's): a
	// new detector, which has ejected no one.
	if list, _ := dir.List(context.Background(), kernel.NewInvocation("m")); urlsOf(list) != "a:1,b:1,c:1" {
		t.Fatalf("after a settings change: %s; want all in", urlsOf(list))
	}
}

// TestOutlierSuccessRateBelowTheMean: Envoy's success rate algorithm (gRPC
// A50): a provider whose success rate is below the mean less factor/1000
// standard deviations is ejected, once minimum hosts have the volume.
func TestOutlierSuccessRateBelowTheMean(t *testing.T) {
	const params = "outlier.consecutive.errors=0&outlier.failure.percent=0&outlier.interval=1000&outlier.success.stdev=1000&outlier.success.volume=20&outlier.success.min.hosts=5&outlier.max.percent=20"
	d, ps, c, _ := outlierDir(t, 5, params)
	// Success rates: 100%, 100%, 100%, 95%, 50% (mean 89%, stdev 19.6%:
	// the threshold is 69.4%).
	fails := []int{0, 0, 0, 1, 10}
	for i := range 20 {
		for j, p := range ps {
			var err error
			if i < fails[j] {
				err = refused
			}
			d.Observe(p, err)
		}
	}
	c.advance(time.Second)
	d.Observe(ps[1], nil)
	if got := listed(t, d); len(got) != 4 {
		t.Fatalf("after the interval: %v, want ps[4] out", got)
	}
	if e, out := d.Ejected(ps[4]); !out || !strings.Contains(e.Why, "success rate") {
		t.Fatalf("Ejected = %+v, %v", e, out)
	}
	if _, out := d.Ejected(ps[3]); out {
		t.Fatal("95% is above the threshold, but ps[3] is out")
	}
	// Too few providers with the volume: nobody is judged.
	d2, ps2, c2, _ := outlierDir(t, 5, params)
	for range 20 {
		d2.Observe(ps2[0], refused)
		d2.Observe(ps2[1], nil)
	}
	c2.advance(time.Second)
	d2.Observe(ps2[2], nil)
	if len(listed(t, d2)) != 5 {
		t.Fatal("judged with two providers of enough volume, min.hosts 5")
	}
}
