package test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	nacos "github.com/weftrpc/weft/registry-nacos"
)

// cfgNode answers with its name and the trace its call carried.
type cfgNode struct{ name string }

func (n cfgNode) Who(ctx context.Context) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	return n.name + "|" + inv.AttachmentString("trace"), nil
}

type cfgNodeClient struct {
	Who func(ctx context.Context) (string, error)
}

// syncBuffer is a log destination tests read while the App writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Under -race these tests are skipped: nacos-sdk-go v2.3.2 races inside
// itself (its client's Start against its health check, its connect event
// against subscription callbacks), which the race detector reports against
// whichever test runs, on a loaded machine often. The README's test command
// runs them again without -race (`go test -run 'Nacos|ConfigCenter'
// ./test`), as test/interop runs TestNacosOutage; weft's own code on these
// paths is raced by the embedded-registry twins of the same tests.
func nacosAddr(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		t.Skip("drives nacos-sdk-go, which races internally: runs in the README's non-race step")
	}
	addr := os.Getenv("NACOS_TEST_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("NACOS_TEST_ADDR is not set but CI is: .ci/run starts PolarisMesh and sets it")
		}
		t.Skip("NACOS_TEST_ADDR is not set: start test/nacos/polaris.sh and set NACOS_TEST_ADDR=127.0.0.1:8848")
	}
	return addr
}

