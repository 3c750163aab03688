package metrics

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Labels of the RPC metrics, dubbo-go's rpc.buildLabels.
var rpcLabels = append(append([]string(nil), appLabels...), "interface", "method", "group", "version")

// sides, in the order of the collector's tables.
const (
	sideProvider = iota
	sideConsumer
	numSides
)

var sideNames = [numSides]string{kernel.SideProvider, kernel.SideConsumer}

// methodStats are the counts of one (side, service, method): atomics the
// filter adds to, and the histogram child, resolved once. The collector
// reads them at scrape time.
type methodStats struct {
	side   int
	labels []string // values of rpcLabels

	total, succeed, failed atomic.Uint64
	reasons                [numReasons]atomic.Uint64
	processing             atomic.Int64
	// Latencies in ns (exposed in ms): Dubbo's rt gauges. min starts at
	// MaxInt64 (no call yet).
	rtSum, rtMin, rtMax, rtLast atomic.Int64
	hist                        prometheus.Observer

	win window // scrape-time only
}

// begin counts a call in.
func (m *methodStats) begin() { m.processing.Add(1) }

// end counts a call out: a few atomic adds, two short CAS loops, the
// histogram's lock-free observe.
func (m *methodStats) end(d time.Duration, err error) {
	ns := int64(d)
	m.processing.Add(-1)
	m.total.Add(1)
	if err == nil {
		m.succeed.Add(1)
	} else {
		m.failed.Add(1)
		m.reasons[reasonOf[kernel.CodeOf(err)]].Add(1)
	}
	m.rtSum.Add(ns)
	m.rtLast.Store(ns)
	for v := m.rtMin.Load(); ns < v && !m.rtMin.CompareAndSwap(v, ns); v = m.rtMin.Load() {
	}
	for v := m.rtMax.Load(); ns > v && !m.rtMax.CompareAndSwap(v, ns); v = m.rtMax.Load() {
	}
	m.hist.Observe(float64(ns) / 1e6)
}

// serviceStats are the methods of one invoker (an exported service, a
// reference's cluster), found by the filter through the invoker's URL.
type serviceStats struct {
	r                     *Registry
	side                  int
	iface, group, version string
	// fixed: the methods are the URL's `methods` (a provider's); any
	// other name counts as unknown. Otherwise names are added as they are
	// called, up to MaxMethods.
	fixed   bool
	methods atomic.Pointer[map[string]*methodStats]
	unknown *methodStats
	mu      sync.Mutex // serialises additions
}

func (s *serviceStats) method(name string) *methodStats {
	if m := (*s.methods.Load())[name]; m != nil {
		return m
	}
	if s.fixed {
		return s.unknown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.methods.Load()
	if m := old[name]; m != nil {
		return m
	}
	if len(old) >= s.r.opt.MaxMethods {
		return s.unknown
	}
	next := make(map[string]*methodStats, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	m := s.r.rpc.child(s.side, s.iface, name, s.group, s.version)
	next[name] = m
	s.methods.Store(&next)
	return m
}

// filter is the "metrics" filter of both sides: outermost on a provider,
// cluster-scoped (once per call, around routing, retries and load
// balancing, as Dubbo's MetricsClusterFilter) on a consumer.
type filter struct {
	r     *Registry
	mu    sync.Mutex // serialises additions to byURL
	byURL atomic.Pointer[map[*kernel.URL]*serviceStats]
}

// Filter returns the filter counting into r (an extension.ClusterScoped
// one).
func (r *Registry) Filter() extension.Filter {
	f := &filter{r: r}
	m := map[*kernel.URL]*serviceStats{}
	f.byURL.Store(&m)
	return f
}

// Activation: every call of both sides, first, as Dubbo's MetricsFilter
// (order Integer.MIN_VALUE + 100), so that it sees what every other filter
// does to the call (echo, token, limits, timeouts).
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider, kernel.GroupConsumer}, Order: math.MinInt32 + 100}
}

