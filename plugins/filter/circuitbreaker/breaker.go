package circuitbreaker

import (
	"fmt"
	"sync"
	"time"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/window"
)

type settings struct {
	window     time.Duration
	minCalls   int64
	errorRatio float64
	slowRT     time.Duration
	slowRatio  float64
	open       time.Duration
	probes     int64
}

type state uint8

const (
	closed state = iota
	open
	halfOpen
)

// The window's counters.
const (
	nCalls = iota
	nFailed
	nSlow
)

// breaker is one provider method's state machine. A mutex guards it: a
// call takes it twice (allow, record), for a few nanoseconds each, and the
// breaker is per provider and method, so only the callers of one method
// of one provider share it.
type breaker struct {
	s    settings
	name string // address service.method, for errors and logs

	mu        sync.Mutex
	st        state
	counts    *window.Counts // calls, failed, slow over the window
	openUntil time.Time
	inFlight  int64  // probes sent in half-open and not yet answered
	passed    int64  // probes answered well in half-open
	gen       uint64 // counts half-open turns: a probe answers for its own
	why       string
}

func newBreaker(s settings, name string) *breaker {
	return &breaker{s: s, name: name, counts: window.New(s.window)}
}

// totals sums the counts still inside the window.
func (b *breaker) totals(now time.Time) (calls, failed, slow int64) {
	n := b.counts.Sum(now)
	return n[nCalls], n[nFailed], n[nSlow]
}

// allow says whether a call may go; probe is the half-open turn of a
// probe (0 for an ordinary call). An open breaker's error says for how
// long and why.
func (b *breaker) allow(now time.Time, f *Filter) (probe uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.st {
	case closed:
		return 0, nil
	case open:
		if now.Before(b.openUntil) {
			return 0, b.refuse(now)
		}
		b.st, b.inFlight, b.passed = halfOpen, 0, 0
		b.gen++
		f.log.Info("weft: circuit breaker half-open: probing the provider", "provider", b.name, "probes", b.s.probes)
	}
	// Half-open: the probes go one batch at a time; the others wait for
	// their verdict, failing fast as when open.
	if b.inFlight+b.passed >= b.s.probes {
		return 0, b.refuse(now)
	}
	b.inFlight++
	return b.gen, nil
}

func (b *breaker) refuse(now time.Time) error {
	wait := "while its probes are answered"
	if b.st == open {
		wait = "for another " + b.openUntil.Sub(now).Round(time.Millisecond).String()
	}
	return &kernel.Error{Code: kernel.CodeLimitExceeded, Cause: ErrOpen,
		Msg: "circuit breaker for " + b.name + " is open " + wait + " (" + b.why + "); the call was not sent; failover tries another provider"}
}

// abandon gives back a probe's slot whose call ended with no verdict.
func (b *breaker) abandon(probe uint64) {
	if probe == 0 {
		return
	}
	b.mu.Lock()
	if b.st == halfOpen && b.gen == probe {
		b.inFlight--
	}
	b.mu.Unlock()
}

// record counts a call's outcome and moves the state: a closed breaker
// opens once the window says so; a probe's failure opens it again, and
// enough successes close it.
func (b *breaker) record(now time.Time, took time.Duration, failed bool, probe uint64, f *Filter) {
	slow := b.s.slowRT > 0 && took > b.s.slowRT
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case probe != 0 && b.st == halfOpen && b.gen == probe:
		b.inFlight--
		if failed || slow {
			what := "failed"
			if !failed {
				what = fmt.Sprintf("took %v, over slow.rt %v", took.Round(time.Millisecond), b.s.slowRT)
			}
			b.trip(now, "a probe "+what, f)
			return
		}
		if b.passed++; b.passed >= b.s.probes {
			b.st = closed
			b.counts.Reset()
			f.stats.Closed.Add(1)
			f.log.Info("weft: circuit breaker closed: the provider answered its probes", "provider", b.name, "probes", b.s.probes)
		}
		return
	case b.st != closed || probe != 0:
		// A call let through before the breaker opened, or a probe of an
		// earlier turn: its outcome is outweighed by what came since.
		return
	}
	b.counts.Add(now, nCalls, 1)
	if failed {
		b.counts.Add(now, nFailed, 1)
	}
	if slow {
		b.counts.Add(now, nSlow, 1)
	}
	if !failed && !slow {
		return // only a failure or a slow call can open it
	}
	calls, nFailed, nSlow := b.totals(now)
	if calls < b.s.minCalls {
		return
	}
	switch {
	case failed && float64(nFailed) >= b.s.errorRatio*float64(calls):
		b.trip(now, fmt.Sprintf("%d of the last %d calls in %v failed, error.ratio %g", nFailed, calls, b.s.window, b.s.errorRatio), f)
	case slow && float64(nSlow) >= b.s.slowRatio*float64(calls):
		b.trip(now, fmt.Sprintf("%d of the last %d calls in %v took over %v, slow.ratio %g", nSlow, calls, b.s.window, b.s.slowRT, b.s.slowRatio), f)
	}
}

func (b *breaker) trip(now time.Time, why string, f *Filter) {
	b.st, b.openUntil, b.why = open, now.Add(b.s.open), why
	b.inFlight, b.passed = 0, 0
	f.stats.Opened.Add(1)
	f.log.Warn("weft: circuit breaker open: calls to the provider fail fast", "provider", b.name, "for", b.s.open, "why", why)
}

func (b *breaker) isOpen(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st == halfOpen || (b.st == open && now.Before(b.openUntil))
}
