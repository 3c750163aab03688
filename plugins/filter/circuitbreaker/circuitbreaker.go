// Package circuitbreaker is a consumer filter that stops calling a provider
// whose calls of a method keep failing, for a while, and then tries it again
// with a few probes: the circuit breaker of Kitex's per-instance breaker,
// Sentinel's (which dubbo-go uses) and resilience4j's, with their three
// states.
//
//   - closed: calls go through; the breaker counts them, their failures and
//     the slow ones over a sliding window (`circuitbreaker.window` ms, ten
//     buckets). Once the window holds at least `circuitbreaker.min.calls`
//     calls and the share that failed reaches `circuitbreaker.error.ratio`
//     (or, with `circuitbreaker.slow.rt` set, the share slower than that
//     reaches `circuitbreaker.slow.ratio`), it opens.
//   - open: calls fail at once, for `circuitbreaker.open` ms, with a
//     limit-exceeded error (CodeLimitExceeded, Dubbo's LIMIT_EXCEEDED, as
//     Sentinel's block does): failover tries another provider, and the
//     consumer's metrics count a call that found none as limited.
//   - half-open: then up to `circuitbreaker.halfopen.calls` probes go
//     through; that many successes close it, one failure opens it again.
//
// A failure is one another provider could answer (kernel.Retryable: the
// call did not reach, was refused for load, or was not answered in time):
// a business error or a refused argument says nothing of the provider's
// health. A call the caller canceled is not counted.
//
// The breaker is per provider and method: the filter runs in each
// provider's chain, so one bad instance is cut off while the others serve.
// It is activated by the `circuitbreaker` key on a reference
// (`params: {circuitbreaker: "true"}`) or chosen by name (`filter:
// circuitbreaker`); the other keys may be set per method.
package circuitbreaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "circuitbreaker"

// URL keys and their defaults.
const (
	KeyEnabled    = "circuitbreaker"                // "true" turns it on (activation), "false" off
	KeyWindow     = "circuitbreaker.window"         // ms the statistics cover
	KeyMinCalls   = "circuitbreaker.min.calls"      // calls in the window before it may open
	KeyErrorRatio = "circuitbreaker.error.ratio"    // share of failures that opens it, (0, 1]
	KeySlowRT     = "circuitbreaker.slow.rt"        // ms over which a call is slow; 0: not watched
	KeySlowRatio  = "circuitbreaker.slow.ratio"     // share of slow calls that opens it, (0, 1]
	KeyOpen       = "circuitbreaker.open"           // ms it stays open before probing
	KeyProbes     = "circuitbreaker.halfopen.calls" // probes in half-open; that many successes close it

	DefaultWindow     = 10000
	DefaultMinCalls   = 20
	DefaultErrorRatio = 0.5
	DefaultSlowRatio  = 0.5
	DefaultOpen       = 5000
	DefaultProbes     = 3
)

// ErrOpen is the cause of the error an open breaker fails a call with.
var ErrOpen = errors.New("circuit breaker open")

// Activation: consumers whose URL sets `circuitbreaker`.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupConsumer}, Keys: []string{KeyEnabled}}
}

// New returns the filter. Its breakers live as long as the App; log hears
// when one opens or closes and of settings it cannot use.
func New(log *slog.Logger) *Filter {
	if log == nil {
		log = slog.Default()
	}
	return &Filter{log: log, now: time.Now}
}

// Filter holds a breaker per provider URL and method.
type Filter struct {
	log      *slog.Logger
	now      func() time.Time // a clock the tests move
	breakers sync.Map         // key -> *breaker
	count    atomic.Int64     // breakers made, bounded by maxBreakers
	stats    Stats
	warned   sync.Map // "key=value" of settings already reported
}

var _ extension.Filter = (*Filter)(nil)

// Stats are the filter's counts since the App started.
type Stats struct {
	Opened   atomic.Int64 // times a breaker opened (from closed or half-open)
	Closed   atomic.Int64 // times a breaker closed again after probes
	Rejected atomic.Int64 // calls failed at once by an open breaker
}