// A consumer composed from files plus a Nacos data id: a condition rule
// published to Nacos moves its calls to another provider within 5 s, a new
// filter list and a new WASM filter config apply without a restart, a
// broken document changes nothing, and deleting the document returns to the
// files' config. No call fails throughout.
func TestConfigCenterChangesRoutingWithoutRestart(t *testing.T) {
	addr := nacosAddr(t)
	guest := buildWasmGuest(t, t.TempDir(), "trace")
	var ports [2]string
	for i := range ports {
		a := freePort(t)
		ports[i] = a[strings.LastIndexByte(a, ':')+1:]
		startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    node: {interface: org.weft.CfgNode}
`, ports[i]), weft.WithService("node", cfgNode{name: fmt.Sprintf("n%d", i+1)}))
	}

	dataID := fmt.Sprintf("weft-e2e-%d.yaml", time.Now().UnixNano())
	pub, err := nacos.ConfigFactory{Log: quietLog}.GetDynamicConfiguration(kernel.MustParseURL("nacos://" + addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	publish := func(doc string) time.Time {
		t.Helper()
		if err := pub.PublishConfig(ctx, dataID, "", doc); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	doc := func(port, filter, name string) string {
		return fmt.Sprintf(`
consumer:
  references:
    node:
      filter: %q
      routers: [{rule: "=> port = %s"}]
wasm:
  filters:
    wasm-trace: {config: {name: %s}}
`, filter, port, name)
	}
	// Published before the App starts: the App starts with it merged.
	publish(doc(ports[0], "wasm-trace", "v1"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := pub.GetConfig(ctx, dataID, "")
		if err == nil && strings.Contains(got, "v1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not serve the published document: %q, %v", got, err)
		}
		// Slowly: the SDK allows 5 reads of a data id per second.
		time.Sleep(300 * time.Millisecond)
	}

	logs := &syncBuffer{}
	var c cfgNodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithPlugins(nacos.Plugin()), weft.WithReference("node", &c),
		weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		weft.WithFilter("stamp", nil, traceFilter("stamp")),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: cfg-e2e}
config_center: {address: "nacos://%s", data_id: %s}
consumer:
  references:
    node:
      interface: org.weft.CfgNode
      url: "dubbo://127.0.0.1:%s;dubbo://127.0.0.1:%s"
      loadbalance: roundrobin
      filter: wasm-trace
wasm:
  filters:
    wasm-trace: {path: %q, config: {name: local}}
`, addr, dataID, ports[0], ports[1], guest))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(ctx)

	// Callers run for the whole test; every answer is recorded.
	var (
		mu       sync.Mutex
		answers  = map[string]int{}
		last     string
		failures []string
		calls    atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := c.Who(ctx)
				calls.Add(1)
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					answers[got]++
					last = got
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	stopCallers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopCallers()
	// waitOnly waits until only want is answered (none other for 100
	// calls) and returns when it started being answered.
	waitOnly := func(what string, within time.Duration, want ...string) time.Duration {
		t.Helper()
		start := time.Now()
		mu.Lock()
		clear(answers)
		mu.Unlock()
		for {
			mu.Lock()
			ok, total := true, 0
			for a, n := range answers {
				total += n
				if !contains(want, a) {
					ok = false
				}
			}
			snapshot := fmt.Sprint(answers)
			if !ok {
				clear(answers) // count again from the next answer
			}
			mu.Unlock()
			if ok && total >= 100 {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%s: calls still answered %s after %v (want only %v); last %q; logs:\n%s", what, snapshot, within, want, last, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	waitOnly("the document merged at start", 2*time.Second, "n1|v1")

	// The acceptance check: a rule published to Nacos moves the calls.
	published := publish(doc(ports[1], "wasm-trace", "v1"))
	moved := waitOnly("routing rule to n2", 5*time.Second, "n2|v1")
	t.Logf("calls moved to n2 %v after the rule was published", moved.Round(10*time.Millisecond))
	if since := time.Since(published); since > 5*time.Second {
		t.Fatalf("the rule took %v", since)
	}

	// A filter list and a WASM filter's config.
	publish(doc(ports[1], "wasm-trace,stamp", "v3"))
	took := waitOnly("new filter list and wasm config", 10*time.Second, "n2|v3,stamp")
	t.Logf("filter list and wasm config applied in %v", took.Round(10*time.Millisecond))

	// Broken documents change nothing; each is reported.
	for _, bad := range []struct{ doc, logged string }{
		{"consumer: {referencez: {}}\n", "unknown key consumer.referencez"},
		{"consumer: [\n", "config center"},
		{doc(ports[0], "wasm-trace,nosuch", "v4"), `unknown filter extension`},
		{strings.Replace(doc(ports[0], "wasm-trace", "v4"), `rule: "=> port`, `type: nosuch, rule: "=> port`, 1), `unknown router extension`},
	} {
		before := strings.Count(logs.String(), "rejected")
		publish(bad.doc)
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logs.String(), "rejected") == before {
			if time.Now().After(deadline) {
				t.Fatalf("broken document %q: no rejection logged; logs:\n%s", bad.doc, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(logs.String(), bad.logged) {
			t.Errorf("broken document %q: the log does not say %q:\n%s", bad.doc, bad.logged, logs.String())
		}
		waitOnly("after a broken document", 2*time.Second, "n2|v3,stamp")
	}

	// A tag rule: n2's address becomes "gray", so untagged calls avoid it.
	publish(fmt.Sprintf(`
consumer:
  references:
    node:
      filter: "wasm-trace,stamp"
      routers: [{type: tag, tags: [{name: gray, addresses: ["127.0.0.1:%s"]}]}]
wasm:
  filters:
    wasm-trace: {config: {name: v3}}
`, ports[1]))
	took = waitOnly("tag rule", 10*time.Second, "n1|v3,stamp")
	t.Logf("tag rule applied in %v", took.Round(10*time.Millisecond))

	// A change only a restart can make is reported, not applied; the
	// dynamic part of the same document is.
	publish("application: {name: renamed}\n" + doc(ports[0], "wasm-trace,stamp", "v5"))
	waitOnly("dynamic part of a mixed document", 10*time.Second, "n1|v5,stamp")
	if !strings.Contains(logs.String(), "needs a restart") || !strings.Contains(logs.String(), "keys=application") {
		t.Errorf("the restart-only change is not reported:\n%s", logs.String())
	}
	if got := app.Config().Application.Name; got != "cfg-e2e" {
		t.Errorf("App.Config shows application.name %q, which is not what runs", got)
	}

	// Deleted: back to the files' config (no rule, the local wasm config).
	publish("")
	waitOnly("document deleted", 10*time.Second, "n1|local", "n2|local")

	stopCallers()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed, first: %s", len(failures), calls.Load(), failures[0])
	}
	t.Logf("%d calls, none failed", calls.Load())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A broken document fails New with its data id named; with check: false an
// unreachable config center leaves the App on its files.
func TestConfigCenterAtStart(t *testing.T) {
	addr := nacosAddr(t)
	ctx := context.Background()
	dataID := fmt.Sprintf("weft-start-%d.yaml", time.Now().UnixNano())
	pub, err := nacos.ConfigFactory{Log: quietLog}.GetDynamicConfiguration(kernel.MustParseURL("nacos://" + addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.PublishConfig(ctx, dataID, "", "consumer: {timeout: soon}\n"); err != nil {
		t.Fatal(err)
	}
	defer pub.PublishConfig(ctx, dataID, "", "")
	local := fmt.Sprintf(`
config_center: {address: "nacos://%s", data_id: %s}
consumer:
  references:
    node: {interface: org.weft.CfgNode, url: "dubbo://127.0.0.1:1"}
`, addr, dataID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithPlugins(nacos.Plugin()), weft.WithConfig(weft.ConfigYAML(local)))
		if err != nil && strings.Contains(err.Error(), dataID) && strings.Contains(err.Error(), "consumer.timeout") {
			t.Logf("broken document at start: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("New with a broken document in the config center: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // the server may not serve the new data id yet
	}

	// Nothing listens on this port.
	dead := freePort(t)
	logs := &syncBuffer{}
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), weft.WithPlugins(nacos.Plugin()),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
config_center: {address: "nacos://%s?timeout=1000", data_id: x.yaml, check: false}
consumer: {timeout: 777}
`, dead))))
	if err != nil {
		t.Fatalf("check: false with an unreachable config center: %v", err)
	}
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	app.Stop(ctx)
	if got := app.Config().Consumer.Timeout; got != 777 {
		t.Errorf("consumer.timeout %d, want the file's 777", got)
	}
	if !strings.Contains(logs.String(), "config center unreachable") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}

// A provider's filter list changes without a restart: the exported
// service's chain is replaced while calls run.
func TestConfigCenterChangesProviderFilters(t *testing.T) {
	addr := nacosAddr(t)
	ctx := context.Background()
	dataID := fmt.Sprintf("weft-provider-%d.yaml", time.Now().UnixNano())
	pub, err := nacos.ConfigFactory{Log: quietLog}.GetDynamicConfiguration(kernel.MustParseURL("nacos://" + addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	defer pub.PublishConfig(ctx, dataID, "", "")
	a := freePort(t)
	port := a[strings.LastIndexByte(a, ':')+1:]
	startApp(t, fmt.Sprintf(`
config_center: {address: "nacos://%s", data_id: %s}
protocols: {dubbo: {port: %s}}
provider:
  services:
    node: {interface: org.weft.CfgNode}
`, addr, dataID, port), weft.WithPlugins(nacos.Plugin()), weft.WithService("node", cfgNode{name: "p"}), weft.WithFilter("stamp", nil, traceFilter("stamp")))
	var c cfgNodeClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    node: {interface: org.weft.CfgNode, url: "dubbo://127.0.0.1:%s"}
`, port), weft.WithReference("node", &c))
	if got, err := c.Who(ctx); err != nil || got != "p|" {
		t.Fatalf("before: %q, %v", got, err)
	}
	start := time.Now()
	if err := pub.PublishConfig(ctx, dataID, "", "provider: {services: {node: {filter: stamp}}}\n"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	for {
		got, err := c.Who(ctx)
		calls++
		if err != nil {
			t.Fatalf("call %d during the change: %v", calls, err)
		}
		if got == "p|stamp" {
			break
		}
		if got != "p|" || time.Since(start) > 10*time.Second {
			t.Fatalf("after %v: %q, want p|stamp", time.Since(start), got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("provider filter list applied %v after publishing; %d calls meanwhile, none failed", time.Since(start).Round(10*time.Millisecond), calls)
}

// A bridge's forward target follows its config center document while 8
// callers call it: the published impl.forward moves the calls from one
// reference to the other with no failed call.
func TestConfigCenterChangesForwardTarget(t *testing.T) {
	addr := nacosAddr(t)
	ctx := context.Background()
	dataID := fmt.Sprintf("weft-forward-%d.yaml", time.Now().UnixNano())
	pub, err := nacos.ConfigFactory{Log: quietLog}.GetDynamicConfiguration(kernel.MustParseURL("nacos://" + addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	defer pub.PublishConfig(ctx, dataID, "", "")
	backend := func(name string) string {
		a := freePort(t)
		startApp(t, fmt.Sprintf("protocols: {dubbo: {port: %s}}\nprovider: {services: {node: {interface: org.weft.CfgNode}}}\n",
			a[strings.LastIndexByte(a, ':')+1:]), weft.WithService("node", cfgNode{name: name}))
		return a
	}
	a, b := backend("a"), backend("b")
	bridge := freePort(t)
	startApp(t, fmt.Sprintf(`
config_center: {address: "nacos://%s", data_id: %s}
protocols: {dubbo: {port: %s}}
consumer:
  references:
    a: {interface: org.weft.CfgNode, url: "dubbo://%s"}
    b: {interface: org.weft.CfgNode, url: "dubbo://%s"}
provider:
  services:
    node: {interface: org.weft.CfgNode, impl: {forward: a}}
`, addr, dataID, bridge[strings.LastIndexByte(bridge, ':')+1:], a, b), weft.WithPlugins(nacos.Plugin()))
	var c cfgNodeClient
	startApp(t, fmt.Sprintf("consumer: {references: {node: {interface: org.weft.CfgNode, url: \"dubbo://%s\"}}}\n", bridge),
		weft.WithReference("node", &c))
	if got, err := c.Who(ctx); err != nil || got != "a|" {
		t.Fatalf("before: %q, %v", got, err)
	}
	var seenB atomic.Bool
	load := callersUnderLoad(8, func() error {
		got, err := c.Who(ctx)
		if err == nil && got != "a|" && got != "b|" {
			err = fmt.Errorf("got %q", got)
		}
		if got == "b|" {
			seenB.Store(true)
		}
		return err
	})
	start := time.Now()
	if err := pub.PublishConfig(ctx, dataID, "", "provider: {services: {node: {impl: {forward: b}}}}\n"); err != nil {
		t.Fatal(err)
	}
	for !seenB.Load() && time.Since(start) < 15*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	calls, failed, firstErr := load()
	if !seenB.Load() {
		t.Fatalf("the forward target did not follow the published document within 15 s")
	}
	if failed != 0 {
		t.Fatalf("%d of %d calls failed during the change; first: %v", failed, calls, firstErr)
	}
	if got, err := c.Who(ctx); err != nil || got != "b|" {
		t.Fatalf("after: %q, %v", got, err)
	}
	t.Logf("forward moved to b %v after publishing; %d calls by 8 callers, none failed", time.Since(start).Round(10*time.Millisecond), calls)
}
