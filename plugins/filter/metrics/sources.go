package metrics

import "github.com/prometheus/client_golang/prometheus"

// The App's other metrics are read when Prometheus scrapes, from counts
// the App keeps anyway: nothing of them is on the call path. Each source
// is a function the App gives the Registry; this package knows none of the
// transport, registries or WASM host.

// ThreadPool is one provider server's pool (Dubbo's fixed pool of
// `threads`, a SynchronousQueue: no queue).
type ThreadPool struct {
	// Name is the thread_pool_name label, Dubbo's
	// "DubboServerHandler-<ip>:<port>".
	Name                                       string
	Core, Max, Largest, Active, Threads, Queue int64
	Rejected                                   int64
}

// Connections are the open connections of one side: "provider" (accepted)
// or "consumer" (dialled).
type Connections struct {
	Side  string
	Count int64
}

// RegistryStats are the registry layer's counts: registrations and
// subscriptions made and failed, notifications received and the number of
// providers the last one listed.
type RegistryStats struct {
	Register, RegisterFailed   int64
	Subscribe, SubscribeFailed int64
	Notify, NotifyLast         int64
}

// ConfigChange counts the config-center documents received with one set
// of labels (dubbo_configcenter_total): the document's key and group, the
// config center's kind ("nacos") and Dubbo's change type (added, modified,
// deleted).
type ConfigChange struct {
	Key, Group, ConfigCenter, ChangeType string
	Count                                int64
}

// ConfigApplies count what became of the documents: applied (something
// changed at once), restart (a change that needs one), rejected (did not
// decode or named an unknown extension).
type ConfigApplies struct {
	Applied, Restart, Rejected int64
}

// WasmFilter is one WASM filter's counts (wasmfilter.Stats).
type WasmFilter struct {
	Name                   string
	Calls, Traps, Timeouts int64
	Reloads, FailedReloads int64
	Instances, MemoryBytes int64
	FailOpen               int64
	StartFailures          int64 // instances that failed to start
	Backoffs               int64 // crash-loop back-offs begun
	// Guest are the metrics a proxy-wasm guest defined.
	Guest []GuestMetric
}

// GuestMetric is one metric a WASM guest defined: a counter or gauge
// (Value), or a histogram (Buckets, cumulative counts at Bounds, Count,
// Sum). Name is its name on /metrics.
type GuestMetric struct {
	Name      string
	Histogram bool
	Counter   bool
	Value     int64
	Bounds    []float64
	Buckets   []uint64
	Count     uint64
	Sum       float64
}

// Sources are the App's scrape-time readers; nil ones export nothing.
type Sources struct {
	ThreadPools   func() []ThreadPool
	Connections   func() []Connections
	Registry      func() RegistryStats
	ConfigChanges func() []ConfigChange
	ConfigApplies func() ConfigApplies
	Wasm          func() []WasmFilter
	// CircuitBreakers are the consumer's circuit breakers, all together.
	CircuitBreakers func() CircuitBreakers
	// Limiters are the provider's adaptive concurrency limits.
	Limiters func() Limiters
	// References are the references whose outlier detection or retry
	// budget is on.
	References func() []ReferenceStats
}

// ReferenceStats are one reference's outlier detection (providers ejected
// since the App started, and out now) and retry budget (extra attempts it
// allowed and refused).
type ReferenceStats struct {
	Reference, Service            string
	Outlier                       bool
	Ejections, Ejected            int64
	Budget                        bool
	RetriesAllowed, RetriesDenied int64
}

// CircuitBreakers count what the consumer's circuit breakers (one per
// provider and method) did: times one opened and closed again, calls one
// failed at once, and how many are open (or probing) now.
type CircuitBreakers struct {
	Opened, Closed, Rejected, Open int64
}

// Limiters are the provider's adaptive concurrency limits (the padasvc
// filter): calls shed since the App started, and each service method's
// limit and calls in flight now.
type Limiters struct {
	Shed    int64
	Methods []LimiterMethod
}

// LimiterMethod is one service method's adaptive limit.
type LimiterMethod struct {
	Service, Method string
	Limit, Inflight int64
}

// AddSources registers the collectors of s.
func (r *Registry) AddSources(s Sources) error {
	return r.reg.Register(&sourceCollector{r: r, s: s})
}

type sourceCollector struct {
	r *Registry
	s Sources
}

func (*sourceCollector) Describe(chan<- *prometheus.Desc) {}

// Thread pool names are Java's MetricsKey (dubbo.thread.pool.*); Java
// exports all of them, the reject count too, as gauges.
var (
	poolLabels = append(append([]string(nil), appLabels...), "thread_pool_name")
	poolNames  = []struct{ name, help string }{
		{"dubbo_thread_pool_core_size", "Thread Pool Core Size"},
		{"dubbo_thread_pool_largest_size", "Thread Pool Largest Size"},
		{"dubbo_thread_pool_max_size", "Thread Pool Max Size"},
		{"dubbo_thread_pool_active_size", "Thread Pool Active Size"},
		{"dubbo_thread_pool_thread_count", "Thread Pool Thread Count"},
		{"dubbo_thread_pool_queue_size", "Thread Pool Queue Size"},
		{"dubbo_thread_pool_reject_thread_count", "Thread Pool Reject Thread Count (calls answered with status 100)"},
	}
)

