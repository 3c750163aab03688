package otlp_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft"
	otlp "github.com/weftrpc/weft/tracing-otlp"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// receiver is the trace service of an OTLP collector, over gRPC or HTTP:
// it keeps every span with its resource's service.name, and the headers of
// the last export.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []gotSpan
	headers map[string]string
}

type gotSpan struct {
	service string
	span    *tracepb.Span
}

func (r *receiver) add(req *collectortrace.ExportTraceServiceRequest, headers map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = headers
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, gotSpan{service, s})
			}
		}
	}
}

func (r *receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, v := range md {
		h[k] = v[0]
	}
	r.add(req, h)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP's POST /v1/traces with a protobuf body.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg, map[string]string{"x-tenant": req.Header.Get("X-Tenant"), "content-encoding": req.Header.Get("Content-Encoding")})
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *receiver) snapshot() ([]gotSpan, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gotSpan(nil), r.spans...), r.headers
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startGRPC(t *testing.T, r *receiver) string {
	ln := listen(t)
	s := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(s, r)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func startHTTP(t *testing.T, r *receiver) string {
	ln := listen(t)
	s := &http.Server{Handler: r}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

type echo struct{}

func (echo) Echo(_ context.Context, s string) (string, error) { return s, nil }

type echoClient struct {
	Echo func(ctx context.Context, s string) (string, error)
}

func newApp(t *testing.T, yaml string, opts ...weft.Option) *weft.App {
	t.Helper()
	app, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(quiet),
		weft.WithConfig(weft.ConfigYAML(yaml)), weft.WithPlugins(otlp.Plugin())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}

// A consumer App and a provider App export their spans over OTLP to a
// receiver in the test: the client span and the server span arrive, in one
// trace, the server's parent the client's, each under its application's
// service.name.
func TestTracingOTLPExport(t *testing.T) {
	for _, c := range []struct {
		typ, extra string
		start      func(*testing.T, *receiver) string
		url        bool
	}{
		{typ: otlp.GRPCName, start: startGRPC, extra: `headers: {x-tenant: t1}`},
		// A URL endpoint (Dubbo's form), gzip, headers.
		{typ: otlp.HTTPName, start: startHTTP, url: true, extra: `compression: gzip, headers: {x-tenant: t1}`},
	} {
		t.Run(c.typ, func(t *testing.T) {
			r := &receiver{}
			addr := c.start(t, r)
			endpoint := addr
			if c.url {
				endpoint = "http://" + addr + "/v1/traces"
			}
			exporter := fmt.Sprintf("{type: %s, endpoint: %q, insecure: true, timeout: 5000, %s}", c.typ, endpoint, c.extra)
			ln := listen(t)
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			provider := newApp(t, fmt.Sprintf(`application: {name: otlp-provider}
tracing: {enable: true, exporter: %s}
protocols: {dubbo: {port: %d}}
provider: {services: {echo: {interface: org.weft.otlp.Echo}}}
`, exporter, port), weft.WithService("echo", echo{}))
			var cl echoClient
			consumer := newApp(t, fmt.Sprintf(`application: {name: otlp-consumer}
tracing: {enable: true, exporter: %s}
consumer: {references: {echo: {interface: org.weft.otlp.Echo, url: "dubbo://127.0.0.1:%d"}}}
`, exporter, port), weft.WithReference("echo", &cl))
			if got, err := cl.Echo(context.Background(), "hi"); err != nil || got != "hi" {
				t.Fatalf("echo: %q %v", got, err)
			}
			// Stopping flushes the batches.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := consumer.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := provider.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			spans, headers := r.snapshot()
			if len(spans) != 2 {
				t.Fatalf("received %d spans, want 2 (client, server): %v", len(spans), spans)
			}
			byKind := map[tracepb.Span_SpanKind]gotSpan{}
			for _, s := range spans {
				byKind[s.span.GetKind()] = s
			}
			cs, ss := byKind[tracepb.Span_SPAN_KIND_CLIENT], byKind[tracepb.Span_SPAN_KIND_SERVER]
			if cs.span == nil || ss.span == nil {
				t.Fatalf("want a client and a server span, got %v", spans)
			}
			if cs.service != "otlp-consumer" || ss.service != "otlp-provider" {
				t.Errorf("service.name: client %q, server %q; want otlp-consumer, otlp-provider", cs.service, ss.service)
			}
			if hex.EncodeToString(ss.span.GetTraceId()) != hex.EncodeToString(cs.span.GetTraceId()) {
				t.Errorf("server span in trace %x, client in %x", ss.span.GetTraceId(), cs.span.GetTraceId())
			}
			if hex.EncodeToString(ss.span.GetParentSpanId()) != hex.EncodeToString(cs.span.GetSpanId()) {
				t.Errorf("server span's parent %x, want the client span %x", ss.span.GetParentSpanId(), cs.span.GetSpanId())
			}
			for _, s := range []*tracepb.Span{cs.span, ss.span} {
				if s.GetName() != "org.weft.otlp.Echo/echo" {
					t.Errorf("span name %q, want org.weft.otlp.Echo/echo", s.GetName())
				}
				found := false
				for _, kv := range s.GetAttributes() {
					if kv.GetKey() == "rpc.system" && kv.GetValue().GetStringValue() == "apache_dubbo" {
						found = true
					}
				}
				if !found {
					t.Errorf("span %s: no rpc.system=apache_dubbo in %v", s.GetKind(), s.GetAttributes())
				}
			}
			if headers["x-tenant"] != "t1" {
				t.Errorf("export headers %v, want x-tenant: t1", headers)
			}
			if c.typ == otlp.HTTPName && headers["content-encoding"] != "gzip" {
				t.Errorf("compression: gzip sent Content-Encoding %q", headers["content-encoding"])
			}
		})
	}
}
