package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Failback defaults, Dubbo's.
const (
	DefaultRetryPeriod   = 5 * time.Second
	DefaultFailbackTimes = 3
	DefaultFailbackTasks = 100
)

// NewFailback returns an empty result at once when a call fails and retries
// it in the background, every `retry.period` (5 s) up to `retries` times
// (Dubbo's failback default 3), at most `failbacktasks` (100) calls queued:
// for notifications that must eventually arrive. Business errors are not
// retried.
func NewFailback(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: failback, start: func(c *clusterInvoker) {
		c.fb = &failbackQueue{c: c, timers: map[*time.Timer]struct{}{}}
	}}
}

type failbackQueue struct {
	c      *clusterInvoker
	mu     sync.Mutex
	timers map[*time.Timer]struct{}
	wg     sync.WaitGroup
	closed bool
}

func failback(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	res, err := failfast(ctx, c, inv)
	if err == nil || !kernel.Retryable(err) {
		return res, err
	}
	u := c.dir.URL()
	times := u.MethodParamInt(inv.Method, kernel.KeyRetries, DefaultFailbackTimes)
	if _, set := u.Lookup(kernel.KeyRetries); !set {
		times = DefaultFailbackTimes
	}
	if times <= 0 {
		return kernel.Result{}, err
	}
	if !c.fb.schedule(inv.Clone(), int(times)) {
		logf(c, "failback: retry queue full, dropping the failed call", inv, err)
		return kernel.Result{}, err
	}
	logf(c, "failback: call failed, will retry in the background", inv, err)
	return kernel.Result{}, nil
}

func (q *failbackQueue) schedule(inv *kernel.Invocation, left int) bool {
	u := q.c.dir.URL()
	period := time.Duration(u.ParamInt(KeyRetryPeriod, int64(DefaultRetryPeriod/time.Millisecond))) * time.Millisecond
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || int64(len(q.timers)) >= u.ParamInt(KeyFailbackTasks, DefaultFailbackTasks) {
		return false
	}
	q.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(period, func() {
		defer q.wg.Done()
		q.mu.Lock()
		delete(q.timers, t)
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), u.MethodTimeout(inv.Method, kernel.DefaultTimeoutMillis*time.Millisecond))
		_, err := failfast(ctx, q.c, inv)
		cancel()
		if err == nil || !kernel.Retryable(err) {
			if err != nil {
				logf(q.c, "failback: a retry failed in a way no retry can fix; giving up", inv, err)
			}
			return
		}
		if left > 1 && q.schedule(inv, left-1) {
			return
		}
		logf(q.c, "failback: giving up on a call after its retries", inv, err)
	})
	q.timers[t] = struct{}{}
	return true
}

func (q *failbackQueue) stop() {
	q.mu.Lock()
	q.closed = true
	for t := range q.timers {
		if t.Stop() {
			q.wg.Done()
		}
		delete(q.timers, t)
	}
	q.mu.Unlock()
	q.wg.Wait()
}
