// Package tps is Dubbo's TpsLimitFilter: a provider service with `tps=N`
// takes at most N calls per `tps.interval` (ms, default 60000, Dubbo's) in
// all, over all its methods and callers; the calls past it in a window are
// rejected at once with a limit-exceeded error, which a consumer's failover
// may take to another provider. Windows are fixed, as Dubbo's StatItem:
// the count starts again when a window is over, unused calls are not
// carried over.
package tps

import (
	"context"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "tps"

// URL parameters, Dubbo's.
const (
	KeyRate     = "tps"
	KeyInterval = "tps.interval"
	// DefaultInterval is Dubbo's DEFAULT_TPS_LIMIT_INTERVAL.
	DefaultInterval = 60 * time.Second
)

// Activation: providers whose URL sets `tps`. It runs before the limits
// that count calls in flight, after the token check.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Keys: []string{KeyRate}, Order: -8000}
}

// New returns the filter; its windows are the App's (one per service key).
func New() extension.Filter { return &filter{now: time.Now} }

type filter struct {
	windows sync.Map // service key -> *window
	now     func() time.Time
}

type window struct {
	mu    sync.Mutex
	start time.Time
	left  int64
}

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	rate := u.ParamInt(KeyRate, 0)
	if rate <= 0 {
		return next.Invoke(ctx, inv)
	}
	interval := time.Duration(u.ParamInt(KeyInterval, DefaultInterval.Milliseconds())) * time.Millisecond
	if interval <= 0 {
		interval = DefaultInterval
	}
	key := u.ServiceKey()
	w, ok := f.windows.Load(key)
	if !ok {
		w, _ = f.windows.LoadOrStore(key, &window{})
	}
	if !w.(*window).take(f.now(), rate, interval) {
		return kernel.Result{}, kernel.Errorf(kernel.CodeLimitExceeded,
			"provider %s rejected %s: over its tps limit of %d calls per %v; retry later or raise tps",
			key, inv.Method, rate, interval)
	}
	return next.Invoke(ctx, inv)
}

// take counts a call in the current window, starting a new one when the
// last is over.
func (w *window) take(now time.Time, rate int64, interval time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() || now.Sub(w.start) >= interval {
		w.start, w.left = now, rate
	}
	if w.left <= 0 {
		return false
	}
	w.left--
	return true
}
