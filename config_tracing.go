package weft

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
	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/tracing"
)

// TracingConfig turns on OpenTelemetry tracing: a server span per provider
// call, a client span per consumer call, the W3C trace context carried in
// attachments as dubbo-go's otel filters carry it. The keys are Dubbo's
// dubbo.tracing.* (sampling.probability, propagation.type) with dubbo-go's
// otel.tracing.enable; off by default, and then no tracing filter is in any
// chain.
//
//	tracing:
//	  enable: true
//	  sampling: {probability: 0.1}
//	  exporter: {type: otlp-grpc, endpoint: "collector:4317", insecure: true}
type TracingConfig struct {
	// Enable turns tracing on (dubbo-go's otel.tracing.enable). Unset, it
	// is on only when the App was given weft.WithTracerProvider.
	Enable *bool `koanf:"enable"`
	// Enabled is Java Dubbo's spelling of Enable (dubbo.tracing.enabled).
	Enabled *bool `koanf:"enabled"`
	// Sampling decides which new traces are recorded; a call that carries
	// a caller's trace follows the caller's decision (parent-based).
	Sampling TracingSamplingConfig `koanf:"sampling"`
	// Propagation names the wire format of the trace context.
	Propagation TracingPropagationConfig `koanf:"propagation"`
	// Exporter says where spans go.
	Exporter TracingExporterConfig `koanf:"exporter"`
}

// TracingSamplingConfig is Dubbo's dubbo.tracing.sampling.
type TracingSamplingConfig struct {
	// Probability is the share of new traces recorded, 0..1 (default 1,
	// the OpenTelemetry SDK's; Dubbo's default is 0.1, dubbo-go's 0.5).
	Probability *float64 `koanf:"probability"`
}

// TracingPropagationConfig is Dubbo's dubbo.tracing.propagation.
type TracingPropagationConfig struct {
	// Type is W3C (traceparent, tracestate and baggage; the default, and
	// what dubbo-go's w3c propagator sends). Another format is given in
	// code with weft.WithTextMapPropagator.
	Type string `koanf:"type"`
}

// TracingExporterConfig is where spans go: Dubbo's
// tracing-exporter.otlp-config, with dubbo-go's exporter names.
type TracingExporterConfig struct {
	// Type names the exporter: otlp-grpc (the default, as Dubbo's) or
	// otlp-http, both from the module github.com/weftrpc/weft/tracing-otlp;
	// none (built in) records and propagates spans but sends them nowhere.
	Type string `koanf:"type"`
	// Endpoint is host:port (otlp-grpc: localhost:4317, otlp-http:
	// localhost:4318 by default) or a URL (http://collector:4318/v1/traces).
	// Unset, the exporter reads OTEL_EXPORTER_OTLP_* variables.
	Endpoint string `koanf:"endpoint"`
	// Insecure sends without TLS (an http:// endpoint implies it).
	Insecure bool `koanf:"insecure"`
	// Timeout bounds one export in ms (default 10000).
	Timeout int `koanf:"timeout"`
	// Headers go with every export.
	Headers map[string]string `koanf:"headers"`
	// Compression is gzip or none (the default).
	Compression string `koanf:"compression"`
}

// on says whether config turns tracing on; set says whether it says at all.
func (c TracingConfig) on() (on, set bool) {
	switch {
	case c.Enable != nil:
		return *c.Enable, true
	case c.Enabled != nil:
		return *c.Enabled, true
	}
	return false, false
}

// probability is the sampling share, 1 when unset.
func (c TracingConfig) probability() float64 {
	if c.Sampling.Probability == nil {
		return 1
	}
	return *c.Sampling.Probability
}