// ClusterScope makes the consumer side count each call once, with its
// retries, and see "no provider" failures: extension.ClusterScoped.
func (*filter) ClusterScope() {}

func (f *filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	m := f.service(next.URL()).method(inv.Method)
	m.begin()
	start := time.Now()
	res, err := next.Invoke(ctx, inv)
	m.end(time.Since(start), err)
	return res, err
}

// service finds the stats of the invoker whose URL is u: a map read
// through an atomic pointer, keyed by the URL's pointer (an invoker's URL
// does not change over its life), built on the first call.
func (f *filter) service(u *kernel.URL) *serviceStats {
	if s := (*f.byURL.Load())[u]; s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.byURL.Load()
	if s := old[u]; s != nil {
		return s
	}
	s := f.r.rpc.service(u)
	next := make(map[*kernel.URL]*serviceStats, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[u] = s
	f.byURL.Store(&next)
	return s
}

// rpcCollector owns every methodStats of a Registry and exposes them.
type rpcCollector struct {
	r    *Registry
	hist [numSides]*prometheus.HistogramVec

	mu       sync.Mutex // serialises additions
	children map[string]*methodStats
	list     atomic.Pointer[[]*methodStats]

	descs [numSides]rpcDescs
}

type rpcDescs struct {
	total, succeed, failed               *prometheus.Desc
	reasons                              [numReasons]*prometheus.Desc
	processing, processingJava           *prometheus.Desc
	rtSum, rtLast, rtMin, rtMax, rtAvg   *prometheus.Desc
	qps, totalAgg, succeedAgg, failedAgg *prometheus.Desc
	rtAvgAgg                             *prometheus.Desc
	p50, p90, p95, p99                   *prometheus.Desc
}

func newRPCCollector(r *Registry) *rpcCollector {
	c := &rpcCollector{r: r, children: map[string]*methodStats{}}
	empty := []*methodStats{}
	c.list.Store(&empty)
	for side := range numSides {
		s := sideNames[side]
		d := func(name, help string) *prometheus.Desc {
			return prometheus.NewDesc("dubbo_"+s+"_"+name, help, rpcLabels, nil)
		}
		ds := &c.descs[side]
		ds.total = d("requests_total", "The total number of requests, as dubbo-go's dubbo_"+s+"_requests_total")
		ds.succeed = d("requests_succeed_total", "The number of requests that succeeded")
		ds.failed = d("requests_failed_total", "Total Failed Requests, whatever the reason")
		for i := range numReasons {
			ds.reasons[i] = d("requests_"+reasonNames[i], reasonHelp[i])
		}
		ds.processing = d("requests_processing_total", "The number of requests being processed (dubbo-go's name)")
		ds.processingJava = d("requests_processing", "Processing Requests (Dubbo Java's name)")
		ds.rtSum = d("rt_milliseconds_sum", "Sum Response Time in ms")
		ds.rtLast = d("rt_milliseconds_last", "Last Response Time in ms")
		ds.rtMin = d("rt_milliseconds_min", "Min Response Time in ms")
		ds.rtMax = d("rt_milliseconds_max", "Max Response Time in ms")
		ds.rtAvg = d("rt_milliseconds_avg", "Average Response Time in ms")
		ds.qps = d("qps_total", "The number of requests per second over the aggregation window")
		ds.totalAgg = d("requests_total_aggregate", "The total number of requests under the sliding window")
		ds.succeedAgg = d("requests_succeed_total_aggregate", "The number of successful requests under the sliding window")
		ds.failedAgg = d("requests_failed_total_aggregate", "Total Failed Aggregate Requests")
		ds.rtAvgAgg = d("rt_avg_milliseconds_aggregate", "The average response time in ms under the sliding window")
		ds.p50 = d("rt_milliseconds_p50", "The response time in ms of 50% of the requests under the sliding window")
		ds.p90 = d("rt_milliseconds_p90", "The response time in ms of 90% of the requests under the sliding window")
		ds.p95 = d("rt_milliseconds_p95", "The response time in ms of 95% of the requests under the sliding window")
		ds.p99 = d("rt_milliseconds_p99", "The response time in ms of 99% of the requests under the sliding window")
		c.hist[side] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dubbo_" + s + "_rt_milliseconds_histogram",
			Help:    "Response Time Histogram in ms (Dubbo Java's rt.milliseconds.histogram)",
			Buckets: r.opt.BucketsMs,
		}, rpcLabels)
	}
	return c
}