// sample is one value of a family the collector emits with the App's
// labels (and the source's own).
type sample struct {
	name, help string
	t          prometheus.ValueType
	v          int64
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	app := c.r.app
	emit := func(name, help string, t prometheus.ValueType, v float64, names []string, values ...string) {
		d := prometheus.NewDesc(name, help, names, nil)
		ch <- prometheus.MustNewConstMetric(d, t, v, values...)
	}
	with := func(extra ...string) []string { return append(append([]string(nil), app...), extra...) }
	if f := c.s.ThreadPools; f != nil {
		for _, p := range f() {
			vals := []int64{p.Core, p.Largest, p.Max, p.Active, p.Threads, p.Queue, p.Rejected}
			for i, n := range poolNames {
				emit(n.name, n.help, prometheus.GaugeValue, float64(vals[i]), poolLabels, with(p.Name)...)
			}
		}
	}
	if f := c.s.Connections; f != nil {
		names := append(append([]string(nil), appLabels...), "side")
		for _, cn := range f() {
			emit("weft_connections", "Open connections: accepted by this App's servers (side provider) or dialled to providers (side consumer)",
				prometheus.GaugeValue, float64(cn.Count), names, with(cn.Side)...)
		}
	}
	if f := c.s.Registry; f != nil {
		s := f()
		for _, m := range []sample{
			{"dubbo_registry_register_requests_total", "Total Register Requests", prometheus.CounterValue, s.Register},
			{"dubbo_registry_register_requests_succeed_total", "Succeed Register Requests", prometheus.CounterValue, s.Register - s.RegisterFailed},
			{"dubbo_registry_register_requests_failed_total", "Failed Register Requests", prometheus.CounterValue, s.RegisterFailed},
			{"dubbo_registry_subscribe_num_total", "Total Subscribe Num", prometheus.CounterValue, s.Subscribe},
			{"dubbo_registry_subscribe_num_succeed_total", "Succeed Subscribe Num", prometheus.CounterValue, s.Subscribe - s.SubscribeFailed},
			{"dubbo_registry_subscribe_num_failed_total", "Failed Subscribe Num", prometheus.CounterValue, s.SubscribeFailed},
			{"dubbo_registry_notify_requests_total", "Total Notify Requests", prometheus.CounterValue, s.Notify},
			{"dubbo_registry_notify_num_last", "Last Notify Nums: the providers the last notification listed", prometheus.GaugeValue, s.NotifyLast},
		} {
			emit(m.name, m.help, m.t, float64(m.v), appLabels, app...)
		}
	}
	if f := c.s.ConfigChanges; f != nil {
		// dubbo-go's ConfigCenterLevel: no application_version.
		names := []string{"application_name", "hostname", "ip", "key", "group", "config_center", "change_type"}
		for _, cc := range f() {
			emit("dubbo_configcenter_total", "Config Changed Total", prometheus.CounterValue, float64(cc.Count), names,
				app[0], app[2], app[3], cc.Key, cc.Group, cc.ConfigCenter, cc.ChangeType)
		}
	}
	if f := c.s.ConfigApplies; f != nil {
		s := f()
		names := append(append([]string(nil), appLabels...), "result")
		for _, m := range []struct {
			result string
			v      int64
		}{{"applied", s.Applied}, {"restart", s.Restart}, {"rejected", s.Rejected}} {
			emit("weft_configcenter_applies_total", "Config-center documents by what became of them: applied, restart (a change that needs one, not applied), rejected",
				prometheus.CounterValue, float64(m.v), names, with(m.result)...)
		}
	}
	if f := c.s.CircuitBreakers; f != nil {
		b := f()
		for _, m := range []sample{
			{"weft_circuitbreaker_opened_total", "Times a circuit breaker (per provider and method) opened", prometheus.CounterValue, b.Opened},
			{"weft_circuitbreaker_closed_total", "Times an open circuit breaker closed again after its probes passed", prometheus.CounterValue, b.Closed},
			{"weft_circuitbreaker_rejected_total", "Calls an open circuit breaker failed at once (failover may have sent them to another provider)", prometheus.CounterValue, b.Rejected},
			{"weft_circuitbreaker_open", "Circuit breakers open or probing now", prometheus.GaugeValue, b.Open},
		} {
			emit(m.name, m.help, m.t, float64(m.v), appLabels, app...)
		}
	}
	if f := c.s.Limiters; f != nil {
		l := f()
		if l.Shed > 0 || len(l.Methods) > 0 {
			emit("weft_adaptive_limiter_shed_total", "Calls the provider's adaptive concurrency limiters shed (answered status 100 / RESOURCE_EXHAUSTED)",
				prometheus.CounterValue, float64(l.Shed), appLabels, app...)
		}
		names := append(append([]string(nil), appLabels...), "interface", "method")
		for _, m := range l.Methods {
			emit("weft_adaptive_limiter_limit", "A service method's adaptive concurrency limit now", prometheus.GaugeValue,
				float64(m.Limit), names, with(m.Service, m.Method)...)
			emit("weft_adaptive_limiter_inflight", "Calls of a service method running under its adaptive limit now", prometheus.GaugeValue,
				float64(m.Inflight), names, with(m.Service, m.Method)...)
		}
	}
	if f := c.s.References; f != nil {
		names := append(append([]string(nil), appLabels...), "reference", "interface")
		budget := append(append([]string(nil), names...), "result")
		for _, o := range f() {
			if o.Outlier {
				emit("weft_outlier_ejections_total", "Providers outlier detection ejected from a reference's directory", prometheus.CounterValue,
					float64(o.Ejections), names, with(o.Reference, o.Service)...)
				emit("weft_outlier_ejected", "Providers outlier detection holds out of a reference's directory now", prometheus.GaugeValue,
					float64(o.Ejected), names, with(o.Reference, o.Service)...)
			}
			if o.Budget {
				for _, r := range []struct {
					result string
					v      int64
				}{{"allowed", o.RetriesAllowed}, {"denied", o.RetriesDenied}} {
					emit("weft_retry_budget_attempts_total", "Extra attempts (retries, forks, backups) a reference's retry budget allowed or denied",
						prometheus.CounterValue, float64(r.v), budget, with(o.Reference, o.Service, r.result)...)
				}
			}
		}
	}
	if f := c.s.Wasm; f != nil {
		names := append(append([]string(nil), appLabels...), "filter")
		// Guest metric names are the guests' to choose: two filters may give
		// one name to metrics of two kinds, which one metric family cannot
		// hold (the whole scrape would fail). The first kind seen keeps the
		// name, in filter order; another kind goes out as <name>_<kind>.
		kinds := map[string]string{}
		for _, w := range f() {
			for _, m := range []sample{
				{"weft_wasm_calls_total", "Calls the WASM filter ran", prometheus.CounterValue, w.Calls},
				{"weft_wasm_traps_total", "Guest calls that trapped, exited or broke the ABI (each costs its instance)", prometheus.CounterValue, w.Traps},
				{"weft_wasm_timeouts_total", "Guest calls stopped at their deadline or cancelled", prometheus.CounterValue, w.Timeouts},
				{"weft_wasm_reloads_total", "Module files reloaded", prometheus.CounterValue, w.Reloads},
				{"weft_wasm_reload_failures_total", "Module files that did not load (the old module kept serving)", prometheus.CounterValue, w.FailedReloads},
				{"weft_wasm_instances", "Live instances of the current module", prometheus.GaugeValue, w.Instances},
				{"weft_wasm_memory_bytes", "Linear memory of the live instances", prometheus.GaugeValue, w.MemoryBytes},
				{"weft_wasm_fail_open_total", "Calls a failed guest let through (fail_open)", prometheus.CounterValue, w.FailOpen},
				{"weft_wasm_start_failures_total", "Instances that failed to start (a trap in start-up, a refused configuration, the start-up limit)", prometheus.CounterValue, w.StartFailures},
				{"weft_wasm_backoffs_total", "Crash-loop back-offs begun: instances kept failing to start, none started for a while", prometheus.CounterValue, w.Backoffs},
			} {
				emit(m.name, m.help, m.t, float64(m.v), names, with(w.Name)...)
			}
			for _, g := range w.Guest {
				const help = "Defined by the WASM filter's guest (proxy_define_metric)"
				kind := "gauge"
				switch {
				case g.Histogram:
					kind = "histogram"
				case g.Counter:
					kind = "counter"
				}
				if first, seen := kinds[g.Name]; !seen {
					kinds[g.Name] = kind
				} else if first != kind {
					g.Name += "_" + kind
				}
				switch {
				case g.Histogram:
					buckets := make(map[float64]uint64, len(g.Bounds))
					for i, b := range g.Bounds {
						buckets[b] = g.Buckets[i]
					}
					d := prometheus.NewDesc(g.Name, help, names, nil)
					ch <- prometheus.MustNewConstHistogram(d, g.Count, g.Sum, buckets, with(w.Name)...)
				case g.Counter:
					emit(g.Name, help, prometheus.CounterValue, float64(g.Value), names, with(w.Name)...)
				default:
					emit(g.Name, help, prometheus.GaugeValue, float64(g.Value), names, with(w.Name)...)
				}
			}
		}
	}
}
