package tracing

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultSpanExporter is the exporter tracing uses when config names none:
// OTLP over gRPC, as Dubbo's tracing-exporter.otlp-config. It lives in the
// separate module github.com/weftrpc/weft/tracing-otlp (it pulls gRPC and
// protobuf), so a program that enables tracing links that module or names
// another exporter.
const DefaultSpanExporter = "otlp-grpc"

// SpanExporterConfig is tracing.exporter as a factory receives it.
type SpanExporterConfig struct {
	// Type is the factory's name (otlp-grpc, otlp-http, none, ...).
	Type string
	// Endpoint is where spans go: host:port, or a URL
	// (http://collector:4318/v1/traces). Empty: the exporter's own default,
	// which honours the OTEL_EXPORTER_OTLP_* environment variables.
	Endpoint string
	// Insecure sends without TLS (an http:// endpoint implies it).
	Insecure bool
	// Timeout bounds one export; 0: the exporter's default (10 s).
	Timeout time.Duration
	// Headers go with every export (an API key, a tenant).
	Headers map[string]string
	// Compression is "gzip" or "" (none).
	Compression string
}

// SpanExporterFactory makes the span exporter that tracing.exporter.type
// names. The App calls it once, at weft.New, and shuts the exporter down
// (flushing what is queued) when it stops.
type SpanExporterFactory interface {
	NewSpanExporter(ctx context.Context, cfg SpanExporterConfig) (sdktrace.SpanExporter, error)
}

// SpanExporterFactoryFunc adapts a function to SpanExporterFactory.
type SpanExporterFactoryFunc func(ctx context.Context, cfg SpanExporterConfig) (sdktrace.SpanExporter, error)

// NewSpanExporter calls f.
func (f SpanExporterFactoryFunc) NewSpanExporter(ctx context.Context, cfg SpanExporterConfig) (sdktrace.SpanExporter, error) {
	return f(ctx, cfg)
}