func (c *rpcCollector) register(reg *prometheus.Registry) error {
	for _, h := range c.hist {
		if err := reg.Register(h); err != nil {
			return err
		}
	}
	return reg.Register(c)
}

// service builds the stats of an invoker from its URL: the interface,
// group and version labels, and the methods of its `methods` parameter.
func (c *rpcCollector) service(u *kernel.URL) *serviceStats {
	side := sideProvider
	if u.Param(kernel.KeySide) == kernel.SideConsumer || u.Protocol == "consumer" {
		side = sideConsumer
	}
	s := &serviceStats{r: c.r, side: side, iface: u.Interface(), group: u.Param(kernel.KeyGroup), version: u.Param(kernel.KeyVersion)}
	s.unknown = c.child(side, s.iface, UnknownMethod, s.group, s.version)
	m := map[string]*methodStats{}
	if list := u.Param(kernel.KeyMethods); list != "" && side == sideProvider {
		s.fixed = true
		for _, name := range strings.Split(list, ",") {
			if name = strings.TrimSpace(name); name != "" {
				m[name] = c.child(side, s.iface, name, s.group, s.version)
			}
		}
		// The echo filter answers $echo on every service (weft invoke's
		// liveness check); a fixed name, not the caller's.
		m["$echo"] = c.child(side, s.iface, "$echo", s.group, s.version)
	}
	s.methods.Store(&m)
	return s
}

// child returns the one methodStats of its labels, shared by every invoker
// with them (a service exported on two protocols, a reference referred
// again).
func (c *rpcCollector) child(side int, iface, method, group, version string) *methodStats {
	key := sideNames[side] + "\x00" + iface + "\x00" + method + "\x00" + group + "\x00" + version
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.children[key]; m != nil {
		return m
	}
	labels := append(append([]string(nil), c.r.app...), iface, method, group, version)
	m := &methodStats{side: side, labels: labels, hist: c.hist[side].WithLabelValues(labels...)}
	m.rtMin.Store(math.MaxInt64)
	m.win.init(time.Now())
	c.children[key] = m
	old := *c.list.Load()
	next := append(old[:len(old):len(old)], m)
	c.list.Store(&next)
	return m
}

// Describe sends nothing: the collector is unchecked, its series come and
// go with the services (the registry still rejects duplicates).
func (c *rpcCollector) Describe(chan<- *prometheus.Desc) {}

