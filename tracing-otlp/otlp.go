// Package otlp provides weft's OTLP span exporters, otlp-grpc and
// otlp-http, on the OpenTelemetry SDK's. They are a module of their own
// because they pull gRPC and protobuf, which a weft program that does not
// export spans should not carry. Link them with
//
//	app, err := weft.New(weft.WithPlugins(otlp.Plugin()), ...)
//
// and configure them under tracing.exporter:
//
//	tracing:
//	  enable: true
//	  exporter: {type: otlp-grpc, endpoint: "collector:4317", insecure: true}
package otlp

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/fx"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
)

// Exporter names, dubbo-go's (otel.tracing.exporter).
const (
	GRPCName = "otlp-grpc"
	HTTPName = "otlp-http"
)

// Plugin registers both exporters with an App.
func Plugin() fx.Option {
	return fx.Options(
		weft.Plugin[extension.SpanExporterFactory](func() weft.Extension[extension.SpanExporterFactory] {
			return weft.Extension[extension.SpanExporterFactory]{Name: GRPCName, New: func() (extension.SpanExporterFactory, error) {
				return extension.SpanExporterFactoryFunc(NewGRPC), nil
			}}
		}),
		weft.Plugin[extension.SpanExporterFactory](func() weft.Extension[extension.SpanExporterFactory] {
			return weft.Extension[extension.SpanExporterFactory]{Name: HTTPName, New: func() (extension.SpanExporterFactory, error) {
				return extension.SpanExporterFactoryFunc(NewHTTP), nil
			}}
		}),
	)
}

// isURL tells a URL endpoint (Dubbo writes http://host:4317) from host:port.
func isURL(endpoint string) bool { return strings.Contains(endpoint, "://") }

// NewGRPC makes an OTLP/gRPC exporter. It connects lazily: a collector that
// is down delays nothing at start, and spans are retried, then dropped.
func NewGRPC(ctx context.Context, cfg extension.SpanExporterConfig) (sdktrace.SpanExporter, error) {
	var opts []otlptracegrpc.Option
	switch {
	case isURL(cfg.Endpoint):
		opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	case cfg.Endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracegrpc.WithTimeout(cfg.Timeout))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	if cfg.Compression == "gzip" {
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp-grpc exporter to %q: %w; check tracing.exporter.endpoint (host:port or http[s]://host:port)", cfg.Endpoint, err)
	}
	return exp, nil
}

// NewHTTP makes an OTLP/HTTP (protobuf) exporter; a URL endpoint without a
// path posts to it as it is, host:port posts to /v1/traces.
func NewHTTP(ctx context.Context, cfg extension.SpanExporterConfig) (sdktrace.SpanExporter, error) {
	var opts []otlptracehttp.Option
	switch {
	case isURL(cfg.Endpoint):
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	case cfg.Endpoint != "":
		opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracehttp.WithTimeout(cfg.Timeout))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	if cfg.Compression == "gzip" {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp-http exporter to %q: %w; check tracing.exporter.endpoint (host:port or http[s]://host:port/v1/traces)", cfg.Endpoint, err)
	}
	return exp, nil
}
