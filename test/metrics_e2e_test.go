package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/plugins/filter/metrics"
)

// metricsDemo is the service the metrics tests call: an answer, a
// business error, a call slower than the consumer's timeout.
type metricsDemo struct{}

func (metricsDemo) Echo(_ context.Context, s string) (string, error) { return s, nil }
func (metricsDemo) Fail(_ context.Context, s string) (string, error) {
	return "", errors.New("refused: " + s)
}
func (metricsDemo) Slow(ctx context.Context, ms int64) (string, error) {
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
	case <-ctx.Done():
	}
	return "late", nil
}

type metricsDemoClient struct {
	Echo func(ctx context.Context, s string) (string, error)
	Fail func(ctx context.Context, s string) (string, error)
	Slow func(ctx context.Context, ms int64) (string, error)
	// Missing is no method of the provider: its name reaches the
	// provider from the wire.
	Missing func(ctx context.Context) (string, error)
}

const metricsIface = "org.weft.MetricsDemo"

// startMetricsPair starts a provider App and a consumer App of it over
// dubbo on loopback, each with its metrics served on a port of its own
// (standing in for the QoS server), and returns the client and both
// metrics URLs.
func startMetricsPair(t testing.TB, extra string) (cl *metricsDemoClient, provider, consumer string) {
	t.Helper()
	addr := freeAddr(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	p := startApp(t, fmt.Sprintf(`application: {name: metrics-provider, version: 1.2.3}
protocols: {dubbo: {port: %s}}
provider: {services: {demo: {interface: %s, version: 1.0.0, group: g1}}}
%s`, port, metricsIface, extra), weft.WithService("demo", metricsDemo{}))
	cl = &metricsDemoClient{}
	c := startApp(t, fmt.Sprintf(`application: {name: metrics-consumer}
consumer:
  references:
    demo: {interface: %s, version: 1.0.0, group: g1, url: "dubbo://%s", retries: 0, timeout: 300}
%s`, metricsIface, addr, extra), weft.WithReference("demo", cl))
	return cl, serveMetrics(t, p), serveMetrics(t, c)
}

func serveMetrics(t testing.TB, app *weft.App) string {
	t.Helper()
	s, err := metrics.Serve("127.0.0.1:0", "/metrics", app.MetricsHandler())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return "http://" + s.Addr() + "/metrics"
}

// driveCalls makes echo calls that succeed, fail calls that fail with a
// business error and slow calls that time out on the consumer.
func driveCalls(t testing.TB, cl *metricsDemoClient, echo, fail, slow int) {
	t.Helper()
	ctx := context.Background()
	for i := range echo {
		if _, err := cl.Echo(ctx, "hi"); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	for range fail {
		if _, err := cl.Fail(ctx, "x"); err == nil {
			t.Fatal("fail succeeded")
		}
	}
	for range slow {
		if _, err := cl.Slow(ctx, 2000); err == nil {
			t.Fatal("slow did not time out")
		}
	}
}

func parseExposition(t testing.TB, u string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want Prometheus text", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("Prometheus's parser rejects the exposition of %s: %v", u, err)
	}
	return fams
}

func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, map[string]string) {
	f := fams[name]
	if f == nil {
		return nil, nil
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
		return m, got
	}
	return nil, nil
}

