package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
)

// Native, weft-ABI and proxy-wasm filters in one activation, on both sides
// of a real dubbo (and Triple) call: each appends its name to the attachment
// "trace" on the way in (the service returns it) and to the result
// attachment "rtrace" on the way out (which travels back with the
// response); the proxy-wasm ones (an AssemblyScript filter on
// @solo-io/proxy-runtime, and the same on proxy-wasm-go-sdk's API built
// with Go) through the request's and the response's headers. The order is the activated order: by `order`, then listed names
// where the list puts them.
func TestWasmAndNativeFiltersRunInActivatedOrder(t *testing.T) {
	forEachProtocol(t, testWasmAndNativeFiltersRunInActivatedOrder)
}

func testWasmAndNativeFiltersRunInActivatedOrder(t *testing.T, proto string) {
	dir := t.TempDir()
	trace := buildWasmGuest(t, dir, "trace")
	pwTrace := buildProxyWasmAS(t, filepath.Join(dir, "proxy-wasm"), "trace")
	pwGoTrace := buildProxyWasmGo(t, filepath.Join(dir, "proxy-wasm-go"), "trace")
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	provider := kernel.GroupProvider
	startApp(t, fmt.Sprintf(`
protocols: {`+proto+`: {port: %s}}
wasm:
  filters:
    wasm-a: {path: %q, groups: [provider], order: -200, config: {name: wasm-a}}
    wasm-b: {path: %q, groups: [provider], order: 50, timeout: 500, max_memory_pages: 64, config: {name: wasm-b}}
    wasm-listed: {path: %q, config: {name: wasm-listed}}
    wasm-keyed: {path: %q, groups: [provider], keys: [nosuchkey], config: {name: wasm-keyed}}
    pw-p: {abi: proxy-wasm, path: %q, root_id: trace, configuration: pw-p, groups: [provider], order: 20}
    pw-go-p: {abi: proxy-wasm, path: %q, configuration: pw-go-p, groups: [provider], order: 30}
provider:
  filter: "default,wasm-listed"
  services:
    tracer: {interface: org.weft.Tracer, protocol: `+proto+`}
`, port, trace, trace, trace, trace, pwTrace, pwGoTrace),
		weft.WithService("tracer", tracer{}),
		weft.WithFilter("n1", &kernel.Activate{Groups: []string{provider}, Order: -300}, traceFilter("n1")),
		weft.WithFilter("n2", &kernel.Activate{Groups: []string{provider}, Order: -100}, traceFilter("n2")))

	var c tracerClient
	consumer := kernel.GroupConsumer
	app := startApp(t, fmt.Sprintf(`
qos: {port: 0}
wasm:
  filters:
    wasm-c: {path: %q, groups: [consumer], order: 5, config: {name: wasm-c}}
    pw-c: {abi: proxy-wasm, path: %q, root_id: trace, configuration: pw-c, groups: [consumer], order: 7}
    pw-go-c: {abi: proxy-wasm, path: %q, configuration: pw-go-c, groups: [consumer], order: 8}
consumer:
  references:
    tracer: {interface: org.weft.Tracer, url: "%s://%s", retries: 0}
`, trace, pwTrace, pwGoTrace, proto, addr),
		weft.WithReference("tracer", &c),
		weft.WithFilter("c1", &kernel.Activate{Groups: []string{consumer}, Order: 10}, traceFilter("c1")))

	got, err := c.Trace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := "wasm-c,pw-c,pw-go-c,c1,n1,wasm-a,n2,pw-p,pw-go-p,wasm-b,wasm-listed"; got != want {
		t.Fatalf("request order %q, want %q", got, want)
	}
	iv, err := app.Reference("tracer")
	if err != nil {
		t.Fatal(err)
	}
	res, err := iv.Invoke(context.Background(), kernel.NewInvocation("trace"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "wasm-listed,wasm-b,pw-go-p,pw-p,n2,wasm-a,n1,c1,pw-go-c,pw-c,wasm-c"; res.Attachments["rtrace"] != want {
		t.Fatalf("response order %q, want %q (attachments %v)", res.Attachments["rtrace"], want, res.Attachments)
	}
	// QoS ls shows the same chain, the WASM filters marked.
	resp, err := http.Get("http://" + app.QoSAddr() + "/ls")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ls, last := string(body), -1
	for _, f := range []string{"wasm-c (wasm)", "pw-c (wasm)", "pw-go-c (wasm)", "c1"} {
		i := strings.Index(ls, f+" ")
		if i < 0 || i < last {
			t.Fatalf("ls: %q missing or out of the calls' order:\n%s", f, ls)
		}
		last = i
	}
}

// The App watches its modules: replacing the file while calls run swaps the
// module without failing any call.
func TestWasmHotReloadInApp(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.wasm")
	v2 := buildWasmGuest(t, dir, "version", `VERSION="2"`)
	mustCopy(t, buildWasmGuest(t, dir, "version", `VERSION="1"`), live)
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
wasm:
  filters:
    wasm-version: {path: %q, groups: [provider]}
provider:
  services:
    tracer: {interface: org.weft.Tracer}
`, addr[strings.LastIndexByte(addr, ':')+1:], live), weft.WithService("tracer", tracer{}))
	var c tracerClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    tracer: {interface: org.weft.Tracer, url: "dubbo://%s", retries: 0}
`, addr), weft.WithReference("tracer", &c))

	var stop atomic.Bool
	var calls, fails, sawNew atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				v, err := c.Version(context.Background())
				calls.Add(1)
				switch {
				case err != nil:
					fails.Add(1)
					t.Errorf("call during reload: %v", err)
				case v == "2":
					sawNew.Add(1)
				case v != "1":
					t.Errorf("version %q", v)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	tmp := live + ".tmp"
	mustCopy(t, v2, tmp)
	if err := os.Rename(tmp, live); err != nil {
		t.Fatal(err)
	}
	swapped := time.Now()
	deadline := swapped.Add(5 * time.Second)
	for sawNew.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("new module serving %v after the rename (poll interval 500ms)", time.Since(swapped).Round(time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if v, err := c.Version(context.Background()); err != nil || v != "2" {
		t.Fatalf("after reload: %q, %v", v, err)
	}
	t.Logf("%d calls, %d failed", calls.Load(), fails.Load())
	if fails.Load() != 0 || sawNew.Load() == 0 {
		t.Fatalf("fails %d, calls on the new module %d", fails.Load(), sawNew.Load())
	}
}

// Config errors name the key path and the cause, at weft.New.
func TestWasmConfigErrors(t *testing.T) {
	dir := t.TempDir()
	noop := buildWasmGuest(t, dir, "noop")
	abi2 := buildWasmGuest(t, dir, "noop", "ABI_VERSION=2")
	for _, c := range []struct {
		yaml string
		want []string
	}{
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, pathh: x}}}", noop),
			[]string{"unknown key wasm.filters.wasm-x.pathh (known at wasm.filters.wasm-x: abi, allowed_capabilities, body, clusters, config, configuration, fail_open, groups, keys, max_callouts, max_instances, max_memory_pages, order, path, root_id, sha256, timeout, url, vm_configuration, vm_id)"}},
		{"wasm: {filters: {wasm-x: {path: /nonexistent/x.wasm}}}",
			[]string{"wasm.filters.wasm-x: stat /nonexistent/x.wasm: no such file or directory"}},
		{"wasm: {filters: {wasm-x: {groups: [provider]}}}",
			[]string{"wasm.filters.wasm-x.path: the module file is required"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q}}}", abi2),
			[]string{"wasm.filters.wasm-x: module", "weft_abi_version returned 2; this host implements ABI version 1"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, max_memory_pages: 2}}}", noop),
			[]string{"wasm.filters.wasm-x: module", "min 3 pages (192 Ki) over limit of 2 pages"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, groups: [server]}}}", noop),
			[]string{`wasm.filters.wasm-x: groups: unknown group "server"`}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, keys: [token]}}}", noop),
			[]string{"wasm.filters.wasm-x: keys without groups"}},
		{fmt.Sprintf("wasm: {filters: {timeout: {path: %q}}}", noop),
			[]string{`wasm.filters.timeout: weft: filter extension "timeout" registered twice`}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, abi: wasi-http}}}", noop),
			[]string{`wasm.filters.wasm-x.abi: "wasi-http" is not known: want weft (the default) or proxy-wasm`}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, configuration: {a: 1}, root_id: r}}}", noop),
			[]string{"wasm.filters.wasm-x.configuration: a proxy-wasm setting on a filter of weft's ABI", "wasm.filters.wasm-x.root_id"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, abi: proxy-wasm, body: [requests]}}}", noop),
			[]string{`wasm.filters.wasm-x.body[0]: "requests" is not a body; known: request, response; e.g. body: [request]`}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, body: [request]}}}", noop),
			[]string{"wasm.filters.wasm-x.body: a proxy-wasm setting on a filter of weft's ABI"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, abi: proxy-wasm, config: {a: 1}}}}", noop),
			[]string{"wasm.filters.wasm-x.config: a proxy-wasm filter gets its settings from configuration"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, abi: proxy-wasm}}}", noop),
			[]string{"wasm.filters.wasm-x: module", "is not a proxy-wasm module weft can run", "no proxy_abi_version_0_2_1"}},
		{fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q}}}\nprovider: {filter: wasm-y}", noop),
			[]string{`provider.filter: unknown filter extension "wasm-y"`, "wasm-x"}},
	} {
		_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(c.yaml)))
		if err == nil {
			t.Errorf("%s: no error", c.yaml)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n error %q\n lacks %q", c.yaml, err, w)
			}
		}
	}
}

