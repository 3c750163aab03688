package netty

import (
	"sync"
	"sync/atomic"
	"time"
)

// workerPool runs tasks on at most max long-lived goroutines, handing each
// task to an idle worker through an unbuffered channel (Dubbo's fixed pool
// with a SynchronousQueue): no queueing, so a full pool refuses at once.
// Reusing goroutines matters: a fresh goroutine per call pays for growing its
// stack on every call, which profiles showed as a quarter of a provider's CPU.
type workerPool struct {
	run     func(task)
	tasks   chan task
	max     int64
	core    int64 // workers that never retire
	workers atomic.Int64
	largest atomic.Int64 // the most workers at once, for metrics
	idle    time.Duration
	done    chan struct{}
	wg      sync.WaitGroup
}

// task is one request to serve; a struct rather than a closure, so handing
// it over allocates nothing.
type task struct {
	conn *Conn
	req  *Request
}

// newWorkerPool: at most max workers; the first core of them never retire,
// the others after idling for idle (0: they never do either).
func newWorkerPool(max, core int, idle time.Duration, run func(task)) *workerPool {
	return &workerPool{run: run, tasks: make(chan task), max: int64(max), core: int64(core), idle: idle, done: make(chan struct{})}
}

// submit runs f on an idle worker or a new one; false when max workers are
// all busy.
func (p *workerPool) submit(f task) bool {
	select {
	case p.tasks <- f:
		return true
	default:
	}
	for {
		n := p.workers.Load()
		if n >= p.max {
			// One more try: a worker may have just become idle.
			select {
			case p.tasks <- f:
				return true
			default:
				return false
			}
		}
		if p.workers.CompareAndSwap(n, n+1) {
			// Only when a worker starts, which is rare: not on the call path.
			for l := p.largest.Load(); n+1 > l && !p.largest.CompareAndSwap(l, n+1); l = p.largest.Load() {
			}
			p.wg.Add(1)
			go p.work(f)
			return true
		}
	}
}

func (p *workerPool) work(f task) {
	defer p.wg.Done()
	// The idle timer is not reset per task (a timer operation on every
	// call): the worker notes when it last served, and when the timer
	// fires it either retires or waits out the rest of its idle time.
	idle := p.idle
	if idle <= 0 {
		idle = time.Hour // never retires: the timer only wakes it to check
	}
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		p.run(f)
		if f = p.next(t, time.Now(), idle); f.req == nil {
			return
		}
	}
}

// next waits for the worker's next task; a zero task when the worker
// retires (idle since last for the pool's idle time, and more than core
// workers are left), counted out of workers, or the pool closes.
func (p *workerPool) next(t *time.Timer, last time.Time, idle time.Duration) task {
	for {
		select {
		case f := <-p.tasks:
			return f
		case <-t.C:
			rest := idle - time.Since(last)
			if rest <= 0 && p.idle > 0 && p.retire() {
				return task{}
			}
			if rest <= 0 {
				rest = idle
			}
			t.Reset(rest)
		case <-p.done:
			p.workers.Add(-1)
			return task{}
		}
	}
}

// retire counts a worker out unless that would leave core or fewer.
func (p *workerPool) retire() bool {
	for {
		n := p.workers.Load()
		if n <= p.core {
			return false
		}
		if p.workers.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// close stops idle workers; busy ones stop after their task.
func (p *workerPool) close() {
	close(p.done)
	p.wg.Wait()
}
