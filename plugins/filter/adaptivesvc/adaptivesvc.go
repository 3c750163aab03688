// Package adaptivesvc is a provider's adaptive concurrency limit: the
// padasvc filter (dubbo-go's name) keeps, per service and method, a limit
// on the calls running at once that it moves with the latency it sees, and
// sheds a call over it at once with a limit-exceeded error (Dubbo status
// 100 over dubbo, RESOURCE_EXHAUSTED over tri), which failover retries on
// another provider. Unlike `executes`, nobody has to know the right
// number: the limit finds where latency starts to grow, and follows it
// when the service slows down or speeds up.
//
// `limiter` on a service (or `<method>.limiter`) chooses the algorithm:
//
//   - gradient: Envoy's adaptive concurrency gradient controller (keys
//     limiter.*, below). It sheds before latency collapses and is the one
//     to use.
//   - hillClimbing: dubbo-go's, as dubbo-go's `adaptive-service: true`
//     runs it, for fleets that mix weft and dubbo-go providers.
//
// A call that carries dubbo-go's adaptive-service.enabled = "1" (weft's p2c
// balancer sends it) is answered with the limit's remaining capacity and
// the calls in flight (adaptive-service.remaining, .inflight), which p2c
// balances on.
package adaptivesvc

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

// Name is the filter's extension name, dubbo-go's.
const Name = "padasvc"

// Limiter names (values of KeyLimiter).
const (
	Gradient     = "gradient"
	HillClimbing = "hillClimbing"
)

// Keys, on a service or per method as `<method>.<key>`. The gradient
// limiter's are Envoy's fields; their defaults are Envoy's.
const (
	KeyLimiter         = "limiter"
	KeyUpdateInterval  = "limiter.update.interval"                        // ms; concurrency_update_interval
	KeyPercentile      = "limiter.percentile"                             // sample_aggregate_percentile
	KeyMaxConcurrency  = "limiter.max.concurrency"                        // max_concurrency_limit
	KeyMinRTTInterval  = "limiter.min.rtt.interval"                       // ms; min_rtt_calc_params.interval
	KeyMinRTTRequests  = "limiter.min.rtt.requests"                       // request_count
	KeyJitter          = "limiter.jitter"                                 // percent
	KeyMinConcurrency  = "limiter.min.concurrency"                        // min_concurrency
	KeyBuffer          = "limiter.buffer"                                 // percent
	KeyFixedMinRTT     = "limiter.min.rtt"                                // ms; fixed_value, 0: measured
	DefaultUpdate      = 100                                              // ms
	DefaultPercentile  = 50                                               // percent
	DefaultMaxLimit    = 1000                                             // calls
	DefaultMinRTTEvery = 60000                                            // ms
	DefaultMinRTTCalls = 50                                               // calls
	DefaultJitter      = 15                                               // percent
	DefaultMinLimit    = 3                                                // calls
	DefaultBuffer      = 25                                               // percent
	ShedMessage        = "adaptive service interrupted: reach limitation" // dubbo-go's text
)

// ErrShed is the cause of the error a shed call fails with.
var ErrShed = errors.New(ShedMessage)

// Activation: providers whose URL (or a method's) sets `limiter`. It runs
// inside the other provider filters, so that the latency it measures is
// the service's.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Keys: []string{KeyLimiter}, Order: 100000}
}

// limiter is one algorithm's state for one service method.
type limiter interface {
	Acquire(now time.Time) bool
	// Release ends a call that Acquire let in; sample false when it says
	// nothing of the service's latency (canceled).
	Release(start, now time.Time, sample bool)
	Remaining() int64
	Inflight() int64
	Limit() int64
}

// New returns the filter; log hears of settings it cannot use.
func New(log *slog.Logger) *Filter {
	if log == nil {
		log = slog.Default()
	}
	return &Filter{log: log, now: time.Now}
}

// Filter holds a limiter per service and method.
type Filter struct {
	log      *slog.Logger
	now      func() time.Time
	limiters sync.Map // key -> limiter (nil interface: none, bad name)
	count    atomic.Int64
	shed     atomic.Int64
	warned   sync.Map
}

var _ extension.Filter = (*Filter)(nil)

// maxLimiters bounds the limiters one App keeps: generic calls may name
// any method. Past it, calls go unlimited rather than fail.
const maxLimiters = 100_000

type key struct{ service, method string }

