package wasmfilter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newFilter(t testing.TB, path string, c wasmfilter.Config) *wasmfilter.Filter {
	t.Helper()
	if c.Name == "" {
		c.Name = "wasm-" + strings.TrimSuffix(filepath.Base(path), ".wasm")
	}
	c.Path = path
	if c.Log == nil {
		c.Log = quiet
	}
	f, err := wasmfilter.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func withMode(mode string) *kernel.Invocation {
	inv := kernel.NewInvocation("sayHello", "world", int64(42))
	if mode != "" {
		inv.SetAttachment("mode", mode)
	}
	return inv
}

func TestHostFunctions(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "inspect")
	var logs bytes.Buffer
	f := newFilter(t, path, wasmfilter.Config{Name: "wasm-inspect",
		Settings: map[string]any{"token": "s3cret", "nested": map[string]any{"n": 1}},
		Log:      slog.New(slog.NewTextHandler(&logs, nil))})
	ep := newEndpoint()
	var got map[string]any
	ep.seen = func(inv *kernel.Invocation) { got = inv.Attachments() }
	inv := kernel.NewInvocation("sayHello", "world", map[any]any{1: "x"})
	inv.RemoteAddr = "10.0.0.7:51234"
	inv.SetAttachment("num", int64(12))
	inv.SetAttachment("drop", "me")
	res, err := f.Invoke(context.Background(), ep, inv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"saw.service":    "g/org.example.Greeter:1.0",
		"saw.method":     "sayHello",
		"saw.side":       "provider",
		"saw.arguments":  `["world",{"1":"x"}]`,
		"saw.remote":     "10.0.0.7:51234",
		"saw.config":     `{"nested":{"n":1},"token":"s3cret"}`,
		"saw.result":     "<not found>",
		"saw.error":      "<not found>",
		"saw.attachment": "12",
		"saw.missing":    "<not found>",
		"saw.badkey":     "<status 2>",
		"saw.badout":     "<status 2>",
		"saw.badutf8":    "<status 2>",
		"saw.badcode":    "<status 2>",
		"saw.counter":    "205", // 2, then 2+3
		"saw.now":        "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["drop"]; ok {
		t.Error("remove_attachment left drop")
	}
	if !strings.Contains(logs.String(), "inspect saw a call") || !strings.Contains(logs.String(), "filter=wasm-inspect") {
		t.Errorf("guest log missing: %q", logs.String())
	}
	// On response: the result as JSON, the reply attachment with the result,
	// and get_attachment still sees the call's attachments.
	if res.Attachments["saw.result"] != `{"greeting":"hello"}` || res.Attachments["reply"] != "from-wasm" ||
		res.Attachments["saw.method.onresponse"] != "sayHello" {
		t.Errorf("result attachments %v", res.Attachments)
	}
	if _, ok := res.Attachments["saw.error"]; ok {
		t.Error("get_error found an error on a successful call")
	}

	// A failed call: get_result is NOT_FOUND, get_error has the message.
	ep.err = kernel.BizError(errors.New("insufficient funds"))
	res, err = f.Invoke(context.Background(), ep, kernel.NewInvocation("pay"))
	if !kernel.IsBiz(err) || res.Attachments["saw.error"] != "insufficient funds" || res.Attachments["saw.result"] != nil {
		t.Errorf("failed call: err %v, attachments %v", err, res.Attachments)
	}
}

