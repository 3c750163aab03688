package cluster

import (
	"fmt"
	"net"
	"strings"

	"github.com/weftrpc/weft/kernel"
)

// Tag routing keys, Dubbo's.
const (
	// KeyTag on a provider URL labels it (gray, canary, a tenant...); as a
	// call attachment it asks for providers of that label.
	KeyTag = "dubbo.tag"
	// KeyForceTag as a call attachment ("true") forbids falling back to
	// untagged providers when none carries the tag.
	KeyForceTag = "dubbo.force.tag"
)

// TagRouter is Dubbo's tag router. A call with a `dubbo.tag` attachment goes
// to the providers with that tag, or, when there is none and the call does
// not force its tag, to the untagged providers. A call without a tag goes to
// untagged providers only, so tagged ones (a canary) take only the traffic
// meant for them.
//
// A provider's tag is its URL's `dubbo.tag`, unless a tag rule (Dubbo's
// tag-router document: tags with the addresses that carry them) names its
// address: the rule wins, so tags can be moved without restarting providers.
type TagRouter struct {
	priority int
	byAddr   map[string]string // host:port -> tag, from a rule
	force    bool              // the rule's force: no fallback to untagged
}

// NewTagRouter returns the router; Dubbo runs it before condition routers.
func NewTagRouter(priority int) *TagRouter { return &TagRouter{priority: priority} }

// NewTagRuleRouter returns a tag router with a rule: tags maps each tag to
// the host:port addresses that carry it; force forbids falling back to
// untagged providers when none carries a call's tag.
func NewTagRuleRouter(priority int, tags map[string][]string, force bool) (*TagRouter, error) {
	r := &TagRouter{priority: priority, byAddr: map[string]string{}, force: force}
	for tag, addrs := range tags {
		if tag == "" {
			return nil, fmt.Errorf("tag rule: a tag needs a name (addresses %v)", addrs)
		}
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("tag rule: tag %q: address %q is not host:port", tag, a)
			}
			if prev, dup := r.byAddr[a]; dup && prev != tag {
				return nil, fmt.Errorf("tag rule: address %s is in tags %q and %q", a, prev, tag)
			}
			r.byAddr[a] = tag
		}
	}
	return r, nil
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

func (r *TagRouter) tagOf(iv kernel.Invoker) string {
	if r.byAddr != nil {
		if tag, ok := r.byAddr[iv.URL().Address()]; ok {
			return tag
		}
	}
	return iv.URL().Param(KeyTag)
}

// Priority orders the router in a chain.
func (r *TagRouter) Priority() int { return r.priority }

// Route keeps the providers the call's tag allows.
func (r *TagRouter) Route(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	tag := ""
	force := false
	if inv != nil {
		tag = inv.AttachmentString(KeyTag)
		force = inv.AttachmentString(KeyForceTag) == "true" || r.force
	}
	if tag != "" {
		if tagged := r.filterTag(invokers, tag); len(tagged) > 0 || force {
			return tagged
		}
	}
	return r.filterTag(invokers, "")
}

// filterTag returns the invokers whose tag is tag; it returns invokers itself
// when all match, so the common untagged case allocates nothing.
func (r *TagRouter) filterTag(invokers []kernel.Invoker, tag string) []kernel.Invoker {
	for i, iv := range invokers {
		if r.tagOf(iv) != tag {
			out := append(make([]kernel.Invoker, 0, len(invokers)), invokers[:i]...)
			for _, rest := range invokers[i+1:] {
				if r.tagOf(rest) == tag {
					out = append(out, rest)
				}
			}
			return out
		}
	}
	return invokers
}
