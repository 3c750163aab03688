// Package tracing holds the OpenTelemetry filters, under dubbo-go's names:
// otelServerTrace makes a server span per provider call, otelClientTrace a
// client span per consumer call, and otelClientTracePeer records on that
// span the provider each try went to. The W3C trace context (traceparent,
// tracestate) and baggage travel as call attachments, as dubbo-go's otel
// filters send them, so a trace crosses weft, dubbo-go and Java Dubbo alike.
//
// The filters take the App's TracerProvider and propagator; they never read
// otel's globals, so two Apps in one process trace independently.
package tracing

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Filter names: dubbo-go's, so that a dubbo-go filter list means the same
// here.
const (
	ServerName = "otelServerTrace"
	ClientName = "otelClientTrace"
	// PeerName is the per-provider half of the client filter.
	PeerName = "otelClientTracePeer"
)

// ScopeName is the instrumentation scope of weft's spans.
const ScopeName = "github.com/weftrpc/weft/plugins/filter/tracing"

// Attribute keys that semconv has no name for.
const (
	// KeyErrorCode is weft's error code (kernel.Code, Dubbo's RpcException
	// numbers); error.type carries its name.
	KeyErrorCode = attribute.Key("weft.error.code")
	// EventAttemptFailed is recorded on the client span for each try that
	// failed, with the provider it went to, before failover tried another.
	EventAttemptFailed = "weft.attempt.failed"
)

// Order puts the server span outside every provider filter but echo (a
// $echo probe makes no span), so token refusals and limits show in traces;
// and the client span outside every consumer filter.
const Order = -100000

// ServerActivation: every provider call.
func ServerActivation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: Order}
}

// ClientActivation: every consumer call (the span, once per call, and the
// per-provider part).
func ClientActivation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupConsumer}, Order: Order}
}

// Propagator is what dubbo-go's w3c propagator is: the W3C trace context
// and W3C baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// NewServer returns the provider filter.
func NewServer(tp trace.TracerProvider, p propagation.TextMapPropagator) extension.Filter {
	return &server{tracer: tp.Tracer(ScopeName), prop: p}
}

// NewClient returns the cluster-scoped consumer filter that makes the span.
func NewClient(tp trace.TracerProvider, p propagation.TextMapPropagator) extension.Filter {
	return &client{tracer: tp.Tracer(ScopeName), prop: p}
}

// NewPeer returns the per-provider consumer filter.
func NewPeer() extension.Filter { return peer{} }

// carrier reads and writes the W3C fields as attachments. A struct of one
// pointer, so that passing it as a TextMapCarrier does not allocate.
type carrier struct{ inv *kernel.Invocation }

// Get reads an attachment; besides the string the dubbo protocol carries,
// it takes the []string that dubbo-go's triple metadata uses.
func (c carrier) Get(k string) string {
	v, _ := c.inv.Attachment(k)
	switch x := v.(type) {
	case string:
		return x
	case []string:
		if len(x) > 0 {
			return x[0]
		}
	}
	return ""
}

func (c carrier) Set(k, v string) { c.inv.SetAttachment(k, v) }

func (c carrier) Keys() []string {
	m := c.inv.Attachments()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// method is the method a call is really for: a generic call's first
// argument (dubbo-go's ActualMethodName).
func method(inv *kernel.Invocation) string {
	if (inv.Method == "$invoke" || inv.Method == "$invokeAsync") && len(inv.Args) == 3 {
		if m, ok := inv.Args[0].(string); ok {
			return m
		}
	}
	return inv.Method
}

// spanName is semconv's {rpc.service}/{rpc.method}, as Java Dubbo names its
// spans (interface/method).
func spanName(iface, m string) string { return iface + "/" + m }

type server struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (s *server) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	// The caller's span becomes the parent, its baggage the context's.
	ctx = s.prop.Extract(ctx, carrier{inv})
	iface := next.URL().Interface()
	m := method(inv)
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.RPCSystemApacheDubbo, semconv.RPCService(iface), semconv.RPCMethod(m))
	if host, port, ok := splitAddr(inv.RemoteAddr); ok {
		attrs = append(attrs, semconv.NetworkPeerAddress(host), semconv.NetworkPeerPort(port))
	}
	ctx, span := s.tracer.Start(ctx, spanName(iface, m), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	res, err := next.Invoke(ctx, inv)
	if err != nil {
		fail(span, err)
	}
	span.End()
	return res, err
}

type client struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// ClusterScope makes one span per call, around routing, load balancing and
// every failover try (as Dubbo's ObservationSenderFilter, a ClusterFilter):
// the tries of a call belong to one trace even when the caller has no span
// of its own. The peer filter adds the provider of each try.
func (*client) ClusterScope() {}

func (c *client) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	iface := next.URL().Interface()
	m := method(inv)
	ctx, span := c.tracer.Start(ctx, spanName(iface, m), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.RPCSystemApacheDubbo, semconv.RPCService(iface), semconv.RPCMethod(m)))
	// traceparent, tracestate and baggage as attachments: every try carries
	// this span as the provider's parent.
	c.prop.Inject(ctx, carrier{inv})
	res, err := next.Invoke(ctx, inv)
	if err != nil {
		fail(span, err)
	}
	span.End()
	return res, err
}

// peer runs around each provider's invoker, after load balancing: it alone
// knows where a try went.
type peer struct{}

func (peer) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return next.Invoke(ctx, inv)
	}
	u := next.URL()
	// A later try overwrites an earlier one's: the span ends naming the
	// provider that answered last.
	span.SetAttributes(semconv.ServerAddress(u.Host), semconv.ServerPort(u.Port))
	res, err := next.Invoke(ctx, inv)
	if err != nil {
		span.AddEvent(EventAttemptFailed, trace.WithAttributes(semconv.ServerAddress(u.Host), semconv.ServerPort(u.Port),
			semconv.ErrorTypeKey.String(kernel.CodeOf(err).String())))
	}
	return res, err
}

// fail marks span failed: status Error with the message, error.type the
// code's name (timeout, biz, limit exceeded, ...), weft.error.code its
// number, and the error as an exception event.
func fail(span trace.Span, err error) {
	code := kernel.CodeOf(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(code.String()), KeyErrorCode.Int(int(code)))
	span.RecordError(err)
}

// splitAddr parses "host:port" without allocating.
func splitAddr(addr string) (string, int, bool) {
	if addr == "" {
		return "", 0, false
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, false
	}
	return host, port, true
}
