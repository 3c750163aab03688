package cluster

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/window"
)

// A retry budget (Envoy's and Finagle's idea; grpc-go's retry throttling
// and Kitex's retry circuit breaker are its cousins) caps the extra
// attempts a reference makes, failover's retries, forking's extra forks and
// hedging's backups together, at a share of its calls over a sliding
// window. When every provider fails, retries would otherwise multiply the
// load on them by retries+1 just when they can least take it.
const (
	KeyRetryBudget       = "retry.budget.percent" // extra attempts ≤ this % of calls; unset: no budget
	KeyRetryBudgetWindow = "retry.budget.window"  // ms the counts cover
	KeyRetryBudgetMin    = "retry.budget.min"     // extra attempts always allowed per window

	DefaultRetryBudgetWindow = 10000
	DefaultRetryBudgetMin    = 10
)

// retryBudget counts a reference's calls and extra attempts in ten buckets
// of a tenth of the window each.
type retryBudget struct {
	percent int64
	window  time.Duration
	min     int64
	now     func() time.Time

	mu      sync.Mutex
	counts  *window.Counts // calls, retries
	denied  int64          // extra attempts refused since the reference was made
	allowed int64
}

// The window's counters.
const (
	nCalls = iota
	nRetries
)

// newRetryBudget reads the budget's keys from the reference's URL; nil
// when it sets none. A value it cannot use is logged, and the budget is
// off rather than guessed.
func newRetryBudget(u *kernel.URL, log *slog.Logger) *retryBudget {
	s := u.Param(KeyRetryBudget)
	if s == "" {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	p, err := strconv.ParseInt(s, 10, 64)
	if err != nil || p < 0 || p > 100 {
		log.Error("weft: retry budget setting not usable; no budget is applied", "service", u.ServiceKey(),
			"key", KeyRetryBudget, "value", s, "want", "a whole percentage in 0..100, such as 20")
		return nil
	}
	ms := u.ParamInt(KeyRetryBudgetWindow, DefaultRetryBudgetWindow)
	if ms < 10 {
		log.Error("weft: retry budget setting not usable; the default is used", "service", u.ServiceKey(),
			"key", KeyRetryBudgetWindow, "value", u.Param(KeyRetryBudgetWindow), "want", "ms ≥ 10", "default", DefaultRetryBudgetWindow)
		ms = DefaultRetryBudgetWindow
	}
	minimum := u.ParamInt(KeyRetryBudgetMin, DefaultRetryBudgetMin)
	if minimum < 0 {
		minimum = DefaultRetryBudgetMin
	}
	d := time.Duration(ms) * time.Millisecond
	return &retryBudget{percent: p, window: d, min: minimum, now: time.Now, counts: window.New(d)}
}

// call counts a call of the reference (its first attempt).
func (b *retryBudget) call() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.counts.Add(b.now(), nCalls, 1)
	b.mu.Unlock()
}

// retry takes one extra attempt from the budget; false (and why) when the
// window's extra attempts already reached the budget's share of its calls.
func (b *retryBudget) retry() (bool, string) {
	if b == nil {
		return true, ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	n := b.counts.Sum(now)
	calls, retries := n[nCalls], n[nRetries]
	if retries >= b.min && retries*100 >= calls*b.percent {
		b.denied++
		return false, "retry budget spent: " + strconv.FormatInt(retries, 10) + " extra attempts for " +
			strconv.FormatInt(calls, 10) + " calls in the last " + b.window.String() + " (" + KeyRetryBudget + " " +
			strconv.FormatInt(b.percent, 10) + ", " + KeyRetryBudgetMin + " " + strconv.FormatInt(b.min, 10) + ")"
	}
	b.counts.Add(now, nRetries, 1)
	b.allowed++
	return true, ""
}

// BudgetReporter is a cluster invoker with a retry budget (cluster's
// strategies): the metrics read what it allowed and refused.
type BudgetReporter interface {
	// RetryBudget returns the extra attempts allowed and denied so far;
	// on is false when the reference has no budget.
	RetryBudget() (allowed, denied int64, on bool)
}

// RetryBudget is BudgetReporter's.
func (c *clusterInvoker) RetryBudget() (allowed, denied int64, on bool) {
	if c.budget == nil {
		return 0, 0, false
	}
	allowed, denied = c.budget.tally()
	return allowed, denied, true
}

var _ BudgetReporter = (*clusterInvoker)(nil)

// tally is the extra attempts allowed and refused so far.
func (b *retryBudget) tally() (allowed, denied int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowed, b.denied
}