// An App started from another working directory finds a module named by a
// path relative to its config file, and runs it with max_instances set.
func TestWasmPathRelativeToConfigFileInApp(t *testing.T) {
	confDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(confDir, "filters"), 0o755); err != nil {
		t.Fatal(err)
	}
	buildWasmGuest(t, filepath.Join(confDir, "filters"), "trace")
	conf := filepath.Join(confDir, "weft.yaml")
	if err := os.WriteFile(conf, []byte(`
protocols: {injvm: {name: injvm}}
wasm:
  filters:
    wasm-t: {path: filters/trace.wasm, groups: [provider], max_instances: 1, config: {name: wasm-t}}
provider:
  services:
    tracer: {interface: org.weft.Tracer}
consumer:
  references:
    tracer: {interface: org.weft.Tracer, protocol: injvm}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var c tracerClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigFiles(conf)...),
		weft.WithService("tracer", tracer{}), weft.WithReference("tracer", &c))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	if got := app.Config().Wasm.Filters["wasm-t"].Path; got != filepath.Join(confDir, "filters", "trace.wasm") {
		t.Errorf("resolved path %q", got)
	}
	for range 3 {
		if got, err := c.Trace(context.Background()); err != nil || got != "wasm-t" {
			t.Fatalf("trace %q, %v", got, err)
		}
	}
}

func mustCopy(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Metrics a proxy-wasm guest defines (a counter, a gauge, a histogram) are
// on the App's /metrics, labelled with the filter's name, and add up across
// the filter's instances.
func TestProxyWasmGuestMetricsInApp(t *testing.T) {
	dir := t.TempDir()
	wat := filepath.Join("..", "filters-wasm", "testdata", "proxywasm_metrics.wat")
	mod := filepath.Join(dir, "metrics.wasm")
	if out, err := exec.Command("wat2wasm", wat, "-o", mod).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("wat2wasm: %v", err)
		}
		t.Fatalf("wat2wasm %s: %v\n%s", wat, err, out)
	}
	app := startApp(t, fmt.Sprintf(`
metrics: {enable: true}
wasm:
  filters:
    pw-metrics: {abi: proxy-wasm, path: %q, groups: [provider]}
protocols: {injvm: {}}
provider: {services: {demo: {interface: org.weft.MetricsDemo}}}
consumer: {references: {demo: {interface: org.weft.MetricsDemo, protocol: injvm}}}
`, mod), weft.WithService("demo", metricsDemo{}))
	iv, err := app.Reference("demo")
	if err != nil {
		t.Fatal(err)
	}
	const calls = 12
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls / 4 {
				if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("echo", "x")); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`weft_wasm_guest_requests_total{application_name=`,
		`filter="pw-metrics"`,
		`} 12`,
		`# TYPE weft_wasm_guest_last_size gauge`,
		`# TYPE weft_wasm_guest_size histogram`,
		`weft_wasm_guest_size_bucket{`,
		`weft_wasm_guest_size_count{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		for _, line := range strings.Split(body, "\n") {
			if strings.Contains(line, "wasm") {
				t.Log(line)
			}
		}
	}
}

// A proxy-wasm filter's callout to another weft service: the provider's
// filter (an AssemblyScript filter on @solo-io/proxy-runtime) names its
// cluster "auth", which the config maps to ref:auth, a reference of the
// App to a second provider over dubbo. An allowed user's call goes through
// with the role the auth service answered; a refused one is answered by
// the filter with the auth service's error, over dubbo and tri.
func TestProxyWasmCalloutToWeftReference(t *testing.T) {
	forEachProtocol(t, testProxyWasmCalloutToWeftReference)
}

type authService struct{ asked atomic.Int32 }

func (a *authService) Check(_ context.Context, user string) (string, error) {
	a.asked.Add(1)
	if user == "alice" {
		return "admin", nil
	}
	return "", kernel.Errorf(kernel.CodeForbidden, "%s may not", user)
}

func testProxyWasmCalloutToWeftReference(t *testing.T, proto string) {
	mod := buildProxyWasmAS(t, t.TempDir(), "refcall")
	authAddr := freePort(t)
	auth := &authService{}
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider: {services: {auth: {interface: org.weft.Auth}}}
`, authAddr[strings.LastIndexByte(authAddr, ':')+1:]), weft.WithService("auth", auth))

	addr := freePort(t)
	var role atomic.Value
	startApp(t, fmt.Sprintf(`
protocols: {%s: {port: %s}}
wasm:
  filters:
    refcall: {abi: proxy-wasm, path: %q, root_id: refcall, groups: [provider], clusters: {auth: "ref:auth"}}
provider: {services: {vault: {interface: org.weft.Vault, protocol: %s}}}
consumer: {references: {auth: {interface: org.weft.Auth, url: "dubbo://%s"}}}
`, proto, addr[strings.LastIndexByte(addr, ':')+1:], mod, proto, authAddr),
		weft.WithService("vault", &vault{}),
		weft.WithFilter("role", &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: 1000},
			func() (extension.Filter, error) {
				return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
					role.Store(inv.AttachmentString("x-role"))
					return next.Invoke(ctx, inv)
				}), nil
			}))

	var c tokenClient
	client := startApp(t, fmt.Sprintf(`consumer: {references: {vault: {interface: org.weft.Vault, url: "%s://%s", retries: 0}}}`, proto, addr),
		weft.WithReference("vault", &c))
	iv, err := client.Reference("vault")
	if err != nil {
		t.Fatal(err)
	}
	call := func(user string) error {
		inv := kernel.NewInvocation("secret", "x")
		inv.SetAttachment("x-user", user)
		_, err := iv.Invoke(context.Background(), inv)
		return err
	}
	if err := call("alice"); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if got := role.Load(); got != `"admin"` {
		t.Errorf("the provider saw x-role %v, want the auth service's answer \"admin\" (as JSON)", got)
	}
	err = call("mallory")
	if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "mallory may not") {
		t.Errorf("mallory: %v, want forbidden with the auth service's message", err)
	}
	if n := auth.asked.Load(); n != 2 {
		t.Errorf("the auth service was asked %d times, want 2", n)
	}
}

