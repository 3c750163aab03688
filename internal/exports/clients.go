package exports

import (
	"sync"
	"time"
)

// DrainMax bounds how long a released client waits for its calls in flight
// before it closes: longer than any sane `timeout`, so in practice each
// call ends by its own deadline first.
const DrainMax = time.Minute

// Closer is a client connection as Clients closes it.
type Closer interface {
	// CloseGracefully closes once the calls in flight have ended, or
	// after max.
	CloseGracefully(max time.Duration)
	// Close closes now.
	Close()
}

// Clients are a protocol's client connections shared per provider address,
// as Dubbo and gRPC share one: made by the first reference to an address,
// held by each, and closed gracefully in the background when the last lets
// go, so that the caller (a registry notification destroying invokers under
// its lock) never waits for calls in flight. Both protocols keep theirs
// here, so that the lifecycle is written once.
type Clients[C interface {
	comparable
	Closer
}] struct {
	mu       sync.Mutex
	m        map[string]*held[C]
	draining sync.WaitGroup
}

type held[C any] struct {
	c    C
	refs int
}

// Hold returns the client of addr, made by dial when there is none, and
// holds it until Release.
func (cs *Clients[C]) Hold(addr string, dial func() C) C {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	h := cs.m[addr]
	if h == nil {
		if cs.m == nil {
			cs.m = map[string]*held[C]{}
		}
		h = &held[C]{c: dial()}
		cs.m[addr] = h
	}
	h.refs++
	return h.c
}

// Release lets go of c, held for addr; the last holder's release closes it
// gracefully in the background. A c that is no longer addr's (Close ran)
// is left alone.
func (cs *Clients[C]) Release(addr string, c C) {
	cs.mu.Lock()
	h := cs.m[addr]
	last := false
	if h != nil && h.c == c {
		if h.refs--; h.refs <= 0 {
			delete(cs.m, addr)
			last = true
		}
	}
	cs.mu.Unlock()
	if last {
		cs.CloseGracefully(c)
	}
}

// CloseGracefully closes c in the background once its calls have ended
// (DrainMax at most); Close waits for it.
func (cs *Clients[C]) CloseGracefully(c C) {
	cs.draining.Add(1)
	go func() {
		defer cs.draining.Done()
		c.CloseGracefully(DrainMax)
	}()
}

// Close closes every shared client now, and waits for those closing
// gracefully.
func (cs *Clients[C]) Close() {
	cs.mu.Lock()
	all := cs.m
	cs.m = nil
	cs.mu.Unlock()
	for _, h := range all {
		h.c.Close()
	}
	cs.draining.Wait()
}
