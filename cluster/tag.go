package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Tag routing keys, Dubbo's.
const (
	// KeyTag on a provider URL labels it (gray, canary, a tenant...); as a
	// call attachment, or on the consumer URL, it asks for providers of
	// that label.
	KeyTag = "dubbo.tag"
	// KeyForceTag as a call attachment, or on the consumer URL, ("true")
	// forbids falling back to untagged providers when none carries the tag.
	KeyForceTag = "dubbo.force.tag"
)

// TagRules is the rule of a tag router: which providers carry which tag,
// whatever their URLs' own dubbo.tag say. It comes from a tag router URL's
// `tags` parameter (NewTagRuleRouter) or from a tag-router document of
// Dubbo Admin, which the governance package reads (governance.ParseTagRules).
//
// A tag's providers are those at its addresses (IP patterns: "*", CIDR,
// 10.0.*.1-9, with or without :port; 0.0.0.0:port for a port on any host)
// or, for a tag without addresses, those whose URL parameters satisfy
// every match. Java: TagRouterRule, Tag, ParamMatch.
type TagRules struct {
	// Version is the document's configVersion ("v2.7", "v3.0").
	Version string
	// Key is the document's key field (the provider application).
	Key string
	// Enabled false: the rule is ignored and providers' own dubbo.tag
	// decide (default true).
	Enabled bool
	// Force: a call whose tag the rule names gets only that tag's
	// providers, none when they are gone (default false: it falls back).
	Force bool
	// Runtime, Priority: read and kept; informative in weft (Java Dubbo 3
	// does not order by priority either).
	Runtime  bool
	Priority int
	// Tags, in the document's order.
	Tags []Tag
}

// Tag is one tag of a rule.
type Tag struct {
	Name      string
	Addresses []*IPPattern
	// Match selects providers by URL parameters (v3.0; used when Addresses
	// is empty).
	Match []ParamMatch
}

// Router returns a tag router applying the rule; priority as for
// NewTagRouter.
func (r *TagRules) Router(priority int) *TagRouter {
	t := &TagRouter{priority: priority, rule: r}
	for _, tag := range r.Tags {
		if len(tag.Addresses) == 0 && len(tag.Match) > 0 {
			t.dynamic = true
		}
	}
	if !t.dynamic {
		t.static = r.tagSets(nil)
	}
	return t
}

// tagSet is the providers of one tag: address patterns, or the addresses of
// the providers a match selected.
type tagSet struct {
	patterns []*IPPattern
	exact    map[string]bool
}

func (s *tagSet) has(u *kernel.URL) bool {
	if s.exact != nil {
		return s.exact[u.Address()]
	}
	for _, p := range s.patterns {
		// Java also takes "0.0.0.0:port" for that port on any host.
		if p.Match(u.Host, u.Port) || (p.literal && p.host == "0.0.0.0" && p.port == strconv.Itoa(u.Port)) {
			return true
		}
	}
	return false
}

// tagSets is Java's TagRouterRule.init: tag name to its providers, the
// address tags first, then (v3.0) the match tags against invokers; a match
// tag that selects nobody is not set.
type tagSets map[string]*tagSet

func (r *TagRules) tagSets(invokers []kernel.Invoker) tagSets {
	out := tagSets{}
	for _, t := range r.Tags {
		if len(t.Addresses) > 0 {
			out[t.Name] = &tagSet{patterns: t.Addresses}
		}
	}
	for _, t := range r.Tags {
		if len(t.Addresses) > 0 || len(t.Match) == 0 {
			continue
		}
		set := &tagSet{exact: map[string]bool{}}
	next:
		for _, iv := range invokers {
			for _, m := range t.Match {
				if !m.Match(iv.URL()) {
					continue next
				}
			}
			set.exact[iv.URL().Address()] = true
		}
		if len(set.exact) > 0 {
			out[t.Name] = set
		}
	}
	return out
}

