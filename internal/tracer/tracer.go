// Package tracer builds an App's OpenTelemetry tracing from its tracing.*
// config: the exporter chosen by name, the SDK's provider with parent-based
// sampling and batching, or a provider the program gave.
package tracer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/tracing"
)

// Tracing is the App's tracing: off, or the provider and propagator its
// filters use.
type Tracing struct {
	On         bool
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Shutdown flushes and stops a provider Build made; nil for one the
	// program gave (its owner shuts it down).
	Shutdown func(context.Context) error
}

// In is what Build needs.
type In struct {
	Config               tracing.Config
	Application, Version string
	Log                  *slog.Logger
	Exporters            *kernel.Loader[tracing.SpanExporterFactory]
	// Provider and Propagator, when set, are the program's
	// (weft.WithTracerProvider, weft.WithTextMapPropagator).
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// NoneExporter is the built-in exporter type that sends spans nowhere.
const NoneExporter = "none"

// None is the factory of the none exporter.
func None() tracing.SpanExporterFactory {
	return tracing.SpanExporterFactoryFunc(func(context.Context, tracing.SpanExporterConfig) (sdktrace.SpanExporter, error) {
		return noneExporter{}, nil
	})
}

// Build makes the App's tracing from tracing.* at weft.New: the
// exporter is made here, so an exporter that is not linked, or one that
// refuses its settings, fails New rather than the first call.
func Build(in In) (*Tracing, error) {
	tc := in.Config
	if errs := tc.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	on, set := tc.On()
	if !set && in.Provider != nil {
		on = true
	}
	if !on {
		return &Tracing{}, nil
	}
	t := &Tracing{On: true, Propagator: tracing.Propagator()}
	if in.Propagator != nil {
		t.Propagator = in.Propagator
	}
	if in.Provider != nil {
		t.Provider = in.Provider
		return t, nil
	}
	typ := tc.Exporter.Type
	if typ == "" {
		typ = tracing.DefaultSpanExporter
	}
	f, err := in.Exporters.Get(typ)
	if err != nil {
		if m, ok := tracing.ExporterModules[typ]; ok {
			return nil, fmt.Errorf("weft: config: tracing.exporter.type: %s comes from the module %s, which this program does not link: "+
				"add it (go get %s), import it and pass weft.WithPlugins(%s) to weft.New; or set tracing.exporter.type to one that is linked (known: %s)",
				typ, m.Module, m.Module, m.Plugin, strings.Join(in.Exporters.Names(), ", "))
		}
		return nil, fmt.Errorf("weft: config: tracing.exporter.type: %w", err)
	}
	exp, err := f.NewSpanExporter(context.Background(), tracing.SpanExporterConfig{
		Type: typ, Endpoint: tc.Exporter.Endpoint, Insecure: tc.Exporter.Insecure,
		Timeout: time.Duration(tc.Exporter.Timeout) * time.Millisecond, Headers: tc.Exporter.Headers,
		Compression: strings.ToLower(tc.Exporter.Compression),
	})
	if err != nil {
		return nil, fmt.Errorf("weft: config: tracing.exporter (%s): %w", typ, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(serviceAttrs(in.Application, in.Version)...))
	if err != nil {
		res = resource.NewSchemaless(serviceAttrs(in.Application, in.Version)...)
	}
	tp := sdktrace.NewTracerProvider(
		// A call that carries a caller's trace follows its decision, so a
		// trace is recorded whole or not at all; new traces are sampled.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.Probability()))),
		// Spans leave in batches, off the call path.
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	t.Provider, t.Shutdown = tp, tp.Shutdown
	in.Log.Info("weft: tracing on", "exporter", typ, "endpoint", tc.Exporter.Endpoint, "sampling.probability", tc.Probability())
	return t, nil
}

func serviceAttrs(name, version string) []attribute.KeyValue {
	var out []attribute.KeyValue
	if name != "" {
		out = append(out, semconv.ServiceName(name))
	}
	if version != "" {
		out = append(out, semconv.ServiceVersion(version))
	}
	return out
}

// noneExporter drops spans: tracing.exporter.type none.
type noneExporter struct{}

func (noneExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (noneExporter) Shutdown(context.Context) error                             { return nil }

// Off is a tracing filter while tracing is off: it never activates, and
// where a filter list names it, it passes calls through, saying so once
// when the chain is built.
func Off(name string, log *slog.Logger) kernel.Factory[extension.Filter] {
	return func() (extension.Filter, error) {
		log.Warn("weft: a filter list names "+name+" but tracing is off; it passes calls through: set tracing.enable: true to trace", "filter", name)
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			return next.Invoke(ctx, inv)
		}), nil
	}
}
