package weft

import (
	"context"
	"errors"
	"fmt"
	netty "github.com/weftrpc/weft/transport-netty"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/metrics"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
)

// observer counts the App's life events that metrics export: registry
// registrations, subscriptions and notifications, config-center documents.
// The runtime counts into it whether metrics are on or not (a few atomic
// adds on rare events); the metrics read it at scrape time. Its methods
// accept a nil observer.
type observer struct {
	register, registerFailed   atomic.Int64
	subscribe, subscribeFailed atomic.Int64
	notify, notifyLast         atomic.Int64

	applied, restart, rejected atomic.Int64

	mu      sync.Mutex
	changes map[metrics.ConfigChange]int64 // Count 0 in the key
	seen    map[string]bool                // documents seen, by key and group

	// metrics is the App's registry; nil when metrics are off.
	metrics *metrics.Registry
}

func newObserver() *observer {
	return &observer{changes: map[metrics.ConfigChange]int64{}, seen: map[string]bool{}}
}

func (o *observer) registered(err error) {
	if o == nil {
		return
	}
	o.register.Add(1)
	if err != nil {
		o.registerFailed.Add(1)
	}
}

func (o *observer) subscribed(err error) {
	if o == nil {
		return
	}
	o.subscribe.Add(1)
	if err != nil {
		o.subscribeFailed.Add(1)
	}
}

func (o *observer) notified(providers int) {
	if o == nil {
		return
	}
	o.notify.Add(1)
	o.notifyLast.Store(int64(providers))
}

// configChanged counts a document received from the config center at
// address (its scheme is the config_center label), with Dubbo's change
// types: added (the first version seen), modified, deleted.
func (o *observer) configChanged(ev extension.ConfigChangedEvent, address string) {
	if o == nil {
		return
	}
	kind := "config"
	if u, err := kernel.ParseURL(address); err == nil {
		kind = u.Protocol
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	id := ev.Key + "\x00" + ev.Group
	change := "modified"
	switch {
	case ev.Deleted:
		change = "deleted"
		delete(o.seen, id)
	case !o.seen[id]:
		change = "added"
		o.seen[id] = true
	}
	o.changes[metrics.ConfigChange{Key: ev.Key, Group: ev.Group, ConfigCenter: kind, ChangeType: change}]++
}

// configApplied counts what a document did: err (rejected), or a report.
func (o *observer) configApplied(applied, restart bool, err error) {
	if o == nil {
		return
	}
	switch {
	case err != nil:
		o.rejected.Add(1)
	case applied:
		o.applied.Add(1)
	case restart:
		o.restart.Add(1)
	}
}

// MetricsHandler serves the App's metrics in Prometheus's text format: what
// the QoS server mounts at /metrics. With metrics off (metrics.enable:
// false) it answers 404 saying so.
func (a *App) MetricsHandler() http.Handler {
	if a.rt == nil || a.rt.obs == nil || a.rt.obs.metrics == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "weft: metrics are off in this App; set metrics.enable: true", http.StatusNotFound)
		})
	}
	return a.rt.obs.metrics.Handler()
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
		fx.Provide(newObserver),
		fx.Provide(newMetrics),
	)
}

func newMetrics(cfg *Config, obs *observer, protocols *kernel.Loader[extension.Protocol], wasm wasmSet,
	lc fx.Lifecycle, log *slog.Logger) (metricsOut, error) {
	mc := cfg.Metrics
	if errs := mc.check(); len(errs) > 0 {
		return metricsOut{}, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	if !mc.enabled() {
		return metricsOut{}, nil
	}
	reg, err := metrics.New(mc.options(cfg.Application))
	if err != nil {
		return metricsOut{}, fmt.Errorf("weft: config: %w", err)
	}
	if err := reg.AddSources(appSources(obs, protocols, wasm)); err != nil {
		return metricsOut{}, fmt.Errorf("weft: metrics: %w", err)
	}
	obs.metrics = reg
	if mc.Prometheus.Exporter.Enabled {
		var srv *metrics.Server
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error {
				s, err := metrics.Serve(mc.exporterAddr(), mc.path(), reg.Handler())
				if err != nil {
					return fmt.Errorf("weft: metrics.prometheus.exporter: %w", err)
				}
				srv = s
				log.Info("weft: metrics exporter listening", "addr", s.Addr(), "path", mc.path())
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

// appSources reads the App's state for the metrics, at scrape time only.
func appSources(obs *observer, protocols *kernel.Loader[extension.Protocol], wasm wasmSet) metrics.Sources {
	dubboProto := func() netty.StatsReporter {
		if !protocols.Has(dubbo.Name) {
			return nil
		}
		p, err := protocols.Get(dubbo.Name)
		if err != nil {
			return nil
		}
		dp, _ := p.(netty.StatsReporter)
		return dp
	}
	return metrics.Sources{
		ThreadPools: func() []metrics.ThreadPool {
			p := dubboProto()
			if p == nil {
				return nil
			}
			var out []metrics.ThreadPool
			for _, s := range p.ServerStats() {
				out = append(out, metrics.ThreadPool{Name: "DubboServerHandler-" + s.Addr,
					Core: s.Threads, Max: s.Threads, Largest: s.Largest, Active: s.Busy, Threads: s.Workers, Rejected: s.Rejected})
			}
			return out
		},
		Connections: func() []metrics.Connections {
			p := dubboProto()
			if p == nil {
				return nil
			}
			var server int64
			for _, s := range p.ServerStats() {
				server += int64(s.Connections)
			}
			return []metrics.Connections{{Side: kernel.SideProvider, Count: server}, {Side: kernel.SideConsumer, Count: p.ClientConnections()}}
		},
		Registry: func() metrics.RegistryStats {
			return metrics.RegistryStats{Register: obs.register.Load(), RegisterFailed: obs.registerFailed.Load(),
				Subscribe: obs.subscribe.Load(), SubscribeFailed: obs.subscribeFailed.Load(),
				Notify: obs.notify.Load(), NotifyLast: obs.notifyLast.Load()}
		},
		ConfigChanges: func() []metrics.ConfigChange {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			out := make([]metrics.ConfigChange, 0, len(obs.changes))
			for k, n := range obs.changes {
				k.Count = n
				out = append(out, k)
			}
			sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
			return out
		},
		ConfigApplies: func() metrics.ConfigApplies {
			return metrics.ConfigApplies{Applied: obs.applied.Load(), Restart: obs.restart.Load(), Rejected: obs.rejected.Load()}
		},
		Wasm: func() []metrics.WasmFilter {
			out := make([]metrics.WasmFilter, 0, len(wasm))
			for _, name := range sortedKeys(wasm) {
				s := wasm[name].Stats()
				out = append(out, metrics.WasmFilter{Name: name, Calls: s.Calls, Traps: s.Traps, Timeouts: s.Timeouts,
					Reloads: s.Reloads, FailedReloads: s.FailedReloads, Instances: int64(s.Live), MemoryBytes: s.MemoryBytes})
			}
			return out
		},
	}
}