// inAny reports whether u is a provider of any tag of the rule (Java's
// TagRouterRule.getAddresses).
func (s tagSets) inAny(u *kernel.URL) bool {
	for _, set := range s {
		if set.has(u) {
			return true
		}
	}
	return false
}

// selectByLevel is Java's TagStateRouter.selectAddressByTagLevel: a tag
// "beta|team1|partner1" falls back to "beta|team1", then "beta", unless the
// call forces its tag. nil: the rule does not set the tag.
func (s tagSets) selectByLevel(tag string, force bool) *tagSet {
	if force || !strings.Contains(tag, "|") {
		return s[tag]
	}
	parts := strings.Split(tag, "|")
	for i := len(parts); i > 0; i-- {
		if set := s[strings.Join(parts[:i], "|")]; set != nil {
			return set
		}
	}
	return nil
}

// TagRouter is Dubbo's tag router (Java: TagStateRouter). A call's tag is
// its `dubbo.tag` attachment, else the consumer URL's.
//
// Without a rule (or with a disabled one) providers' own `dubbo.tag`
// decide: a tagged call goes to the providers with that tag, or, when there
// is none and the call does not force its tag (`dubbo.force.tag`), to the
// untagged providers; an untagged call goes to untagged providers only, so
// tagged ones (a canary) take only the traffic meant for them.
//
// With a rule, a tagged call whose tag the rule sets goes to the rule's
// providers of that tag (empty and forced by the rule: none); a tag the
// rule does not set is looked up in providers' own tags; failing both, an
// unforced call falls back to providers neither the rule nor their URL
// tags. An untagged call goes to the providers the rule does not name and
// whose URL has no tag.
type TagRouter struct {
	priority int
	rule     *TagRules
	// static is the rule's tag sets when they do not depend on the
	// providers (no match tags); else dynamic is set and cache holds the
	// sets computed for the last provider list seen.
	static  tagSets
	dynamic bool
	cache   atomic.Pointer[tagCache]
}

type tagCache struct {
	first *kernel.Invoker
	n     int
	sets  tagSets
}

// NewTagRouter returns the router without a rule; Dubbo runs it before
// condition routers.
func NewTagRouter(priority int) *TagRouter { return &TagRouter{priority: priority} }

// NewTagRuleRouter returns a tag router with a rule: tags maps each tag to
// the addresses (IP patterns) that carry it; force as TagRules.Force.
func NewTagRuleRouter(priority int, tags map[string][]string, force bool) (*TagRouter, error) {
	// A URL's rule has no document, so no configVersion: "v2.7" is what
	// Dubbo reads a document without one as.
	r := &TagRules{Version: "v2.7", Enabled: true, Force: force, Runtime: true}
	for name, addrs := range tags {
		if name == "" {
			return nil, fmt.Errorf("tag rule: a tag needs a name (addresses %v)", addrs)
		}
		t := Tag{Name: name}
		for _, a := range addrs {
			p, err := ParseIPPattern(a)
			if err != nil {
				return nil, fmt.Errorf("tag rule: tag %q: address %q: %v", name, a, err)
			}
			t.Addresses = append(t.Addresses, p)
		}
		r.Tags = append(r.Tags, t)
	}
	return r.Router(priority), nil
}

// ParseTagRule reads the `tags` parameter of a tag router URL:
// "gray=10.0.0.1:20880,10.0.0.2:20880;blue=10.0.0.3:20880".
func ParseTagRule(s string) (map[string][]string, error) {
	tags := map[string][]string{}
	for _, part := range strings.Split(s, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, addrs, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("tag rule %q: want name=host:port,...", part)
		}
		name = strings.TrimSpace(name)
		tags[name] = append(tags[name], splitTrim(addrs)...)
	}
	return tags, nil
}

