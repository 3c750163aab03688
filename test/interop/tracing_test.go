package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// memTracer is one party's tracer provider with an in-memory exporter that
// holds each span once it ends.
func memTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

// useGlobalTracer makes tp and the W3C propagator otel's globals for the
// test: dubbo-go's otel filters trace with them (and so would weft, were
// the App given otel.GetTracerProvider(); weft itself never reads them).
func useGlobalTracer(t *testing.T, tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

// traceEnd is the last weft provider: it answers with the trace context
// and baggage it received as attachments.
type traceEnd struct{}

func (traceEnd) Echo(ctx context.Context, s string) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	return s + "|" + inv.AttachmentString("traceparent") + "|" + inv.AttachmentString("baggage"), nil
}

type traceEndClient struct {
	Echo func(ctx context.Context, s string) (string, error)
}

// traceHop is EchoService on weft whose echo calls the next weft provider
// from inside the call, with the call's context.
type traceHop struct{ next *traceEndClient }

func (h traceHop) Echo(ctx context.Context, s string) (string, error) {
	// The baggage dubbo-go sent is in the context the implementation gets.
	if m := baggage.FromContext(ctx).Member("tenant"); m.Value() != "t1" {
		return "", fmt.Errorf("baggage tenant %q at the weft provider, want t1", m.Value())
	}
	return h.next.Echo(ctx, s)
}

func onlySpan(t *testing.T, exp *tracetest.InMemoryExporter, name string, kind trace.SpanKind) tracetest.SpanStub {
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

// A trace started in a dubbo-go consumer crosses a weft provider, that
// provider's own weft consumer and a second weft provider: one trace id,
// each span the child of the one before it, baggage carried all the way.
// Each party has its own tracer provider, as separate processes would:
// dubbo-go otel's global one, each weft App the one it was given.
func TestTracingDubboGoToWeftToWeft(t *testing.T) {
	tpG, expG := memTracer(t)
	useGlobalTracer(t, tpG)
	tpEnd, expEnd := memTracer(t)
	endAddr, endPort := freeAddr(t)
	startWeft(t, weft.WithTracerProvider(tpEnd), weft.WithService("end", traceEnd{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
tracing: {enable: true}
protocols: {dubbo: {port: %d}}
provider: {services: {end: {interface: org.weft.trace.End}}}
`, endPort))))
	tpHop, expHop := memTracer(t)
	hopAddr, hopPort := freeAddr(t)
	next := &traceEndClient{}
	startWeft(t, weft.WithTracerProvider(tpHop), weft.WithService("echo", traceHop{next}), weft.WithReference("end", next),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
tracing: {enable: true}
protocols: {dubbo: {port: %d}}
provider: {services: {echo: {interface: %s}}}
consumer: {references: {end: {interface: org.weft.trace.End, url: "dubbo://%s", retries: 0}}}
`, hopPort, dubbogo.Interface, endAddr))))

	c, err := dubbogo.NewClient("dubbo://"+hopAddr, dubbogo.WithTracing())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	member, _ := baggage.NewMember("tenant", "t1")
	bag, _ := baggage.New(member)
	ctx, root := tpG.Tracer("interop-test").Start(baggage.ContextWithBaggage(context.Background(), bag), "root")
	got, err := c.Echo(ctx, "x")
	root.End()
	if err != nil {
		t.Fatal(err)
	}

	rootSpan := onlySpan(t, expG, "root", trace.SpanKindInternal)
	// dubbo-go names its client span by the method alone.
	dgClient := onlySpan(t, expG, "echo", trace.SpanKindClient)
	hopServer := onlySpan(t, expHop, dubbogo.Interface+"/echo", trace.SpanKindServer)
	hopClient := onlySpan(t, expHop, "org.weft.trace.End/echo", trace.SpanKindClient)
	endServer := onlySpan(t, expEnd, "org.weft.trace.End/echo", trace.SpanKindServer)
	chain := []tracetest.SpanStub{rootSpan, dgClient, hopServer, hopClient, endServer}
	traceID := rootSpan.SpanContext.TraceID()
	for i := 1; i < len(chain); i++ {
		s, parent := chain[i], chain[i-1]
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("%s span %q is in trace %s, want %s", s.SpanKind, s.Name, s.SpanContext.TraceID(), traceID)
		}
		if s.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Errorf("%s span %q has parent %s, want %s span %q (%s)", s.SpanKind, s.Name, s.Parent.SpanID(), parent.SpanKind, parent.Name, parent.SpanContext.SpanID())
		}
	}
	if !hopServer.Parent.IsRemote() || !endServer.Parent.IsRemote() {
		t.Errorf("the weft server spans' parents are not marked remote")
	}
	want := fmt.Sprintf("x|00-%s-%s-01|tenant=t1", traceID, hopClient.SpanContext.SpanID())
	if got != want {
		t.Errorf("the last provider received %q, want %q", got, want)
	}
}

// And back: a weft consumer's trace context reaches a dubbo-go provider
// as the attachments dubbo-go's own consumer sends (traceparent, as a
// string). dubbo-go v3.3.1's otelServerTrace does not continue it over the
// dubbo protocol: its carrier reads only []string values (triple's
// metadata), so its server span starts a trace of its own. The test pins
// both facts: weft sends what dubbo-go sends, and where dubbo-go drops it.
func TestTracingWeftToDubboGo(t *testing.T) {
	tpG, expG := memTracer(t)
	useGlobalTracer(t, tpG)
	addr, _ := freeAddr(t)
	stop, err := dubbogo.StartProvider(addr, dubbogo.WithProviderTracing())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tpW, expW := memTracer(t)
	app := startWeft(t, weft.WithTracerProvider(tpW), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
tracing: {enable: true}
consumer: {references: {echo: {interface: %s, url: "dubbo://%s", timeout: 5000, retries: 0}}}
`, dubbogo.Interface, addr))))
	ref, err := app.Reference("echo")
	if err != nil {
		t.Fatal(err)
	}
	// The dubbo-go provider echoes every request attachment back.
	res, err := ref.Invoke(context.Background(), kernel.NewInvocation("echo", "x"))
	if err != nil {
		t.Fatal(err)
	}
	wc := onlySpan(t, expW, dubbogo.Interface+"/echo", trace.SpanKindClient)
	want := fmt.Sprintf("00-%s-%s-01", wc.SpanContext.TraceID(), wc.SpanContext.SpanID())
	if got := res.Attachments["traceparent"]; got != want {
		t.Fatalf("the dubbo-go provider received traceparent %v, want %s", got, want)
	}
	ds := onlySpan(t, expG, "echo", trace.SpanKindServer)
	if ds.SpanContext.TraceID() == wc.SpanContext.TraceID() {
		// dubbo-go reads string attachments now: the trace continues.
		if ds.Parent.SpanID() != wc.SpanContext.SpanID() {
			t.Errorf("dubbo-go's server span has parent %s, want weft's client span %s", ds.Parent.SpanID(), wc.SpanContext.SpanID())
		}
		t.Log("dubbo-go's otelServerTrace continued weft's trace over the dubbo protocol")
		return
	}
	if ds.Parent.IsValid() {
		t.Errorf("dubbo-go's server span has parent %s in another trace", ds.Parent.SpanID())
	}
	t.Log("dubbo-go v3.3.1's otelServerTrace ignored the string traceparent (it reads []string only) and started its own trace")
}
