package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/tracing"
)

type fakeInvoker struct {
	url *kernel.URL
	do  func(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error)
}

func (f fakeInvoker) URL() *kernel.URL  { return f.url }
func (f fakeInvoker) IsAvailable() bool { return true }
func (f fakeInvoker) Destroy()          {}
func (f fakeInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	return f.do(ctx, inv)
}

// A failover call: one client span for the call, the provider that
// answered as server.address/port, the failed try as an event naming its
// provider and code; both tries carry the same traceparent.
func TestClientSpanAcrossTries(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var seen []string
	provider := func(port int, err error) kernel.Invoker {
		return extension.BuildChain(fakeInvoker{url: kernel.NewURL("dubbo", "10.0.0.1", port, "org.example.Greeter", nil),
			do: func(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
				seen = append(seen, inv.AttachmentString("traceparent"))
				return kernel.Result{Value: "ok"}, err
			}}, []extension.Filter{tracing.NewPeer()})
	}
	bad := provider(20880, kernel.Errorf(kernel.CodeNetwork, "connection lost"))
	good := provider(20881, nil)
	failover := fakeInvoker{url: kernel.NewURL("consumer", "127.0.0.1", 0, "org.example.Greeter", nil),
		do: func(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
			if _, err := bad.Invoke(ctx, inv); err == nil {
				t.Fatal("the bad provider answered")
			}
			return good.Invoke(ctx, inv)
		}}
	call := extension.BuildChain(failover, []extension.Filter{tracing.NewClient(tp, tracing.Propagator())})
	// A generic call is named by the method it is for.
	if _, err := call.Invoke(context.Background(), kernel.NewInvocation("$invoke", "sayHello", []string{"java.lang.String"}, []any{"x"})); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1 for the call", len(spans))
	}
	s := spans[0]
	if s.Name != "org.example.Greeter/sayHello" || s.SpanKind != trace.SpanKindClient {
		t.Errorf("span %q %s, want org.example.Greeter/sayHello client", s.Name, s.SpanKind)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["server.address"] != "10.0.0.1" || attrs["server.port"] != "20881" || attrs["rpc.method"] != "sayHello" {
		t.Errorf("attributes %v, want the provider that answered (10.0.0.1:20881) and rpc.method sayHello", attrs)
	}
	if len(s.Events) != 1 || s.Events[0].Name != tracing.EventAttemptFailed {
		t.Fatalf("events %v, want one %s", s.Events, tracing.EventAttemptFailed)
	}
	ev := map[string]string{}
	for _, kv := range s.Events[0].Attributes {
		ev[string(kv.Key)] = kv.Value.Emit()
	}
	if ev["server.port"] != "20880" || ev["error.type"] != "network" {
		t.Errorf("failed try's event %v, want server.port 20880 and error.type network", ev)
	}
	if len(seen) != 2 || seen[0] == "" || seen[0] != seen[1] {
		t.Errorf("traceparent per try %q, want the call's span on both", seen)
	}
}

// The server filter takes a traceparent sent as a []string too (dubbo-go's
// triple metadata), and a call without one starts a trace.
func TestServerExtract(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	svc := extension.BuildChain(fakeInvoker{url: kernel.NewURL("dubbo", "127.0.0.1", 20880, "org.example.Greeter", nil),
		do: func(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) { return kernel.Result{}, nil }},
		[]extension.Filter{tracing.NewServer(tp, tracing.Propagator())})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	inv := kernel.NewInvocation("sayHello", "x")
	inv.SetAttachment("traceparent", []string{"00-" + traceID + "-" + parent + "-01"})
	inv.RemoteAddr = "10.1.2.3:50000"
	svc.Invoke(context.Background(), inv)
	svc.Invoke(context.Background(), kernel.NewInvocation("sayHello", "y"))
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if spans[0].SpanContext.TraceID().String() != traceID || spans[0].Parent.SpanID().String() != parent || !spans[0].Parent.IsRemote() {
		t.Errorf("span in trace %s with parent %s, want %s and %s (remote)", spans[0].SpanContext.TraceID(), spans[0].Parent.SpanID(), traceID, parent)
	}
	if spans[1].Parent.IsValid() {
		t.Errorf("a call without traceparent got parent %s", spans[1].Parent.SpanID())
	}
	found := false
	for _, kv := range spans[0].Attributes {
		if kv.Key == "network.peer.address" && kv.Value.AsString() == "10.1.2.3" {
			found = true
		}
	}
	if !found {
		t.Errorf("no network.peer.address 10.1.2.3 in %v", spans[0].Attributes)
	}
}
