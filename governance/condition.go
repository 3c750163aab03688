package governance

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/kernel"
)

// Where condition-rule routers go in a chain, after the tag router (-100)
// and in Java Dubbo 3's order (the @Activate orders of
// ServiceStateRouterFactory, AppStateRouterFactory): the service's rules,
// then the consumer application's.
const (
	ServiceConditionRouterPriority = 140
	AppConditionRouterPriority     = 150
)

// ConditionRules is a condition-router document, as Dubbo Admin writes it
// under "<RuleKey>.condition-router" (scope service) or
// "<application>.condition-router" (scope application, the consumer's):
//
//	configVersion: v3.0
//	scope: service
//	key: org.apache.dubbo.samples.DemoService::
//	enabled: true
//	force: false
//	runtime: true
//	conditions:
//	  - method = sayHello => host = 1.1.1.1
//
// Java: ConditionRuleParser, ConditionRouterRule, ListenableStateRouter.
type ConditionRules struct {
	// Version is configVersion; v2.7 when the document has none (as Java
	// reads it).
	Version string
	// Scope is service or application, "" when the document has none (Java
	// does not use it for condition rules; weft checks it against the key).
	Scope string
	// Key is the document's key field, informative: the config-center key
	// decides what the rules apply to.
	Key string
	// Enabled false: the document routes nothing (default true).
	Enabled bool
	// Force keeps a rule's empty result rather than ignoring the rule for
	// that call (default false).
	Force bool
	// Runtime is Java's route-cache switch (default true); weft routes every
	// call anyway, so it is informative.
	Runtime bool
	// Priority is read and kept; Java Dubbo 3 does not order by it, nor
	// does weft: the key's scope places the router (see the *Priority
	// constants).
	Priority int
	// Rules are the conditions, in the document's order; each has the
	// document's Force and Enabled.
	Rules []*cluster.ConditionRule
}

// ParseConditionRules parses a condition-router document. docKey is its
// config-center key (ConditionRouterKey), used in errors and to check the
// document's scope; "" skips that check. configVersion v2.7 and v3.0 are
// read (and none, as v2.7); v3.1's multi-destination rules are refused.
func ParseConditionRules(docKey string, data []byte) (*ConditionRules, error) {
	d := &ruleDoc{key: docKey}
	root, err := d.load(data)
	if err != nil {
		return nil, err
	}
	if v, ok, _ := d.str(root, "configVersion", ""); ok && strings.HasPrefix(strings.ToLower(v), RuleVersionV31) {
		n, _ := d.field(root, "configVersion", "")
		return nil, d.fail(n, "configVersion", "v2.7 or v3.0 (weft does not read v3.1 multi-destination rules)", v)
	}
	h, err := d.header(root, RuleVersionV27, RuleVersionV30)
	if err != nil {
		return nil, err
	}
	c := &ConditionRules{Version: h.version, Scope: h.scope, Key: h.key, Enabled: h.enabled, Force: h.force,
		Runtime: h.runtime, Priority: h.priority}
	items, err := d.list(root, "conditions", "")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// Java marks such a rule invalid and keeps routing by the previous one.
		n, _ := d.field(root, "conditions", "")
		return nil, d.fail(n, "conditions", "a list of at least one \"when => then\" rule", "")
	}
	for i, it := range items {
		p := fmt.Sprintf("conditions[%d]", i)
		if it.Kind != yaml.ScalarNode {
			return nil, d.fail(it, p, "a \"when => then\" string", kindName(it))
		}
		r, err := cluster.ParseConditionRule(it.Value, c.Force, c.Priority)
		if err != nil {
			e := d.fail(it, p, "a \"when => then\" rule", it.Value).(*RuleError)
			e.Err = err
			return nil, e
		}
		r.Enabled = c.Enabled
		c.Rules = append(c.Rules, r)
	}
	return c, nil
}

// Router returns the document as one router of the given priority
// (ServiceConditionRouterPriority or AppConditionRouterPriority): each rule
// narrows what the one before it left, as Java's ListenableStateRouter
// runs its ConditionStateRouters.
func (c *ConditionRules) Router(priority int) *ConditionRulesRouter {
	r := &ConditionRulesRouter{rules: c, priority: priority}
	for _, rule := range c.Rules {
		r.routers = append(r.routers, cluster.NewConditionRouter(rule))
	}
	return r
}

// ConditionRulesRouter routes by a ConditionRules document.
type ConditionRulesRouter struct {
	rules    *ConditionRules
	routers  []*cluster.ConditionRouter // one per rule, in order
	priority int
}

// Priority orders the router in a chain.
func (r *ConditionRulesRouter) Priority() int { return r.priority }

// Rules returns the document the router applies.
func (r *ConditionRulesRouter) Rules() *ConditionRules { return r.rules }

// Route applies every rule in turn.
func (r *ConditionRulesRouter) Route(invokers []kernel.Invoker, consumer *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	for _, cr := range r.routers {
		if len(invokers) == 0 {
			break
		}
		invokers = cr.Route(invokers, consumer, inv)
	}
	return invokers
}
