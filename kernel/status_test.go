package kernel_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

func TestStatusTryBegin(t *testing.T) {
	tests := []struct {
		name   string
		max    int64
		tries  int
		wantOK int
	}{
		{"max 1", 1, 3, 1},
		{"max 2", 2, 5, 2},
		{"max 5", 5, 5, 5},
		{"unlimited (0)", 0, 10, 10},
		{"unlimited (negative)", -1, 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s kernel.Status
			ok := 0
			for range tc.tries {
				if s.TryBegin(tc.max) {
					ok++
				}
			}
			if ok != tc.wantOK {
				t.Fatalf("%d of %d TryBegin(%d) succeeded, want %d", ok, tc.tries, tc.max, tc.wantOK)
			}
			if s.Active() != int64(tc.wantOK) {
				t.Fatalf("Active() = %d, want %d", s.Active(), tc.wantOK)
			}
			if tc.max > 0 {
				s.End(time.Millisecond, true)
				if !s.TryBegin(tc.max) {
					t.Fatal("TryBegin failed after an End freed a slot")
				}
				if s.TryBegin(tc.max) {
					t.Fatal("TryBegin succeeded past max again")
				}
			}
		})
	}
}

func TestStatusTryBeginConcurrent(t *testing.T) {
	var s kernel.Status
	const max = 3
	var won atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if s.TryBegin(max) {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != max || s.Active() != max {
		t.Errorf("%d TryBegin won, Active %d; want %d", won.Load(), s.Active(), max)
	}
}

func TestStatusCounters(t *testing.T) {
	var s kernel.Status
	if s.AverageElapsed() != 0 {
		t.Errorf("AverageElapsed with no calls = %v", s.AverageElapsed())
	}
	calls := []struct {
		d  time.Duration
		ok bool
	}{
		{10 * time.Millisecond, true},
		{30 * time.Millisecond, false},
		{20 * time.Millisecond, true},
	}
	for range calls {
		if !s.TryBegin(0) {
			t.Fatal("TryBegin(0) failed")
		}
	}
	for _, c := range calls {
		s.End(c.d, c.ok)
	}
	if s.Active() != 0 || s.Total() != 3 || s.Failed() != 1 {
		t.Errorf("Active/Total/Failed = %d/%d/%d, want 0/3/1", s.Active(), s.Total(), s.Failed())
	}
	if got := s.AverageElapsed(); got != 20*time.Millisecond {
		t.Errorf("AverageElapsed = %v, want 20ms", got)
	}
}

// TestStatusBeginLimitsConcurrency starts 10 callers with max 2 that each
// hold their slot for 20ms: never more than 2 run at once and all finish.
func TestStatusBeginLimitsConcurrency(t *testing.T) {
	var s kernel.Status
	const (
		max     = 2
		callers = 10
		hold    = 20 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var running, high, done atomic.Int64
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			if err := s.Begin(ctx, max); err != nil {
				errs <- err
				return
			}
			n := running.Add(1)
			for {
				h := high.Load()
				if n <= h || high.CompareAndSwap(h, n) {
					break
				}
			}
			time.Sleep(hold)
			running.Add(-1)
			s.End(hold, true)
			done.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Begin: %v", err)
	}
	if h := high.Load(); h > max {
		t.Errorf("%d calls ran at once, max %d", h, max)
	}
	if h := high.Load(); h < 1 {
		t.Errorf("high-water mark %d", h)
	}
	if done.Load() != callers {
		t.Errorf("%d of %d callers finished", done.Load(), callers)
	}
	if s.Active() != 0 || s.Total() != callers {
		t.Errorf("Active %d, Total %d; want 0, %d", s.Active(), s.Total(), callers)
	}
	// 10 callers, 2 at a time, 20ms each: at least 5 rounds.
	if el := time.Since(start); el < (callers/max)*hold {
		t.Errorf("took %v, less than %v: the limit did not hold", el, (callers/max)*hold)
	}
}

// goroutineStates returns the header lines ("goroutine 7 [select]:") of the
// goroutines whose stack contains fn.
func goroutineStates(fn string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			header, _, _ := strings.Cut(g, "\n")
			out = append(out, header)
		}
	}
	return out
}

// TestStatusBeginBlocksAndIsWokenByEnd checks that a waiting Begin parks on a
// channel (no polling loop, no sleep) and returns as soon as End frees a slot.
func TestStatusBeginBlocksAndIsWokenByEnd(t *testing.T) {
	var s kernel.Status
	if !s.TryBegin(1) {
		t.Fatal("TryBegin")
	}
	returned := make(chan error, 1)
	go func() { returned <- s.Begin(context.Background(), 1) }()

	// Wait until the waiter is parked in Begin's select.
	const fn = "kernel.(*Status).Begin"
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := goroutineStates(fn)
		if len(st) == 1 && strings.Contains(st[0], "[select") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter not parked in select; states %q", st)
		}
		time.Sleep(time.Millisecond)
	}
	// It stays parked: sample its state a few times.
	for range 20 {
		time.Sleep(time.Millisecond)
		st := goroutineStates(fn)
		if len(st) != 1 || !strings.Contains(st[0], "[select") {
			t.Fatalf("waiter is not parked while the slot is held: %q", st)
		}
	}
	select {
	case err := <-returned:
		t.Fatalf("Begin returned %v while the slot was held", err)
	default:
	}

	s.End(0, true)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Begin was not woken by End")
	}
	if s.Active() != 1 {
		t.Errorf("Active() = %d, want 1", s.Active())
	}
}

