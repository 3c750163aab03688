package cluster

import (
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// NewLeastActive returns Dubbo's LeastActiveLoadBalance: among the providers
// with the fewest calls in flight from this consumer, pick by weight (Weight;
// uniform when equal). Slow providers accumulate active calls, so they get
// less new work without any timing.
//
// The active counts are the ones the consumer's activelimit filter keeps in
// stats (scope: provider URL, method); with that filter inactive every count
// is 0 and this is weighted random. A nil stats behaves so. It does not
// allocate once every provider has been counted.
func NewLeastActive(stats *kernel.StatusStore) extension.LoadBalance {
	if stats == nil {
		stats = kernel.NewStatusStore()
	}
	return &leastActive{stats: stats}
}

type leastActive struct{ stats *kernel.StatusStore }

func (lb *leastActive) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	switch len(invokers) {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	var (
		c     clock
		pick  tiePick
		least int64 = -1
	)
	for _, iv := range invokers {
		u := iv.URL()
		active := lb.stats.Get(u.String(), inv.Method).Active()
		switch {
		case least < 0 || active < least:
			least, pick = active, tiePick{}
			pick.add(iv, weightOf(u, inv.Method, &c))
		case active == least:
			pick.add(iv, weightOf(u, inv.Method, &c))
		}
	}
	return pick.result()
}
