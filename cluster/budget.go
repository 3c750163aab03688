package cluster

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/weftrpc/weft/kernel"
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
	ring    [buckets]budgetBucket
	denied  int64 // extra attempts refused since the reference was made
	allowed int64
}

const buckets = 10

type budgetBucket struct {
	start          int64
	calls, retries int64
}

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
	window := u.ParamInt(KeyRetryBudgetWindow, DefaultRetryBudgetWindow)
	if window < 10 {
		log.Error("weft: retry budget setting not usable; the default is used", "service", u.ServiceKey(),
			"key", KeyRetryBudgetWindow, "value", u.Param(KeyRetryBudgetWindow), "want", "ms ≥ 10", "default", DefaultRetryBudgetWindow)
		window = DefaultRetryBudgetWindow
	}
	minimum := u.ParamInt(KeyRetryBudgetMin, DefaultRetryBudgetMin)
	if minimum < 0 {
		minimum = DefaultRetryBudgetMin
	}
	return &retryBudget{percent: p, window: time.Duration(window) * time.Millisecond, min: minimum, now: time.Now}
}

func (b *retryBudget) bucket(now time.Time) *budgetBucket {
	span := int64(b.window) / buckets
	start := now.UnixNano() / span * span
	c := &b.ring[(now.UnixNano()/span)%buckets]
	if c.start != start {
		*c = budgetBucket{start: start}
	}
	return c
}

func (b *retryBudget) totals(now time.Time) (calls, retries int64) {
	oldest := now.UnixNano() - int64(b.window)
	for i := range b.ring {
		if c := &b.ring[i]; c.start > oldest {
			calls += c.calls
			retries += c.retries
		}
	}
	return
}

// call counts a call of the reference (its first attempt).
func (b *retryBudget) call() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.bucket(b.now()).calls++
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
	calls, retries := b.totals(now)
	if retries >= b.min && retries*100 >= calls*b.percent {
		b.denied++
		return false, "retry budget spent: " + strconv.FormatInt(retries, 10) + " extra attempts for " +
			strconv.FormatInt(calls, 10) + " calls in the last " + b.window.String() + " (" + KeyRetryBudget + " " +
			strconv.FormatInt(b.percent, 10) + ", " + KeyRetryBudgetMin + " " + strconv.FormatInt(b.min, 10) + ")"
	}
	b.bucket(now).retries++
	b.allowed++
	return true, ""
}

// counts are the extra attempts allowed and refused so far.
func (b *retryBudget) counts() (allowed, denied int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowed, b.denied
}
