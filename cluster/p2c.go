package cluster

import (
	"math/rand/v2"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// NewP2C returns power of two choices (dubbo-go's p2c): pick two distinct
// providers at random and take the less loaded: fewer calls in flight, then
// the lower average call time. Looking at two instead of all keeps the cost
// constant in the number of providers and avoids the herd that "always the
// least loaded" causes when load figures are stale.
//
// Load is read from stats as the consumer's activelimit filter counts it
// (scope: provider URL, method); a nil stats, or no such filter, leaves only
// randomness. Weights are not considered, as in dubbo-go. It does not
// allocate once the providers have been counted.
func NewP2C(stats *kernel.StatusStore) extension.LoadBalance {
	if stats == nil {
		stats = kernel.NewStatusStore()
	}
	return &p2c{stats: stats}
}

type p2c struct{ stats *kernel.StatusStore }

func (lb *p2c) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	n := len(invokers)
	switch n {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	var i, j int
	if n == 2 {
		// dubbo-go takes 0 and 1 in fixed order, which sends every tie to
		// the same provider; a random order keeps ties even.
		i = rand.IntN(2)
		j = 1 - i
	} else {
		i = rand.IntN(n)
		if j = rand.IntN(n - 1); j >= i {
			j++
		}
	}
	si := lb.stats.Get(invokers[i].URL().String(), inv.Method)
	sj := lb.stats.Get(invokers[j].URL().String(), inv.Method)
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