func TestAttachmentReadWrite(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "attach"), wasmfilter.Config{})
	ep := newEndpoint()
	var out any
	ep.seen = func(inv *kernel.Invocation) { out, _ = inv.Attachment("out") }
	inv := kernel.NewInvocation("m")
	inv.SetAttachment("in", "héllo")
	if _, err := f.Invoke(context.Background(), ep, inv); err != nil {
		t.Fatal(err)
	}
	if out != "héllo!" {
		t.Fatalf("out = %q", out)
	}
	// Absent attachment: the guest gets NOT_FOUND and writes just "!".
	if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("m")); err != nil || out != "!" {
		t.Fatalf("out = %q, err %v", out, err)
	}

	// The same module given as bytes (nothing to read or watch).
	b, err := os.ReadFile(buildGuest(t, t.TempDir(), "attach"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := wasmfilter.New(context.Background(), wasmfilter.Config{Name: "wasm-mem", Path: "attach.wasm", Module: b})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Watch(time.Millisecond)
	if _, err := g.Invoke(context.Background(), ep, inv); err != nil || out != "héllo!" {
		t.Fatalf("from bytes: out = %q, err %v", out, err)
	}
}

func TestRejections(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "misbehave"), wasmfilter.Config{Name: "wasm-guard"})
	ep := newEndpoint()
	called := 0
	ep.seen = func(*kernel.Invocation) { called++ }
	for _, c := range []struct {
		mode string
		code kernel.Code
		msg  string
	}{
		{"reject", kernel.CodeLimitExceeded, `wasm filter "wasm-guard" rejected the call: too many requests`},
		{"reject0", kernel.CodeForbidden, `wasm filter "wasm-guard" rejected the call`},
		{"action9", kernel.CodeUnknown, `weft_on_request returned 9, which is neither CONTINUE (0) nor REJECT (1)`},
	} {
		_, err := f.Invoke(context.Background(), ep, withMode(c.mode))
		if kernel.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v (code %v), want code %v and %q", c.mode, err, kernel.CodeOf(err), c.code, c.msg)
		}
	}
	if called != 0 {
		t.Errorf("a rejected call went on %d times", called)
	}
	// Rejecting on response replaces the result.
	inv := withMode("")
	inv.SetAttachment("rmode", "reject")
	if _, err := f.Invoke(context.Background(), ep, inv); kernel.CodeOf(err) != kernel.CodeLimitExceeded || called != 1 {
		t.Errorf("reject on response: %v, called %d", err, called)
	}
	// Rejections are answers, not failures: the instance is kept (with the
	// spare the pool made when the first call took its only instance).
	waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle == 2 })
	if s := f.Stats(); s.MemoryBytes < 2*65536 {
		t.Errorf("two live instances hold %d bytes of linear memory, want at least a page each", s.MemoryBytes)
	}
	if s := f.Stats(); s.Discarded != 0 || s.Failures != 0 || s.Created != 2 {
		t.Errorf("stats %+v", s)
	}
}

