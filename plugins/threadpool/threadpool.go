// Package threadpool holds Dubbo's four thread pools, chosen by a protocol's
// or service's `threadpool`: each reads `threads`, `corethreads`, `queues`
// and `alive` (milliseconds) from the URL with Dubbo's defaults for it, and
// says how the provider's server gives calls their threads
// (extension.PoolSpec). The server runs calls on goroutines; a pool bounds
// how many run at once, how many wait, and how long idle workers live.
package threadpool

import (
	"fmt"
	"math"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// URL keys, Dubbo's.
const (
	KeyThreadPool  = "threadpool"
	KeyCoreThreads = "corethreads"
	KeyQueues      = "queues"
	KeyAlive       = "alive"
)

// Names of the pools; Fixed is Dubbo's default.
const (
	Fixed   = "fixed"
	Cached  = "cached"
	Limited = "limited"
	Eager   = "eager"
)

// Dubbo's defaults: 200 threads for fixed and limited, no bound for cached
// and eager, no core threads, no queue, a minute's idle life.
const (
	DefaultThreads = 200
	DefaultAlive   = time.Minute
	unbounded      = math.MaxInt32
)

type pool struct {
	name    string
	threads int
	spec    func(threads, core, queues int, alive time.Duration) extension.PoolSpec
}

func (p pool) Pool(u *kernel.URL) (extension.PoolSpec, error) {
	threads := int(u.ParamInt(kernel.KeyThreads, int64(p.threads)))
	core := int(u.ParamInt(KeyCoreThreads, 0))
	queues := int(u.ParamInt(KeyQueues, 0))
	alive := time.Duration(u.ParamInt(KeyAlive, int64(DefaultAlive/time.Millisecond))) * time.Millisecond
	switch {
	case threads <= 0:
		return extension.PoolSpec{}, fmt.Errorf("threadpool %s: threads %d: want at least 1", p.name, threads)
	case core < 0 || core > threads:
		return extension.PoolSpec{}, fmt.Errorf("threadpool %s: corethreads %d: want 0 to threads (%d)", p.name, core, threads)
	case queues < 0:
		return extension.PoolSpec{}, fmt.Errorf("threadpool %s: queues %d: want 0 or more", p.name, queues)
	case alive < 0:
		return extension.PoolSpec{}, fmt.Errorf("threadpool %s: alive %v: want 0 or more", p.name, alive)
	}
	return p.spec(threads, core, queues, alive), nil
}

// New returns the pool of name, or false.
func New(name string) (extension.ThreadPool, bool) {
	switch name {
	case Fixed:
		// Dubbo's FixedThreadPool: threads threads, all core (started as
		// calls come, kept), queues.
		return pool{Fixed, DefaultThreads, func(threads, _, queues int, _ time.Duration) extension.PoolSpec {
			return extension.PoolSpec{Threads: threads, Core: threads, Queues: queues}
		}}, true
	case Cached:
		// Dubbo's CachedThreadPool: corethreads, up to threads (no
		// bound), idle ones beyond core retire after alive.
		return pool{Cached, unbounded, func(threads, core, queues int, alive time.Duration) extension.PoolSpec {
			return extension.PoolSpec{Threads: threads, Core: core, Queues: queues, Alive: alive}
		}}, true
	case Limited:
		// Dubbo's LimitedThreadPool: up to threads, never shrinking.
		return pool{Limited, DefaultThreads, func(threads, core, queues int, _ time.Duration) extension.PoolSpec {
			return extension.PoolSpec{Threads: threads, Core: core, Queues: queues}
		}}, true
	case Eager:
		// Dubbo's EagerThreadPool: a new thread before a queued call,
		// up to threads; then queues.
		return pool{Eager, unbounded, func(threads, core, queues int, alive time.Duration) extension.PoolSpec {
			return extension.PoolSpec{Threads: threads, Core: core, Queues: queues, Alive: alive, Eager: true}
		}}, true
	}
	return nil, false
}

// Names are the pools New knows.
func Names() []string { return []string{Cached, Eager, Fixed, Limited} }
