package weft

import (
	"log/slog"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/tracer"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/tracing"
)

// The tracing block's parts (plugins/filter/tracing).
type (
	TracingSamplingConfig    = tracing.SamplingConfig
	TracingPropagationConfig = tracing.PropagationConfig
	TracingExporterConfig    = tracing.ExporterConfig
)

// NoneExporter is the built-in exporter type that sends spans nowhere.
const NoneExporter = tracer.NoneExporter

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

type tracingIn struct {
	fx.In
	Cfg       *Config
	Log       *slog.Logger
	Exporters *kernel.Loader[tracing.SpanExporterFactory]
	LC        fx.Lifecycle
	Closers   *closers
	TP        *tracerProviderOption `optional:"true"`
	Prop      *propagatorOption     `optional:"true"`
}

// newTracing builds the App's tracing at weft.New: an exporter that is not
// linked, or one that refuses its settings, fails New rather than the
// first call.
func newTracing(in tracingIn) (*tracer.Tracing, error) {
	ti := tracer.In{Config: in.Cfg.Tracing, Application: in.Cfg.Application.Name, Version: in.Cfg.Application.Version,
		Log: in.Log, Exporters: in.Exporters}
	if in.TP != nil {
		ti.Provider = in.TP.tp
	}
	if in.Prop != nil {
		ti.Propagator = in.Prop.p
	}
	t, err := tracer.Build(ti)
	if err == nil && t.Shutdown != nil {
		// Stopped after the runtime (hooks stop in reverse and the
		// runtime's is added later), so the last calls' spans are flushed.
		in.LC.Append(fx.StopHook(t.Shutdown))
		in.Closers.add(t.Shutdown)
	}
	return t, err
}

// tracingPlugins are the tracing filters and the built-in exporter. The
// filters are always registered, so that a filter list naming them is
// valid, but activate only when tracing is on: off, no chain has them and
// a call pays nothing.
func tracingPlugins() fx.Option {
	return fx.Options(
		fx.Provide(newTracing),
		plugin[extension.Filter](func(t *tracer.Tracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.On {
				return Extension[extension.Filter]{Name: tracing.ServerName, New: tracer.Off(tracing.ServerName, log)}
			}
			return Extension[extension.Filter]{Name: tracing.ServerName, New: value(tracing.NewServer(t.Provider, t.Propagator)), Activate: tracing.ServerActivation()}
		}),
		plugin[extension.Filter](func(t *tracer.Tracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.On {
				return Extension[extension.Filter]{Name: tracing.ClientName, New: tracer.Off(tracing.ClientName, log)}
			}
			return Extension[extension.Filter]{Name: tracing.ClientName, New: value(tracing.NewClient(t.Provider, t.Propagator)), Activate: tracing.ClientActivation()}
		}),
		plugin[extension.Filter](func(t *tracer.Tracing, log *slog.Logger) Extension[extension.Filter] {
			if !t.On {
				return Extension[extension.Filter]{Name: tracing.PeerName, New: tracer.Off(tracing.PeerName, log)}
			}
			return Extension[extension.Filter]{Name: tracing.PeerName, New: value(tracing.NewPeer()), Activate: tracing.ClientActivation()}
		}),
		plugin[tracing.SpanExporterFactory](func() Extension[tracing.SpanExporterFactory] {
			return Extension[tracing.SpanExporterFactory]{Name: tracer.NoneExporter, New: value(tracer.None())}
		}),
	)
}