func splitTrim(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Priority orders the router in a chain.
func (r *TagRouter) Priority() int { return r.priority }

// Rule returns the router's rule, nil when it has none.
func (r *TagRouter) Rule() *TagRules { return r.rule }

// sets returns the rule's tag sets for this provider list. Match tags are
// evaluated once per list: the directory's snapshots are immutable and
// replaced whole, so a list is known by its backing array and length.
func (r *TagRouter) sets(invokers []kernel.Invoker) tagSets {
	if !r.dynamic {
		return r.static
	}
	first := unsafe.SliceData(invokers)
	if c := r.cache.Load(); c != nil && c.first == first && c.n == len(invokers) {
		return c.sets
	}
	s := r.rule.tagSets(invokers)
	r.cache.Store(&tagCache{first: first, n: len(invokers), sets: s})
	return s
}

// Route keeps the providers the call's tag allows.
func (r *TagRouter) Route(invokers []kernel.Invoker, consumer *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	if len(invokers) == 0 {
		return invokers
	}
	tag, forceTag := callTag(consumer, inv)
	rule := r.rule
	if rule == nil || !rule.Enabled {
		return staticTagRoute(invokers, tag, forceTag)
	}
	sets := r.sets(invokers)
	if tag != "" {
		var result []kernel.Invoker
		if set := sets.selectByLevel(tag, forceTag); set != nil {
			result = filterInvokers(invokers, func(u *kernel.URL) bool { return set.has(u) })
			if len(result) > 0 || rule.Force {
				return result
			}
		} else {
			result = filterInvokers(invokers, func(u *kernel.URL) bool { return u.Param(KeyTag) == tag })
		}
		if len(result) > 0 || forceTag {
			return result
		}
		return filterInvokers(invokers, func(u *kernel.URL) bool { return !sets.inAny(u) && u.Param(KeyTag) == "" })
	}
	if len(sets) > 0 {
		result := filterInvokers(invokers, func(u *kernel.URL) bool { return !sets.inAny(u) })
		if len(result) == 0 {
			return result
		}
		invokers = result
	}
	return filterInvokers(invokers, func(u *kernel.URL) bool { return u.Param(KeyTag) == "" })
}

// callTag is the call's tag and whether it is forced: attachments first,
// then the consumer URL.
func callTag(consumer *kernel.URL, inv *kernel.Invocation) (tag string, force bool) {
	var forceText string
	if inv != nil {
		tag = inv.AttachmentString(KeyTag)
		forceText = inv.AttachmentString(KeyForceTag)
	}
	if consumer != nil {
		if tag == "" {
			tag = consumer.Param(KeyTag)
		}
		if _, set := attachment(inv, KeyForceTag); !set {
			forceText = consumer.Param(KeyForceTag)
		}
	}
	return tag, strings.EqualFold(forceText, "true")
}

func attachment(inv *kernel.Invocation, k string) (any, bool) {
	if inv == nil {
		return nil, false
	}
	return inv.Attachment(k)
}

// staticTagRoute is Java's filterUsingStaticTag: providers' own tags.
func staticTagRoute(invokers []kernel.Invoker, tag string, force bool) []kernel.Invoker {
	if tag != "" {
		tagged := filterInvokers(invokers, func(u *kernel.URL) bool { return u.Param(KeyTag) == tag })
		if len(tagged) > 0 || force {
			return tagged
		}
	}
	return filterInvokers(invokers, func(u *kernel.URL) bool { return u.Param(KeyTag) == "" })
}

// filterInvokers returns the invokers whose URL keep accepts; it returns
// invokers itself when all are kept, so the common case allocates nothing.
func filterInvokers(invokers []kernel.Invoker, keep func(*kernel.URL) bool) []kernel.Invoker {
	for i, iv := range invokers {
		if !keep(iv.URL()) {
			out := append(make([]kernel.Invoker, 0, len(invokers)), invokers[:i]...)
			for _, rest := range invokers[i+1:] {
				if keep(rest.URL()) {
					out = append(out, rest)
				}
			}
			return out
		}
	}
	return invokers
}

// IsTagRouter says whether r is a tag router (the default one or a tag
// rule's): a chain has one, and a tag rule's takes the default's place.
func IsTagRouter(r extension.Router) bool {
	_, ok := r.(*TagRouter)
	return ok
}
