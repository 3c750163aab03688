package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Hedging is the strategy that sends a backup request (Kitex's backup
// request, gRPC's hedging policy, Google's "tail at scale"): the call goes
// to one provider; when no answer has come after `hedging.delay`, the same
// call goes to another, and so on up to `hedging.max.attempts` attempts;
// the first answer wins and the others are canceled (over Triple the
// cancel reaches the provider as RST_STREAM CANCEL; Dubbo's protocol has no
// cancel frame, so a dubbo provider finishes the call and its answer is
// dropped). A failure another provider could answer starts the next
// attempt at once rather than at the delay. Backups come out of the
// reference's retry budget when it has one. The attempts share the
// method's `timeout`.
const (
	Hedging = "hedging"
	// KeyHedgingDelay is ms, or pNN (p50 to p99.9): that percentile of the
	// latencies the reference observed, as Kitex's backup request and the
	// "tail at scale" paper suggest (p95 by default).
	KeyHedgingDelay       = "hedging.delay"
	KeyHedgingMaxAttempts = "hedging.max.attempts" // attempts in all, the first included
	DefaultHedgingDelay   = "p95"
	DefaultHedgingMax     = 2
	// minSamples latencies are needed before a percentile is trusted;
	// until then a backup waits half the timeout.
	minSamples = 20
)

// NewHedging returns the hedging strategy.
func NewHedging(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: hedging, start: func(c *clusterInvoker) { c.lat = &latencies{} }}
}

type attempt struct {
	answer
	took time.Duration
}

func hedging(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	invokers, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	u := c.dir.URL()
	most := int(u.MethodParamInt(inv.Method, KeyHedgingMaxAttempts, DefaultHedgingMax))
	most = max(1, min(most, len(invokers)))
	timeout := c.timeout(inv)
	delay := c.hedgeDelay(u, inv.Method, timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // the slower attempts stop here
	answers := make(chan attempt, most)
	var tried []kernel.Invoker
	launch := func() bool {
		iv, err := c.pick(invokers, tried, inv)
		if err != nil || contains(tried, iv) {
			return false
		}
		tried = append(tried, iv)
		call := inv
		if len(tried) > 1 {
			call = inv.Clone() // the attempts run at once
		}
		go func() {
			start := time.Now()
			res, err := iv.Invoke(ctx, call)
			if c.observer != nil {
				c.observer.Observe(iv, err) // a canceled loser is not counted
			}
			answers <- attempt{answer{res, err}, time.Since(start)}
		}()
		return true
	}
	if !launch() {
		return kernel.Result{}, kernel.Errorf(kernel.CodeNoProvider, "hedging call of %s.%s: no provider to choose", u.ServiceKey(), inv.Method)
	}
	// The first attempt owns inv; the backups clone it before it runs.
	backup := func() bool {
		if len(tried) >= most {
			return false
		}
		if ok, _ := c.budget.retry(); !ok {
			return false
		}
		return launch()
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	running := 1
	var last error
	for running > 0 {
		select {
		case a := <-answers:
			running--
			if a.err == nil || !kernel.Retryable(a.err) {
				// An answer every provider would give is an answer.
				if a.err == nil {
					c.lat.record(a.took)
				}
				return a.res, a.err
			}
			last = a.err
			if backup() {
				running++
			}
		case <-timer.C:
			if backup() {
				running++
				timer.Reset(delay)
			}
		case <-ctx.Done():
			return kernel.Result{}, kernel.Wrap(kernel.CodeTimeout, ctx.Err(), "hedging call of %s.%s: no answer from %d providers within %v",
				u.ServiceKey(), inv.Method, len(tried), timeout)
		}
	}
	return kernel.Result{}, gaveUp(u, inv, "hedging", tried, last)
}

// hedgeDelay is how long an attempt goes unanswered before the next:
// hedging.delay's ms, or the percentile of the latencies observed.
func (c *clusterInvoker) hedgeDelay(u *kernel.URL, method string, timeout time.Duration) time.Duration {
	s := u.MethodParamOr(method, KeyHedgingDelay, DefaultHedgingDelay)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	q, err := strconv.ParseFloat(strings.TrimPrefix(s, "p"), 64)
	if !strings.HasPrefix(s, "p") || err != nil || q < 50 || q > 99.9 {
		c.warnOnce(KeyHedgingDelay+"="+s, "weft: hedging.delay not usable; p95 is used", "value", s,
			"want", "ms > 0, or a percentile p50..p99.9 of the observed latencies, such as p95")
		q = 95
	}
	if d, ok := c.lat.percentile(q); ok {
		return max(d, time.Millisecond)
	}
	return timeout / 2
}

func (c *clusterInvoker) warnOnce(key, msg string, args ...any) {
	if _, seen := c.warned.LoadOrStore(key, true); !seen {
		c.log.Error(msg, append([]any{"service", c.dir.URL().ServiceKey()}, args...)...)
	}
}

// latencies keeps a reference's last answered attempts' latencies in a
// ring, and their percentiles, worked out at most every 100 ms: a sort of
// the ring per call would cost more than the hedging saves.
type latencies struct {
	ring  [512]atomic.Int64
	next  atomic.Uint64
	mu    sync.Mutex
	at    time.Time
	cache map[float64]time.Duration
}

func (l *latencies) record(d time.Duration) {
	if l != nil {
		l.ring[(l.next.Add(1)-1)%uint64(len(l.ring))].Store(int64(d))
	}
}

func (l *latencies) percentile(q float64) (time.Duration, bool) {
	if l == nil || l.next.Load() < minSamples {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.cache[q]; ok && time.Since(l.at) < 100*time.Millisecond {
		return d, true
	}
	if time.Since(l.at) >= 100*time.Millisecond {
		l.cache, l.at = map[float64]time.Duration{}, time.Now()
	}
	n := min(int(l.next.Load()), len(l.ring))
	s := make([]int64, n)
	for i := range s {
		s[i] = l.ring[i].Load()
	}
	slices.Sort(s)
	d := time.Duration(s[min(n-1, int(float64(n)*q/100))])
	l.cache[q] = d
	return d, true
}