// A proxy-wasm filter fetched from a URL (a real HTTP server on loopback)
// and pinned by sha256, in a VM it shares with a second filter of its
// vm_id (declared, not activated): its instances hold both root contexts
// (the Go SDK guest reports x-vm-plugins 2), and a call through it runs
// with its own root id. The wrong digest fails weft.New by key path.
func TestProxyWasmVMFromURLInApp(t *testing.T) {
	mod, err := os.ReadFile(buildProxyWasmGo(t, t.TempDir(), "headers"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(mod) }))
	defer srv.Close()
	sum := sha256.Sum256(mod)
	yaml := func(digest string) string {
		return fmt.Sprintf(`
wasm:
  filters:
    pw-a: {abi: proxy-wasm, url: %[1]q, sha256: %[2]s, vm_id: edge, root_id: root-a, configuration: cfg-a, groups: [consumer]}
    pw-b: {abi: proxy-wasm, url: %[1]q, sha256: %[2]s, vm_id: edge, root_id: root-b, configuration: cfg-b}
protocols: {injvm: {}}
provider: {services: {demo: {interface: org.weft.MetricsDemo}}}
consumer: {references: {demo: {interface: org.weft.MetricsDemo, protocol: injvm}}}
`, srv.URL+"/headers.wasm", digest)
	}
	app := startApp(t, yaml(hex.EncodeToString(sum[:])), weft.WithService("demo", metricsDemo{}))
	iv, err := app.Reference("demo")
	if err != nil {
		t.Fatal(err)
	}
	res, err := iv.Invoke(context.Background(), kernel.NewInvocation("echo", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Attachments["x-served-by"] != "root-a" || res.Attachments["x-vm-plugins"] != "2" {
		t.Errorf("result attachments %v: want x-served-by root-a and x-vm-plugins 2 (pw-a's root context, in a VM shared with pw-b)", res.Attachments)
	}
	_, err = weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(yaml(strings.Repeat("ab", 32)))),
		weft.WithService("demo", metricsDemo{}))
	if err == nil || !strings.Contains(err.Error(), "wasm.filters.pw-a") || !strings.Contains(err.Error(), "update sha256") {
		t.Errorf("weft.New with the wrong sha256: %v, want the key path and the fix", err)
	}
}

