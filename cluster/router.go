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
	chain atomic.Pointer[routerSet]
}

// routerSet is one snapshot of a chain: its routers in order, and those of
// them that set call policies (extension.PolicyRouter), so that a chain
// without any costs a call nothing to ask.
type routerSet struct {
	routers  []extension.Router
	policies []extension.PolicyRouter
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
	set := &routerSet{routers: rs}
	for _, r := range rs {
		if p, ok := r.(extension.PolicyRouter); ok {
			set.policies = append(set.policies, p)
		}
	}
	c.chain.Store(set)
}

// Routers returns the current routers, in order.
func (c *RouterChain) Routers() []extension.Router { return c.chain.Load().routers }

// Route narrows invokers for one call.
func (c *RouterChain) Route(invokers []kernel.Invoker, url *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	if c == nil {
		return invokers
	}
	for _, r := range c.chain.Load().routers {
		invokers = r.Route(invokers, url, inv)
		if len(invokers) == 0 {
			break
		}
	}
	return invokers
}

// CallPolicy is the policy of the first router, in order, that sets one
// for inv; nil: none.
func (c *RouterChain) CallPolicy(url *kernel.URL, inv *kernel.Invocation) *extension.CallPolicy {
	if c == nil {
		return nil
	}
	for _, p := range c.chain.Load().policies {
		if cp := p.CallPolicy(url, inv); cp != nil {
			return cp
		}
	}
	return nil
}

// Router kinds, the names of their factories.
const (
	ConditionRouterName = "condition"
	TagRouterName       = "tag"
)

// ConditionRouterFactory builds condition routers from URLs such as
// condition://0.0.0.0/org.example.Greeter?rule=host%3D10.0.0.1%20%3D%3E%20port%3D20881&force=true&priority=1
type ConditionRouterFactory struct{}

// GetRouter parses the URL's rule.
func (ConditionRouterFactory) GetRouter(u *kernel.URL) (extension.Router, error) {
	rule, err := ParseConditionRule(u.Param("rule"), u.ParamBool("force", false), int(u.ParamInt("priority", 0)))
	if err != nil {
		return nil, err
	}
	rule.Enabled = u.ParamBool("enabled", true)
	return NewConditionRouter(rule), nil
}

// TagRouterFactory builds the tag router; `priority` defaults to -100 so
// that it runs before condition rules, as in Dubbo.
type TagRouterFactory struct{}

// GetRouter returns a tag router; with a `tags` parameter (see
// ParseTagRule) it has a rule, and `force=true` makes the rule's tags strict.
func (TagRouterFactory) GetRouter(u *kernel.URL) (extension.Router, error) {
	prio := int(u.ParamInt("priority", -100))
	if u.Param("tags") == "" {
		return NewTagRouter(prio), nil
	}
	tags, err := ParseTagRule(u.Param("tags"))
	if err != nil {
		return nil, err
	}
	return NewTagRuleRouter(prio, tags, u.ParamBool("force", false))
}
