package cluster

import (
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// NewP2C returns power of two choices (dubbo-go's p2c): pick two distinct
// providers at random and take the less loaded. Looking at two instead of
// all keeps the cost constant in the number of providers and avoids the
// herd that "always the least loaded" causes when load figures are stale.
//
// Less loaded is, when both providers reported it in the last second, the
// one with more remaining capacity by its own concurrency limiter
// (dubbo-go's adaptive service: the adaptiveLoadBalance filter asks for it
// and keeps it in m); otherwise the one with fewer calls in flight from
// this consumer, then the lower average call time, as the consumer's
// activelimit filter counts them in stats (scope: provider URL, method).
// Nil stores, or neither filter, leave only randomness. Weights are not
// considered, as in dubbo-go. It does not allocate once the providers have
// been counted.
func NewP2C(stats *kernel.StatusStore, m *AdaptiveMetrics) extension.LoadBalance {
	if stats == nil {
		stats = kernel.NewStatusStore()
	}
	if m == nil {
		m = NewAdaptiveMetrics()
	}
	return &p2c{stats: stats, m: m}
}

type p2c struct {
	stats *kernel.StatusStore
	m     *AdaptiveMetrics
}

func (lb *p2c) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	n := len(invokers)
	switch n {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	// dubbo-go takes 0 and 1 in fixed order when there are two, which
	// sends every tie to the same provider; a random order keeps ties even.
	i, j := twoOf(n)
	ki, kj := invokers[i].URL().String(), invokers[j].URL().String()
	if ri, ok := lb.m.Remaining(ki, inv.Method); ok {
		if rj, ok := lb.m.Remaining(kj, inv.Method); ok && ri != rj {
			if rj > ri {
				return invokers[j]
			}
			return invokers[i]
		}
	}
	si := lb.stats.Get(ki, inv.Method)
	sj := lb.stats.Get(kj, inv.Method)
	if ai, aj := si.Active(), sj.Active(); ai != aj {
		if aj < ai {
			return invokers[j]
		}
		return invokers[i]
	}
	if sj.AverageElapsed() < si.AverageElapsed() {
		return invokers[j]
	}
	return invokers[i]
}
