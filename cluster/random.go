package cluster

import (
	"math/rand/v2"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Random is the name of the weighted random load balancer.
const Random = "random"

// DefaultWeight is a provider's weight when its URL sets none.
const DefaultWeight = 100

// NewRandom returns Dubbo's default load balancer: random, proportional to each
// provider's `weight`. It does not allocate.
func NewRandom() extension.LoadBalance { return randomLB{} }

type randomLB struct{}

func (randomLB) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	n := len(invokers)
	if n == 1 {
		return invokers[0]
	}
	total, first := int64(0), int64(-1)
	same := true
	for _, iv := range invokers {
		w := Weight(iv.URL(), inv.Method)
		total += w
		if first < 0 {
			first = w
		} else if w != first {
			same = false
		}
	}
	if total > 0 && !same {
		off := rand.Int64N(total)
		for _, iv := range invokers {
			off -= Weight(iv.URL(), inv.Method)
			if off < 0 {
				return iv
			}
		}
	}
	return invokers[rand.IntN(n)]
}

// Weight is a provider's configured weight for method (method-level first),
// DefaultWeight when unset; never negative.
func Weight(u *kernel.URL, method string) int64 {
	w := u.MethodParamInt(method, kernel.KeyWeight, DefaultWeight)
	if w < 0 {
		return 0
	}
	return w
}
