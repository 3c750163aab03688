package kernel

import (
	"context"
	"reflect"

	"github.com/weftrpc/weft/kernel/view"
)

// Invocation is one call on its way through the filter chains: the method, its
// arguments and the attachments that travel with it. It belongs to one call;
// filters may change it on the way in.
type Invocation struct {
	// Method is the method name as it goes on the wire (Java convention,
	// "sayHello").
	Method string
	// ParamTypes is the JVM parameter descriptor, "Ljava/lang/String;J";
	// empty where the protocol does not need it.
	ParamTypes string
	// Args are the call's arguments.
	Args []any
	// RemoteAddr is the peer's address on the provider side, "" in process.
	RemoteAddr string
	// TLS says, on the provider side, that the call came over TLS; MTLS
	// that its client certificate verified too (mutual TLS).
	TLS, MTLS bool

	attachments map[string]any
	attributes  map[string]any
}

// Decodable is an argument that a protocol decodes only once the method's
// parameter type is known (Triple's protobuf messages, whose bytes do not
// say their type): the service invoker asks it for a value of that type.
type Decodable interface {
	DecodeAs(t reflect.Type) (reflect.Value, error)
}

// Encoded is an argument or a result still in its wire form, as a
// protocol read it: Encoding says which ("proto": a protobuf message's
// bytes; "json": one JSON value). An invoker that knows its types only at
// run time (a service declared by an IDL in config, a forward) reads it
// with Bytes; a protocol passing a call on as it came writes the bytes as
// they are.
type Encoded interface {
	Encoding() string
	Bytes() []byte
}

// NewInvocation builds an invocation of method with args.
func NewInvocation(method string, args ...any) *Invocation {
	return &Invocation{Method: method, Args: args}
}

// Attachment returns an attachment, which travels to the peer with the call.
func (inv *Invocation) Attachment(k string) (any, bool) {
	v, ok := inv.attachments[k]
	return v, ok
}

// AttachmentString returns an attachment as a string: strings as they are,
// numbers and booleans as fmt formats them, other values (which came off
// the wire and may contain themselves) as their bounded text (view.Text),
// "" when absent.
func (inv *Invocation) AttachmentString(k string) string {
	switch v := inv.attachments[k].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return view.Text(v)
	}
}

// SetAttachment sets an attachment.
func (inv *Invocation) SetAttachment(k string, v any) {
	if inv.attachments == nil {
		inv.attachments = make(map[string]any, 4)
	}
	inv.attachments[k] = v
}

// RemoveAttachment deletes an attachment.
func (inv *Invocation) RemoveAttachment(k string) { delete(inv.attachments, k) }

// Attachments returns the attachment map itself (not a copy), nil when empty.
// Codecs read it; filters should prefer the accessors.
func (inv *Invocation) Attachments() map[string]any { return inv.attachments }

// SetAttachments replaces the attachment map; the invocation takes ownership.
func (inv *Invocation) SetAttachments(m map[string]any) { inv.attachments = m }

// Attribute returns a local attribute: state that filters of one process share
// about this call and that never goes on the wire.
func (inv *Invocation) Attribute(k string) (any, bool) {
	v, ok := inv.attributes[k]
	return v, ok
}

// SetAttribute sets a local attribute.
func (inv *Invocation) SetAttribute(k string, v any) {
	if inv.attributes == nil {
		inv.attributes = make(map[string]any, 2)
	}
	inv.attributes[k] = v
}

// Clone returns a copy whose attachment and attribute maps are its own, for a
// call that goes to several providers at once or crosses to another side.
func (inv *Invocation) Clone() *Invocation {
	c := *inv
	if inv.attachments != nil {
		c.attachments = make(map[string]any, len(inv.attachments))
		for k, v := range inv.attachments {
			c.attachments[k] = v
		}
	}
	if inv.attributes != nil {
		c.attributes = make(map[string]any, len(inv.attributes))
		for k, v := range inv.attributes {
			c.attributes[k] = v
		}
	}
	return &c
}

// Result is what a call returned. Errors, business or framework, travel as the
// error beside it.
type Result struct {
	Value any
	// Attachments come back from the provider with the response.
	Attachments map[string]any
}

// Invoker is anything that can be called: a service implementation, a remote
// provider, a cluster of providers, a filter chain around one of those.
type Invoker interface {
	// URL describes the invoker; it does not change over its life.
	URL() *URL
	// Invoke makes the call. ctx carries the deadline and cancellation.
	Invoke(ctx context.Context, inv *Invocation) (Result, error)
	// IsAvailable reports whether the invoker can take calls now.
	IsAvailable() bool
	// Destroy releases the invoker's resources; later calls fail.
	Destroy()
}

// WhyUnavailable is an optional interface of an Invoker that can tell why
// IsAvailable is false (the address it cannot connect to and the dial
// error), so that a call with no reachable provider says so rather than
// "no provider". It returns nil while the invoker is available.
type WhyUnavailable interface {
	WhyUnavailable() error
}

type invocationKey struct{}

// WithInvocation returns a context that carries the server-side invocation,
// so that a service implementation can read the caller's attachments and
// address through InvocationFrom. The provider's context filter sets it.
func WithInvocation(ctx context.Context, inv *Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation stored by WithInvocation.
func InvocationFrom(ctx context.Context) (*Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(*Invocation)
	return inv, ok
}

type outgoingKey struct{}

// WithAttachments returns a context whose calls carry the given attachments to
// the provider (Dubbo's RpcContext.setAttachment on the consumer side). The
// consumer context filter copies them into each invocation.
func WithAttachments(ctx context.Context, kv map[string]any) context.Context {
	if prev, ok := ctx.Value(outgoingKey{}).(map[string]any); ok {
		merged := make(map[string]any, len(prev)+len(kv))
		for k, v := range prev {
			merged[k] = v
		}
		for k, v := range kv {
			merged[k] = v
		}
		kv = merged
	}
	return context.WithValue(ctx, outgoingKey{}, kv)
}

// OutgoingAttachments returns what WithAttachments stored; do not modify it.
func OutgoingAttachments(ctx context.Context) map[string]any {
	m, _ := ctx.Value(outgoingKey{}).(map[string]any)
	return m
}

const replyAttachmentsKey = "weft.reply.attachments"

// SetReplyAttachment makes the provider send k=v back to the consumer with
// this call's response (Dubbo's server-context attachments). It works in a
// service implementation, whose ctx carries the invocation; it reports
// whether it found one.
func SetReplyAttachment(ctx context.Context, k string, v any) bool {
	inv, ok := InvocationFrom(ctx)
	if !ok {
		return false
	}
	m, _ := inv.attributes[replyAttachmentsKey].(map[string]any)
	if m == nil {
		m = map[string]any{}
		inv.SetAttribute(replyAttachmentsKey, m)
	}
	m[k] = v
	return true
}

// ReplyAttachments returns what SetReplyAttachment set, nil when nothing.
func (inv *Invocation) ReplyAttachments() map[string]any {
	m, _ := inv.attributes[replyAttachmentsKey].(map[string]any)
	return m
}
