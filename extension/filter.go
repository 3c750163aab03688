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