// check reports the values of tracing.* that have no meaning, with their
// key paths: they are checked whether tracing is on or not, so a typo does
// not wait for the day it is turned on.
func (c TracingConfig) check() []error {
	var errs []error
	if c.Enable != nil && c.Enabled != nil && *c.Enable != *c.Enabled {
		errs = append(errs, fmt.Errorf("tracing.enabled: %t disagrees with tracing.enable: %t; keep one of the two keys", *c.Enabled, *c.Enable))
	}
	if p := c.Sampling.Probability; p != nil && !(*p >= 0 && *p <= 1) {
		errs = append(errs, fmt.Errorf("tracing.sampling.probability: %v is not allowed: want 0..1, the share of new traces recorded (unset: 1); set e.g. probability: 0.1", *p))
	}
	switch t := strings.ToLower(c.Propagation.Type); t {
	case "", "w3c":
	default:
		errs = append(errs, fmt.Errorf("tracing.propagation.type: %q is not built in: want W3C (traceparent, tracestate and baggage, as dubbo-go sends them); for another format (B3: go.opentelemetry.io/contrib/propagators/b3) pass weft.WithTextMapPropagator to weft.New and remove the key", c.Propagation.Type))
	}
	if c.Exporter.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tracing.exporter.timeout: %d is not allowed: want ms >= 0 (0 or unset: the exporter's default, 10000); set the ms one export may take, or remove the key", c.Exporter.Timeout))
	}
	switch strings.ToLower(c.Exporter.Compression) {
	case "", "none", "gzip":
	default:
		errs = append(errs, fmt.Errorf("tracing.exporter.compression: %q is not allowed: want gzip or none; set one of them or remove the key", c.Exporter.Compression))
	}
	return errs
}

// exporterModules names, by exporter type, the module that provides it, so
// that a program that lacks it is told what to add.
var exporterModules = map[string]struct{ module, plugin string }{
	"otlp-grpc": {"github.com/weftrpc/weft/tracing-otlp", "otlp.Plugin()"},
	"otlp-http": {"github.com/weftrpc/weft/tracing-otlp", "otlp.Plugin()"},
}

// NoneExporter is the built-in exporter type that sends spans nowhere.
const NoneExporter = "none"

// WithTracerProvider makes the App trace with tp (for example an SDK
// provider of the program's own, with its exporters and sampler) instead of
// one built from tracing.*: tracing is then on unless config sets
// tracing.enable: false, and tracing.sampling and tracing.exporter are not
// used. The App never shuts tp down: its owner does, after the App stops.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return withFx(fx.Supply(&tracerProviderOption{tp}))
}

// WithTextMapPropagator replaces the W3C propagator (trace context and
// baggage) with p, e.g. B3 for a Zipkin mesh.
func WithTextMapPropagator(p propagation.TextMapPropagator) Option {
	return withFx(fx.Supply(&propagatorOption{p}))
}

type tracerProviderOption struct{ tp trace.TracerProvider }
type propagatorOption struct{ p propagation.TextMapPropagator }

