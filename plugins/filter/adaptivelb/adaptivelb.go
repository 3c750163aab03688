// Package adaptivelb carries the load reports that the adaptive and p2c
// balancers decide on, in the attachments their models use, so that Java
// Dubbo and dubbo-go peers take part:
//
//   - the consumer filter adaptiveLoadBalance (Java's
//     AdaptiveLoadBalanceFilter), on references with `loadbalance:
//     adaptive` or `p2c`: it asks each call's provider for its load, takes
//     the answer into the App's cluster.AdaptiveMetrics, and strips it so
//     that the application never sees it;
//   - the provider filter profiler-server (the load-report half of Java's
//     ProfilerServerFilter), on every provider: it answers a call that
//     asks (lb_adaptive) with "curTime:<ms>,load:<load average × 100 /
//     CPUs>", as a Java provider does. dubbo-go's remaining capacity is
//     answered by the limiter that knows it (the padasvc filter).
package adaptivelb

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Names of the two filters, Java's.
const (
	Name         = "adaptiveLoadBalance"
	ProviderName = "profiler-server"
)

// Activation: consumers whose URL (or a method's) sets loadbalance adaptive
// or p2c; Java's order, early in the chain, so that the time measured is
// the call's.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupConsumer},
		Keys: []string{kernel.KeyLoadBalance + ":" + adaptiveLB, kernel.KeyLoadBalance + ":" + p2cLB}, Order: -200000}
}

// ProviderActivation: every provider, as Java's; a call that does not ask
// costs one attachment lookup.
func ProviderActivation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: -300000}
}

// New returns the consumer filter, which keeps what it learns in m.
func New(m extension.LoadReports) extension.Filter { return &consumer{m: m} }

type consumer struct{ m extension.LoadReports }

// The balancers' names (cluster.Adaptive, cluster.P2C): the filter works
// for them.
const (
	adaptiveLB = "adaptive"
	p2cLB      = "p2c"
)

func (f *consumer) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	switch u.MethodParam(inv.Method, kernel.KeyLoadBalance) {
	case adaptiveLB:
		key := u.String()
		inv.SetAttachment(extension.KeyAdaptiveLoad, extension.AdaptiveLoadRequest)
		f.m.Picked(key)
		start := time.Now()
		res, err := next.Invoke(ctx, inv)
		report, _ := res.Attachments[extension.KeyAdaptiveLoad].(string)
		delete(res.Attachments, extension.KeyAdaptiveLoad)
		// An answer, even a business error, is a success for the
		// balancer, as Java's onResponse; no answer is an error.
		if err != nil && kernel.CodeOf(err) != kernel.CodeBiz {
			f.m.Failed(key)
		} else {
			f.m.Answered(key, report, time.Since(start))
		}
		return res, err
	case p2cLB:
		inv.SetAttachment(extension.KeyAdaptiveService, "1")
		res, err := next.Invoke(ctx, inv)
		if rem, ok := number(res.Attachments[extension.KeyAdaptiveRemaining]); ok {
			inflight, _ := number(res.Attachments[extension.KeyAdaptiveInflight])
			f.m.SetRemaining(u.String(), inv.Method, rem, inflight)
		}
		delete(res.Attachments, extension.KeyAdaptiveRemaining)
		delete(res.Attachments, extension.KeyAdaptiveInflight)
		return res, err
	}
	return next.Invoke(ctx, inv)
}

// number reads a report's decimal string (dubbo-go sends a string; over
// Triple a header may come as a list of one).
func number(v any) (int64, bool) {
	switch s := v.(type) {
	case []string:
		if len(s) == 0 {
			return 0, false
		}
		return number(s[0])
	case string:
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// NewProvider returns the provider filter, reading the load average from
// the system (Linux's /proc/loadavg) at most once a second.
func NewProvider() extension.Filter { return &provider{load: newLoadAverage(readLoadAverage)} }

type provider struct{ load *loadAverage }

func (f *provider) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	if inv.AttachmentString(extension.KeyAdaptiveLoad) == "" {
		return next.Invoke(ctx, inv)
	}
	res, err := next.Invoke(ctx, inv)
	// Java answers on a result (a business exception included), not on a
	// framework failure.
	if err == nil || kernel.CodeOf(err) == kernel.CodeBiz {
		if res.Attachments == nil {
			res.Attachments = map[string]any{}
		}
		res.Attachments[extension.KeyAdaptiveLoad] = f.load.report(time.Now())
	}
	return res, err
}

// loadAverage caches the report's load figure: the system's one-minute
// load average × 100 / CPUs, Java's OperatingSystemMXBean figure. Reading
// it per call would cost a file read on every call; it moves on a scale
// of seconds.
type loadAverage struct {
	read func() (float64, bool)
	// at (unix ns) and bits (float64) of the last reading, stored
	// together under a tiny race: two callers may both read once.
	at   atomic.Int64
	bits atomic.Uint64
}

func newLoadAverage(read func() (float64, bool)) *loadAverage { return &loadAverage{read: read} }

// report is the lb_adaptive answer at now.
func (l *loadAverage) report(now time.Time) string {
	ns := now.UnixNano()
	if ns-l.at.Load() > int64(time.Second) {
		v, ok := l.read()
		if ok {
			v = v * 100 / float64(runtime.NumCPU())
		} else {
			// Java's getSystemLoadAverage where there is none; a
			// consumer reads it as 0.
			v = -1
		}
		l.bits.Store(floatBits(v))
		l.at.Store(ns)
	}
	// One allocation: the digits go straight into the builder's buffer.
	var num [32]byte
	var b strings.Builder
	b.Grow(48)
	b.WriteString("curTime:")
	b.Write(strconv.AppendInt(num[:0], now.UnixMilli(), 10))
	b.WriteString(",load:")
	b.Write(strconv.AppendFloat(num[:0], bitsFloat(l.bits.Load()), 'f', -1, 64))
	return b.String()
}
