package metrics

import (
	"fmt"
	"math"
	"time"
)

// Config is Dubbo's `metrics` block, with dubbo-go's key names:
//
//	metrics:
//	  enable: true              # default true (see DefaultOn)
//	  protocol: prometheus      # the only one
//	  prometheus:
//	    exporter: {enabled: false}  # true: serve /metrics on its own port
//	  port: 9090                # the exporter's port (0: a free one)
//	  path: /metrics
//	  aggregation:              # sliding-window qps, p50..p99, *_aggregate
//	    enabled: true
//	    bucket-num: 10
//	    time-window-seconds: 120
//	  histogram:
//	    buckets-ms: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]
//
// The QoS server serves the same metrics at /metrics on the QoS port
// (weft's App.MetricsHandler); the exporter is for Apps without one.
type Config struct {
	Enable      *bool             `koanf:"enable"`
	Protocol    string            `koanf:"protocol"`
	Port        *int              `koanf:"port"`
	Path        string            `koanf:"path"`
	Prometheus  PrometheusConfig  `koanf:"prometheus"`
	Aggregation AggregationConfig `koanf:"aggregation"`
	Histogram   HistogramConfig   `koanf:"histogram"`
}

// PrometheusConfig is dubbo-go's metrics.prometheus.
type PrometheusConfig struct {
	Exporter ExporterConfig `koanf:"exporter"`
}

// ExporterConfig is dubbo-go's metrics.prometheus.exporter.
type ExporterConfig struct {
	Enabled bool `koanf:"enabled"`
}

// AggregationConfig is dubbo-go's metrics.aggregation.
type AggregationConfig struct {
	Enabled           *bool `koanf:"enabled"`
	BucketNum         int   `koanf:"bucket-num"`
	TimeWindowSeconds int   `koanf:"time-window-seconds"`
}

// HistogramConfig is Dubbo Java's metrics.histogram.
type HistogramConfig struct {
	BucketsMs []float64 `koanf:"buckets-ms"`
}

// DefaultOn: metrics are on unless `metrics.enable: false`, as in
// Dubbo 3, because they cost so little: the filter takes about 150 ns per
// call and side and allocates nothing (BenchmarkFilter in
// plugins/filter/metrics), which on an echo round trip over loopback of
// some 20 µs is within the noise of a shared 2-core machine, well above
// 97% of the calls/s with metrics off, with the same 34 allocations per
// call (BenchmarkMetricsEcho in test/).
const DefaultOn = true

// Dubbo-go's defaults.
const (
	DefaultPort = 9090
	DefaultPath = "/metrics"
)

// Enabled says whether the App keeps metrics.
func (c Config) Enabled() bool {
	if c.Enable == nil {
		return DefaultOn
	}
	return *c.Enable
}

// Validate reports the settings that have no meaning, by key path, with what
// is wanted and the fix, as the rest of the config's checks do.
func (c Config) Validate() []error {
	var errs []error
	bad := func(path string, v any, want, fix string) {
		errs = append(errs, fmt.Errorf("%s: %v is not allowed: want %s; %s", path, v, want, fix))
	}
	if c.Protocol != "" && c.Protocol != "prometheus" {
		bad("metrics.protocol", fmt.Sprintf("%q", c.Protocol), "prometheus (the only metrics protocol)", "set protocol: prometheus or remove the key")
	}
	if c.Port != nil && (*c.Port < 0 || *c.Port > 65535) {
		bad("metrics.port", *c.Port, "0..65535 (0: a free port)", "set the exporter's port, e.g. 9090")
	}
	if c.Path != "" && c.Path[0] != '/' {
		bad("metrics.path", fmt.Sprintf("%q", c.Path), "a path starting with /", "set e.g. path: /metrics")
	}
	a := c.Aggregation
	if a.BucketNum < 0 || a.BucketNum > 1000 {
		bad("metrics.aggregation.bucket-num", a.BucketNum, "1..1000 steps per window (0 or unset: 10)", "set e.g. bucket-num: 10")
	}
	if a.TimeWindowSeconds < 0 || a.TimeWindowSeconds > math.MaxInt32 {
		bad("metrics.aggregation.time-window-seconds", a.TimeWindowSeconds, "seconds > 0 (0 or unset: 120)", "set e.g. time-window-seconds: 120")
	}
	if b := c.Histogram.BucketsMs; b != nil {
		for i := range b {
			if b[i] <= 0 || (i > 0 && b[i] <= b[i-1]) {
				bad("metrics.histogram.buckets-ms", b, "ascending bounds in ms above 0", "list them in order, e.g. [1, 5, 10, 50, 100, 500]")
				break
			}
		}
	}
	return errs
}

// Options are the collector's options for the application name and version.
func (c Config) Options(name, version string) Options {
	a := c.Aggregation
	return Options{
		Application:        name,
		ApplicationVersion: version,
		BucketsMs:          c.Histogram.BucketsMs,
		Aggregation:        a.Enabled == nil || *a.Enabled,
		Window:             time.Duration(a.TimeWindowSeconds) * time.Second,
		WindowBuckets:      a.BucketNum,
	}
}

// ExporterAddr is where the exporter of its own listens.
func (c Config) ExporterAddr() string {
	port := DefaultPort
	if c.Port != nil {
		port = *c.Port
	}
	return fmt.Sprintf(":%d", port)
}

// MetricsPath is the HTTP path of the metrics.
func (c Config) MetricsPath() string {
	if c.Path == "" {
		return DefaultPath
	}
	return c.Path
}
