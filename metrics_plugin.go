package weft

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/builtin"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/internal/observe"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/metrics"
)

// The metrics block's parts (plugins/filter/metrics).
type (
	MetricsPrometheusConfig  = metrics.PrometheusConfig
	MetricsExporterConfig    = metrics.ExporterConfig
	MetricsAggregationConfig = metrics.AggregationConfig
	MetricsHistogramConfig   = metrics.HistogramConfig
)

// MetricsHandler serves the App's metrics in Prometheus's text format: what
// the QoS server mounts at /metrics. With metrics off (metrics.enable:
// false) it answers 404 saying so.
func (a *App) MetricsHandler() http.Handler {
	var obs *observe.Observer
	if a.rt != nil {
		obs = a.rt.Observer()
	}
	if obs == nil || obs.Metrics == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "weft: metrics are off in this App; set metrics.enable: true", http.StatusNotFound)
		})
	}
	return obs.Metrics.Handler()
}

// metricsOut puts the metrics filter (none when off) into the filter group.
type metricsOut struct {
	fx.Out
	Filters []Extension[extension.Filter] `group:"weft.filter,flatten"`
}

// metricsPlugin is the App's metrics: the observer the runtime counts into
// and, unless metrics.enable is false, the registry, the "metrics" filter
// of both sides, the scrape-time sources and dubbo-go's optional
// stand-alone exporter.
func metricsPlugin() fx.Option {
	return fx.Options(
		fx.Provide(observe.New),
		fx.Provide(newMetrics),
	)
}

func newMetrics(cfg *Config, obs *observe.Observer, protocols *kernel.Loader[extension.Protocol], wasm engine.WasmSet,
	st *builtin.State, lc fx.Lifecycle, log *slog.Logger) (metricsOut, error) {
	mc := cfg.Metrics
	reg, err := obs.Start(mc, cfg.Application.Name, cfg.Application.Version, protocols, wasm, st.Sources())
	if reg == nil {
		return metricsOut{}, err
	}
	if mc.Prometheus.Exporter.Enabled {
		var srv *metrics.Server
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error {
				s, err := metrics.Serve(mc.ExporterAddr(), mc.MetricsPath(), reg.Handler())
				if err != nil {
					return fmt.Errorf("weft: metrics.prometheus.exporter: %w", err)
				}
				srv = s
				log.Info("weft: metrics exporter listening", "addr", s.Addr(), "path", mc.MetricsPath())
				return nil
			},
			OnStop: func(ctx context.Context) error {
				if srv == nil {
					return nil
				}
				return srv.Close(ctx)
			},
		})
	}
	f := reg.Filter()
	return metricsOut{Filters: []Extension[extension.Filter]{{Name: metrics.Name, New: value(f), Activate: metrics.Activation()}}}, nil
}
