package wasmfilter

import (
	"sync"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// Crash-loop back-off: a module whose new instances keep failing to start
// (crashLimit start-ups within crashWindow: a trap in _initialize or
// proxy_on_configure, a refused configuration, the start-up limit) is not
// restarted at the rate calls come in. For a back-off that starts at
// backoffFirst and doubles, up to backoffMax, while the failures go on, no
// instance is started: a call that finds none idle fails at once by the
// filter's fail policy (fail_open lets it through); a crash loop after a
// quiet crashWindow starts again from backoffFirst. A guest that traps in a
// call's callback costs that call and that instance only (its replacement
// starting counts only if it fails to).
const (
	crashLimit   = 5
	crashWindow  = 10 * time.Second
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 30 * time.Second
)

type crashes struct {
	mu    sync.Mutex
	times [crashLimit]time.Time // the last failures, a ring
	next  int
	until time.Time     // no call runs the guest before this
	wait  time.Duration // the back-off after the next crash loop
}

// note records a failure and starts a back-off when crashLimit of them came
// within crashWindow; it reports whether it started one.
func (c *crashes) note(now time.Time) (backoff bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.times[c.next] = now
	c.next = (c.next + 1) % crashLimit
	// times[next] is now the oldest of the last crashLimit failures (zero
	// while there were fewer).
	if oldest := c.times[c.next]; oldest.IsZero() || now.Sub(oldest) > crashWindow {
		return false
	}
	if c.wait == 0 || now.Sub(c.until) > crashWindow {
		c.wait = backoffFirst
	}
	c.until = now.Add(c.wait)
	c.wait = min(2*c.wait, backoffMax)
	c.times = [crashLimit]time.Time{}
	return true
}

// backingOff says how long calls still fail at once, 0 when they run.
func (c *crashes) backingOff(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Before(c.until) {
		return c.until.Sub(now)
	}
	return 0
}

// backoffErr marks acquire's error during a back-off: the fail policy
// applies to it as to a guest's failure.
type backoffErr struct{ err error }

func (e *backoffErr) Error() string { return e.err.Error() }
func (e *backoffErr) Unwrap() error { return e.err }

// backoffError is the error of a call that came during a back-off.
func (f *Filter) backoffError(left time.Duration) error {
	err := kernel.Errorf(kernel.CodeUnknown, "wasm filter %q: its instances keep failing to start (%d within %v); no instance is started for %v more (crash-loop back-off), then one is tried again",
		f.name, crashLimit, crashWindow, left.Round(time.Millisecond))
	f.warn(warnBackoff, "weft: wasm filter is in crash-loop back-off; calls fail by its fail policy", "error", err.Error())
	return &backoffErr{err}
}
