package zookeeper

import (
	"log/slog"
	"sync"

	"github.com/weftrpc/weft/extension"
)

// owner is what the registry, the discovery and the config center are each
// built on: a client (a session) of their own, the goroutines that follow
// its watches, and their watches by key (a service's providers, an
// application's instances, a document), each shared by its listeners, of
// type L.
type owner[L comparable, W watcher[L]] struct {
	c         *client
	log       *slog.Logger
	errClosed error         // what a call gets once the owner is closed
	stop      chan struct{} // closed by shut: every goroutine ends
	wg        sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	watches map[string]W
}

func newOwner[L comparable, W watcher[L]](c *client, log *slog.Logger, errClosed error) owner[L, W] {
	return owner[L, W]{c: c, log: log, errClosed: errClosed, stop: make(chan struct{}), watches: map[string]W{}}
}

// watcher is a watch as its owner sees it: what shared provides.
type watcher[L any] interface {
	remove(l L) bool
	clear()
}

// shared is what every watch has: its listeners (told values of type V),
// and stop, closed when the last of them goes.
type shared[L comparable, V any] struct {
	stop      chan struct{}
	listeners extension.Listeners[L, V]
}

func newShared[L comparable, V any]() shared[L, V] {
	return shared[L, V]{stop: make(chan struct{})}
}

// remove removes l and, if it was the last listener, stops the watch and
// reports true.
func (s *shared[L, V]) remove(l L) bool {
	if s.listeners.Remove(l) > 0 {
		return false
	}
	close(s.stop)
	return true
}

// clear forgets every listener: the owner is closing.
func (s *shared[L, V]) clear() { s.listeners.Clear() }

// check is the owner's closed error once it is closed, else nil.
func (o *owner[L, W]) check() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.errClosed
	}
	return nil
}

// unwatch removes l from the watch at key, which ends with its last
// listener.
func (o *owner[L, W]) unwatch(key string, l L) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.errClosed
	}
	if w, ok := o.watches[key]; ok && w.remove(l) {
		delete(o.watches, key)
	}
	return nil
}

// shut ends every watch, the goroutines and the session; it is
// idempotent.
func (o *owner[L, W]) shut() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	for _, w := range o.watches {
		w.clear()
	}
	o.watches = nil
	o.mu.Unlock()
	close(o.stop)
	o.c.close()
	o.wg.Wait()
}
