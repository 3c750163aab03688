package exports

import (
	"sync"

	"github.com/weftrpc/weft/kernel"
)

// Servers are a protocol's servers by address: one per host:port, opened by
// the first export to it and forgotten (for its protocol to close) when the
// last export leaves. Both protocols keep theirs here, so that the
// lifecycle is written once.
type Servers[S comparable] struct {
	mu sync.Mutex
	m  map[string]S
}

// Export runs add with the server of u's address, first opening it with
// open when there is none (port 0 always opens one, kept under the address
// it bound, which open returns). add runs under the table's lock, so that
// no Release of the same server runs between the lookup and the add.
func (ss *Servers[S]) Export(u *kernel.URL, open func() (s S, bound string, err error), add func(s S, addr string) error) error {
	addr := u.Address()
	if u.Port == 0 {
		addr = u.Host + ":0"
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[addr]
	if !ok {
		var bound string
		var err error
		if s, bound, err = open(); err != nil {
			return err
		}
		if u.Port == 0 {
			addr = bound
		}
		if ss.m == nil {
			ss.m = map[string]S{}
		}
		ss.m[addr] = s
	}
	return add(s, addr)
}

// Export is the export of one service to the server of u's address
// (opened with open on first use): mk makes its exporter, which joins the
// server's table under u's service key, unless one is there already.
func Export[S, E comparable](ss *Servers[S], u *kernel.URL, open func() (S, string, error), table func(S) *Table[E], mk func(s S, addr string) E) (E, error) {
	var e E
	err := ss.Export(u, open, func(s S, addr string) error {
		key := u.ServiceKey()
		e = mk(s, addr)
		if !table(s).Add(key, e) {
			return kernel.Errorf(kernel.CodeUnknown, "service %s is already exported on %s", key, addr)
		}
		return nil
	})
	return e, err
}

// Release forgets s at addr, if it is still the server there: its last
// export left. It reports whether it did, and so whether the caller closes
// it. empty runs under the table's lock, so that an Export adding to s
// meanwhile keeps it.
func (ss *Servers[S]) Release(addr string, s S, empty func() bool) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if cur, ok := ss.m[addr]; !ok || cur != s || !empty() {
		return false
	}
	delete(ss.m, addr)
	return true
}

// All returns the servers now.
func (ss *Servers[S]) All() []S {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]S, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	return out
}

// TakeAll forgets every server and returns them, for the protocol to close
// (its Destroy).
func (ss *Servers[S]) TakeAll() []S {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]S, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	ss.m = nil
	return out
}
