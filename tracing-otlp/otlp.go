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
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/plugins/filter/tracing"
)

// Exporter names, dubbo-go's (otel.tracing.exporter).
const (
	GRPCName = "otlp-grpc"
	HTTPName = "otlp-http"
)

// Plugin registers both exporters with an App.
func Plugin() weft.Plugin {
	return weft.NewPlugin("otlp",
		weft.Provide(GRPCName, func(weft.Host) (tracing.SpanExporterFactory, error) {
			return tracing.SpanExporterFactoryFunc(NewGRPC), nil
		}, nil),
		weft.Provide(HTTPName, func(weft.Host) (tracing.SpanExporterFactory, error) {
			return tracing.SpanExporterFactoryFunc(NewHTTP), nil
		}, nil),
	)
}

// isURL tells a URL endpoint (Dubbo writes http://host:4317) from host:port.
func isURL(endpoint string) bool { return strings.Contains(endpoint, "://") }

// options maps cfg onto one exporter's options: the gRPC and HTTP
// exporters take the same settings through option types of their own.
type options[O any] struct {
	url, endpoint func(string) O
	insecure      func() O
	timeout       func(time.Duration) O
	headers       func(map[string]string) O
	gzip          func() O
}

func (o options[O]) from(cfg tracing.SpanExporterConfig) []O {
	var opts []O
	switch {
	case isURL(cfg.Endpoint):
		opts = append(opts, o.url(cfg.Endpoint))
	case cfg.Endpoint != "":
		opts = append(opts, o.endpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, o.insecure())
	}
	if cfg.Timeout > 0 {
		opts = append(opts, o.timeout(cfg.Timeout))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, o.headers(cfg.Headers))
	}
	if cfg.Compression == "gzip" {
		opts = append(opts, o.gzip())
	}
	return opts
}

// NewGRPC makes an OTLP/gRPC exporter. It connects lazily: a collector that
// is down delays nothing at start, and spans are retried, then dropped.
func NewGRPC(ctx context.Context, cfg tracing.SpanExporterConfig) (sdktrace.SpanExporter, error) {
	exp, err := otlptracegrpc.New(ctx, options[otlptracegrpc.Option]{
		url: otlptracegrpc.WithEndpointURL, endpoint: otlptracegrpc.WithEndpoint,
		insecure: otlptracegrpc.WithInsecure, timeout: otlptracegrpc.WithTimeout,
		headers: otlptracegrpc.WithHeaders,
		gzip:    func() otlptracegrpc.Option { return otlptracegrpc.WithCompressor("gzip") },
	}.from(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("otlp-grpc exporter to %q: %w; check tracing.exporter.endpoint (host:port or http[s]://host:port)", cfg.Endpoint, err)
	}
	return exp, nil
}

// NewHTTP makes an OTLP/HTTP (protobuf) exporter; a URL endpoint without a
// path posts to it as it is, host:port posts to /v1/traces.
func NewHTTP(ctx context.Context, cfg tracing.SpanExporterConfig) (sdktrace.SpanExporter, error) {
	exp, err := otlptracehttp.New(ctx, options[otlptracehttp.Option]{
		url: otlptracehttp.WithEndpointURL, endpoint: otlptracehttp.WithEndpoint,
		insecure: otlptracehttp.WithInsecure, timeout: otlptracehttp.WithTimeout,
		headers: otlptracehttp.WithHeaders,
		gzip:    func() otlptracehttp.Option { return otlptracehttp.WithCompression(otlptracehttp.GzipCompression) },
	}.from(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("otlp-http exporter to %q: %w; check tracing.exporter.endpoint (host:port or http[s]://host:port/v1/traces)", cfg.Endpoint, err)
	}
	return exp, nil
}
