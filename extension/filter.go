package extension

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// DefaultFilter is empty: filters are activated by group and key, never
// chosen as "the" filter.
const DefaultFilter = ""

// Filter intercepts calls: it sees the invocation on the way in and the result
// on the way out, and calls next to go on (or does not, to answer or reject).
// One instance serves every chain it is part of, concurrently.
type Filter interface {
	Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error)
}

// FilterFunc adapts a function to Filter.
type FilterFunc func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error)

// Invoke calls f.
func (f FilterFunc) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	return f(ctx, next, inv)
}

// BuildChain wraps invoker in filters; filters[0] runs first. The chain is
// built once per exported or referred invoker, never per call.
func BuildChain(invoker kernel.Invoker, filters []Filter) kernel.Invoker {
	next := invoker
	for i := len(filters) - 1; i >= 0; i-- {
		next = &chainNode{Invoker: invoker, filter: filters[i], next: next}
	}
	return next
}

type chainNode struct {
	kernel.Invoker // the innermost invoker: URL, IsAvailable, Destroy
	filter         Filter
	next           kernel.Invoker
}

func (c *chainNode) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	return c.filter.Invoke(ctx, c.next, inv)
}

// WhyUnavailable forwards to the innermost invoker (kernel.WhyUnavailable).
func (c *chainNode) WhyUnavailable() error {
	if w, ok := c.Invoker.(kernel.WhyUnavailable); ok {
		return w.WhyUnavailable()
	}
	return nil
}

// ClusterScoped marks a consumer filter that runs once per call around the
// cluster (before routing and load balancing, as Dubbo 3's ClusterFilter),
// rather than around each provider's invoker after the choice. Filters that
// prepare the call (context, attachments a router reads) are cluster-scoped;
// those that count per provider (actives) are not.
type ClusterScoped interface {
	ClusterScope()
}

// SplitClusterScoped divides an activated consumer chain, keeping each part
// in order.
func SplitClusterScoped(filters []Filter) (cluster, perInvoker []Filter) {
	for _, f := range filters {
		if _, ok := f.(ClusterScoped); ok {
			cluster = append(cluster, f)
		} else {
			perInvoker = append(perInvoker, f)
		}
	}
	return cluster, perInvoker
}
