// Package exports is the table of services one protocol server exports,
// keyed by service key (group/interface:version). The dubbo and tri
// protocols share it: a server per address, the exporters it serves, and
// the server's close when the last one is unexported.
package exports

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Table is copy-on-write: the call path looks an exporter up with one
// atomic load and no lock; exporting and unexporting, rare, copy the map.
type Table[E comparable] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]E]
}

func (t *Table[E]) load() map[string]E {
	if m := t.m.Load(); m != nil {
		return *m
	}
	return nil
}

// Wildcard is the service key of a gateway's export (interface "*"): it
// serves the calls of every service the server does not export itself.
const Wildcard = "*"

// Lookup returns the exporter of key, or the gateway's (Wildcard) when
// key is not exported and a gateway is.
func (t *Table[E]) Lookup(key string) (E, bool) {
	m := t.load()
	e, ok := m[key]
	if !ok {
		e, ok = m[Wildcard]
	}
	return e, ok
}

// Len is the number of exporters.
func (t *Table[E]) Len() int { return len(t.load()) }

// Keys lists the service keys, sorted (for errors that say what is there).
func (t *Table[E]) Keys() []string {
	m := t.load()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Each calls f for each exporter.
func (t *Table[E]) Each(f func(key string, e E)) {
	for k, e := range t.load() {
		f(k, e)
	}
}

// Add adds e under key; false when key is exported already.
func (t *Table[E]) Add(key string, e E) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.load()
	if _, dup := old[key]; dup {
		return false
	}
	m := make(map[string]E, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = e
	t.m.Store(&m)
	return true
}

// Remove removes e (under whichever key it has) and returns how many
// exporters are left.
func (t *Table[E]) Remove(e E) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.load()
	m := make(map[string]E, len(old))
	for k, v := range old {
		if v != e {
			m[k] = v
		}
	}
	t.m.Store(&m)
	return len(m)
}
