package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weftrpc/weft/kernel"
)

// stub is the invoker under the filter: it answers with err.
type stub struct {
	url *kernel.URL
	err error
}

func (s *stub) URL() *kernel.URL { return s.url }
func (s *stub) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, s.err
}
func (s *stub) IsAvailable() bool { return true }
func (s *stub) Destroy()          {}

func providerURL(methods string) *kernel.URL {
	return kernel.NewURL("dubbo", "127.0.0.1", 20880, "org.example.Greeter",
		map[string]string{kernel.KeySide: kernel.SideProvider, kernel.KeyMethods: methods,
			kernel.KeyGroup: "g1", kernel.KeyVersion: "1.0.0", kernel.KeyInterface: "org.example.Greeter"})
}

func consumerURL() *kernel.URL {
	return kernel.NewURL("consumer", "127.0.0.1", 0, "org.example.Greeter",
		map[string]string{kernel.KeySide: kernel.SideConsumer, kernel.KeyInterface: "org.example.Greeter"})
}

func newTestRegistry(t testing.TB, o Options) *Registry {
	t.Helper()
	if o.Application == "" {
		o.Application = "demo"
	}
	o.Hostname, o.IP = "host1", "10.0.0.1"
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// scrape parses the registry's exposition with Prometheus's own parser.
func scrape(t testing.TB, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels include want.
func value(t testing.TB, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func call(f interface {
	Invoke(context.Context, kernel.Invoker, *kernel.Invocation) (kernel.Result, error)
}, iv kernel.Invoker, method string) {
	f.Invoke(context.Background(), iv, &kernel.Invocation{Method: method})
}

func TestCountsByReasonAndLabels(t *testing.T) {
	r := newTestRegistry(t, Options{ApplicationVersion: "2.0", Aggregation: true})
	f := r.Filter()
	u := providerURL("sayHello,sayBye")
	codes := []struct {
		err    error
		reason string
	}{
		{nil, ""},
		{kernel.BizError(errors.New("no")), "business_failed_total"},
		{kernel.Errorf(kernel.CodeTimeout, "slow"), "timeout_total"},
		{context.DeadlineExceeded, "timeout_total"},
		{kernel.Errorf(kernel.CodeLimitExceeded, "full"), "limit_total"},
		{kernel.Errorf(kernel.CodeNetwork, "gone"), "failed_network_total"},
		{kernel.Errorf(kernel.CodeSerialization, "bad"), "failed_codec_total"},
		{kernel.Errorf(kernel.CodeForbidden, "token"), "failed_service_unavailable_total"},
		{kernel.Errorf(kernel.CodeNoProvider, "none"), "failed_service_unavailable_total"},
		{kernel.Errorf(kernel.CodeServiceNotFound, "none"), "failed_service_unavailable_total"},
		{kernel.Errorf(kernel.CodeShuttingDown, "bye"), "failed_service_unavailable_total"},
		{kernel.Errorf(kernel.CodeMethodNotFound, "what"), "unknown_failed_total"},
		{errors.New("plain"), "unknown_failed_total"},
	}
	want := map[string]float64{}
	for _, c := range codes {
		call(f, &stub{url: u, err: c.err}, "sayHello")
		if got := Reason(c.err); got != c.reason {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.reason)
		}
		if c.reason != "" {
			want[c.reason]++
		}
	}
	fams := scrape(t, r)
	labels := map[string]string{"application_name": "demo", "application_version": "2.0", "hostname": "host1", "ip": "10.0.0.1",
		"interface": "org.example.Greeter", "method": "sayHello", "group": "g1", "version": "1.0.0"}
	check := func(name string, want float64, typ dto.MetricType) {
		t.Helper()
		got, ok := value(t, fams, name, labels)
		if !ok {
			t.Errorf("%s%v missing", name, labels)
			return
		}
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
		if ft := fams[name].GetType(); ft != typ {
			t.Errorf("%s is a %v, want %v", name, ft, typ)
		}
	}
	n := float64(len(codes))
	check("dubbo_provider_requests_total", n, dto.MetricType_COUNTER)
	check("dubbo_provider_requests_succeed_total", 1, dto.MetricType_COUNTER)
	check("dubbo_provider_requests_failed_total", n-1, dto.MetricType_COUNTER)
	for _, name := range reasonNames {
		check("dubbo_provider_requests_"+name, want[name], dto.MetricType_COUNTER)
	}
	check("dubbo_provider_requests_processing_total", 0, dto.MetricType_GAUGE)
	check("dubbo_provider_requests_processing", 0, dto.MetricType_GAUGE)
	check("dubbo_provider_rt_milliseconds_histogram", n, dto.MetricType_HISTOGRAM)
	check("dubbo_provider_requests_total_aggregate", n, dto.MetricType_GAUGE)
	for _, g := range []string{"sum", "last", "min", "max", "avg", "p50", "p90", "p95", "p99"} {
		if _, ok := value(t, fams, "dubbo_provider_rt_milliseconds_"+g, labels); !ok {
			t.Errorf("dubbo_provider_rt_milliseconds_%s missing", g)
		}
	}
	if _, ok := value(t, fams, "dubbo_provider_qps_total", labels); !ok {
		t.Error("dubbo_provider_qps_total missing")
	}
	// The other method has its series from the start, at 0.
	labels["method"] = "sayBye"
	check("dubbo_provider_requests_total", 0, dto.MetricType_COUNTER)
}

// A provider's methods are its URL's; a name from the wire that is not one
// of them counts under UnknownMethod and creates no series.
func TestHostileMethodNamesDoNotGrowLabels(t *testing.T) {
	r := newTestRegistry(t, Options{})
	f := r.Filter()
	iv := &stub{url: providerURL("sayHello")}
	for i := range 1000 {
		call(f, iv, fmt.Sprintf("evil%d", i))
	}
	fams := scrape(t, r)
	got := map[string]bool{}
	for _, m := range fams["dubbo_provider_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "method" {
				got[l.GetValue()] = true
			}
		}
	}
	if len(got) != 3 || !got["sayHello"] || !got["$echo"] || !got[UnknownMethod] {
		t.Fatalf("method labels %v, want sayHello, $echo and %s", got, UnknownMethod)
	}
	if v, _ := value(t, fams, "dubbo_provider_requests_total", map[string]string{"method": UnknownMethod}); v != 1000 {
		t.Fatalf("unknown methods counted %v, want 1000", v)
	}
}

