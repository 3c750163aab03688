package extension

import "sync"

// Listeners is what a Registry, ServiceDiscovery or DynamicConfiguration
// keeps for each thing it watches (a service's providers, an application's
// instances, a document): the listeners of it, and the last value they
// were told, so that one watch on the server serves any number of
// listeners, each sees every value in order, and a listener added later
// starts from the current value. Its methods are safe for concurrent use;
// the calls they make run under its lock, one at a time.
type Listeners[L comparable, V any] struct {
	mu   sync.Mutex
	ls   []L
	last V
	have bool
}

// Add adds l; if a value was delivered already, call gives it to l at once.
func (s *Listeners[L, V]) Add(l L, call func(L, V)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ls = append(s.ls, l)
	if s.have && call != nil {
		call(l, s.last)
	}
}

// Remove removes l (every time it was added) and returns how many
// listeners are left: the watch can end with the last one.
func (s *Listeners[L, V]) Remove(l L) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.ls[:0:0]
	for _, x := range s.ls {
		if x != l {
			kept = append(kept, x)
		}
	}
	s.ls = kept
	return len(kept)
}

// Deliver records v and calls call for every listener, in the order they
// were added, when changed (nil: always) says v differs from the last
// value delivered (had is false before the first). It reports whether it
// delivered.
func (s *Listeners[L, V]) Deliver(v V, changed func(last V, had bool) bool, call func(L, V)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if changed != nil && !changed(s.last, s.have) {
		return false
	}
	s.last, s.have = v, true
	for _, l := range s.ls {
		call(l, v)
	}
	return true
}

// Record is Deliver for listeners that must be called outside the lock
// (they may remove themselves, or block): it records v when changed says so
// and returns the listeners to tell, a copy, in order; nil when v is not a
// change. Values recorded one after another may then reach a listener out
// of order only if the caller tells them concurrently.
func (s *Listeners[L, V]) Record(v V, changed func(last V, had bool) bool) []L {
	s.mu.Lock()
	defer s.mu.Unlock()
	if changed != nil && !changed(s.last, s.have) {
		return nil
	}
	s.last, s.have = v, true
	return append(make([]L, 0, len(s.ls)), s.ls...)
}

// Last returns the last value delivered, and whether there was one.
func (s *Listeners[L, V]) Last() (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.have
}

// Len is the number of listeners.
func (s *Listeners[L, V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ls)
}

// Clear removes every listener (the watch is closed).
func (s *Listeners[L, V]) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ls = nil
}