// The exposition of a provider and a consumer passes Prometheus's own
// parser, with dubbo-go's names, types and labels and the counts the calls
// caused.
func TestMetricsExposition(t *testing.T) {
	cl, pu, cu := startMetricsPair(t, "")
	driveCalls(t, cl, 5, 2, 1)
	if _, err := cl.Missing(context.Background()); err == nil {
		t.Fatal("a method the provider lacks answered")
	}
	// The provider's side of the timed-out call ends by its own deadline.
	time.Sleep(100 * time.Millisecond)

	prov := parseExposition(t, pu)
	cons := parseExposition(t, cu)
	type want struct {
		fams   map[string]*dto.MetricFamily
		name   string
		method string
		typ    dto.MetricType
		value  float64
	}
	for _, w := range []want{
		{prov, "dubbo_provider_requests_total", "echo", dto.MetricType_COUNTER, 5},
		{prov, "dubbo_provider_requests_succeed_total", "echo", dto.MetricType_COUNTER, 5},
		{prov, "dubbo_provider_requests_failed_total", "fail", dto.MetricType_COUNTER, 2},
		{prov, "dubbo_provider_requests_business_failed_total", "fail", dto.MetricType_COUNTER, 2},
		{prov, "dubbo_provider_requests_processing_total", "echo", dto.MetricType_GAUGE, 0},
		{prov, "dubbo_provider_requests_total", metrics.UnknownMethod, dto.MetricType_COUNTER, 1},
		{prov, "dubbo_provider_rt_milliseconds_histogram", "echo", dto.MetricType_HISTOGRAM, 5},
		{cons, "dubbo_consumer_requests_total", "echo", dto.MetricType_COUNTER, 5},
		{cons, "dubbo_consumer_requests_business_failed_total", "fail", dto.MetricType_COUNTER, 2},
		{cons, "dubbo_consumer_requests_timeout_total", "slow", dto.MetricType_COUNTER, 1},
		{cons, "dubbo_consumer_requests_failed_total", "slow", dto.MetricType_COUNTER, 1},
		{cons, "dubbo_consumer_requests_unknown_failed_total", "missing", dto.MetricType_COUNTER, 1},
		{cons, "dubbo_consumer_rt_milliseconds_histogram", "slow", dto.MetricType_HISTOGRAM, 1},
	} {
		m, labels := sample(w.fams, w.name, map[string]string{"method": w.method})
		if m == nil {
			t.Errorf("%s{method=%q} missing", w.name, w.method)
			continue
		}
		if typ := w.fams[w.name].GetType(); typ != w.typ {
			t.Errorf("%s is a %v, want %v", w.name, typ, w.typ)
		}
		var v float64
		switch w.typ {
		case dto.MetricType_COUNTER:
			v = m.Counter.GetValue()
		case dto.MetricType_GAUGE:
			v = m.Gauge.GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.Histogram.GetSampleCount())
		}
		if v != w.value {
			t.Errorf("%s{method=%q} = %v, want %v", w.name, w.method, v, w.value)
		}
		for _, l := range []string{"application_name", "application_version", "hostname", "ip", "interface", "method", "group", "version"} {
			if _, ok := labels[l]; !ok {
				t.Errorf("%s has no label %s (labels %v)", w.name, l, labels)
			}
		}
		if labels["interface"] != metricsIface || labels["group"] != "g1" || labels["version"] != "1.0.0" {
			t.Errorf("%s labels %v: want interface %s, group g1, version 1.0.0", w.name, labels, metricsIface)
		}
	}
	if _, l := sample(prov, "dubbo_provider_requests_total", nil); l["application_name"] != "metrics-provider" || l["application_version"] != "1.2.3" {
		t.Errorf("provider's application labels %v", l)
	}
	// A name from the wire never becomes a provider label.
	if m, _ := sample(prov, "dubbo_provider_requests_total", map[string]string{"method": "missing"}); m != nil {
		t.Error("the provider made a series of a method it does not have")
	}
	// The consumer's timeout took at least its timeout.
	if m, _ := sample(cons, "dubbo_consumer_rt_milliseconds_max", map[string]string{"method": "slow"}); m == nil || m.Gauge.GetValue() < 250 {
		t.Errorf("consumer rt max of slow: %v, want >= 250 ms", m)
	}
	// Scrape-time metrics of the provider's server and the consumer's
	// connection.
	if m, l := sample(prov, "dubbo_thread_pool_max_size", nil); m == nil || m.Gauge.GetValue() != 200 || !strings.HasPrefix(l["thread_pool_name"], "DubboServerHandler-127.0.0.1:") {
		t.Errorf("thread pool: %v %v", m, l)
	}
	if m, _ := sample(prov, "weft_connections", map[string]string{"side": "provider"}); m == nil || m.Gauge.GetValue() < 1 {
		t.Errorf("provider connections: %v", m)
	}
	if m, _ := sample(cons, "weft_connections", map[string]string{"side": "consumer"}); m == nil || m.Gauge.GetValue() < 1 {
		t.Errorf("consumer connections: %v", m)
	}
}

// With metrics.enable: false there is no filter and the handler says so.
func TestMetricsOff(t *testing.T) {
	app := startApp(t, "metrics: {enable: false}\nprovider: {services: {demo: {interface: org.weft.MetricsDemo}}}\nprotocols: {injvm: {}}\n",
		weft.WithService("demo", metricsDemo{}))
	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "metrics.enable: true") {
		t.Fatalf("metrics off: %d %q", rec.Code, rec.Body.String())
	}
}

func TestMetricsConfigErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"metrics: {protocol: statsd}", `metrics.protocol: "statsd" is not allowed: want prometheus`},
		{"metrics: {port: 70000}", "metrics.port: 70000 is not allowed: want 0..65535"},
		{"metrics: {histogram: {buckets-ms: [5, 1]}}", "metrics.histogram.buckets-ms: [5 1] is not allowed: want ascending"},
		{"metrics: {aggregation: {bucket-num: -1}}", "metrics.aggregation.bucket-num: -1 is not allowed"},
		{"metrics: {enabled: true}", "unknown key metrics.enabled"},
	} {
		_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("demo", metricsDemo{}),
			weft.WithConfig(weft.ConfigYAML(c.yaml+"\nprovider: {services: {demo: {interface: org.weft.MetricsDemo}}}\nprotocols: {injvm: {}}\n")))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// A real Prometheus server (Debian's prometheus package) scrapes a