// Each failure fails its call, with a clear error, in time (within its budget
// and how late this machine is at a timer right now, see slack), and the pool
// recovers: the next call gets a fresh instance and succeeds.
func TestFailuresAreContained(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "misbehave"),
		wasmfilter.Config{Name: "wasm-bad", MaxMemoryPages: 64, Timeout: 100 * time.Millisecond})
	ep := newEndpoint()
	// Healthy calls run alongside the failing ones, through the same pool,
	// and must all succeed.
	var stop atomic.Bool
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := healthy(f, ep); err != nil {
					bad.Add(1)
					t.Errorf("healthy call failed: %v", err)
				}
				ok.Add(1)
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
		t.Logf("%d healthy calls alongside, %d failed", ok.Load(), bad.Load())
	}()
	for _, c := range []struct {
		mode, rmode string
		deadline    time.Duration // 0: none, the filter's timeout applies
		code        kernel.Code
		msg         string
	}{
		{mode: "trap", code: kernel.CodeUnknown, msg: `wasm filter "wasm-bad": weft_on_request trapped (memory: 3 of max_memory_pages 64); the instance was discarded: wasm error: unreachable`},
		{mode: "loop", deadline: 50 * time.Millisecond, code: kernel.CodeTimeout, msg: `wasm filter "wasm-bad": weft_on_request was still running at the call's deadline`},
		{mode: "loop", code: kernel.CodeTimeout, msg: `wasm filter "wasm-bad": weft_on_request ran past the filter's timeout of 100ms`},
		// Growing to the cap is work a loaded machine can stretch past the
		// filter's 100ms: a deadline of its own, so that only the cap ends it.
		{mode: "grow", deadline: 10 * time.Second, code: kernel.CodeUnknown, msg: `weft_on_request trapped (memory: 51 of max_memory_pages 64)`},
		{mode: "badptr", code: kernel.CodeUnknown, msg: `weft_on_request broke the ABI; the instance was discarded: counter_add: key (ptr 2147483632, len 64) is outside the guest's memory`},
		{mode: "exit", code: kernel.CodeUnknown, msg: `weft_on_request exited (proc_exit) with code 3`},
		{rmode: "trap", code: kernel.CodeUnknown, msg: `weft_on_response trapped`},
		{rmode: "loop", deadline: 30 * time.Millisecond, code: kernel.CodeTimeout, msg: `weft_on_response was still running at the call's deadline`},
	} {
		name := c.mode + c.rmode
		budget := c.deadline
		if budget == 0 {
			budget = 100 * time.Millisecond
		}
		run := func() (time.Duration, error) {
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			inv := withMode(c.mode)
			if c.rmode != "" {
				inv.SetAttachment("rmode", c.rmode)
			}
			start := time.Now()
			_, err := f.Invoke(ctx, ep, inv)
			return time.Since(start), err
		}
		allowed := budget + slack()
		before := f.Stats()
		took, err := run()
		if took > allowed {
			// One scheduling hiccup the baseline did not happen to see is
			// not the mechanism's lateness: measure both again once.
			t.Logf("%s: failed after %v, past its budget and this machine's timer lateness (%v); measuring again", name, took, allowed)
			allowed = budget + slack()
			before = f.Stats()
			took, err = run()
		}
		if err == nil || kernel.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v (code %v), want code %v and %q", name, err, kernel.CodeOf(err), c.code, c.msg)
		}
		var ke *kernel.Error
		if !errors.As(err, &ke) {
			t.Errorf("%s: %T is not a *kernel.Error", name, err)
		}
		if took > allowed {
			t.Errorf("%s: failed after %v, twice past its budget %v + %d × this machine's worst timer lateness now + %v (%v)", name, took, budget, lateFactor, lateMargin, allowed)
		}
		if c.mode == "loop" || c.rmode == "loop" {
			t.Logf("%s (budget %v): failed after %v (%.2fms past; allowed %.2fms)", name, budget, took, float64(took-budget)/1e6, float64(allowed-budget)/1e6)
		}
		if s := f.Stats(); s.Failures != before.Failures+1 || s.Discarded < before.Discarded+1 {
			t.Errorf("%s: the instance was not discarded: %+v", name, s)
		}
		// The metrics' split of failures: a timeout code is a timeout,
		// anything else a trap; every call is counted.
		if s := f.Stats(); s.Calls < before.Calls+1 || s.Traps+s.Timeouts != s.Failures ||
			(c.code == kernel.CodeTimeout) != (s.Timeouts == before.Timeouts+1) || s.MemoryBytes < 0 {
			t.Errorf("%s: calls %d→%d, traps %d→%d, timeouts %d→%d, failures %d, memory %d", name,
				before.Calls, s.Calls, before.Traps, s.Traps, before.Timeouts, s.Timeouts, s.Failures, s.MemoryBytes)
		}
		if _, err := healthy(f, ep); err != nil {
			t.Errorf("%s: the next call failed: %v", name, err)
		}
	}
}

// healthy makes a call that must succeed alongside failing ones. It has a
// deadline of its own, so the filter's timeout (short, to be hit by the
// failing ones) does not bound its callbacks: a stall of a loaded machine
// (plain Go timers were seen 230ms late with both cores taken) is not a
// failure of the guest's.
func healthy(f *wasmfilter.Filter, ep *endpoint) (kernel.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.Invoke(ctx, ep, withMode("ok"))
}

// A call whose context is done before the filter runs does not spoil an
// instance.
func TestExpiredContext(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "noop"), wasmfilter.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := f.Invoke(ctx, newEndpoint(), withMode("")); kernel.CodeOf(err) != kernel.CodeTimeout {
		t.Fatalf("err %v", err)
	}
	if s := f.Stats(); s.Discarded != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// The deadline precision of a spinning guest, against a baseline measured
