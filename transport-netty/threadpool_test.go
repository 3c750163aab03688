package netty

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// The thread pools as Dubbo documents them, by their specs
// (plugins/threadpool maps the names and URL keys onto these).

// blockCalls starts n "block" calls on c and returns their answers' channel.
func blockCalls(c *ExchangeClient, n int) chan *Response {
	done := make(chan *Response, n)
	for range n {
		go func() {
			r, _ := c.Request(context.Background(), "block", 10*time.Second)
			done <- r
		}()
	}
	return done
}

// until waits for cond, failing after 5 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func allOK(t *testing.T, done chan *Response, n int) {
	t.Helper()
	for range n {
		if r := <-done; r == nil || r.Status != kernel.ResponseOK {
			t.Fatalf("a call: %+v", r)
		}
	}
}

// cached: no bound on threads by default (Dubbo's Integer.MAX_VALUE), and
// workers idle past `alive` retire, down to corethreads.
func TestCachedPoolGrowsAndShrinks(t *testing.T) {
	es, h := serve(t, testCodec{}, ServerOptions{Pool: extension.PoolSpec{Threads: math.MaxInt32, Core: 1, Alive: 100 * time.Millisecond}})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	const n = 300
	done := blockCalls(c, n)
	until(t, "300 calls run at once", func() bool { return es.Busy() == n })
	close(h.release)
	allOK(t, done, n)
	if st := es.Stats(); st.Rejected != 0 || st.Workers < 2 {
		t.Fatalf("stats %+v: want workers, none rejected", st)
	}
	until(t, "idle workers retire down to corethreads", func() bool { return es.Stats().Workers == 1 })
}

// limited: bounded by threads (its workers never retire:
// TestWorkerPoolKeepsCoreAndForever).
func TestLimitedPoolIsBounded(t *testing.T) {
	es, h := serve(t, testCodec{}, ServerOptions{Pool: extension.PoolSpec{Threads: 3}})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	done := blockCalls(c, 3)
	until(t, "3 calls run", func() bool { return es.Busy() == 3 })
	resp, err := c.Request(context.Background(), "x", time.Second)
	if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted {
		t.Fatalf("a 4th call: %+v %v, want status 100", resp, err)
	}
	close(h.release)
	allOK(t, done, 3)
}

// A pool's first core workers never retire, nor any when it has no idle
// time (limited); the others do after idling.
func TestWorkerPoolKeepsCoreAndForever(t *testing.T) {
	for _, c := range []struct {
		name        string
		core        int
		idle        time.Duration
		wantWorkers int64
	}{
		{"core 2 of 4", 2, 30 * time.Millisecond, 2},
		{"no idle time", 0, 0, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			p := newWorkerPool(4, c.core, c.idle, func(task) { <-release })
			defer p.close()
			for range 4 {
				if !p.submit(task{req: &Request{}}) {
					t.Fatal("the pool refused one of its 4")
				}
			}
			close(release)
			time.Sleep(200 * time.Millisecond)
			if w := p.workers.Load(); w != c.wantWorkers {
				t.Fatalf("%d workers after idling, want %d", w, c.wantWorkers)
			}
		})
	}
}

// eager starts threads up to `threads` before it queues (Dubbo's
// EagerThreadPool); a pool of Java's ThreadPoolExecutor shape (fixed,
// cached, limited with queues) queues past corethreads and starts a thread
// beyond them only when the queue is full.
func TestEagerPoolThreadsBeforeQueue(t *testing.T) {
	for _, c := range []struct {
		name               string
		eager              bool
		busyAt3, queuedAt3 int64
		busyAt4, queuedAt4 int64
		sixthRefused       bool
	}{
		{"eager", true, 3, 0, 3, 1, true},
		{"cached", false, 1, 2, 2, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			es, h := serve(t, testCodec{}, ServerOptions{Pool: extension.PoolSpec{Threads: 3, Core: 1, Queues: 2, Alive: time.Minute, Eager: c.eager}})
			cl := dial(t, es.Addr(), testCodec{}, ClientOptions{})
			done := blockCalls(cl, 3)
			until(t, "3 calls placed", func() bool { st := es.Stats(); return st.Busy+st.Queued == 3 })
			if st := es.Stats(); st.Busy != c.busyAt3 || st.Queued != c.queuedAt3 {
				t.Fatalf("3 calls: %d run, %d queued; want %d and %d", st.Busy, st.Queued, c.busyAt3, c.queuedAt3)
			}
			more := blockCalls(cl, 1)
			until(t, "4 calls placed", func() bool { st := es.Stats(); return st.Busy+st.Queued == 4 })
			if st := es.Stats(); st.Busy != c.busyAt4 || st.Queued != c.queuedAt4 {
				t.Fatalf("4 calls: %d run, %d queued; want %d and %d", st.Busy, st.Queued, c.busyAt4, c.queuedAt4)
			}
			if c.sixthRefused {
				five := blockCalls(cl, 1)
				until(t, "5 calls placed", func() bool { st := es.Stats(); return st.Busy+st.Queued == 5 })
				resp, err := cl.Request(context.Background(), "x", time.Second)
				if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted || !strings.Contains(resp.ErrMsg, "queue") {
					t.Fatalf("a 6th call: %+v %v, want status 100 naming the queue", resp, err)
				}
				defer allOK(t, five, 1)
			}
			close(h.release)
			allOK(t, done, 3)
			allOK(t, more, 1)
		})
	}
}

// fixed with queues: threads run, queues wait (and run, in order, as
// threads free), the next is refused.
func TestFixedPoolQueues(t *testing.T) {
	es, h := serve(t, testCodec{}, ServerOptions{Pool: extension.PoolSpec{Threads: 1, Core: 1, Queues: 1}})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	done := blockCalls(c, 2)
	until(t, "1 runs, 1 waits", func() bool { st := es.Stats(); return st.Busy == 1 && st.Queued == 1 })
	resp, err := c.Request(context.Background(), "x", time.Second)
	if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted {
		t.Fatalf("a 3rd call: %+v %v, want status 100", resp, err)
	}
	close(h.release)
	allOK(t, done, 2)
	if st := es.Stats(); st.Queued != 0 || st.Busy != 0 {
		t.Fatalf("after: %+v", st)
	}
}