// appTracing is the App's tracing: off, or the provider and propagator its
// filters use.
type appTracing struct {
	on   bool
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

type tracingIn struct {
	fx.In
	Cfg       *Config
	Log       *slog.Logger
	Exporters *kernel.Loader[extension.SpanExporterFactory]
	LC        fx.Lifecycle
	Closers   *closers
	TP        *tracerProviderOption `optional:"true"`
	Prop      *propagatorOption     `optional:"true"`
}

// newTracing builds the App's tracing from tracing.* at weft.New: the
// exporter is made here, so an exporter that is not linked, or one that
// refuses its settings, fails New rather than the first call.
func newTracing(in tracingIn) (*appTracing, error) {
	tc := in.Cfg.Tracing
	if errs := tc.check(); len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	on, set := tc.on()
	if !set && in.TP != nil {
		on = true
	}
	if !on {
		return &appTracing{}, nil
	}
	t := &appTracing{on: true, prop: tracing.Propagator()}
	if in.Prop != nil {
		t.prop = in.Prop.p
	}
	if in.TP != nil {
		t.tp = in.TP.tp
		return t, nil
	}
	typ := tc.Exporter.Type
	if typ == "" {
		typ = extension.DefaultSpanExporter
	}
	f, err := in.Exporters.Get(typ)
	if err != nil {
		if m, ok := exporterModules[typ]; ok {
			return nil, fmt.Errorf("weft: config: tracing.exporter.type: %s comes from the module %s, which this program does not link: "+
				"add it (go get %s), import it and pass weft.WithPlugins(%s) to weft.New; or set tracing.exporter.type to one that is linked (known: %s)",
				typ, m.module, m.module, m.plugin, strings.Join(in.Exporters.Names(), ", "))
		}
		return nil, fmt.Errorf("weft: config: tracing.exporter.type: %w", err)
	}
	exp, err := f.NewSpanExporter(context.Background(), extension.SpanExporterConfig{
		Type: typ, Endpoint: tc.Exporter.Endpoint, Insecure: tc.Exporter.Insecure,
		Timeout: time.Duration(tc.Exporter.Timeout) * time.Millisecond, Headers: tc.Exporter.Headers,
		Compression: strings.ToLower(tc.Exporter.Compression),
	})
	if err != nil {
		return nil, fmt.Errorf("weft: config: tracing.exporter (%s): %w", typ, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(serviceAttrs(in.Cfg.Application)...))
	if err != nil {
		res = resource.NewSchemaless(serviceAttrs(in.Cfg.Application)...)
	}
	tp := sdktrace.NewTracerProvider(
		// A call that carries a caller's trace follows its decision, so a
		// trace is recorded whole or not at all; new traces are sampled.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.probability()))),
		// Spans leave in batches, off the call path.
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	// Stopped after the runtime (hooks stop in reverse and the runtime's
	// is added later), so the last calls' spans are flushed.
	in.LC.Append(fx.StopHook(tp.Shutdown))
	in.Closers.add(tp.Shutdown)
	t.tp = tp
	in.Log.Info("weft: tracing on", "exporter", typ, "endpoint", tc.Exporter.Endpoint, "sampling.probability", tc.probability())
	return t, nil
}

func serviceAttrs(a ApplicationConfig) []attribute.KeyValue {
	var out []attribute.KeyValue
	if a.Name != "" {
		out = append(out, semconv.ServiceName(a.Name))
	}
	if a.Version != "" {
		out = append(out, semconv.ServiceVersion(a.Version))
	}
	return out
}

// tracingPlugins are the tracing filters and the built-in exporter. The
// filters are always registered, so that a filter list naming them is
// valid, but activate only when tracing is on: off, no chain has them and
// a call pays nothing.
func tracingPlugins() fx.Option {
	return fx.Options(
		fx.Provide(newTracing),
		plugin[extension.Filter](func(t *appTracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.on {
				return offFilter(tracing.ServerName, log)
			}
			return Extension[extension.Filter]{Name: tracing.ServerName, New: value(tracing.NewServer(t.tp, t.prop)), Activate: tracing.ServerActivation()}
		}),
		plugin[extension.Filter](func(t *appTracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.on {
				return offFilter(tracing.ClientName, log)
			}
			return Extension[extension.Filter]{Name: tracing.ClientName, New: value(tracing.NewClient(t.tp, t.prop)), Activate: tracing.ClientActivation()}
		}),
		plugin[extension.Filter](func(t *appTracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.on {
				return offFilter(tracing.PeerName, log)
			}
			return Extension[extension.Filter]{Name: tracing.PeerName, New: value(tracing.NewPeer()), Activate: tracing.ClientActivation()}
		}),
		plugin[extension.SpanExporterFactory](func() Extension[extension.SpanExporterFactory] {
			return Extension[extension.SpanExporterFactory]{Name: NoneExporter, New: value[extension.SpanExporterFactory](
				extension.SpanExporterFactoryFunc(func(context.Context, extension.SpanExporterConfig) (sdktrace.SpanExporter, error) {
					return noneExporter{}, nil
				}))}
		}),
	)
}

// offFilter is a tracing filter while tracing is off: it never activates,
// and where a filter list names it, it passes calls through, saying so once
// when the chain is built.
func offFilter(name string, log *slog.Logger) Extension[extension.Filter] {
	return Extension[extension.Filter]{Name: name, New: func() (extension.Filter, error) {
		log.Warn("weft: a filter list names "+name+" but tracing is off; it passes calls through: set tracing.enable: true to trace", "filter", name)
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			return next.Invoke(ctx, inv)
		}), nil
	}}
}

// noneExporter drops spans: tracing.exporter.type none.
type noneExporter struct{}

func (noneExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (noneExporter) Shutdown(context.Context) error                             { return nil }