// Counts returns the Stats; Open is the number of breakers open now.
func (f *Filter) Counts() (opened, closed, rejected, open int64) {
	f.breakers.Range(func(_, v any) bool {
		if v.(*breaker).isOpen(f.now()) {
			open++
		}
		return true
	})
	return f.stats.Opened.Load(), f.stats.Closed.Load(), f.stats.Rejected.Load(), open
}

// maxBreakers bounds the breakers one App keeps (provider URLs times
// methods): a registry that lists ever new providers, or calls of ever new
// method names (generic calls take any), must not grow it for good. Past
// it, calls go unguarded rather than fail.
const maxBreakers = 100_000

type key struct{ url, method string }

func (f *Filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	if !u.MethodParamBool(inv.Method, KeyEnabled, true) {
		return next.Invoke(ctx, inv)
	}
	b := f.get(u, inv.Method)
	if b == nil {
		return next.Invoke(ctx, inv)
	}
	now := f.now()
	probe, err := b.allow(now, f)
	if err != nil {
		f.stats.Rejected.Add(1)
		return kernel.Result{}, err
	}
	res, err := next.Invoke(ctx, inv)
	end := f.now()
	if errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled {
		// The caller gave up (or forking canceled a slower fork): no
		// verdict on the provider. A probe's slot is given back.
		b.abandon(probe)
		return res, err
	}
	failed := err != nil && kernel.Retryable(err)
	b.record(end, end.Sub(now), failed, probe, f)
	return res, err
}

func (f *Filter) get(u *kernel.URL, method string) *breaker {
	k := key{u.String(), method}
	if v, ok := f.breakers.Load(k); ok {
		return v.(*breaker)
	}
	if f.count.Load() >= maxBreakers {
		return nil
	}
	b := newBreaker(f.settings(u, method), u.Address()+" "+u.ServiceKey()+"."+method)
	v, loaded := f.breakers.LoadOrStore(k, b)
	if !loaded {
		f.count.Add(1)
	}
	return v.(*breaker)
}

// settings reads the breaker's keys for method; a value it cannot use is
// reported once, with the key, what it wants and the default it takes.
func (f *Filter) settings(u *kernel.URL, method string) settings {
	intKey := func(k string, def, lo int64, want string) int64 {
		s := u.MethodParam(method, k)
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo {
			f.warn(k, s, fmt.Sprintf("want %s", want), strconv.FormatInt(def, 10))
			return def
		}
		return n
	}
	ratioKey := func(k string, def float64) float64 {
		s := u.MethodParam(method, k)
		if s == "" {
			return def
		}
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || !(r > 0 && r <= 1) {
			f.warn(k, s, "want a share in (0, 1], such as 0.5", strconv.FormatFloat(def, 'g', -1, 64))
			return def
		}
		return r
	}
	return settings{
		window:     time.Duration(intKey(KeyWindow, DefaultWindow, 10, "ms ≥ 10")) * time.Millisecond,
		minCalls:   intKey(KeyMinCalls, DefaultMinCalls, 1, "a number of calls ≥ 1"),
		errorRatio: ratioKey(KeyErrorRatio, DefaultErrorRatio),
		slowRT:     time.Duration(intKey(KeySlowRT, 0, 0, "ms ≥ 0 (0: slow calls not watched)")) * time.Millisecond,
		slowRatio:  ratioKey(KeySlowRatio, DefaultSlowRatio),
		open:       time.Duration(intKey(KeyOpen, DefaultOpen, 1, "ms ≥ 1")) * time.Millisecond,
		probes:     intKey(KeyProbes, DefaultProbes, 1, "a number of calls ≥ 1"),
	}
}

func (f *Filter) warn(k, v, want, def string) {
	if _, seen := f.warned.LoadOrStore(k+"="+v, true); seen {
		return
	}
	f.log.Error("weft: circuit breaker setting not usable; the default is used", "key", k, "value", v,
		"want", want, "default", def, "fix", "correct "+k+" in the reference's params or methods")
}
