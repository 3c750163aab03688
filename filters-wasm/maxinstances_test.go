package wasmfilter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// hold makes a call that keeps one instance busy (misbehave exports
// weft_on_response, so the call holds its instance until its result is back)
// until release; release returns the call's error.
func hold(t *testing.T, f *wasmfilter.Filter, ep *endpoint, inv *kernel.Invocation) (release func() error) {
	t.Helper()
	held, let := make(chan struct{}), make(chan struct{})
	e := *ep
	e.seen = func(*kernel.Invocation) { close(held); <-let }
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := f.Invoke(ctx, &e, inv)
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the call holding an instance: %v", err)
	}
	return func() error { close(let); return <-done }
}

// call runs one call with the given deadline (0: none) on its own
// goroutine and reports its error and how long it took.
type outcome struct {
	err  error
	took time.Duration
}

func callAsync(f *wasmfilter.Filter, ep *endpoint, deadline time.Duration) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		// The clock starts before the deadline does: a goroutine
		// descheduled between the two (a loaded machine) would otherwise
		// see the deadline pass before its own measured wait (98 ms of a
		// 100 ms deadline, once).
		start := time.Now()
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if deadline > 0 {
			ctx, cancel = context.WithTimeout(ctx, deadline)
		}
		defer cancel()
		_, err := f.Invoke(ctx, ep, withMode(""))
		done <- outcome{err, time.Since(start)}
	}()
	return done
}

func waitOutcome(t *testing.T, ch <-chan outcome, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("the call did not return in %v", within)
		return outcome{}
	}
}

