package wasmfilter_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// On the pinned wazero a filter takes the fast call path: no goroutine, no
// allocation per guest call, and the Done channel of a call with a deadline
// never asked for (kernel.WithDeadline, the provider's context, would then
// start a timer of its own for every call; a call without deadline is asked
// whether it can be cancelled at all). If this fails after a wazero upgrade, see
// internals.go.
func TestFastPathActive(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "noop"), wasmfilter.Config{})
	if ok, why := wasmfilter.FastPath(f); !ok {
		t.Fatalf("the fast call path is off on the pinned wazero: %s", why)
	}
	ep := nop{url: newEndpoint().url}
	inv := kernel.NewInvocation("sayHello", "world")
	// The first call takes the only idle instance and a spare starts in the
	// background: made before measuring, so that its allocations (counted
	// process-wide) are not, and the calls measured never start another.
	if _, err := f.Invoke(context.Background(), ep, inv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 2 })
	timed, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	lazy, release := kernel.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer release()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"no deadline", context.Background()},
		{"context.WithTimeout", timed},
		{"kernel.WithDeadline", lazy},
	} {
		ctx := &doneCounter{Context: c.ctx}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := f.Invoke(ctx, ep, inv); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 && !raceEnabled { // the race detector's instrumentation allocates
			t.Errorf("%s: %v allocations per call, want 0", c.name, allocs)
		}
		if n := ctx.n.Load(); c.ctx != context.Background() && n != 0 {
			t.Errorf("%s: Done asked for %d times in 201 calls, want never", c.name, n)
		}
	}
}

// doneCounter counts the calls of its Done.
type doneCounter struct {
	context.Context
	n atomic.Int64
}

func (c *doneCounter) Done() <-chan struct{} {
	c.n.Add(1)
	return c.Context.Done()
}

// With the fast path off (the fallback a wazero without the internals it
// needs gets), wazero's per-call watch bounds every guest call as before.
func TestFallbackStillBounded(t *testing.T) {
	restore := wasmfilter.ForceWatch()
	f := newFilter(t, buildGuest(t, t.TempDir(), "misbehave"), wasmfilter.Config{Name: "wasm-watched", Timeout: 30 * time.Millisecond})
	restore()
	if ok, _ := wasmfilter.FastPath(f); ok {
		t.Fatal("the fast path is on despite ForceWatch")
	}
	stopsLoop(t, f)
}

// A module with a start section keeps wazero's watch (its start function runs
// inside wazero's instantiation, where only that watch can stop it), and its
// calls are bounded all the same.
func TestStartSectionKeepsWatch(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "start", `(module
  (import "weft" "get_attachment" (func $get_attachment (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $started (mut i32) (i32.const 0))
  (data (i32.const 0) "mode")
  (func $start (global.set $started (i32.const 1)))
  (start $start)
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weft_on_request") (result i32)
    ;; mode "l...": spin
    (if (i32.eqz (call $get_attachment (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 20)))
      (then (if (i32.eq (i32.load8_u (i32.load (i32.const 16))) (i32.const 108))
        (then (loop $l (br $l))))))
    (if (i32.eqz (global.get $started)) (then unreachable))
    (i32.const 0)))`)
	f := newFilter(t, path, wasmfilter.Config{Name: "wasm-start", Timeout: 30 * time.Millisecond})
	if ok, why := wasmfilter.FastPath(f); ok || !strings.Contains(why, "start section") {
		t.Fatalf("fast path %v (%s), want off for a start section", ok, why)
	}
	stopsLoop(t, f)
}

// stopsLoop checks that f (a misbehave-like guest: mode "loop" spins, no
// mode continues; timeout 30ms) stops a spinning guest at a call's deadline,
// at the filter's timeout, and when a call without deadline is cancelled, and
// then serves a healthy call.
func stopsLoop(t *testing.T, f *wasmfilter.Filter) {
	t.Helper()
	ep := newEndpoint()
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		code kernel.Code
		msg  string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, kernel.CodeTimeout, "was still running at the call's deadline"},
		{"provider deadline", func() (context.Context, context.CancelFunc) {
			ctx, release := kernel.WithDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
			return ctx, release
		}, kernel.CodeTimeout, "was still running at the call's deadline"},
		{"timeout", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			kernel.CodeTimeout, "ran past the filter's timeout of 30ms"},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, kernel.CodeUnknown, "the call was cancelled while weft_on_request ran"},
	} {
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
		ctx, cancel := c.ctx()
		done := make(chan error, 1)
		go func() { _, err := f.Invoke(ctx, ep, withMode("loop")); done <- err }()
		select {
		case err := <-done:
			if kernel.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: %v (code %v), want code %v and %q", c.name, err, kernel.CodeOf(err), c.code, c.msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a spinning guest was not stopped in 10s", c.name)
		}
		cancel()
	}
	if _, err := healthy(f, ep); err != nil {
		t.Errorf("a healthy call after the loops: %v", err)
	}
}

// A guest stopped while it spins in WASI functions (the host's clock, a write
// to stdout) stops cleanly: the host marks its module closed without closing
// the module's resources under the WASI function running on the call's
// goroutine. Closing them there (api.Module.CloseWithExitCode from the
// timer's goroutine) makes the next WASI call find its module's system
// context gone, a nil dereference instead of the exit error; every call
// failure logged must be the exit error.
func TestStopInWASICall(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "wasi-spin", `(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\10\00\00\00\01\00\00\00")
  (data (i32.const 16) "x")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weft_on_request") (result i32)
    (loop $l
      (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 32)))
      (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
      (br $l))
    (i32.const 0)))`)
	var log syncBuffer
	f := newFilter(t, path, wasmfilter.Config{Name: "wasm-wasi-spin", Timeout: 5 * time.Millisecond,
		WarnInterval: time.Nanosecond, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if ok, why := wasmfilter.FastPath(f); !ok {
		t.Fatalf("fast path off: %s", why)
	}
	ep := newEndpoint()
	notRun := 0 // calls whose deadline passed before the guest ran (a busy machine)
	for i := range 20 {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if i%2 == 1 {
			ctx, cancel = context.WithTimeout(ctx, 5*time.Millisecond)
		}
		_, err := f.Invoke(ctx, ep, withMode(""))
		cancel()
		if kernel.CodeOf(err) != kernel.CodeTimeout {
			t.Fatalf("call %d: %v", i, err)
		}
		if strings.Contains(err.Error(), "before weft_on_request ran") {
			notRun++
		}
	}
	// Each call that ran its guest was stopped in a WASI call and its
	// instance discarded; one whose deadline passed first (a stressed CI
	// run saw it) never started one.
	if s := f.Stats(); s.Timeouts != int64(20-notRun) || s.Discarded < int64(20-notRun) || notRun > 10 {
		t.Errorf("stats %+v, %d calls not run", s, notRun)
	}
	lines := 0
	for _, l := range strings.Split(log.String(), "\n") {
		if !strings.Contains(l, "wasm filter call failed") {
			continue
		}
		lines++
		if !strings.Contains(l, "detail=\"module closed with context deadline exceeded") {
			t.Errorf("a guest stopped in a WASI call failed otherwise: %s", l)
		}
	}
	if lines == 0 {
		t.Error("no call failure was logged")
	}
}
