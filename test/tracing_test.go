package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

// backend is the last hop: it reports the trace context it received.
type traceBackend struct{}

func (traceBackend) Echo(ctx context.Context, s string) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	return s + "|" + inv.AttachmentString("traceparent"), nil
}

func (traceBackend) Fail(ctx context.Context, s string) error {
	return kernel.BizError(errors.New("backend refuses " + s))
}

type traceBackendClient struct {
	Echo func(ctx context.Context, s string) (string, error)
	Fail func(ctx context.Context, s string) error
}

// traceFront calls the backend from inside its own provider call, so the
// backend's spans must hang below the front's server span.
type traceFront struct{ back *traceBackendClient }

func (f traceFront) Hop(ctx context.Context, s string) (string, error) { return f.back.Echo(ctx, s) }
func (f traceFront) Fail(ctx context.Context, s string) error          { return f.back.Fail(ctx, s) }

type traceFrontClient struct {
	Hop  func(ctx context.Context, s string) (string, error)
	Fail func(ctx context.Context, s string) error
}

// memTracer is one App's tracer provider with an in-memory exporter that
// sees each span as it ends.
func memTracer(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// Three Apps over TCP, each with its own tracer provider (as three
// processes would have): consumer A → provider B, whose implementation
// calls provider C. One trace, each span the child of the one before.
func TestTracingWeftToWeft(t *testing.T) {
	backAddr, frontAddr := freeAddr(t), freeAddr(t)
	tpC, expC := memTracer(t)
	startApp(t, fmt.Sprintf("application: {name: back}\ntracing: {enable: true}\nprotocols: {dubbo: {port: %s}}\nprovider: {services: {back: {interface: org.weft.trace.Backend}}}\n", portOf(backAddr)),
		weft.WithService("back", traceBackend{}), weft.WithTracerProvider(tpC))
	tpB, expB := memTracer(t)
	back := &traceBackendClient{}
	// Tracing on through WithTracerProvider alone (tracing.enable unset).
	startApp(t, fmt.Sprintf(`protocols: {dubbo: {port: %s}}
provider: {services: {front: {interface: org.weft.trace.Front}}}
consumer: {references: {back: {interface: org.weft.trace.Backend, url: "dubbo://%s", retries: 0}}}
`, portOf(frontAddr), backAddr),
		weft.WithService("front", traceFront{back}), weft.WithReference("back", back), weft.WithTracerProvider(tpB))
	tpA, expA := memTracer(t)
	var front traceFrontClient
	startApp(t, fmt.Sprintf("tracing: {enable: true}\nconsumer: {references: {front: {interface: org.weft.trace.Front, url: \"dubbo://%s\", retries: 0}}}\n", frontAddr),
		weft.WithReference("front", &front), weft.WithTracerProvider(tpA))
	ctx := context.Background()

	got, err := front.Hop(ctx, "hi")
	if err != nil {
		t.Fatal(err)
	}
	a := onlySpan(t, expA, "org.weft.trace.Front/hop", trace.SpanKindClient)
	bs := onlySpan(t, expB, "org.weft.trace.Front/hop", trace.SpanKindServer)
	bc := onlySpan(t, expB, "org.weft.trace.Backend/echo", trace.SpanKindClient)
	c := onlySpan(t, expC, "org.weft.trace.Backend/echo", trace.SpanKindServer)
	if a.Parent.IsValid() {
		t.Errorf("A's client span has a parent %s; the caller had no span, want a root", a.Parent.SpanID())
	}
	chain := []tracetest.SpanStub{a, bs, bc, c}
	for i := 1; i < len(chain); i++ {
		if chain[i].SpanContext.TraceID() != a.SpanContext.TraceID() {
			t.Errorf("span %q is in trace %s, want %s", chain[i].Name, chain[i].SpanContext.TraceID(), a.SpanContext.TraceID())
		}
		if chain[i].Parent.SpanID() != chain[i-1].SpanContext.SpanID() {
			t.Errorf("span %q (%s) has parent %s, want %q's %s", chain[i].Name, chain[i].SpanKind, chain[i].Parent.SpanID(), chain[i-1].Name, chain[i-1].SpanContext.SpanID())
		}
		if !chain[i].Parent.IsRemote() && chain[i].SpanKind == trace.SpanKindServer {
			t.Errorf("server span %q: parent not marked remote", chain[i].Name)
		}
	}
	// What the backend received is the W3C traceparent of B's client span.
	want := fmt.Sprintf("hi|00-%s-%s-01", bc.SpanContext.TraceID(), bc.SpanContext.SpanID())
	if got != want {
		t.Errorf("backend saw traceparent %q, want %q", got, want)
	}
	wantAttrs(t, a, map[string]any{"rpc.system": "apache_dubbo", "rpc.service": "org.weft.trace.Front", "rpc.method": "hop",
		"server.address": "127.0.0.1", "server.port": mustAtoi(t, portOf(frontAddr))})
	wantAttrs(t, bs, map[string]any{"rpc.system": "apache_dubbo", "rpc.service": "org.weft.trace.Front", "rpc.method": "hop",
		"network.peer.address": "127.0.0.1"})
	wantAttrs(t, c, map[string]any{"rpc.system": "apache_dubbo", "rpc.service": "org.weft.trace.Backend", "rpc.method": "echo"})
	for _, s := range chain {
		if s.Status.Code != codes.Unset {
			t.Errorf("span %q: status %v on success, want unset", s.Name, s.Status)
		}
	}

	// A business error at the end marks every span of the way failed,
	// with weft's code.
	resetAll(expA, expB, expC)
	err = front.Fail(ctx, "x")
	if !kernel.IsBiz(err) {
		t.Fatalf("fail: %v, want a business error", err)
	}
	for _, s := range []tracetest.SpanStub{
		onlySpan(t, expA, "org.weft.trace.Front/fail", trace.SpanKindClient),
		onlySpan(t, expB, "org.weft.trace.Front/fail", trace.SpanKindServer),
		onlySpan(t, expB, "org.weft.trace.Backend/fail", trace.SpanKindClient),
		onlySpan(t, expC, "org.weft.trace.Backend/fail", trace.SpanKindServer),
	} {
		if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "backend refuses x") {
			t.Errorf("span %q (%s): status %v, want Error with the message", s.Name, s.SpanKind, s.Status)
		}
		wantAttrs(t, s, map[string]any{"error.type": "biz", "weft.error.code": int64(kernel.CodeBiz)})
	}
}