// provider and a consumer every second; queries through its HTTP API
// return the calls the test made, failures by reason included.
func TestPrometheusScrapesProviderAndConsumer(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the prometheus binary is missing; install Debian's prometheus package (.ci/run does)")
		}
		t.Skip("prometheus not installed (apt-get install prometheus); skipped outside CI")
	}
	cl, pu, cu := startMetricsPair(t, "")
	dir := t.TempDir()
	target := func(u string) string { pu, _ := url.Parse(u); return pu.Host }
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
scrape_configs:
  - job_name: weft-provider
    static_configs: [{targets: [%q]}]
  - job_name: weft-consumer
    static_configs: [{targets: [%q]}]
`, target(pu), target(cu))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	out, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	api := "http://" + promAddr
	waitFor(t, 60*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := http.Get(api + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	// Prometheus syncs its targets some 5 s after it starts: calls made
	// before its first scrape would all land in one sample.
	waitFor(t, 60*time.Second, "both targets scraped", func() (bool, string) {
		v, err := promQuery(api, `sum(up)`)
		if err != nil {
			return false, err.Error()
		}
		return v == 2, fmt.Sprintf("sum(up) = %v", v)
	})

	// Calls spread over a few seconds, so that rate() has several samples.
	const rounds, echoPer, fails, slows = 6, 50, 3, 2
	for i := range rounds {
		driveCalls(t, cl, echoPer, 0, 0)
		if i < fails {
			driveCalls(t, cl, 0, 1, 0)
		}
		if i < slows {
			driveCalls(t, cl, 0, 0, 1)
		}
		time.Sleep(700 * time.Millisecond)
	}
	sel := fmt.Sprintf(`interface=%q`, metricsIface)
	// The counters as Prometheus stored them equal the calls made.
	for _, c := range []struct {
		query string
		want  float64
	}{
		{fmt.Sprintf(`sum(dubbo_provider_requests_total{%s,method="echo"})`, sel), rounds * echoPer},
		{fmt.Sprintf(`sum(dubbo_consumer_requests_succeed_total{%s,method="echo"})`, sel), rounds * echoPer},
		{fmt.Sprintf(`sum(dubbo_provider_requests_business_failed_total{%s,method="fail"})`, sel), fails},
		{fmt.Sprintf(`sum(dubbo_consumer_requests_failed_total{%s})`, sel), fails + slows},
		{fmt.Sprintf(`sum(dubbo_consumer_requests_timeout_total{%s,method="slow"})`, sel), slows},
		{fmt.Sprintf(`sum(dubbo_consumer_requests_business_failed_total{%s,method="fail"})`, sel), fails},
	} {
		waitFor(t, 30*time.Second, c.query, func() (bool, string) {
			v, err := promQuery(api, c.query)
			if err != nil {
				return false, err.Error()
			}
			return v == c.want, fmt.Sprintf("%v, want %v", v, c.want)
		})
	}
	// rate() over the run: the echo calls came at some tens per second on
	// both sides; the other methods' rates are far smaller.
	for _, q := range []string{
		fmt.Sprintf(`sum by (interface, method) (rate(dubbo_provider_requests_total{%s,method="echo"}[1m]))`, sel),
		fmt.Sprintf(`sum by (interface, method) (rate(dubbo_consumer_requests_total{%s,method="echo"}[1m]))`, sel),
	} {
		v, err := promQuery(api, q)
		if err != nil {
			t.Fatal(err)
		}
		// 300 calls in about 5 s, averaged by Prometheus over what the
		// window saw: well above 1/s, below the 300/s no loaded machine
		// can be far from.
		if v < 1 || v > 300 {
			t.Errorf("%s = %v calls/s, want between 1 and 300", q, v)
		}
		fail, err := promQuery(api, strings.Replace(q, `method="echo"`, `method="fail"`, 1))
		if err != nil {
			t.Fatal(err)
		}
		if fail >= v {
			t.Errorf("rate of fail %v not below rate of echo %v", fail, v)
		}
	}
	// Failed counters by reason, as a dashboard would read them.
	v, err := promQuery(api, fmt.Sprintf(`sum(dubbo_consumer_requests_timeout_total{%s}) + sum(dubbo_consumer_requests_business_failed_total{%s})`, sel, sel))
	if err != nil || v != fails+slows {
		t.Errorf("failed by reason: %v, %v; want %d", v, err, fails+slows)
	}
}

// promQuery runs an instant query and returns its single value.
func promQuery(api, q string) (float64, error) {
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Value [2]any
			}
		}
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", q, err, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", q, r.Error)
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %d series, want 1 (not scraped yet?)", q, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		done, last := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, limit, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// The echo round trip over dubbo on loopback, one process, with the
// metrics filter on both sides and without: compare ns/op, allocs/op and
// calls/s (run with -count to interleave).
func BenchmarkMetricsEcho(b *testing.B) {
	for _, c := range []struct{ name, yaml string }{
		{"off", "metrics: {enable: false}"},
		{"on", "metrics: {enable: true}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl, _, _ := startMetricsPair(b, c.yaml)
			ctx := context.Background()
			for range 100 {
				if _, err := cl.Echo(ctx, "warm"); err != nil {
					b.Fatal(err)
				}
			}
			benchEchoParallel(b, ctx, cl.Echo)
		})
	}
}