// What a proxy-wasm filter sees of a real call, over dubbo and tri, on the
// provider's and the consumer's side (filters-wasm/testdata/proxywasm-go/
// inspect, which reports it in a response header): the request headers
// Envoy shows an HTTP filter for a gRPC request (:method, :scheme, :path,
// :authority, content-type, grpc-timeout from the call's deadline, the
// attachments), the properties (Envoy's attributes, request.headers as a
// map, connection.mtls as a bool byte, plugin_*, weft.*), the VM's and the
// plugin's configuration, the response's headers and trailers
// (grpc-status 0); and grpc-status set in the trailers turning a success
// into that error.
func TestProxyWasmCallViewInApp(t *testing.T) {
	forEachProtocol(t, func(t *testing.T, proto string) {
		t.Run("plain", func(t *testing.T) { testProxyWasmCallView(t, proto, "") })
		ca, cert, key := testpki.WriteFiles(t, t.TempDir())
		t.Run("mutual-tls", func(t *testing.T) {
			testProxyWasmCallView(t, proto, fmt.Sprintf("tls: {ca-cert-file: %q, tls-cert-file: %q, tls-key-file: %q}\n", ca, cert, key))
		})
	})
}

// testProxyWasmCallView runs the inspect filter on both sides of a call,
// over TLS when tlsYAML (a tls block both apps share) is set.
func testProxyWasmCallView(t *testing.T, proto, tlsYAML string) {
	mod := buildProxyWasmGo(t, t.TempDir(), "inspect")
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	startApp(t, tlsYAML+fmt.Sprintf(`
protocols: {%s: {port: %s}}
wasm:
  filters:
    inspect-p: {abi: proxy-wasm, path: %q, root_id: inspect, vm_id: v, vm_configuration: vmcfg, configuration: plugin-p, groups: [provider]}
provider: {services: {tracer: {interface: org.weft.Tracer, protocol: %s}}}
`, proto, port, mod, proto), weft.WithService("tracer", tracer{}))
	var cl tracerClient
	client := startApp(t, tlsYAML+fmt.Sprintf(`
wasm:
  filters:
    inspect-c: {abi: proxy-wasm, path: %q, root_id: inspect, configuration: plugin-c, groups: [consumer]}
consumer: {references: {tracer: {interface: org.weft.Tracer, url: "%s://%s", timeout: 5000, retries: 0}}}
`, mod, proto, addr), weft.WithReference("tracer", &cl))
	iv, err := client.Reference("tracer")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("echo", "hi")
	inv.SetAttachment("x-user", "alice")
	res, err := iv.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	type report struct {
		VMConfiguration  string            `json:"vm_configuration"`
		Configuration    string            `json:"configuration"`
		RequestHeaders   map[string]string `json:"request_headers"`
		Properties       map[string]string `json:"properties"`
		ResponseHeaders  map[string]string `json:"response_headers"`
		ResponseTrailers map[string]string `json:"response_trailers"`
	}
	for _, side := range []string{kernel.SideProvider, kernel.SideConsumer} {
		raw, _ := res.Attachments["x-inspect-"+side].(string)
		var r report
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("%s: no report in the result's attachments (%v): %v", side, res.Attachments, err)
		}
		scheme, mtls := "http", "00"
		if tlsYAML != "" && side == kernel.SideProvider {
			scheme, mtls = "https", "01" // the provider's call came over mutual TLS
		}
		want := map[string]string{":method": "POST", ":scheme": scheme, ":path": "/org.weft.Tracer/echo", ":authority": addr, "x-user": "alice"}
		for k, v := range want {
			if r.RequestHeaders[k] != v {
				t.Errorf("%s: request header %s = %q, want %q (all: %v)", side, k, r.RequestHeaders[k], v, r.RequestHeaders)
			}
		}
		ct := r.RequestHeaders["content-type"]
		if proto == "dubbo" && ct != "application/dubbo+hessian2" || proto == "tri" && !strings.HasPrefix(ct, "application/grpc") {
			t.Errorf("%s: content-type %q", side, ct)
		}
		if d, err := parseGRPCTimeout(r.RequestHeaders["grpc-timeout"]); err != nil || d <= 0 || d > 5*time.Second {
			t.Errorf("%s: grpc-timeout %q (%v, %v), want the time left of the call's 5 s", side, r.RequestHeaders["grpc-timeout"], d, err)
		}
		p := r.Properties
		wantP := map[string]string{"request.path": "/org.weft.Tracer/echo", "request.method": "POST", "destination.address": addr,
			"plugin_root_id": "inspect", "weft.interface": "org.weft.Tracer", "weft.method": "echo", "weft.side": side,
			"weft.protocol": proto, "request.headers.x-user": "alice", "request.headers": "alice"}
		if side == kernel.SideProvider {
			wantP["plugin_name"], wantP["plugin_vm_id"], wantP["connection.mtls"], wantP["request.scheme"] = "inspect-p", "v", mtls, scheme
		} else {
			wantP["plugin_name"] = "inspect-c"
		}
		for k, v := range wantP {
			if p[k] != v {
				t.Errorf("%s: property %s = %q, want %q (all: %v)", side, k, p[k], v, p)
			}
		}
		if side == kernel.SideProvider && !strings.HasPrefix(p["source.address"], "127.0.0.1:") {
			t.Errorf("provider: source.address %q, want the consumer's 127.0.0.1:port", p["source.address"])
		}
		if _, ok := p["connection.mtls"]; side == kernel.SideConsumer && ok {
			t.Errorf("consumer: connection.mtls %q, want none (a consumer's call has no downstream connection)", p["connection.mtls"])
		}
		if side == kernel.SideProvider && (r.VMConfiguration != "vmcfg" || r.Configuration != "plugin-p") || side == kernel.SideConsumer && r.Configuration != "plugin-c" {
			t.Errorf("%s: vm_configuration %q, configuration %q", side, r.VMConfiguration, r.Configuration)
		}
		if r.ResponseHeaders[":status"] != "200" || r.ResponseTrailers["grpc-status"] != "0" {
			t.Errorf("%s: response headers %v, trailers %v; want :status 200 and grpc-status 0", side, r.ResponseHeaders, r.ResponseTrailers)
		}
	}

	fail := kernel.NewInvocation("echo", "hi")
	fail.SetAttachment("x-inspect-fail", "5") // NOT_FOUND
	_, err = iv.Invoke(context.Background(), fail)
	if kernel.CodeOf(err) != kernel.CodeOfGRPCStatus(5) || !strings.Contains(err.Error(), "failed by the inspect filter") {
		t.Errorf("grpc-status 5 set in the trailers: %v, want code %v with the filter's message", err, kernel.CodeOfGRPCStatus(5))
	}
}

