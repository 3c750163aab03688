package wasmfilter

import (
	"sync"
	"time"
)

// warnKind is a kind of host warning; each kind is rate-limited on its own,
// so a flood of timeouts does not hide the first trap.
type warnKind int

const (
	warnTrap          warnKind = iota // traps, ABI violations, proc_exit, calls failed by Close
	warnTimeout                       // a guest stopped at a deadline or timeout, or cancelled
	warnFull                          // a call waited for an instance and failed (max_instances)
	warnStart                         // an instance made in the background did not start
	warnUnimplemented                 // a proxy-wasm guest called a host function weft does not implement
	warnFailOpen                      // a failed guest let the call through (fail_open)
	warnPaused                        // a proxy-wasm callback paused a call nothing could resume
	warnCallout                       // a proxy-wasm callout failed
	warnRefused                       // a proxy-wasm guest called a host function not in allowed_capabilities
	warnBackoff                       // calls failed while new instances wait (crash-loop back-off)
	warnBody                          // a proxy-wasm body replacement refused
	numWarnKinds
)

// warnLimiter lets one warning per kind through per interval and counts the
// others, so the next line can say how many were not logged. Warnings come
// from failing calls only, never from the healthy path, so a mutex is cheap
// enough.
type warnLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       [numWarnKinds]time.Time
	suppressed [numWarnKinds]int
}

// allow reports whether a warning of kind k is logged now, and how many of
// that kind were suppressed since the last one logged.
func (l *warnLimiter) allow(k warnKind) (bool, int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last[k].IsZero() && now.Sub(l.last[k]) < l.every {
		l.suppressed[k]++
		return false, 0
	}
	n := l.suppressed[k]
	l.last[k], l.suppressed[k] = now, 0
	return true, n
}

// warn logs a host warning unless one of its kind was logged less than the
// interval ago; a line after suppressed ones carries their number
// (suppressed=N) and the interval they were counted in.
func (f *Filter) warn(k warnKind, msg string, args ...any) {
	ok, n := f.warns.allow(k)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n, "suppressed_within", f.warns.every.String())
	}
	f.log.Warn(msg, args...)
}
