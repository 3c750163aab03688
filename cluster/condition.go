package cluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// ConditionRule is one of Dubbo's condition routing rules,
// "when => then": calls matching when go only to providers matching then.
//
//	method = sayHello & host = 10.0.0.* => host = 10.0.1.1,10.0.1.2
//	=> port != 20881                       (when empty: every call)
//	arguments[0] = vip => attachments[zone] = ...
//
// On the when side, host is the consumer's; on the then side, the
// provider's. Keys: method, host, port, address, arguments[i],
// attachments[k], or any URL parameter. Values may be comma lists and may
// use '*' as a wildcard; '!=' negates; '&' joins conditions.
type ConditionRule struct {
	// Rule is the text of the rule.
	Rule string
	// Force keeps an empty result; otherwise a rule that would leave no
	// provider is ignored for that call (Dubbo's force=false).
	Force bool
	// Priority orders routers: lower runs first.
	Priority int
	// Enabled false switches the rule off without removing it.
	Enabled bool

	when, then []condition
}

type condition struct {
	key    string
	index  string // for arguments[i] and attachments[k]
	neg    bool
	values []string
}

// ParseConditionRule parses a rule; the error names what is wrong.
func ParseConditionRule(rule string, force bool, priority int) (*ConditionRule, error) {
	r := &ConditionRule{Rule: rule, Force: force, Priority: priority, Enabled: true}
	when, then, ok := strings.Cut(rule, "=>")
	if !ok {
		return nil, fmt.Errorf("condition rule %q: want \"when => then\"", rule)
	}
	var err error
	if r.when, err = parseConditions(when); err != nil {
		return nil, fmt.Errorf("condition rule %q, when side: %w", rule, err)
	}
	if r.then, err = parseConditions(then); err != nil {
		return nil, fmt.Errorf("condition rule %q, then side: %w", rule, err)
	}
	return r, nil
}

func parseConditions(s string) ([]condition, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []condition
	for _, part := range strings.Split(s, "&") {
		part = strings.TrimSpace(part)
		var c condition
		var k, v string
		if i := strings.Index(part, "!="); i >= 0 {
			k, v, c.neg = part[:i], part[i+2:], true
		} else if i := strings.IndexByte(part, '='); i >= 0 {
			k, v = part[:i], part[i+1:]
		} else {
			return nil, fmt.Errorf("condition %q: want key=value or key!=value", part)
		}
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, fmt.Errorf("condition %q has no key", part)
		}
		if open := strings.IndexByte(k, '['); open >= 0 && strings.HasSuffix(k, "]") {
			c.key, c.index = k[:open], k[open+1:len(k)-1]
			if c.key != "arguments" && c.key != "attachments" {
				return nil, fmt.Errorf("condition %q: only arguments[i] and attachments[k] take an index", part)
			}
			if c.key == "arguments" {
				if _, err := strconv.Atoi(c.index); err != nil {
					return nil, fmt.Errorf("condition %q: argument index %q is not a number", part, c.index)
				}
			}
		} else {
			c.key = k
		}
		for _, val := range strings.Split(v, ",") {
			if val = strings.TrimSpace(val); val != "" {
				c.values = append(c.values, val)
			}
		}
		if len(c.values) == 0 {
			return nil, fmt.Errorf("condition %q has no value", part)
		}
		out = append(out, c)
	}
	return out, nil
}

// ConditionRouter applies one ConditionRule.
type ConditionRouter struct{ rule *ConditionRule }

// NewConditionRouter routes by rule.
func NewConditionRouter(rule *ConditionRule) *ConditionRouter { return &ConditionRouter{rule: rule} }

// Priority orders the router in a chain.
func (r *ConditionRouter) Priority() int { return r.rule.Priority }

// Route keeps the providers the rule's then side allows, for calls its when
// side matches.
func (r *ConditionRouter) Route(invokers []kernel.Invoker, consumer *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	rule := r.rule
	if !rule.Enabled || len(invokers) == 0 {
		return invokers
	}
	if !matchAll(rule.when, consumer, inv) {
		return invokers
	}
	if len(rule.then) == 0 {
		// "when =>" with nothing after it: these calls go nowhere.
		if rule.Force {
			return nil
		}
		return invokers
	}
	out := make([]kernel.Invoker, 0, len(invokers))
	for _, iv := range invokers {
		if matchAll(rule.then, iv.URL(), inv) {
			out = append(out, iv)
		}
	}
	if len(out) == 0 && !rule.Force {
		return invokers
	}
	return out
}

func matchAll(conds []condition, u *kernel.URL, inv *kernel.Invocation) bool {
	for _, c := range conds {
		if !c.match(u, inv) {
			return false
		}
	}
	return true
}

func (c condition) match(u *kernel.URL, inv *kernel.Invocation) bool {
	var v string
	switch c.key {
	case "method":
		if inv != nil {
			v = inv.Method
		}
	case "host":
		if u != nil {
			v = u.Host
		}
	case "port":
		if u != nil {
			v = strconv.Itoa(u.Port)
		}
	case "address":
		if u != nil {
			v = u.Address()
		}
	case "protocol":
		if u != nil {
			v = u.Protocol
		}
	case "arguments":
		i, _ := strconv.Atoi(c.index)
		if inv != nil && i >= 0 && i < len(inv.Args) {
			v = view.Text(inv.Args[i])
		}
	case "attachments":
		if inv != nil {
			v = inv.AttachmentString(c.index)
		}
	default:
		if u != nil {
			v = u.Param(c.key)
			if inv != nil {
				v = u.MethodParam(inv.Method, c.key)
			}
		}
	}
	hit := false
	for _, pattern := range c.values {
		if wildcard(pattern, v) {
			hit = true
			break
		}
	}
	return hit != c.neg
}

// wildcard matches value against a pattern where '*' stands for any run of
// characters (Dubbo's UrlUtils.isMatchGlobPattern).
func wildcard(pattern, value string) bool {
	if pattern == "*" {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return pattern == value
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(value, parts[0]) {
		return false
	}
	value = value[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(value, p)
		if i < 0 {
			return false
		}
		value = value[i+len(p):]
	}
	return strings.HasSuffix(value, last)
}