// alongside. Each repeat measures, back to back on this machine now: how
// late a spinning goroutine is stopped at a timer in plain Go
// (timerLateness, the mechanism the deadline relies on); how long a call
// whose guest traps at once takes (the same failure, discard and close a
// stopped guest goes through, without the stop); then how late a looping
// guest is stopped. Their sum is what a correct host costs now: the stop,
// then the failure's path. On a loaded machine both stretch (each of their
// steps waits for a core), so the test holds them against that sum, not
// against fixed bounds: the guest's median lateness must be within
// lateFactor × the baseline's median + lateMargin; and, the target of the
// host's own timer (issue 13), the median of each repeat's excess over its
// own baseline within 5ms. A guest whose deadline were ignored fails: stopped
// by the filter's 1s timeout (the deadline cases run with the default
// timeout for that reason), or not at all (then the watchdog fails the
// test); a timer that fired late, or checks too far apart, show as the
// excess. The deadline is a context.WithTimeout's, then a
// kernel.WithDeadline's (the provider's, whose Done channel the host never
// asks for).
func TestLoopDeadlinePrecision(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "misbehave")
	ep := newEndpoint()
	const deadline = 20 * time.Millisecond
	const repeats = 21
	const target = 5 * time.Millisecond
	for _, how := range []string{"ctx deadline", "provider deadline", "filter timeout"} {
		byTimer := how == "filter timeout"
		cfg := wasmfilter.Config{Name: "wasm-precision"} // default timeout, 1s
		if byTimer {
			cfg.Timeout = deadline
		}
		f := newFilter(t, path, cfg)
		// The last call cost its instance: wait until the pool has made
		// the replacement, so that what is measured is the deadline's
		// precision (or the failure's path), not a start-up.
		ready := func() { waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 }) }
		trap := func() time.Duration {
			ready()
			// A deadline of its own, as healthy's: the filter's timeout
			// (20ms in the filter timeout case) is not to stop it when the
			// machine stalls.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := f.Invoke(ctx, ep, withMode("trap"))
			took := time.Since(start)
			if err == nil || kernel.CodeOf(err) == kernel.CodeTimeout {
				t.Fatalf("%s: a trapping guest: %v", how, err)
			}
			return took
		}
		measure := func() time.Duration {
			ready()
			type outcome struct {
				late time.Duration
				err  error
			}
			done := make(chan outcome, 1)
			go func() { // timed on its own goroutine: the watchdog's hand-off is not counted
				start := time.Now()
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch how {
				case "ctx deadline":
					ctx, cancel = context.WithTimeout(ctx, deadline)
				case "provider deadline":
					ctx, cancel = kernel.WithDeadline(ctx, start.Add(deadline))
				}
				defer cancel()
				_, err := f.Invoke(ctx, ep, withMode("loop"))
				done <- outcome{time.Since(start) - deadline, err}
			}()
			select {
			case o := <-done:
				if kernel.CodeOf(o.err) != kernel.CodeTimeout {
					t.Fatalf("%s: %v", how, o.err)
				}
				return o.late
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: a looping guest was not stopped in 10s (deadline %v)", how, deadline)
				return 0
			}
		}
		var timer, failing, base, late, excess []time.Duration
		for range repeats {
			ready()
			b := timerLateness(deadline, byTimer)
			c := trap()
			g := measure()
			timer, failing, base, late, excess = append(timer, b), append(failing, c), append(base, b+c), append(late, g), append(excess, g-b-c)
		}
		bs, gs, xs := spreadOf(base), spreadOf(late), spreadOf(excess)
		allowed := lateFactor*bs.median + lateMargin
		t.Logf("%s %v, %d repeats: baseline %v (plain Go spinner's lateness %v; a trapping guest's call %v); guest lateness %v, allowed median %v; excess over the baseline %v",
			how, deadline, repeats, bs, spreadOf(timer), spreadOf(failing), gs, allowed.Round(10*time.Microsecond), xs)
		if gs.median > allowed {
			t.Errorf("%s: a looping guest was stopped %v after its deadline (median of %d), past %d × what this machine costs a correct host now (median %v: a timer's lateness and a failed call) + %v",
				how, gs.median, repeats, lateFactor, bs.median, lateMargin)
		}
		if xs.median > target {
			t.Errorf("%s: a looping guest was stopped %v later than this machine stops a spinner and fails a call now (median of %d repeats), past %v: the host's timer is late",
				how, xs.median, repeats, target)
		}
	}
}