// Collect reads every child's atomics.
func (c *rpcCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, m := range *c.list.Load() {
		ds := &c.descs[m.side]
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), m.labels...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, m.labels...)
		}
		total, succeed, failed := m.total.Load(), m.succeed.Load(), m.failed.Load()
		counter(ds.total, total)
		counter(ds.succeed, succeed)
		counter(ds.failed, failed)
		for i := range numReasons {
			counter(ds.reasons[i], m.reasons[i].Load())
		}
		p := float64(m.processing.Load())
		gauge(ds.processing, p)
		gauge(ds.processingJava, p)
		sum := m.rtSum.Load()
		gauge(ds.rtSum, ms(sum))
		gauge(ds.rtLast, ms(m.rtLast.Load()))
		if mn := m.rtMin.Load(); mn != math.MaxInt64 {
			gauge(ds.rtMin, ms(mn))
		} else {
			gauge(ds.rtMin, 0)
		}
		gauge(ds.rtMax, ms(m.rtMax.Load()))
		if total > 0 {
			gauge(ds.rtAvg, ms(sum)/float64(total))
		} else {
			gauge(ds.rtAvg, 0)
		}
		if !c.r.opt.Aggregation {
			continue
		}
		cur := snapshot{t: now, total: total, succeed: succeed, failed: failed, sumNs: sum}
		var pb dto.Metric
		if hm, ok := m.hist.(prometheus.Metric); ok && hm.Write(&pb) == nil && pb.Histogram != nil {
			for _, b := range pb.Histogram.Bucket {
				cur.buckets = append(cur.buckets, b.GetCumulativeCount())
			}
			cur.count = pb.Histogram.GetSampleCount()
		}
		base := m.win.advance(cur, c.r.opt.Window, c.r.opt.WindowBuckets)
		secs := now.Sub(base.t).Seconds()
		n := cur.total - base.total
		if secs > 0 {
			gauge(ds.qps, float64(n)/secs)
		} else {
			gauge(ds.qps, 0)
		}
		gauge(ds.totalAgg, float64(n))
		gauge(ds.succeedAgg, float64(cur.succeed-base.succeed))
		gauge(ds.failedAgg, float64(cur.failed-base.failed))
		if n > 0 {
			gauge(ds.rtAvgAgg, ms(cur.sumNs-base.sumNs)/float64(n))
		} else {
			gauge(ds.rtAvgAgg, 0)
		}
		q := quantiles(c.r.opt.BucketsMs, cur, base)
		gauge(ds.p50, q(0.5))
		gauge(ds.p90, q(0.9))
		gauge(ds.p95, q(0.95))
		gauge(ds.p99, q(0.99))
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// snapshot is a child's counts at one scrape.
type snapshot struct {
	t                      time.Time
	total, succeed, failed uint64
	sumNs                  int64
	count                  uint64
	buckets                []uint64 // cumulative, one per bound
}

// window is the sliding window of the aggregation: snapshots taken at
// scrapes, at least Window/WindowBuckets apart, the oldest within about
// Window of now serving as the base that the window's counts are relative
// to. Only scrapes touch it, so a mutex costs the calls nothing.
type window struct {
	mu   sync.Mutex
	ring []snapshot
}

func (w *window) init(t time.Time) { w.ring = []snapshot{{t: t}} }

// advance records cur if the last snapshot is a step old, drops those
// older than the window, and returns the base.
func (w *window) advance(cur snapshot, size time.Duration, buckets int) snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	step := size / time.Duration(buckets)
	// Keep the newest snapshot that is older than the window: the base
	// then covers at least the whole window, at most a step more.
	for len(w.ring) > 1 && cur.t.Sub(w.ring[1].t) >= size {
		w.ring = w.ring[1:]
	}
	base := w.ring[0]
	if cur.t.Sub(w.ring[len(w.ring)-1].t) >= step {
		w.ring = append(w.ring, cur)
	}
	return base
}

// quantiles estimates quantiles of the calls between base and cur from
// the histogram's buckets, interpolating within a bucket as PromQL's
// histogram_quantile does; beyond the last bound it answers the last bound.
func quantiles(bounds []float64, cur, base snapshot) func(q float64) float64 {
	n := len(cur.buckets)
	diff := make([]float64, n)
	for i := range n {
		var b uint64
		if i < len(base.buckets) {
			b = base.buckets[i]
		}
		diff[i] = float64(cur.buckets[i] - b)
	}
	total := float64(cur.count - base.count)
	return func(q float64) float64 {
		if total == 0 || n == 0 {
			return 0
		}
		rank := q * total
		lower, prev := 0.0, 0.0
		for i := range n {
			if diff[i] >= rank {
				in := diff[i] - prev
				if in <= 0 {
					return bounds[i]
				}
				return lower + (bounds[i]-lower)*(rank-prev)/in
			}
			lower, prev = bounds[i], diff[i]
		}
		return bounds[n-1]
	}
}
