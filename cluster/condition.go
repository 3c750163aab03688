package cluster

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// ConditionRule is one of Dubbo's condition routing rules, "when => then":
// calls matching when go only to providers matching then. The syntax and
// its meaning are Java Dubbo 3's ConditionStateRouter:
//
//	method = sayHello & host = 10.0.0.* => host = 10.0.1.1,10.0.1.2
//	=> port != 20881                     (when empty or "true": every call)
//	host = 10.0.0.1                      (no "=>": the whole rule is then)
//	method = echo =>                     (then empty or "false": no provider)
//	arguments[0] = vip => attachments[zone] = ...  (a ~ range: 1~100, ~100)
//	=> region = $region                  (then side: the consumer's region)
//
// On the when side keys read the consumer URL (method: the called method);
// on the then side, each provider's URL. Keys: host, port, address,
// protocol, path, username, password, method, arguments[i], attachments[k],
// or any URL parameter; "consumer." and "provider." prefixes are dropped.
// Values are comma lists and may use a '*' glob (Dubbo's: only the last '*'
// is a wildcard); '!=' negates; '&' (or a space) joins conditions, all of
// which must hold. A key the URL or call does not have never holds, for '='
// as for '!='.
type ConditionRule struct {
	// Rule is the text of the rule.
	Rule string
	// Force keeps an empty result; otherwise a rule that would leave no
	// provider is ignored for that call (Dubbo's force=false). A then side
	// that is empty is not a result: it always means no provider.
	Force bool
	// Priority orders routers: lower runs first.
	Priority int
	// Enabled false switches the rule off without removing it.
	Enabled bool

	when   []*condMatcher // empty: every call
	then   []*condMatcher
	noThen bool // blank or "false" then side: matching calls get no provider
}

const (
	condParam = iota
	condMethod
	condArgument
	condAttachment
)

// condMatcher is one key of a side with its match and mismatch patterns
// (Java's AbstractConditionMatcher).
type condMatcher struct {
	key        string
	kind       int
	arg        int    // condArgument: the index
	attachment string // condAttachment: the attachment's name
	matches    []string
	mismatches []string
}

// routePattern is Java's ConditionStateRouter.ROUTE_PATTERN.
var routePattern = regexp.MustCompile(`([&!=,]*)\s*([^&!=,\s]+)`)

var (
	argumentsKey   = regexp.MustCompile(`^arguments\[([0-9]+)\]`)
	attachmentsKey = regexp.MustCompile(`^attachments\[(.+)\]`)
)

// ParseConditionRule parses a rule; the error names what is wrong.
func ParseConditionRule(rule string, force bool, priority int) (*ConditionRule, error) {
	r := &ConditionRule{Rule: rule, Force: force, Priority: priority, Enabled: true}
	if strings.TrimSpace(rule) == "" {
		return nil, fmt.Errorf("condition rule is empty: want \"when => then\"")
	}
	text := strings.ReplaceAll(strings.ReplaceAll(rule, "consumer.", ""), "provider.", "")
	when, then, ok := strings.Cut(text, "=>")
	if !ok {
		when, then = "", text
	}
	when, then = strings.TrimSpace(when), strings.TrimSpace(then)
	var err error
	if when != "" && when != "true" {
		if r.when, err = parseConditions(when); err != nil {
			return nil, fmt.Errorf("condition rule %q, when side: %w", echo(rule), err)
		}
	}
	if then == "" || then == "false" {
		r.noThen = true
	} else if r.then, err = parseConditions(then); err != nil {
		return nil, fmt.Errorf("condition rule %q, then side: %w", echo(rule), err)
	}
	return r, nil
}