// A consumer learns its methods as it calls them, up to MaxMethods.
func TestConsumerMethodsBounded(t *testing.T) {
	r := newTestRegistry(t, Options{MaxMethods: 3})
	f := r.Filter()
	iv := &stub{url: consumerURL()}
	for i := range 10 {
		call(f, iv, fmt.Sprintf("m%d", i))
	}
	fams := scrape(t, r)
	if n := len(fams["dubbo_consumer_requests_total"].Metric); n != 4 {
		t.Fatalf("%d consumer series, want 3 methods + %s", n, UnknownMethod)
	}
	if v, _ := value(t, fams, "dubbo_consumer_requests_total", map[string]string{"method": UnknownMethod}); v != 7 {
		t.Fatalf("beyond the cap: %v calls, want 7", v)
	}
	if _, ok := fams["dubbo_provider_requests_total"]; ok && len(fams["dubbo_provider_requests_total"].Metric) > 0 {
		t.Fatal("a consumer's calls counted on the provider side")
	}
}

// The call path allocates nothing once the (service, method) is resolved,
// failures included.
func TestFilterAllocatesNothing(t *testing.T) {
	r := newTestRegistry(t, Options{Aggregation: true})
	f := r.Filter()
	for _, c := range []struct {
		name string
		iv   kernel.Invoker
	}{
		{"provider ok", &stub{url: providerURL("sayHello")}},
		{"consumer ok", &stub{url: consumerURL()}},
		{"provider unknown method", &stub{url: providerURL("other")}},
	} {
		ctx := context.Background()
		inv := &kernel.Invocation{Method: "sayHello"}
		f.Invoke(ctx, c.iv, inv)
		if n := testing.AllocsPerRun(1000, func() { f.Invoke(ctx, c.iv, inv) }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}

// Calls and scrapes at once (run with -race): every call is counted once.
func TestConcurrentCallsAndScrapes(t *testing.T) {
	r := newTestRegistry(t, Options{Aggregation: true})
	f := r.Filter()
	ok := &stub{url: providerURL("a,b")}
	bad := &stub{url: ok.url, err: kernel.Errorf(kernel.CodeTimeout, "slow")}
	const workers, calls = 8, 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				scrape(t, r)
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				iv := kernel.Invoker(ok)
				if i%10 == 0 {
					iv = bad
				}
				call(f, iv, []string{"a", "b"}[w%2])
			}
		}()
	}
	wg.Wait()
	close(done)
	fams := scrape(t, r)
	var total, timeouts float64
	for _, m := range []string{"a", "b"} {
		v, _ := value(t, fams, "dubbo_provider_requests_total", map[string]string{"method": m})
		total += v
		v, _ = value(t, fams, "dubbo_provider_requests_timeout_total", map[string]string{"method": m})
		timeouts += v
	}
	if total != workers*calls || timeouts != workers*calls/10 {
		t.Fatalf("total %v timeouts %v, want %d and %d", total, timeouts, workers*calls, workers*calls/10)
	}
}