// parseGRPCTimeout reads a grpc-timeout header: up to 8 digits and a unit.
func parseGRPCTimeout(s string) (time.Duration, error) {
	units := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
	if len(s) < 2 || len(s) > 9 {
		return 0, fmt.Errorf("grpc-timeout %q: want 1 to 8 digits and a unit", s)
	}
	unit, ok := units[s[len(s)-1]]
	n, err := strconv.Atoi(s[:len(s)-1])
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("grpc-timeout %q: want digits and one of HMSmun", s)
	}
	return time.Duration(n) * unit, nil
}

// attAnswer is a service that answers with one attachment of its call: what
// the filters before it set.
type attAnswer struct{}

func (attAnswer) Get(ctx context.Context, key string) (string, error) {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return "", fmt.Errorf("no invocation in context")
	}
	return inv.AttachmentString(key), nil
}

type attClient struct {
	Get func(ctx context.Context, key string) (string, error)
}

// The host capabilities end to end, through a provider App over dubbo and
// tri, each filter named by its service's filter list: shared data with
// compare-and-swap from 8 concurrent callers (the AssemblyScript counter,
// which numbers each call in x-n) loses no increment; its tick and a
// shared queue (proxywasm_queue.wat) show in the guest metrics on
// /metrics; a guest that traps fails its call closed, or lets it through
// with fail_open (counted); a host function allowed_capabilities do not
// list has no effect.
func TestProxyWasmCapabilitiesInApp(t *testing.T) {
	forEachProtocol(t, testProxyWasmCapabilitiesInApp)
}