// parseConditions is Java's ConditionStateRouter.parseRule, stricter in one
// way: a key with no value (Java: a condition that never holds, so
// "method => ..." silently routes nothing) is an error.
func parseConditions(s string) ([]*condMatcher, error) {
	var out []*condMatcher
	byKey := map[string]*condMatcher{}
	var cur *condMatcher
	var values *[]string
	for _, m := range routePattern.FindAllStringSubmatchIndex(s, -1) {
		sep, content := s[m[2]:m[3]], s[m[4]:m[5]]
		switch sep {
		case "", "&":
			if c, ok := byKey[content]; ok && sep == "&" {
				cur = c
				break
			}
			c, err := newCondMatcher(content)
			if err != nil {
				return nil, err
			}
			if prev, ok := byKey[content]; ok {
				// Java's map keeps the later matcher for the key.
				for i := range out {
					if out[i] == prev {
						out = append(out[:i], out[i+1:]...)
						break
					}
				}
			}
			byKey[content] = c
			out = append(out, c)
			cur, values = c, nil
		case "=", "!=":
			if cur == nil {
				return nil, fmt.Errorf("%q at index %d before %q: a value needs a key", sep, m[2], echo(content))
			}
			if sep == "=" {
				values = &cur.matches
			} else {
				values = &cur.mismatches
			}
			*values = append(*values, content)
		case ",":
			if values == nil || len(*values) == 0 {
				return nil, fmt.Errorf("',' at index %d before %q: a list needs a first value", m[2], echo(content))
			}
			*values = append(*values, content)
		default:
			return nil, fmt.Errorf("%q at index %d before %q: want '=', '!=', ',' or '&'", sep, m[2], echo(content))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q has no condition: want key=value or key!=value", echo(s))
	}
	for _, c := range out {
		if len(c.matches) == 0 && len(c.mismatches) == 0 {
			return nil, fmt.Errorf("condition %q has no value: want key=value or key!=value", echo(c.key))
		}
	}
	return out, nil
}

func newCondMatcher(key string) (*condMatcher, error) {
	c := &condMatcher{key: key}
	switch {
	case strings.HasPrefix(key, "attachments"):
		m := attachmentsKey.FindStringSubmatch(strings.Split(key, ".")[0])
		if m == nil {
			return nil, fmt.Errorf("condition key %q: want attachments[name]", echo(key))
		}
		c.kind, c.attachment = condAttachment, m[1]
	case strings.HasPrefix(key, "arguments"):
		m := argumentsKey.FindStringSubmatch(strings.Split(key, ".")[0])
		if m == nil {
			return nil, fmt.Errorf("condition key %q: want arguments[index]", echo(key))
		}
		i, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("condition key %q: argument index is not a number", echo(key))
		}
		c.kind, c.arg = condArgument, i
	case key == "method" || key == "methods":
		c.kind = condMethod
	default:
		c.kind = condParam
	}
	return c, nil
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
	return r.rule.route(invokers, consumer, inv)
}

func (rule *ConditionRule) route(invokers []kernel.Invoker, consumer *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	if !rule.Enabled || len(invokers) == 0 {
		return invokers
	}
	for _, c := range rule.when {
		if !c.match(consumer, nil, inv, true) {
			return invokers
		}
	}
	if rule.noThen {
		// "when =>": these calls go nowhere (Java: whatever force says).
		return nil
	}
	out := make([]kernel.Invoker, 0, len(invokers))
next:
	for _, iv := range invokers {
		for _, c := range rule.then {
			if !c.match(iv.URL(), consumer, nil, false) {
				continue next
			}
		}
		out = append(out, iv)
	}
	if len(out) == 0 && !rule.Force {
		return invokers
	}
	return out
}

// urlValue is what Java reads from URL.toOriginalMap: the parameters and
// the URL's own parts (port only when set).
func urlValue(u *kernel.URL, key string) (string, bool) {
	if u == nil {
		return "", false
	}
	switch key {
	case "protocol":
		return u.Protocol, true
	case "username":
		return u.Username, u.Username != ""
	case "password":
		return u.Password, u.Password != ""
	case "host":
		return u.Host, true
	case "port":
		if u.Port > 0 {
			return strconv.Itoa(u.Port), true
		}
	case "path":
		return u.Path, true
	case "address":
		return u.Address(), true
	}
	return u.Lookup(key)
}

