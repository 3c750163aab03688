package cluster

import (
	"sort"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// RouterChain runs routers in priority order before load balancing. Its set
// of routers can be replaced at any time (rules pushed by a config center)
// without locking the call path: calls read an immutable snapshot.
type RouterChain struct {
	routers atomic.Pointer[[]extension.Router]
}

// NewRouterChain returns a chain of routers.
func NewRouterChain(routers ...extension.Router) *RouterChain {
	c := &RouterChain{}
	c.SetRouters(routers)
	return c
}

// SetRouters replaces the chain's routers.
func (c *RouterChain) SetRouters(routers []extension.Router) {
	rs := append([]extension.Router(nil), routers...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Priority() < rs[j].Priority() })
	c.routers.Store(&rs)
}

// Routers returns the current routers, in order.
func (c *RouterChain) Routers() []extension.Router { return *c.routers.Load() }

// Route narrows invokers for one call.
func (c *RouterChain) Route(invokers []kernel.Invoker, url *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	if c == nil {
		return invokers
	}
	for _, r := range *c.routers.Load() {
		invokers = r.Route(invokers, url, inv)
		if len(invokers) == 0 {
			break
		}
	}
	return invokers
}