// 100 concurrent callers through one filter: no call fails, and no instance
// ever serves two calls at once (the host counts calls per instance; the
// trace guest also checks with a global of its own and rejects if shared).
func TestConcurrentCallers(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "trace"), wasmfilter.Config{Settings: map[string]any{"name": "w"}})
	ep := newEndpoint()
	ep.seen = func(inv *kernel.Invocation) {
		if inv.AttachmentString("trace") != "w" {
			panic("trace " + inv.AttachmentString("trace"))
		}
		time.Sleep(50 * time.Microsecond) // hold the instance across the call
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				res, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("m"))
				if err != nil || res.Attachments["rtrace"] != "w" {
					failed.Add(1)
					t.Errorf("call: %v, %v", err, res.Attachments)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := f.Stats()
	t.Logf("100 callers x 50 calls: %+v", s)
	if failed.Load() > 0 || s.MaxBusy != 1 {
		t.Fatalf("failed %d, max calls on one instance at once %d", failed.Load(), s.MaxBusy)
	}
	if s.Idle > 16+2*runtime.GOMAXPROCS(0) || s.Live != s.Idle {
		t.Errorf("after the burst: %+v", s)
	}
}

// Replacing the module file under load: no call fails, and calls after the
// swap see the new build. A broken file afterwards changes nothing.
func TestHotReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	v1 := buildGuest(t, dir, "version", `VERSION="1"`)
	v2 := buildGuest(t, dir, "version", `VERSION="2"`)
	live := filepath.Join(dir, "live.wasm")
	copyFile(t, v1, live)
	var logs syncBuffer
	f := newFilter(t, live, wasmfilter.Config{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	f.Watch(20 * time.Millisecond)

	ep := newEndpoint()
	var stop atomic.Bool
	var calls, fails atomic.Int64
	var seen sync.Map
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				var got string
				e := *ep
				e.seen = func(inv *kernel.Invocation) { got = inv.AttachmentString("version") }
				if _, err := f.Invoke(context.Background(), &e, kernel.NewInvocation("m")); err != nil {
					fails.Add(1)
					t.Errorf("call during reload: %v", err)
				}
				calls.Add(1)
				seen.Store(got, true)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	replace(t, v2, live)
	waitFor(t, 5*time.Second, func() bool { return f.Stats().Version == 2 })
	// Every call starting now must see version 2.
	after := kernel.NewInvocation("m")
	var got string
	e := *ep
	e.seen = func(inv *kernel.Invocation) { got = inv.AttachmentString("version") }
	if _, err := f.Invoke(context.Background(), &e, after); err != nil || got != "2" {
		t.Fatalf("after reload: version %q, err %v", got, err)
	}

	// A broken file: logged, the old module stays.
	broken := filepath.Join(dir, "broken.wasm")
	os.WriteFile(broken, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644)
	replace(t, broken, live)
	waitFor(t, 5*time.Second, func() bool { return f.Stats().FailedReloads == 1 })
	time.Sleep(100 * time.Millisecond) // several polls: the same broken file is not retried
	stop.Store(true)
	wg.Wait()
	if _, err := f.Invoke(context.Background(), &e, kernel.NewInvocation("m")); err != nil || got != "2" {
		t.Fatalf("after a broken file: version %q, err %v", got, err)
	}
	s := f.Stats()
	t.Logf("%d calls during two swaps, %d failed; %+v", calls.Load(), fails.Load(), s)
	if fails.Load() != 0 || s.FailedReloads != 1 || s.Version != 2 {
		t.Fatalf("fails %d, stats %+v", fails.Load(), s)
	}
	if _, ok := seen.Load("1"); !ok {
		t.Error("no call saw version 1")
	}
	if !strings.Contains(logs.String(), "cannot be loaded; the previous version keeps serving") {
		t.Errorf("broken reload not logged: %s", logs.String())
	}
}

// A file that changes between a good and a broken build is retried once it
// changes again, and an explicit Reload reports the error.
func TestReloadErrors(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.wasm")
	copyFile(t, buildGuest(t, dir, "noop"), live)
	f := newFilter(t, live, wasmfilter.Config{})
	os.WriteFile(live, []byte("not wasm"), 0o644)
	if err := f.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("reload of garbage: %v", err)
	}
	copyFile(t, buildGuest(t, dir, "noop", "ABI_VERSION=2"), live)
	if err := f.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "weft_abi_version returned 2; this host implements ABI version 1") {
		t.Fatalf("reload of ABI 2: %v", err)
	}
	if _, err := f.Invoke(context.Background(), newEndpoint(), withMode("")); err != nil {
		t.Fatal(err)
	}
}