func mustAtoi(t testing.TB, s string) int64 {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func resetAll(exps ...*tracetest.InMemoryExporter) {
	for _, e := range exps {
		e.Reset()
	}
}

// onlySpan returns the one span of that name and kind exp holds.
func onlySpan(t testing.TB, exp *tracetest.InMemoryExporter, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	var all []string
	for _, s := range exp.GetSpans() {
		all = append(all, s.Name+"("+s.SpanKind.String()+")")
		if s.Name == name && s.SpanKind == kind {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s spans %q, want 1 (spans: %s)", len(found), kind, name, strings.Join(all, ", "))
	}
	return found[0]
}

func wantAttrs(t testing.TB, s tracetest.SpanStub, want map[string]any) {
	t.Helper()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value
	}
	for k, w := range want {
		v, ok := got[attribute.Key(k)]
		if !ok {
			t.Errorf("span %q (%s): no attribute %s (has %v)", s.Name, s.SpanKind, k, s.Attributes)
			continue
		}
		if fmt.Sprint(v.AsInterface()) != fmt.Sprint(w) {
			t.Errorf("span %q (%s): %s = %v, want %v", s.Name, s.SpanKind, k, v.AsInterface(), w)
		}
	}
}

// Off (the default, or enable: false even with a provider given): no span,
// no trace context on the wire.
func TestTracingOff(t *testing.T) {
	addr := freeAddr(t)
	tp, exp := memTracer(t)
	startApp(t, fmt.Sprintf("tracing: {enable: false}\nprotocols: {dubbo: {port: %s}}\nprovider: {services: {back: {interface: org.weft.trace.Backend}}}\n", portOf(addr)),
		weft.WithService("back", traceBackend{}), weft.WithTracerProvider(tp))
	var c traceBackendClient
	startApp(t, fmt.Sprintf("consumer: {references: {back: {interface: org.weft.trace.Backend, url: \"dubbo://%s\"}}}\n", addr),
		weft.WithReference("back", &c))
	got, err := c.Echo(context.Background(), "hi")
	if err != nil || got != "hi|" {
		t.Fatalf("echo: %q %v, want no traceparent sent", got, err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans with tracing.enable: false", n)
	}
}