func TestWindowQuantiles(t *testing.T) {
	bounds := []float64{1, 2, 4, 8}
	base := snapshot{buckets: []uint64{10, 10, 10, 10}, count: 10}
	// 100 calls since base: 50 in (0,1], 40 in (1,2], 10 in (4,8].
	cur := snapshot{buckets: []uint64{60, 100, 100, 110}, count: 110}
	q := quantiles(bounds, cur, base)
	for _, c := range []struct{ q, want float64 }{{0.5, 1}, {0.25, 0.5}, {0.7, 1.5}, {0.95, 6}, {1, 8}} {
		if got := q(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantiles(bounds, base, base)(0.99); got != 0 {
		t.Errorf("no calls: %v, want 0", got)
	}
	var w window
	t0 := time.Unix(1000, 0)
	w.init(t0)
	for i := 1; i <= 30; i++ {
		b := w.advance(snapshot{t: t0.Add(time.Duration(i) * 10 * time.Second), total: uint64(i)}, 120*time.Second, 12)
		if age := time.Duration(i)*10*time.Second - b.t.Sub(t0); i > 12 && (age < 120*time.Second || age > 130*time.Second) {
			t.Fatalf("scrape %d: base %v old, want 120..130s", i, age)
		}
	}
}

func TestOptionsAndSources(t *testing.T) {
	if _, err := New(Options{BucketsMs: []float64{5, 1}}); err == nil || !strings.Contains(err.Error(), "ascending") {
		t.Fatalf("unsorted buckets: %v", err)
	}
	r := newTestRegistry(t, Options{})
	if err := r.AddSources(Sources{
		ThreadPools: func() []ThreadPool {
			return []ThreadPool{{Name: "DubboServerHandler-127.0.0.1:20880", Core: 200, Max: 200, Rejected: 3}}
		},
		Connections: func() []Connections { return []Connections{{Side: "provider", Count: 2}} },
		Registry:    func() RegistryStats { return RegistryStats{Notify: 4, NotifyLast: 2, Register: 1} },
		ConfigChanges: func() []ConfigChange {
			return []ConfigChange{{Key: "demo", Group: "dubbo", ConfigCenter: "nacos", ChangeType: "added", Count: 1}}
		},
		ConfigApplies: func() ConfigApplies { return ConfigApplies{Applied: 1} },
		Wasm: func() []WasmFilter {
			// Two guests give weft_wasm_guest_hits to a counter and a
			// gauge: the second goes out as ..._gauge, the scrape works.
			return []WasmFilter{{Name: "wasm-authz", Calls: 9, Instances: 2, MemoryBytes: 1 << 20,
				Guest: []GuestMetric{{Name: "weft_wasm_guest_hits", Counter: true, Value: 5}}},
				{Name: "wasm-other", Guest: []GuestMetric{{Name: "weft_wasm_guest_hits", Value: 7}}}}
		},
	}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, r)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dubbo_thread_pool_max_size", map[string]string{"thread_pool_name": "DubboServerHandler-127.0.0.1:20880", "application_name": "demo"}, 200},
		{"dubbo_thread_pool_reject_thread_count", nil, 3},
		{"weft_connections", map[string]string{"side": "provider"}, 2},
		{"dubbo_registry_notify_requests_total", nil, 4},
		{"dubbo_registry_notify_num_last", nil, 2},
		{"dubbo_registry_register_requests_succeed_total", nil, 1},
		{"dubbo_configcenter_total", map[string]string{"key": "demo", "change_type": "added", "config_center": "nacos"}, 1},
		{"weft_configcenter_applies_total", map[string]string{"result": "applied"}, 1},
		{"weft_wasm_calls_total", map[string]string{"filter": "wasm-authz"}, 9},
		{"weft_wasm_instances", nil, 2},
		{"weft_wasm_memory_bytes", nil, 1 << 20},
		{"weft_wasm_guest_hits", map[string]string{"filter": "wasm-authz"}, 5},
		{"weft_wasm_guest_hits_gauge", map[string]string{"filter": "wasm-other"}, 7},
	} {
		if got, ok := value(t, fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}

func TestServe(t *testing.T) {
	r := newTestRegistry(t, Options{})
	s, err := Serve("127.0.0.1:0", "/metrics", r.Handler())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := Serve(s.Addr(), "/metrics", r.Handler()); err == nil || !strings.Contains(err.Error(), "choose a free port") {
		t.Fatalf("a port in use: %v", err)
	}
}

// The filter's own cost per call, without the network.
func BenchmarkFilter(b *testing.B) {
	r := newTestRegistry(b, Options{Aggregation: true})
	f := r.Filter()
	iv := &stub{url: providerURL("sayHello")}
	inv := &kernel.Invocation{Method: "sayHello"}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f.Invoke(ctx, iv, inv)
		}
	})
}
