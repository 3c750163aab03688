// Package observe counts an App's life events for its metrics and builds
// the metrics themselves: the registry, the filter, the scrape-time sources
// (thread pools, connections, registries, config changes, WASM filters).
package observe

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/metrics"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Observer counts the App's life events that metrics export: registry
// registrations, subscriptions and notifications, config-center documents.
// The runtime counts into it whether metrics are on or not (a few atomic
// adds on rare events); the metrics read it at scrape time. Its methods
// accept a nil observer.
type Observer struct {
	register, registerFailed   atomic.Int64
	subscribe, subscribeFailed atomic.Int64
	notify, notifyLast         atomic.Int64

	applied, restart, rejected atomic.Int64

	mu      sync.Mutex
	changes map[metrics.ConfigChange]int64 // Count 0 in the key
	seen    map[string]bool                // documents seen, by key and group

	// services are the modules of services implemented in WASM, by
	// their metric name ("service:<id>"): reported beside the WASM
	// filters, read at scrape time (SetWasmServices).
	services atomic.Pointer[map[string]*wasmfilter.Filter]
	// references reads the references' outlier detection and retry
	// budgets (SetReferences).
	references atomic.Pointer[func() []metrics.ReferenceStats]

	// Metrics is the App's registry; nil when metrics are off.
	Metrics *metrics.Registry
}

// New returns an empty Observer.
func New() *Observer {
	return &Observer{changes: map[metrics.ConfigChange]int64{}, seen: map[string]bool{}}
}

// Registered counts a registration (err: a failed one).
func (o *Observer) Registered(err error) {
	if o == nil {
		return
	}
	o.register.Add(1)
	if err != nil {
		o.registerFailed.Add(1)
	}
}

// Subscribed counts a subscription (err: a failed one).
func (o *Observer) Subscribed(err error) {
	if o == nil {
		return
	}
	o.subscribe.Add(1)
	if err != nil {
		o.subscribeFailed.Add(1)
	}
}

// Notified counts a registry notification of providers.
func (o *Observer) Notified(providers int) {
	if o == nil {
		return
	}
	o.notify.Add(1)
	o.notifyLast.Store(int64(providers))
}

// ConfigChanged counts a document received from the config center at
// address (its scheme is the config_center label), with Dubbo's change
// types: added (the first version seen), modified, deleted.
func (o *Observer) ConfigChanged(ev extension.ConfigChangedEvent, address string) {
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

// ConfigApplied counts what a document did: err (rejected), or a report.
func (o *Observer) ConfigApplied(applied, restart bool, err error) {
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

// Start makes the App's metrics registry of mc into obs (unless
// metrics.enable is false: then it returns nil), reading the App's state at
// scrape time from its protocols and WASM filters.
func (obs *Observer) Start(mc metrics.Config, name, version string, protocols *kernel.Loader[extension.Protocol],
	wasm map[string]*wasmfilter.Filter, plugins metrics.Sources) (*metrics.Registry, error) {
	if !mc.Enabled() {
		return nil, nil
	}
	reg, err := metrics.New(mc.Options(name, version))
	if err != nil {
		return nil, fmt.Errorf("weft: config: %w", err)
	}
	src := obs.sources(protocols, wasm)
	src.CircuitBreakers, src.Limiters = plugins.CircuitBreakers, plugins.Limiters
	src.References = func() []metrics.ReferenceStats {
		if f := obs.references.Load(); f != nil {
			return (*f)()
		}
		return nil
	}
	if err := reg.AddSources(src); err != nil {
		return nil, fmt.Errorf("weft: metrics: %w", err)
	}
	obs.Metrics = reg
	return reg, nil
}

// sources reads the App's state for the metrics, at scrape time only.
func (obs *Observer) sources(protocols *kernel.Loader[extension.Protocol], wasm map[string]*wasmfilter.Filter) metrics.Sources {
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
			all := wasm
			if svc := obs.services.Load(); svc != nil && len(*svc) > 0 {
				all = make(map[string]*wasmfilter.Filter, len(wasm)+len(*svc))
				for k, f := range wasm {
					all[k] = f
				}
				for k, f := range *svc {
					all[k] = f
				}
			}
			out := make([]metrics.WasmFilter, 0, len(all))
			for _, name := range sortedNames(all) {
				s := all[name].Stats()
				w := metrics.WasmFilter{Name: name, Calls: s.Calls, Traps: s.Traps, Timeouts: s.Timeouts,
					Reloads: s.Reloads, FailedReloads: s.FailedReloads, Instances: int64(s.Live), MemoryBytes: s.MemoryBytes,
					FailOpen: s.FailOpen, StartFailures: s.StartFailures, Backoffs: s.Backoffs}
				for _, g := range s.GuestMetrics {
					w.Guest = append(w.Guest, metrics.GuestMetric{Name: wasmfilter.MetricName(g.Name),
						Counter: g.Kind == wasmfilter.MetricCounter, Histogram: g.Kind == wasmfilter.MetricHistogram,
						Value: g.Value, Bounds: wasmfilter.HistogramBounds, Buckets: g.Buckets, Count: g.Count, Sum: g.Sum})
				}
				out = append(out, w)
			}
			return out
		},
	}
}

func sortedNames(m map[string]*wasmfilter.Filter) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetWasmServices reports the modules of the services implemented in WASM
// with the WASM filters (weft_wasm_* metrics, label filter="service:<id>").
func (obs *Observer) SetWasmServices(m map[string]*wasmfilter.Filter) {
	if obs != nil {
		obs.services.Store(&m)
	}
}

// SetReferences gives the metrics the references' outlier detection and
// retry budgets, read at scrape time.
func (obs *Observer) SetReferences(f func() []metrics.ReferenceStats) {
	if obs != nil {
		obs.references.Store(&f)
	}
}
