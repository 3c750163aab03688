package wasmfilter_test

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// How late a spinning guest is stopped depends on the machine's load as much
// as on the host: the tests compare it with a baseline measured alongside, in
// the same test, rather than with a fixed bound a loaded machine breaks.

// lateMargin is what the host may add to the baseline when the machine is
// idle: closing the module, unwinding the guest's stack, building and
// logging the error, discarding the instance.
const lateMargin = 2 * time.Millisecond

// lateFactor scales the baseline: stopping a guest takes a few more steps
// than stopping a plain spinner, each of which may wait for a core on a
// loaded machine (the guest noticing, its unwinding, the error, the return
// to the caller). Measured on 2 cores with stress-ng --cpu 2 and other
// builds running (load average 8), a guest's median lateness over 21
// repeats was up to 2.4 times the spinner's; idle, about the same.
const lateFactor = 3

// timerLateness measures how late this machine, right now, stops a spinning
// goroutine at a timer: the mechanism a guest's deadline relies on, in plain
// Go. As wazero's termination watch does, a goroutine waits for the context
// to be done and sets a flag that the spinning goroutine checks; the context
// is done at its deadline d (a call's deadline) or, viaAfterFunc, cancelled
// by a time.AfterFunc after d (the filter's timeout). It returns how long
// after d the spinner saw the flag.
func timerLateness(d time.Duration, viaAfterFunc bool) time.Duration {
	start := time.Now()
	var ctx context.Context
	var cancel context.CancelFunc
	if viaAfterFunc {
		ctx, cancel = context.WithCancel(context.Background())
		t := time.AfterFunc(d, cancel)
		defer t.Stop()
	} else {
		ctx, cancel = context.WithTimeout(context.Background(), d)
	}
	defer cancel()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-done:
		}
	}()
	for !stop.Load() {
	}
	late := time.Since(start) - d
	close(done)
	return late
}

// slack is the lateness a single measurement of a guest stopped at its
// deadline is allowed: lateFactor × the worst of a few baseline
// measurements taken now, + lateMargin.
func slack() time.Duration {
	var worst time.Duration
	for range 3 {
		worst = max(worst, timerLateness(5*time.Millisecond, false), timerLateness(5*time.Millisecond, true))
	}
	return lateFactor*worst + lateMargin
}

// spread is the min, median and max of durations.
type spread struct{ min, median, max time.Duration }

func spreadOf(ds []time.Duration) spread {
	s := slices.Clone(ds)
	slices.Sort(s)
	return spread{s[0], s[len(s)/2], s[len(s)-1]}
}

func (s spread) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return "min " + r(s.min).String() + ", median " + r(s.median).String() + ", max " + r(s.max).String()
}