func testProxyWasmCapabilitiesInApp(t *testing.T, proto string) {
	dir := t.TempDir()
	counter := buildProxyWasmAS(t, dir, "counter")
	queue := buildProxyWasmWAT(t, dir, "proxywasm_queue")
	corners := buildProxyWasmWAT(t, dir, "proxywasm")
	addr := freePort(t)
	services := []string{"count", "queue", "trap", "trapopen", "restricted"}
	var svcYAML, refYAML strings.Builder
	opts := []weft.Option{}
	clients := map[string]*attClient{}
	for _, s := range services {
		fmt.Fprintf(&svcYAML, "    %s: {interface: org.weft.cap.%s, protocol: %s, filter: pw-%s}\n", s, s, proto, s)
		fmt.Fprintf(&refYAML, "    %s: {interface: org.weft.cap.%s, url: \"%s://%s\", retries: 0}\n", s, s, proto, addr)
		opts = append(opts, weft.WithService(s, attAnswer{}))
		clients[s] = &attClient{}
	}
	provider := startApp(t, fmt.Sprintf(`
metrics: {enable: true}
protocols: {%s: {port: %s}}
wasm:
  filters:
    pw-count: {abi: proxy-wasm, path: %q, root_id: counter, vm_id: limits}
    pw-queue: {abi: proxy-wasm, path: %q, vm_id: q}
    pw-trap: {abi: proxy-wasm, path: %[5]q, configuration: t}
    pw-trapopen: {abi: proxy-wasm, path: %[5]q, configuration: t, fail_open: true}
    pw-restricted: {abi: proxy-wasm, path: %[5]q, configuration: o, allowed_capabilities: [proxy_on_request_headers, proxy_get_buffer_bytes]}
provider:
  services:
%s`, proto, addr[strings.LastIndexByte(addr, ':')+1:], counter, queue, corners, svcYAML.String()), opts...)
	var refOpts []weft.Option
	for _, s := range services {
		refOpts = append(refOpts, weft.WithReference(s, clients[s]))
	}
	startApp(t, "consumer:\n  references:\n"+refYAML.String(), refOpts...)
	ctx := context.Background()

	const callers, each = 8, 25
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := clients["count"].Get(ctx, "x-n"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := clients["count"].Get(ctx, "x-n"); err != nil || n != fmt.Sprint(callers*each+1) {
		t.Errorf("after %d counted calls from %d callers the next was numbered %q (%v), want %d: increments lost", callers*each, callers, n, err, callers*each+1)
	}
	for range 10 {
		if _, err := clients["queue"].Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := clients["trap"].Get(ctx, "x")
	if err == nil || !strings.Contains(err.Error(), "trapped") {
		t.Errorf("a trapping guest, fail closed: %v, want the call failed naming the trap", err)
	}
	if _, err := clients["trapopen"].Get(ctx, "x"); err != nil {
		t.Errorf("a trapping guest with fail_open: %v, want the call through", err)
	}
	if mode, err := clients["restricted"].Get(ctx, "x-mode"); err != nil || mode != "" {
		t.Errorf("proxy_add_header_map_value outside allowed_capabilities: x-mode %q (%v), want no header added", mode, err)
	}

	metric := func(name, filter string) float64 {
		rec := httptest.NewRecorder()
		provider.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `filter="`+filter+`"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				return v
			}
		}
		return -1
	}
	for _, m := range []struct {
		name, filter string
		want         float64
	}{
		{"weft_wasm_guest_ticks", "pw-count", 3},
		{"weft_wasm_guest_dequeued", "pw-queue", 10},
		{"weft_wasm_fail_open_total", "pw-trapopen", 1},
		{"weft_wasm_traps_total", "pw-trap", 1},
	} {
		deadline := time.Now().Add(5 * time.Second)
		for metric(m.name, m.filter) < m.want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if v := metric(m.name, m.filter); v < m.want {
			t.Errorf("/metrics %s{filter=%q} = %v, want at least %v", m.name, m.filter, v, m.want)
		}
	}
}