func TestBadModules(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		path string
		cfg  wasmfilter.Config
		want []string
	}{
		{"abi2", buildGuest(t, dir, "noop", "ABI_VERSION=2"), wasmfilter.Config{}, []string{"weft_abi_version returned 2"}},
		{"badabi", buildGuest(t, dir, "badabi"), wasmfilter.Config{}, []string{
			`missing export "weft_on_request" () -> (i32)`,
			`import weft.get_method: wrong signature: ABI v1 declares get_method (i32, i32) -> (i32)`,
			`import weft.get_weather: weft has no host function "get_weather"`,
			`import env.emscripten_notify: module "env" is not provided`,
			"run `weft wasm check",
		}},
		{"memory", buildGuest(t, dir, "noop"), wasmfilter.Config{MaxMemoryPages: 2}, []string{"min 3 pages (192 Ki) over limit of 2 pages"}},
		{"missing", filepath.Join(dir, "nope.wasm"), wasmfilter.Config{}, []string{"no such file"}},
		{"garbage", writeFile(t, dir, "garbage.wasm", "hello"), wasmfilter.Config{}, []string{"does not compile"}},
	} {
		c.cfg.Name, c.cfg.Path, c.cfg.Log = "x", c.path, quiet
		f, err := wasmfilter.New(context.Background(), c.cfg)
		if err == nil {
			f.Close()
			t.Errorf("%s: loaded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r := wasmfilter.Check(context.Background(), read(buildGuest(t, dir, "misbehave")))
	var out bytes.Buffer
	r.Print(&out, "misbehave.wasm")
	if !r.Valid() || r.Version != 1 || !strings.Contains(out.String(), "verdict: valid") ||
		!strings.Contains(out.String(), "wasi_snapshot_preview1.proc_exit") ||
		!strings.Contains(out.String(), "weft_on_response") {
		t.Errorf("valid module:\n%s", out.String())
	}
	r = wasmfilter.Check(context.Background(), read(buildGuest(t, dir, "badabi")))
	out.Reset()
	r.Print(&out, "badabi.wasm")
	if r.Valid() || len(r.Problems) != 4 || !strings.Contains(out.String(), "verdict: INVALID (4 problem(s))") {
		t.Errorf("bad module:\n%s", out.String())
	}
	r = wasmfilter.Check(context.Background(), read(buildGuest(t, dir, "noop", "ABI_VERSION=7")))
	if r.Valid() || !r.Ran || r.Version != 7 {
		t.Errorf("abi 7: %+v", r)
	}
}

func TestCounters(t *testing.T) {
	c := wasmfilter.NewCountersLimit(32)
	if c.Add("a", 1, 0) != 1 || c.Add("a", 2, -5) != 3 {
		t.Fatal("never-reset counter")
	}
	if c.Add("a", 5, 60_000) != 5 { // same key, other window: another counter
		t.Fatal("windowed counter shares the never-reset one")
	}
	w := int64(150)
	// Wait for the start of a fresh window so two adds fall in the same one.
	for time.Now().UnixMilli()%w > 20 {
		time.Sleep(time.Millisecond)
	}
	c.Add("b", 1, w)
	if v := c.Add("b", 1, w); v != 2 {
		t.Fatalf("same window: %d", v)
	}
	time.Sleep(time.Duration(w) * time.Millisecond)
	if v := c.Add("b", 1, w); v != 1 {
		t.Fatalf("next window: %d", v)
	}
	// Bounded: 32 keys at most; new keys past that are not stored.
	for i := range 100 {
		c.Add(fmt.Sprint("k", i), 1, 0)
	}
	if n := c.Len(); n > 32 {
		t.Fatalf("%d keys stored, limit 32", n)
	}
}

func TestCountersExpire(t *testing.T) {
	c := wasmfilter.NewCounters()
	for i := range 1000 {
		c.Add(fmt.Sprint("k", i), 1, 10)
	}
	time.Sleep(1100 * time.Millisecond) // windows end; the sweep runs at most once a second
	for i := range 16 * 4 {
		c.Add(fmt.Sprint("fresh", i), 1, 10)
	}
	if n := c.Len(); n > 64 {
		t.Fatalf("%d keys left after their windows ended", n)
	}
}

func TestCountersConcurrent(t *testing.T) {
	c := wasmfilter.NewCounters()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Add("shared", 1, 0)
			}
		}()
	}
	wg.Wait()
	if v := c.Add("shared", 0, 0); v != 16000 {
		t.Fatalf("lost updates: %d", v)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace puts from's content at to the way deploys do: a temp file renamed
// over the target.
func replace(t testing.TB, from, to string) {
	t.Helper()
	tmp := to + ".tmp"
	copyFile(t, from, tmp)
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A cancellable context without deadline: the filter's timeout still bounds
// the guest, and cancelling stops it at once. Closing the filter stops a
// running guest and fails later calls cleanly.
func TestCancelAndClose(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "misbehave")
	f := newFilter(t, path, wasmfilter.Config{Name: "wasm-c", Timeout: 30 * time.Millisecond})
	ep := newEndpoint()

	// Each is allowed its budget and how late this machine is at a timer
	// right now (slack), measured again once if late.
	timed := func(budget time.Duration, run func() error) (time.Duration, time.Duration, error) {
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 }) // not a start-up
		allowed := budget + slack()
		start := time.Now()
		err := run()
		if took := time.Since(start); took <= allowed {
			return took, allowed, err
		}
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
		allowed = budget + slack()
		start = time.Now()
		err = run()
		return time.Since(start), allowed, err
	}
	took, allowed, err := timed(30*time.Millisecond, func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := f.Invoke(ctx, ep, withMode("loop"))
		return err
	})
	if kernel.CodeOf(err) != kernel.CodeTimeout || took > allowed {
		t.Errorf("cancellable, no deadline: %v after %v (allowed %v)", err, took, allowed)
	}

	took, allowed, err = timed(10*time.Millisecond, func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(10*time.Millisecond, cancel)
		_, err := f.Invoke(ctx, ep, withMode("loop"))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "the call was cancelled while weft_on_request ran") || took > allowed {
		t.Errorf("cancelled: %v after %v (allowed %v)", err, took, allowed)
	}

	g := newFilter(t, path, wasmfilter.Config{Name: "wasm-g", Timeout: 10 * time.Second})
	done := make(chan error)
	go func() {
		_, err := g.Invoke(context.Background(), ep, withMode("loop"))
		done <- err
	}()
	waitFor(t, time.Second, func() bool { s := g.Stats(); return s.Live-s.Idle == 1 }) // the loop holds an instance
	time.Sleep(10 * time.Millisecond)
	g.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), `wasm filter "wasm-g" was closed while weft_on_request ran`) {
			t.Errorf("call running at Close: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Close did not stop a running guest")
	}
	if _, err := g.Invoke(context.Background(), ep, withMode("")); err == nil || !strings.Contains(err.Error(), `wasm filter "wasm-g" is closed`) {
		t.Errorf("call after Close: %v", err)
	}
}

