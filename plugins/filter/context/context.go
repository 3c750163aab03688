// Package context holds Dubbo's two context filters: `context` on providers,
// which makes the call's invocation (attachments, caller address) readable by
// the implementation through kernel.InvocationFrom, and `consumercontext` on
// consumers, which copies the attachments set with kernel.WithAttachments into
// every call.
package context

import (
	"context"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Names of the two filters.
const (
	Name         = "context"
	ConsumerName = "consumercontext"
)

// Activation: every provider call, early.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: -10000}
}

// ConsumerActivation: every consumer call, early.
func ConsumerActivation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupConsumer}, Order: -10000}
}

// New returns the provider filter.
func New() extension.Filter { return provider{} }

// NewConsumer returns the consumer filter.
func NewConsumer() extension.Filter { return consumer{} }

type provider struct{}

func (provider) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	return next.Invoke(kernel.WithInvocation(ctx, inv), inv)
}

type consumer struct{}

// ClusterScope runs the filter once per call, before routing: routers read
// the attachments it copies (dubbo.tag).
func (consumer) ClusterScope() {}

func (consumer) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	// Attachments a filter already set on this invocation win over the
	// context's: they are more specific.
	for k, v := range kernel.OutgoingAttachments(ctx) {
		if _, ok := inv.Attachment(k); !ok {
			inv.SetAttachment(k, v)
		}
	}
	return next.Invoke(ctx, inv)
}
