package tracing

import (
	"fmt"
	"strings"
)

// Config turns on OpenTelemetry tracing: a server span per provider
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
type Config struct {
	// Enable turns tracing on (dubbo-go's otel.tracing.enable). Unset, it
	// is on only when the App was given weft.WithTracerProvider.
	Enable *bool `koanf:"enable"`
	// Enabled is Java Dubbo's spelling of Enable (dubbo.tracing.enabled).
	Enabled *bool `koanf:"enabled"`
	// Sampling decides which new traces are recorded; a call that carries
	// a caller's trace follows the caller's decision (parent-based).
	Sampling SamplingConfig `koanf:"sampling"`
	// Propagation names the wire format of the trace context.
	Propagation PropagationConfig `koanf:"propagation"`
	// Exporter says where spans go.
	Exporter ExporterConfig `koanf:"exporter"`
}

// SamplingConfig is Dubbo's dubbo.tracing.sampling.
type SamplingConfig struct {
	// Probability is the share of new traces recorded, 0..1 (default 1,
	// the OpenTelemetry SDK's; Dubbo's default is 0.1, dubbo-go's 0.5).
	Probability *float64 `koanf:"probability"`
}

// PropagationConfig is Dubbo's dubbo.tracing.propagation.
type PropagationConfig struct {
	// Type is W3C (traceparent, tracestate and baggage; the default, and
	// what dubbo-go's w3c propagator sends). Another format is given in
	// code with weft.WithTextMapPropagator.
	Type string `koanf:"type"`
}

// ExporterConfig is where spans go: Dubbo's
// tracing-exporter.otlp-config, with dubbo-go's exporter names.
type ExporterConfig struct {
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

// On says whether config turns tracing on; set says whether it says at all.
func (c Config) On() (on, set bool) {
	switch {
	case c.Enable != nil:
		return *c.Enable, true
	case c.Enabled != nil:
		return *c.Enabled, true
	}
	return false, false
}

// Probability is the sampling share, 1 when unset.
func (c Config) Probability() float64 {
	if c.Sampling.Probability == nil {
		return 1
	}
	return *c.Sampling.Probability
}

// Validate reports the values of tracing.* that have no meaning, with their
// key paths: they are checked whether tracing is on or not, so a typo does
// not wait for the day it is turned on.
func (c Config) Validate() []error {
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

// ExporterModules names, by exporter type, the module that provides it, so
// that a program that lacks it is told what to add.
var ExporterModules = map[string]struct{ Module, Plugin string }{
	"otlp-grpc": {"github.com/weftrpc/weft/tracing-otlp", "otlp.Plugin()"},
	"otlp-http": {"github.com/weftrpc/weft/tracing-otlp", "otlp.Plugin()"},
}

// NoneExporter is the built-in exporter type that sends spans nowhere.
const NoneExporter = "none"
