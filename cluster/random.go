package cluster

import (
	"math/rand/v2"
	"slices"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Random is the name of the weighted random load balancer, Dubbo's default.
const Random = "random"

// NewRandom returns Dubbo's default load balancer: random, proportional to each
// provider's weight (warm-up included, see Weight), uniform when all weights
// are equal or all zero. It keeps no state and does not allocate.
func NewRandom() extension.LoadBalance { return randomLB{} }

type randomLB struct{}

// randomStack is how many cumulative weights Select keeps on its stack; longer
// lists weigh their providers a second time instead (same instant, same
// result) rather than allocate.
const randomStack = 128

func (randomLB) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	n := len(invokers)
	switch n {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	var (
		c     clock
		buf   [randomStack]int64
		cum   []int64
		total int64
		first int64
		same  = true
	)
	if n <= randomStack {
		cum = buf[:n]
	}
	for i, iv := range invokers {
		w := weightOf(iv.URL(), inv.Method, &c)
		total += w
		if cum != nil {
			cum[i] = total
		}
		if i == 0 {
			first = w
		} else if w != first {
			same = false
		}
	}
	if total > 0 && !same {
		off := rand.Int64N(total)
		if cum != nil {
			// The first provider whose cumulative weight exceeds off.
			i, _ := slices.BinarySearch(cum, off+1)
			return invokers[i]
		}
		for _, iv := range invokers {
			if off -= weightOf(iv.URL(), inv.Method, &c); off < 0 {
				return iv
			}
		}
	}
	return invokers[rand.IntN(n)]
}
