package kernel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Status counts the calls of one service (or provider URL) and method: what
// Dubbo's RpcStatus holds. The `executes` and `actives` filters limit by it;
// the leastactive load balancer reads it.
type Status struct {
	active    atomic.Int64
	total     atomic.Int64
	failed    atomic.Int64
	elapsedNs atomic.Int64
	maxNs     atomic.Int64
	okCount   atomic.Int64
	okNs      atomic.Int64

	waiters atomic.Int64
	mu      sync.Mutex
	wake    chan struct{} // closed and renewed on each End while someone waits
}

// Active is the number of calls in flight.
func (s *Status) Active() int64 { return s.active.Load() }

// Total is the number of finished calls.
func (s *Status) Total() int64 { return s.total.Load() }

// Failed is the number of finished calls that failed.
func (s *Status) Failed() int64 { return s.failed.Load() }

// Succeeded is the number of finished calls that succeeded.
func (s *Status) Succeeded() int64 { return s.okCount.Load() }

// SucceededElapsed is the summed duration of the calls that succeeded:
// what Dubbo's shortestresponse balancer averages over a window.
func (s *Status) SucceededElapsed() time.Duration { return time.Duration(s.okNs.Load()) }

// AverageElapsed is the mean duration of finished calls.
func (s *Status) AverageElapsed() time.Duration {
	n := s.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(s.elapsedNs.Load() / n)
}

// TryBegin counts a call in unless max > 0 and max calls are already active.
func (s *Status) TryBegin(max int64) bool {
	for {
		n := s.active.Load()
		if max > 0 && n >= max {
			return false
		}
		if s.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Begin counts a call in, waiting while max calls are active, until ctx is
// done (its error is returned then). Waiting blocks on a channel: no polling.
func (s *Status) Begin(ctx context.Context, max int64) error {
	for {
		if s.TryBegin(max) {
			return nil
		}
		s.mu.Lock()
		s.waiters.Add(1)
		// Checked again under the lock: an End between the first try and the
		// waiters increment would otherwise go unnoticed.
		if s.TryBegin(max) {
			s.waiters.Add(-1)
			s.mu.Unlock()
			return nil
		}
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		ch := s.wake
		s.mu.Unlock()
		select {
		case <-ch:
			s.waiters.Add(-1)
		case <-ctx.Done():
			s.waiters.Add(-1)
			return ctx.Err()
		}
	}
}

// End counts a call out that took elapsed and wakes the callers waiting in
// Begin.
func (s *Status) End(elapsed time.Duration, ok bool) {
	s.active.Add(-1)
	s.total.Add(1)
	ns := int64(elapsed)
	if ok {
		s.okCount.Add(1)
		s.okNs.Add(ns)
	} else {
		s.failed.Add(1)
	}
	s.elapsedNs.Add(ns)
	for {
		m := s.maxNs.Load()
		if ns <= m || s.maxNs.CompareAndSwap(m, ns) {
			break
		}
	}
	if s.waiters.Load() > 0 {
		s.mu.Lock()
		if s.wake != nil {
			close(s.wake)
			s.wake = nil
		}
		s.mu.Unlock()
	}
}

type statusKey struct{ scope, method string }

// StatusStore holds the Status of every (scope, method) pair: scope is a
// service key for provider-side counts and a provider URL for consumer-side
// ones. One store belongs to one App. Lookups read an immutable map through
// an atomic pointer — no lock, no allocation — since they happen on every
// call of every balancer and limit filter, while new pairs appear rarely.
type StatusStore struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[statusKey]*Status]
}

// NewStatusStore makes an empty store.
func NewStatusStore() *StatusStore {
	st := &StatusStore{}
	m := map[statusKey]*Status{}
	st.m.Store(&m)
	return st
}

// Get returns the Status of scope and method, creating it on first use.
func (st *StatusStore) Get(scope, method string) *Status {
	k := statusKey{scope, method}
	if s := (*st.m.Load())[k]; s != nil {
		return s
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	old := *st.m.Load()
	if s := old[k]; s != nil {
		return s
	}
	next := make(map[statusKey]*Status, len(old)+1)
	for key, v := range old {
		next[key] = v
	}
	s := &Status{}
	next[k] = s
	st.m.Store(&next)
	return s
}
