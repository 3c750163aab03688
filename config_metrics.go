package weft

import (
	"fmt"
	"math"
	"time"

	"github.com/weftrpc/weft/plugins/filter/metrics"
)

// MetricsConfig is Dubbo's `metrics` block, with dubbo-go's key names:
//
//	metrics:
//	  enable: true              # default true (see metricsDefaultOn)
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
// ((*App).MetricsHandler); the exporter is for Apps without one.
type MetricsConfig struct {
	Enable      *bool                    `koanf:"enable"`
	Protocol    string                   `koanf:"protocol"`
	Port        *int                     `koanf:"port"`
	Path        string                   `koanf:"path"`
	Prometheus  MetricsPrometheusConfig  `koanf:"prometheus"`
	Aggregation MetricsAggregationConfig `koanf:"aggregation"`
	Histogram   MetricsHistogramConfig   `koanf:"histogram"`
}

// MetricsPrometheusConfig is dubbo-go's metrics.prometheus.
type MetricsPrometheusConfig struct {
	Exporter MetricsExporterConfig `koanf:"exporter"`
}

// MetricsExporterConfig is dubbo-go's metrics.prometheus.exporter.
type MetricsExporterConfig struct {
	Enabled bool `koanf:"enabled"`
}

// MetricsAggregationConfig is dubbo-go's metrics.aggregation.
type MetricsAggregationConfig struct {
	Enabled           *bool `koanf:"enabled"`
	BucketNum         int   `koanf:"bucket-num"`
	TimeWindowSeconds int   `koanf:"time-window-seconds"`
}

// MetricsHistogramConfig is Dubbo Java's metrics.histogram.
type MetricsHistogramConfig struct {
	BucketsMs []float64 `koanf:"buckets-ms"`
}

// metricsDefaultOn: metrics are on unless `metrics.enable: false`, as in
// Dubbo 3, because they cost so little: the filter takes about 150 ns per
// call and side and allocates nothing (BenchmarkFilter in
// plugins/filter/metrics), which on an echo round trip over loopback of
// some 20 µs is within the noise of a shared 2-core machine, well above
// 97% of the calls/s with metrics off, with the same 34 allocations per
// call (BenchmarkMetricsEcho in test/).
const metricsDefaultOn = true

// Dubbo-go's defaults.
const (
	defaultMetricsPort = 9090
	defaultMetricsPath = "/metrics"
)

func (c MetricsConfig) enabled() bool {
	if c.Enable == nil {
		return metricsDefaultOn
	}
	return *c.Enable
}

// check reports the settings that have no meaning, by key path, with what
// is wanted and the fix, as config.go's checks do.
func (c MetricsConfig) check() []error {
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

// options are the metrics package's options for an App of cfg.
func (c MetricsConfig) options(app ApplicationConfig) metrics.Options {
	a := c.Aggregation
	return metrics.Options{
		Application:        app.Name,
		ApplicationVersion: app.Version,
		BucketsMs:          c.Histogram.BucketsMs,
		Aggregation:        a.Enabled == nil || *a.Enabled,
		Window:             time.Duration(a.TimeWindowSeconds) * time.Second,
		WindowBuckets:      a.BucketNum,
	}
}

func (c MetricsConfig) exporterAddr() string {
	port := defaultMetricsPort
	if c.Port != nil {
		port = *c.Port
	}
	return fmt.Sprintf(":%d", port)
}

func (c MetricsConfig) path() string {
	if c.Path == "" {
		return defaultMetricsPath
	}
	return c.Path
}
