package cluster

import (
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
type TagRouter struct {
	priority int
}

// NewTagRouter returns the router; Dubbo runs it before condition routers.
func NewTagRouter(priority int) *TagRouter { return &TagRouter{priority: priority} }

// Priority orders the router in a chain.
func (r *TagRouter) Priority() int { return r.priority }

// Route keeps the providers the call's tag allows.
func (r *TagRouter) Route(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	tag := ""
	force := false
	if inv != nil {
		tag = inv.AttachmentString(KeyTag)
		force = inv.AttachmentString(KeyForceTag) == "true"
	}
	if tag != "" {
		if tagged := filterTag(invokers, tag); len(tagged) > 0 || force {
			return tagged
		}
	}
	return filterTag(invokers, "")
}

// filterTag returns the invokers whose tag is tag; it returns invokers itself
// when all match, so the common untagged case allocates nothing.
func filterTag(invokers []kernel.Invoker, tag string) []kernel.Invoker {
	for i, iv := range invokers {
		if iv.URL().Param(KeyTag) != tag {
			out := append(make([]kernel.Invoker, 0, len(invokers)), invokers[:i]...)
			for _, rest := range invokers[i+1:] {
				if rest.URL().Param(KeyTag) == tag {
					out = append(out, rest)
				}
			}
			return out
		}
	}
	return invokers
}