// max_instances caps every instance of the module, the pool's spare
// included, under a load of many more callers than instances; no call fails
// when their deadlines are long enough.
func TestMaxInstancesCapsThePool(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "misbehave"), wasmfilter.Config{Name: "wasm-max", MaxInstances: 2})
	ep := newEndpoint()
	var over atomic.Int64
	ep.seen = func(*kernel.Invocation) {
		if s := f.Stats(); s.Live > 2 {
			over.Add(1)
		}
		time.Sleep(200 * time.Microsecond) // hold the instance across the call
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := f.Invoke(ctx, ep, withMode(""))
				cancel()
				if err != nil {
					failed.Add(1)
					t.Errorf("call: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := f.Stats()
	t.Logf("16 callers x 30 calls, max_instances 2: %+v", s)
	if failed.Load() > 0 || over.Load() > 0 || s.Created > 2 || s.MaxBusy != 1 || s.Waiting != 0 {
		t.Fatalf("failed %d, seen over the cap %d times; stats %+v", failed.Load(), over.Load(), s)
	}
}

// A waiting caller gets the instance the moment its holder returns it (not
// at its own deadline, and without a new instance), gets a new one when its
// holder's instance is discarded, and moves to the new module on a reload.
func TestMaxInstancesWaiterServedWhenFreed(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "misbehave")
	ep := newEndpoint()
	// Generous: the hand-off is a channel send; this bound only tells "at
	// once" from "at its 30 s deadline" on a loaded machine.
	const prompt = 2 * time.Second

	t.Run("returned", func(t *testing.T) {
		f := newFilter(t, path, wasmfilter.Config{Name: "wasm-max", MaxInstances: 1})
		release := hold(t, f, ep, withMode(""))
		created := f.Stats().Created
		waiting := callAsync(f, ep, 30*time.Second)
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Waiting == 1 })
		freed := time.Now()
		if err := release(); err != nil {
			t.Fatal(err)
		}
		o := waitOutcome(t, waiting, 10*time.Second)
		after := time.Since(freed)
		if o.err != nil || after > prompt {
			t.Fatalf("waiter: %v, %v after the instance was freed (allowed %v)", o.err, after, prompt)
		}
		if s := f.Stats(); s.Created != created || s.Waiting != 0 {
			t.Errorf("the waiter did not get the freed instance: created %d -> %d, %+v", created, s.Created, s)
		}
		t.Logf("waiter served %v after the instance was freed", after.Round(10*time.Microsecond))
	})

	t.Run("discarded", func(t *testing.T) {
		f := newFilter(t, path, wasmfilter.Config{Name: "wasm-max", MaxInstances: 1})
		inv := withMode("")
		inv.SetAttachment("rmode", "trap") // the holder's instance is discarded
		release := hold(t, f, ep, inv)
		waiting := callAsync(f, ep, 30*time.Second)
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Waiting == 1 })
		freed := time.Now()
		if err := release(); err == nil || !strings.Contains(err.Error(), "weft_on_response trapped") {
			t.Fatalf("holder: %v", err)
		}
		o := waitOutcome(t, waiting, 10*time.Second)
		if o.err != nil || time.Since(freed) > prompt {
			t.Fatalf("waiter after a discard: %v, %v after (allowed %v)", o.err, time.Since(freed), prompt)
		}
		if s := f.Stats(); s.Live > 1 {
			t.Errorf("over the cap after a discard: %+v", s)
		}
	})

	t.Run("reload", func(t *testing.T) {
		f := newFilter(t, path, wasmfilter.Config{Name: "wasm-max", MaxInstances: 1})
		release := hold(t, f, ep, withMode(""))
		waiting := callAsync(f, ep, 30*time.Second)
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Waiting == 1 })
		if err := f.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		o := waitOutcome(t, waiting, 10*time.Second)
		if o.err != nil {
			t.Fatalf("waiter across a reload: %v", o.err)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiting caller fails at its deadline (a call without one at the
// filter's timeout), with a limit error naming the filter and the fix; a
// cancelled one at once. The lower bounds are exact (no failure before the
// deadline); the upper ones are the deadline plus this machine's timer
// lateness measured now plus a second, loose enough for a loaded machine.
func TestMaxInstancesWaitEndsAtDeadline(t *testing.T) {
	f := newFilter(t, buildGuest(t, t.TempDir(), "misbehave"),
		wasmfilter.Config{Name: "wasm-max", MaxInstances: 1, Timeout: 150 * time.Millisecond})
	ep := newEndpoint()
	release := hold(t, f, ep, withMode(""))
	defer func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	}()
	for _, c := range []struct {
		name     string
		deadline time.Duration // 0: none, the filter's timeout bounds the wait
		bound    time.Duration
		want     string
	}{
		{"deadline", 100 * time.Millisecond, 100 * time.Millisecond,
			`wasm filter "wasm-max": max_instances 1 reached: every instance was busy until the call's deadline (waited `},
		{"no deadline", 0, 150 * time.Millisecond,
			`wasm filter "wasm-max": max_instances 1 reached: every instance was busy for the filter's timeout of 150ms`},
	} {
		allowed := c.bound + slack() + time.Second
		o := waitOutcome(t, callAsync(f, ep, c.deadline), 10*time.Second)
		if kernel.CodeOf(o.err) != kernel.CodeLimitExceeded || !kernel.Retryable(o.err) ||
			!strings.Contains(o.err.Error(), c.want) || !strings.Contains(o.err.Error(), "raise wasm.filters.wasm-max.max_instances (0: no cap)") {
			t.Errorf("%s: %v (code %v), want %q", c.name, o.err, kernel.CodeOf(o.err), c.want)
		}
		if o.took < c.bound-time.Millisecond || o.took > allowed {
			t.Errorf("%s: failed after %v, want %v (allowed up to %v)", c.name, o.took, c.bound, allowed)
		}
		t.Logf("%s: %v after %v", c.name, o.err, o.took.Round(10*time.Microsecond))
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := f.Invoke(ctx, ep, withMode(""))
	if !errors.Is(err, context.Canceled) || kernel.CodeOf(err) != kernel.CodeUnknown || !strings.Contains(err.Error(), "cancelled after waiting") {
		t.Errorf("cancelled while waiting: %v", err)
	}
	if s := f.Stats(); s.Waiting != 0 || s.Live != 1 {
		t.Errorf("after the failed waits: %+v", s)
	}
}