func (f *Filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	l := f.get(u, inv.Method)
	if l == nil {
		return next.Invoke(ctx, inv)
	}
	start := f.now()
	if !l.Acquire(start) {
		f.shed.Add(1)
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeLimitExceeded, Cause: ErrShed,
			Msg: fmt.Sprintf("provider %s method %s runs %d calls, its adaptive limit (%s) is %d; retry on another provider, or add providers",
				u.ServiceKey(), inv.Method, l.Inflight(), u.MethodParam(inv.Method, KeyLimiter), l.Limit())}
	}
	res, err := next.Invoke(ctx, inv)
	canceled := errors.Is(err, context.Canceled)
	l.Release(start, f.now(), !canceled)
	if inv.AttachmentString(extension.KeyAdaptiveService) == "1" {
		if res.Attachments == nil {
			res.Attachments = map[string]any{}
		}
		res.Attachments[extension.KeyAdaptiveRemaining] = strconv.FormatInt(l.Remaining(), 10)
		res.Attachments[extension.KeyAdaptiveInflight] = strconv.FormatInt(l.Inflight(), 10)
	}
	return res, err
}

// Shed returns how many calls the filter has shed since the App started.
func (f *Filter) Shed() int64 { return f.shed.Load() }

// Limits calls fn with each limiter's service, method, limit and calls in
// flight (QoS and metrics).
func (f *Filter) Limits(fn func(service, method string, limit, inflight int64)) {
	f.limiters.Range(func(k, v any) bool {
		if l, ok := v.(limiter); ok && l != nil {
			fn(k.(key).service, k.(key).method, l.Limit(), l.Inflight())
		}
		return true
	})
}

func (f *Filter) get(u *kernel.URL, method string) limiter {
	k := key{u.ServiceKey(), method}
	if v, ok := f.limiters.Load(k); ok {
		l, _ := v.(limiter)
		return l
	}
	if f.count.Load() >= maxLimiters {
		return nil
	}
	var l limiter
	switch name := u.MethodParam(method, KeyLimiter); name {
	case Gradient:
		l = newGradient(f.settings(u, method), f.now())
	case HillClimbing:
		l = newHillClimbing(f.now())
	case "", "false":
	default:
		f.warnOnce(KeyLimiter, name, fmt.Sprintf("want %s or %s", Gradient, HillClimbing), "no limit")
	}
	v, loaded := f.limiters.LoadOrStore(k, l)
	if !loaded {
		f.count.Add(1)
	}
	l, _ = v.(limiter)
	return l
}

// settings reads the gradient limiter's keys for method; a value it cannot
// use is reported once, with the key, what it wants and the default taken.
func (f *Filter) settings(u *kernel.URL, method string) gradientSettings {
	num := func(k string, def, lo, hi int64, want string) int64 {
		s := u.MethodParam(method, k)
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			f.warnOnce(k, s, want, strconv.FormatInt(def, 10))
			return def
		}
		return n
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	s := gradientSettings{
		update:      ms(num(KeyUpdateInterval, DefaultUpdate, 1, 1<<31, "ms ≥ 1")),
		percentile:  float64(num(KeyPercentile, DefaultPercentile, 1, 100, "a percentile in [1, 100]")) / 100,
		maxLimit:    num(KeyMaxConcurrency, DefaultMaxLimit, 1, 1<<31, "calls ≥ 1"),
		minRTTEvery: ms(num(KeyMinRTTInterval, DefaultMinRTTEvery, 1, 1<<31, "ms ≥ 1")),
		minRTTCalls: int(num(KeyMinRTTRequests, DefaultMinRTTCalls, 1, 1<<20, "calls ≥ 1")),
		jitter:      float64(num(KeyJitter, DefaultJitter, 0, 100, "a percent in [0, 100]")) / 100,
		minLimit:    num(KeyMinConcurrency, DefaultMinLimit, 1, 1<<31, "calls ≥ 1"),
		buffer:      float64(num(KeyBuffer, DefaultBuffer, 0, 1000, "a percent in [0, 1000]")) / 100,
		fixedMinRTT: ms(num(KeyFixedMinRTT, 0, 0, 1<<31, "ms ≥ 0 (0: measured)")),
	}
	if s.minLimit > s.maxLimit {
		f.warnOnce(KeyMinConcurrency, strconv.FormatInt(s.minLimit, 10), "at most "+KeyMaxConcurrency, strconv.FormatInt(s.maxLimit, 10))
		s.minLimit = s.maxLimit
	}
	return s
}

func (f *Filter) warnOnce(k, v, want, def string) {
	if _, seen := f.warned.LoadOrStore(k+"="+v, true); seen {
		return
	}
	f.log.Error("weft: adaptive limiter setting not usable", "key", k, "value", v,
		"want", want, "taking", def, "fix", "correct "+k+" in the service's params or methods")
}
