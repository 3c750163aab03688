// Package metrics is Dubbo's metrics for weft: per service and method, on
// both sides of a call, the counters, gauges and latencies that dubbo-go
// 3.3 and Dubbo 3 (Java) export, under their names and labels, so Dubbo's
// Grafana dashboards read a weft App as they read a Dubbo one; and, read
// at scrape time from state the App keeps anyway, its thread pools,
// connections, registry and config-center events and WASM filters.
//
// It is built on prometheus/client_golang: one prometheus.Registry per
// Registry (never the process-wide default, so two Apps in one process
// export apart), the text exposition of promhttp, and its lock-free
// histogram. The per-call path (the "metrics" filter) resolves the
// children of a (service, method) once and then pays only atomic adds: no
// lock, no allocation, no label lookup.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Name is the filter's extension name, Dubbo's.
const Name = "metrics"

// UnknownMethod is the method label of calls whose method the service does
// not have: names that came off the wire never become label values, so a
// caller cannot grow the App's memory by inventing methods.
const UnknownMethod = "(unknown)"

// Defaults, Dubbo's where Dubbo has one.
const (
	// DefaultWindow and DefaultWindowBuckets are dubbo-go's aggregation
	// window (time-window-seconds 120, bucket-num 10).
	DefaultWindow        = 120 * time.Second
	DefaultWindowBuckets = 10
	// DefaultMaxMethods bounds the method labels of one service whose
	// methods are not known in advance (a consumer, or a provider URL
	// without `methods`); later names count as UnknownMethod.
	DefaultMaxMethods = 256
)

// DefaultBucketsMs are the latency histogram's upper bounds in ms: from
// 0.1 ms (a loopback call) to 10 s.
var DefaultBucketsMs = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}

// Options configure a Registry.
type Options struct {
	// Application and ApplicationVersion are the application_name and
	// application_version labels.
	Application, ApplicationVersion string
	// Hostname and IP are the hostname and ip labels; empty: this host's
	// name and first non-loopback IPv4 address, as dubbo-go finds them.
	Hostname, IP string
	// BucketsMs are the latency histogram's bounds (ascending, > 0);
	// nil: DefaultBucketsMs.
	BucketsMs []float64
	// Aggregation adds the sliding-window metrics (qps, p50..p99, the
	// *_aggregate gauges), computed at scrape time over Window in
	// WindowBuckets steps.
	Aggregation   bool
	Window        time.Duration
	WindowBuckets int
	// MaxMethods: see DefaultMaxMethods; 0 takes it.
	MaxMethods int
}

// Registry holds one App's metrics.
type Registry struct {
	opt Options
	reg *prometheus.Registry
	// app are the values of appLabels.
	app []string
	rpc *rpcCollector
}

// Labels of application-level metrics, as dubbo-go's ApplicationMetricLevel.
var appLabels = []string{"application_name", "application_version", "hostname", "ip"}

// New makes a Registry; the error says which option is wrong.
func New(o Options) (*Registry, error) {
	if o.BucketsMs == nil {
		o.BucketsMs = DefaultBucketsMs
	}
	for i, b := range o.BucketsMs {
		if b <= 0 || (i > 0 && b <= o.BucketsMs[i-1]) {
			return nil, fmt.Errorf("metrics: histogram buckets %v: want ascending bounds in ms above 0, e.g. [1, 5, 10, 50, 100]", o.BucketsMs)
		}
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.WindowBuckets <= 0 {
		o.WindowBuckets = DefaultWindowBuckets
	}
	if o.MaxMethods <= 0 {
		o.MaxMethods = DefaultMaxMethods
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
	}
	if o.IP == "" {
		o.IP = localIP()
	}
	r := &Registry{opt: o, reg: prometheus.NewRegistry(),
		app: []string{o.Application, o.ApplicationVersion, o.Hostname, o.IP}}
	r.rpc = newRPCCollector(r)
	if err := r.rpc.register(r.reg); err != nil {
		return nil, err
	}
	return r, nil
}

// Handler serves the exposition (Prometheus text, or what the scraper
// negotiates): what the QoS server mounts at /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer is the underlying registry, for tests and for pushing.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Register adds a collector of the App's own (a plugin's) to the registry.
func (r *Registry) Register(c prometheus.Collector) error { return r.reg.Register(c) }

// localIP is the first non-loopback IPv4 address of this host, "" if none:
// what dubbo-go's GetLocalIp puts in the ip label.
func localIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var ips []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ips = append(ips, n.IP.String())
		}
	}
	if len(ips) == 0 {
		return ""
	}
	sort.Strings(ips)
	return ips[0]
}

// Server serves a handler on its own port: dubbo-go's stand-alone
// exporter (metrics.prometheus.exporter), and the tests' way to scrape an
// App without a QoS server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  atomic.Pointer[error]
	once sync.Once
}

// Serve listens on addr ("127.0.0.1:0" for a free port) and serves h at
// path (and only there).
func Serve(addr, path string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w; choose a free port (metrics.port) or 0", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err.Store(&err)
		}
	}()
	return s, nil
}

// Addr is the bound address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, letting scrapes in progress finish until ctx
// ends.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		err = s.srv.Shutdown(ctx)
		<-s.done
		if e := s.err.Load(); e != nil && err == nil {
			err = *e
		}
	})
	return err
}