// rawValue is Java's URL.getRawParameter, what "$key" patterns read.
func rawValue(u *kernel.URL, key string) (string, bool) {
	if key == "port" {
		return strconv.Itoa(u.Port), true
	}
	if key == "address" {
		return u.Lookup(key)
	}
	return urlValue(u, key)
}

// match is Java's AbstractConditionMatcher.isMatch; param is the consumer
// URL on the then side ($ references), nil on the when side.
func (c *condMatcher) match(u, param *kernel.URL, inv *kernel.Invocation, when bool) bool {
	var v string
	var ok bool
	switch c.kind {
	case condMethod:
		if inv != nil {
			v, ok = methodName(inv), true
		} else {
			v, ok = urlValue(u, c.key)
		}
	case condArgument:
		if inv != nil && c.arg < len(inv.Args) {
			if inv.Args[c.arg] == nil {
				v = "null"
			} else {
				v = view.Text(inv.Args[c.arg])
			}
		} else {
			// Java: a marker value that no pattern but '*' matches.
			v = "dubbo_internal_not_found_argument_condition_value"
		}
		ok = true
	case condAttachment:
		if inv != nil {
			if a, has := inv.Attachment(c.attachment); has && a != nil {
				v, ok = view.Text(a), true
			}
		}
	default:
		v, ok = urlValue(u, c.key)
	}
	if !ok {
		return false
	}
	for _, p := range c.mismatches {
		if patternMatch(p, v, param, when) {
			return false
		}
	}
	if len(c.matches) == 0 {
		return true
	}
	for _, p := range c.matches {
		if patternMatch(p, v, param, when) {
			return true
		}
	}
	return false
}

// methodName is Java's RpcUtils.getMethodName: a generic call's real method.
func methodName(inv *kernel.Invocation) string {
	if (inv.Method == "$invoke" || inv.Method == "$invokeAsync") && len(inv.Args) > 0 {
		if s, ok := inv.Args[0].(string); ok {
			return s
		}
	}
	return inv.Method
}

// patternMatch is Java's value patterns: a range when the pattern has '~'
// (RangeValuePattern), else a glob (WildcardValuePattern) where "$key" on
// the then side stands for the consumer's value of key.
func patternMatch(pattern, value string, param *kernel.URL, when bool) bool {
	if strings.Contains(pattern, "~") {
		return rangeMatch(pattern, value, !when)
	}
	if param != nil && strings.HasPrefix(pattern, "$") {
		p, ok := rawValue(param, pattern[1:])
		if !ok {
			// Java: a null pattern matches nothing.
			return false
		}
		pattern = p
	}
	return GlobMatch(pattern, value)
}

// rangeMatch is Java's RangeValuePattern, quirks included: what cannot be
// read as a range (a non-number bound, "1~" whose end Java's split drops)
// gives def, true on the then side and false on the when side; a value
// that is not a number is 0.
func rangeMatch(pattern, value string, def bool) bool {
	n := parseJavaInt(value)
	parts := strings.Split(pattern, "~")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1] // Java's String.split drops trailing empties
	}
	if len(parts) < 2 {
		return def
	}
	start, end := parts[0], parts[1]
	bound := func(s string) (int64, bool) {
		if !isDigits(s) {
			return 0, true
		}
		b, err := strconv.ParseInt(s, 10, 32)
		return b, err == nil
	}
	if start != "" {
		s, ok := bound(start)
		if !ok {
			return def
		}
		if n < s {
			return false
		}
	}
	if end != "" {
		e, ok := bound(end)
		if !ok {
			return def
		}
		if n > e {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseJavaInt(s string) int64 {
	if !isDigits(s) {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0
	}
	return n
}

// maxEcho bounds what an error quotes of a rule.
const maxEcho = 64

// echo cuts s to maxEcho bytes on a rune boundary, marking the cut, so a
// huge rule does not become a huge error.
func echo(s string) string { return Echo(s) }

// Echo is s as an error quotes it: cut to maxEcho bytes on a rune
// boundary, with the cut marked (governance's rule errors quote alike).
func Echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
