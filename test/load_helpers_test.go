package test

import (
	"sync"
	"sync/atomic"
	"time"
)

// load runs callers in a loop until stopped, counting calls and failures:
// the traffic the end-to-end tests keep up while a provider stops, a rule
// changes or a server restarts.
type load struct {
	calls, failed atomic.Int64
	last          atomic.Value // string: the last failure
	stopCh        chan struct{}
	wg            sync.WaitGroup
	once          sync.Once
}

// startLoad starts workers goroutines calling call, each pausing pause
// after every call (0: none) and 10 ms after a failure, so that a test
// with no provider yet does not spin.
func startLoad(workers int, pause time.Duration, call func() error) *load {
	l := &load{stopCh: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stopCh:
					return
				default:
				}
				l.calls.Add(1)
				if err := call(); err != nil {
					l.failed.Add(1)
					l.last.Store(err.Error())
					time.Sleep(10 * time.Millisecond)
				} else if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	return l
}

// stop ends the load, waits for the callers and returns the calls made,
// those that failed and the last failure ("" when none).
func (l *load) stop() (calls, failed int64, last string) {
	l.once.Do(func() { close(l.stopCh) })
	l.wg.Wait()
	last, _ = l.last.Load().(string)
	return l.calls.Load(), l.failed.Load(), last
}
