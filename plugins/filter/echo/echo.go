// Package echo is Dubbo's EchoFilter: it answers the built-in `$echo` method
// with its argument, before any other provider filter, so a consumer can check
// that a service is alive without touching the implementation.
package echo

import (
	"context"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "echo"

// Activation returns when the filter activates: always, on providers, first.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: -110000}
}

// New returns the filter.
func New() extension.Filter { return filter{} }

type filter struct{}

func (filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	if inv.Method == kernel.MethodEcho && len(inv.Args) == 1 {
		return kernel.Result{Value: inv.Args[0]}, nil
	}
	return next.Invoke(ctx, inv)
}