// SetConfig under load: no call fails, every call sees one config or the
// other (never a mix), and once it returns every new call sees the new one,
// even from a guest that keeps what it read on its first call.
func TestSetConfigUnderLoad(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "trace"), wasmfilter.Config{Settings: map[string]any{"name": "old"}})
	ep := newEndpoint()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("m"))
				calls.Add(1)
				if rt := res.Attachments["rtrace"]; err != nil || (rt != "old" && rt != "new") {
					failed.Add(1)
					t.Errorf("call during SetConfig: %v, rtrace %q", err, rt)
					return
				}
			}
		}()
	}
	for calls.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	if err := f.SetConfig(context.Background(), map[string]any{"name": "new"}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		res, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("m"))
		if err != nil || res.Attachments["rtrace"] != "new" {
			t.Fatalf("after SetConfig: %v, rtrace %q", err, res.Attachments["rtrace"])
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	if err := f.SetConfig(context.Background(), map[string]any{"bad": func() {}}); err == nil {
		t.Fatal("a config that is not JSON was accepted")
	}
	res, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("m"))
	if err != nil || res.Attachments["rtrace"] != "new" {
		t.Fatalf("after a rejected SetConfig: %v, rtrace %q", err, res.Attachments["rtrace"])
	}
	t.Logf("%d calls during the change, none failed", calls.Load())
}