func TestStatusBeginDeadline(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"30ms", 30 * time.Millisecond},
		{"80ms", 80 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s kernel.Status
			if !s.TryBegin(1) {
				t.Fatal("TryBegin")
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			err := s.Begin(ctx, 1)
			el := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Begin = %v, want context.DeadlineExceeded", err)
			}
			if el < tc.timeout-time.Millisecond || el > tc.timeout+time.Second {
				t.Errorf("Begin returned after %v, want about %v", el, tc.timeout)
			}
			if s.Active() != 1 {
				t.Errorf("Active() = %d after a timed-out Begin, want 1", s.Active())
			}
			// The status still works afterwards.
			s.End(0, true)
			if err := s.Begin(context.Background(), 1); err != nil {
				t.Errorf("Begin after End: %v", err)
			}
		})
	}

	t.Run("canceled", func(t *testing.T) {
		var s kernel.Status
		s.TryBegin(1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(10 * time.Millisecond); cancel() }()
		if err := s.Begin(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Begin = %v, want context.Canceled", err)
		}
	})

	t.Run("free slot ignores a done context", func(t *testing.T) {
		var s kernel.Status
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Begin(ctx, 1); err != nil {
			t.Errorf("Begin with a free slot = %v, want nil", err)
		}
	})
}

func TestStatusStore(t *testing.T) {
	st := kernel.NewStatusStore()
	a := st.Get("org.Greeter", "sayHello")
	tests := []struct {
		scope, method string
		same          bool
	}{
		{"org.Greeter", "sayHello", true},
		{"org.Greeter", "sayBye", false},
		{"org.Other", "sayHello", false},
		{"org.Greetersay", "Hello", false},
		{"", "org.GreetersayHello", false},
	}
	for _, tc := range tests {
		got := st.Get(tc.scope, tc.method)
		if (got == a) != tc.same {
			t.Errorf("Get(%q, %q) same as Get(org.Greeter, sayHello) = %v, want %v", tc.scope, tc.method, got == a, tc.same)
		}
		if got != st.Get(tc.scope, tc.method) {
			t.Errorf("Get(%q, %q) not stable", tc.scope, tc.method)
		}
	}
	a.TryBegin(0)
	if st.Get("org.Greeter", "sayHello").Active() != 1 {
		t.Error("counts not kept in the stored Status")
	}
	other := kernel.NewStatusStore()
	if other.Get("org.Greeter", "sayHello") == a {
		t.Error("two stores share a Status")
	}

	scope, method := "org.Greeter", "sayHello"
	var s *kernel.Status
	if n := testing.AllocsPerRun(100, func() { s = st.Get(scope, method) }); n != 0 {
		t.Errorf("Get hit path allocates %v times, want 0", n)
	}
	if s != a {
		t.Error("Get returned another Status")
	}
}

func TestStatusStoreConcurrent(t *testing.T) {
	st := kernel.NewStatusStore()
	const n = 50
	got := make([]*kernel.Status, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i] = st.Get("svc", "m")
			got[i].TryBegin(0)
		})
	}
	wg.Wait()
	for i := range n {
		if got[i] != got[0] {
			t.Fatalf("goroutine %d got another Status", i)
		}
	}
	if got[0].Active() != n {
		t.Errorf("Active = %d, want %d", got[0].Active(), n)
	}
}

// TestStatusBeginNoLostWakeup races an End against a Begin that is about to
// wait, many times: a wake-up lost between Begin's failed try and its wait
// would leave the waiter blocked although the slot is free. The window is a
// few nanoseconds wide, so this is a probabilistic guard, not a proof.
func TestStatusBeginNoLostWakeup(t *testing.T) {
	iterations := 20000
	if testing.Short() {
		iterations = 1000
	}
	var s kernel.Status
	var spin atomic.Int64
	for i := range iterations {
		if !s.TryBegin(1) {
			t.Fatal("TryBegin")
		}
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			close(ready)
			done <- s.Begin(ctx, 1)
		}()
		<-ready
		// Vary the moment of End relative to the waiter's first try.
		for j := 0; j < i%200; j++ {
			spin.Add(1)
		}
		s.End(0, true)
		if err := <-done; err != nil {
			t.Fatalf("iteration %d: Begin = %v although the slot was freed", i, err)
		}
		s.End(0, true)
	}
	if s.Active() != 0 {
		t.Errorf("Active() = %d, want 0", s.Active())
	}
}
