package weft_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type greeter struct{}

func (greeter) SayHello(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	suffix := ""
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		suffix = inv.AttachmentString("suffix")
	}
	return "hello " + name + suffix, nil
}

type greeterClient struct {
	SayHello func(ctx context.Context, name string) (string, error)
	Echo     func(ctx context.Context, v string) (string, error) `weft:"$echo"`
}

const greeterYAML = `
application: {name: test}
protocols: {injvm: {name: injvm}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
consumer:
  references:
    greeter: {interface: org.example.Greeter, version: "1.0", protocol: injvm}
`

func newApp(t *testing.T, yaml string, opts ...weft.Option) *weft.App {
	t.Helper()
	app, err := weft.New(append([]weft.Option{weft.WithConfig(weft.ConfigYAML(yaml)), weft.WithoutEnv(), weft.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := app.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return app
}

func TestInProcessCallThroughChains(t *testing.T) {
	var c greeterClient
	newApp(t, greeterYAML, weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c))
	ctx := context.Background()
	got, err := c.SayHello(kernel.WithAttachments(ctx, map[string]any{"suffix": "!"}), "world")
	if err != nil || got != "hello world!" {
		t.Fatalf("SayHello = %q, %v; want the attachment to reach the provider", got, err)
	}
	_, err = c.SayHello(ctx, "")
	if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "empty name") {
		t.Fatalf("business error = %v (biz %t), want a biz error with the message", err, kernel.IsBiz(err))
	}
	if got, err := c.Echo(ctx, "ping"); err != nil || got != "ping" {
		t.Fatalf("$echo = %q, %v", got, err)
	}
}

func TestStubFailsClearlyAfterStop(t *testing.T) {
	var c greeterClient
	app, err := weft.New(weft.WithConfig(weft.ConfigYAML(greeterYAML)), weft.WithoutEnv(), weft.WithLogger(quiet),
		weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SayHello(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "start the App") {
		t.Fatalf("before start: %v", err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SayHello(context.Background(), "x"); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("after stop: %v", err)
	}
}

func TestStartupErrorsNameKeyPathAndKnownNames(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown consumer filter", `
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm, filter: "consumercontext,nosuch"}`,
			[]string{"consumer.references.greeter.filter", `unknown filter extension "nosuch"`, "accesslog, activelimit, adaptiveLoadBalance, circuitbreaker, consumercontext, context, echo, exception, executelimit, generic, metrics, otelClientTrace, otelClientTracePeer, otelServerTrace, padasvc, profiler-server, timeout"}},
		{"unknown provider filter removal", `
provider:
  filter: "-nosuch"
  services:
    greeter: {interface: org.example.Greeter, protocol: injvm}`,
			[]string{"provider.filter", `unknown filter extension "nosuch"`}},
		{"unknown load balancer", `
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm, loadbalance: rondom}`,
			[]string{"consumer.references.greeter.loadbalance", `unknown loadbalance extension "rondom"`, "known: adaptive, consistenthash, leastactive, p2c, random, roundrobin, shortestresponse"}},
		{"unknown method load balancer", `
consumer:
  references:
    greeter:
      interface: org.example.Greeter
      protocol: injvm
      methods: {sayHello: {loadbalance: nope}}`,
			[]string{"consumer.references.greeter.methods.sayHello.loadbalance", `"nope"`}},
		{"unknown registry", `
registries: {main: {address: "etcd://127.0.0.1:2379"}}`,
			[]string{"registries.main.address", `unknown registry extension "etcd"`}},
		{"unknown router", `
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm, routers: [{type: script, rule: "x"}]}`,
			[]string{"consumer.references.greeter: routers[0]", `unknown router extension "script"`, "known: condition, tag"}},
		{"unknown cluster", `
consumer:
  cluster: failwhale`,
			[]string{"consumer.cluster", `unknown cluster extension "failwhale"`, "failfast, failover"}},
		{"unknown protocol", `
protocols: {p1: {name: grpcx}}`,
			[]string{"protocols.p1.name", `unknown protocol extension "grpcx"`, "injvm"}},
		{"unknown serialization on a protocol", `
protocols: {p1: {name: dubbo, serialization: kryo-does-not-exist}}`,
			[]string{"protocols.p1.serialization", `unknown serialization extension "kryo-does-not-exist"`, "known: hessian2, protobuf"}},
		{"unknown threadpool", `
protocols: {p1: {name: dubbo, threadpool: elastic}}`,
			[]string{"protocols.p1.threadpool", `unknown threadpool extension "elastic"`, "known: cached, eager, fixed, limited"}},
		{"unknown transporter", `
protocols: {p1: {name: dubbo, transporter: mina}}`,
			[]string{"protocols.p1.transporter", `unknown transporter "mina"`, "known: netty, netty4"}},
		{"unknown serialization on a service", `
provider:
  services:
    greeter: {interface: org.example.Greeter, protocol: injvm, serialization: fst}`,
			[]string{"provider.services.greeter.serialization", `unknown serialization extension "fst"`, "known: hessian2, protobuf"}},
		{"unknown serialization on a reference", `
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm, serialization: kryo}`,
			[]string{"consumer.references.greeter.serialization", `unknown serialization extension "kryo"`, "known: hessian2, protobuf"}},
		{"unknown key", `
provider:
  services:
    greeter: {interface: org.example.Greeter, timeuot: 5}`,
			[]string{"unknown key provider.services.greeter.timeuot", "known at provider.services.greeter:", "timeout"}},
		{"unknown top-level key", `
consumers: {timeout: 1}`,
			[]string{"unknown key consumers", "known at the top level: application, config_center, consumer, "}},
		{"missing implementation", `
provider:
  services:
    billing: {interface: org.example.Billing, protocol: injvm}`,
			[]string{"provider.services.billing", `no implementation registered as "billing"`}},
		{"missing interface", `
consumer:
  references:
    greeter: {protocol: injvm}`,
			[]string{"consumer.references.greeter", "interface is required"}},
		{"bad yaml", "provider: [unclosed", []string{"config yaml"}},
		{"config center without address", `
config_center: {data_id: app.yaml}`,
			[]string{"config_center: address is required"}},
		// No config center is built in (Nacos is a plugin: TestNacosIsAPlugin).
		{"unknown config center", `
config_center: {address: "apollo://127.0.0.1:8080", data_id: app.yaml}`,
			[]string{"config_center.address", `unknown config center extension "apollo" (none is registered)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weft.New(weft.WithConfig(weft.ConfigYAML(tc.yaml)), weft.WithoutEnv(), weft.WithLogger(quiet),
				weft.WithService("greeter", greeter{}))
			if err == nil {
				t.Fatal("New succeeded, want a start-up error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// Nacos is a plugin of registry-nacos, not built in: a config that names
// it for a registry or a config center without the plugin fails New with
// the key path, the package it lives in and the line that adds it, as an
// OTLP exporter does (TestTracingConfigErrors). registry-nacos's own tests
// (TestPluginNames) check the names with the plugin added.
func TestNacosIsAPlugin(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"registry without the plugin", `
registries: {main: {address: "nacos://127.0.0.1:1?namespace=dev"}}`,
			[]string{"registries.main.address: the nacos registry lives in github.com/weftrpc/weft/registry-nacos, which this program does not link",
				`import nacos "github.com/weftrpc/weft/registry-nacos"`, "weft.WithPlugins(nacos.Plugin())", "known: embedded"}},
		{"config center without the plugin", `
config_center: {address: "nacos://127.0.0.1:1", data_id: app.yaml}`,
			[]string{"config_center.address: the nacos config center lives in github.com/weftrpc/weft/registry-nacos, which this program does not link",
				`import nacos "github.com/weftrpc/weft/registry-nacos"`, "weft.WithPlugins(nacos.Plugin())", "no other config center is linked"}},
		{"zookeeper registry without the plugin", `
registries: {main: {address: "zookeeper://127.0.0.1:2181"}}`,
			[]string{"registries.main.address: the zookeeper registry lives in github.com/weftrpc/weft/registry-zookeeper, which this program does not link",
				`import zookeeper "github.com/weftrpc/weft/registry-zookeeper"`, "weft.WithPlugins(zookeeper.Plugin())", "known: embedded"}},
		{"zookeeper config center without the plugin", `
config_center: {address: "zookeeper://127.0.0.1:2181", data_id: app.yaml}`,
			[]string{"config_center.address: the zookeeper config center lives in github.com/weftrpc/weft/registry-zookeeper, which this program does not link",
				`import zookeeper "github.com/weftrpc/weft/registry-zookeeper"`, "weft.WithPlugins(zookeeper.Plugin())"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weft.New(weft.WithConfig(weft.ConfigYAML(tc.yaml)), weft.WithoutEnv(), weft.WithLogger(quiet),
				weft.WithService("greeter", greeter{}))
			if err == nil {
				t.Fatal("New succeeded, want a start-up error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigFilesMergeInOrderThenEnv(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	// A reference, so that the App has something to do (an empty one fails
	// New); it is never referred.
	os.WriteFile(a, []byte("consumer: {timeout: 100, retries: 5, references: {r: {interface: org.example.R, url: \"dubbo://127.0.0.1:1\"}}}\nprovider: {timeout: 7}\n"), 0o644)
	os.WriteFile(b, []byte("consumer: {timeout: 200}\n"), 0o644)
	t.Setenv("WEFT_PROVIDER_TIMEOUT", "300")
	app, err := weft.New(weft.WithConfig(weft.ConfigFiles(a, b)...), weft.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	c := app.Config()
	if c.Consumer.Timeout != 200 || c.Consumer.Retries == nil || *c.Consumer.Retries != 5 || c.Provider.Timeout != 300 {
		t.Fatalf("merged config: consumer.timeout=%d retries=%v provider.timeout=%d; want 200, 5, 300",
			c.Consumer.Timeout, c.Consumer.Retries, c.Provider.Timeout)
	}
	if _, err := weft.New(weft.WithConfig(weft.ConfigFiles(filepath.Join(dir, "missing.yaml"))...)); err == nil ||
		!strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file error = %v", err)
	}
}

// block is a service whose method holds until released, counting how many run
// at once.
type block struct {
	release chan struct{}
	hold    time.Duration
	running atomic.Int64
	peak    atomic.Int64
	calls   atomic.Int64
	entered chan struct{}
}

func (b *block) Work(ctx context.Context) (string, error) {
	b.calls.Add(1)
	n := b.running.Add(1)
	defer b.running.Add(-1)
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if b.entered != nil {
		b.entered <- struct{}{}
	}
	if b.release != nil {
		<-b.release
	}
	time.Sleep(b.hold)
	return "done", nil
}

type workClient struct {
	Work func(ctx context.Context) (string, error)
}

func callConcurrently(n int, call func() error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call()
		}()
	}
	wg.Wait()
	return errs
}

func TestExecutesRejectsOverLimitAtOnce(t *testing.T) {
	b := &block{release: make(chan struct{}), entered: make(chan struct{}, 10)}
	var c workClient
	newApp(t, `
protocols: {injvm: {}}
provider:
  services:
    work: {interface: org.example.Work, executes: 2, timeout: 5000}
consumer:
  references:
    work: {interface: org.example.Work, protocol: injvm, retries: 0, timeout: 5000}
`, weft.WithService("work", b), weft.WithReference("work", &c))

	var rejected atomic.Int64
	rejectedAll := make(chan struct{})
	done := make(chan []error)
	go func() {
		done <- callConcurrently(10, func() error {
			_, err := c.Work(context.Background())
			if kernel.CodeOf(err) == kernel.CodeLimitExceeded && rejected.Add(1) == 8 {
				close(rejectedAll)
			}
			return err
		})
	}()
	// The 8 rejections come while the 2 admitted calls are still held.
	select {
	case <-rejectedAll:
	case <-time.After(3 * time.Second):
		t.Fatalf("only %d calls rejected while 2 were running; want 8 rejected at once", rejected.Load())
	}
	// The two admitted calls passed the limit before the rejections, but
	// may not have reached the method yet on a busy machine: wait for both.
	for range 2 {
		select {
		case <-b.entered:
		case <-time.After(3 * time.Second):
			t.Fatal("an admitted call did not reach the method")
		}
	}
	if r := b.running.Load(); r != 2 {
		t.Fatalf("%d calls running, want 2", r)
	}
	close(b.release)
	errs := <-done
	ok, limited := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case kernel.CodeOf(err) == kernel.CodeLimitExceeded:
			limited++
			if !strings.Contains(err.Error(), "executes=2") {
				t.Errorf("limit error does not name the limit: %v", err)
			}
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 2 || limited != 8 || b.calls.Load() != 2 {
		t.Fatalf("ok=%d limited=%d implementation calls=%d; want 2, 8, 2", ok, limited, b.calls.Load())
	}
}

func TestActivesWaitsForSlot(t *testing.T) {
	b := &block{hold: 30 * time.Millisecond}
	var c workClient
	newApp(t, `
protocols: {injvm: {}}
provider:
  services:
    work: {interface: org.example.Work}
consumer:
  references:
    work: {interface: org.example.Work, protocol: injvm, actives: 2, timeout: 5000}
`, weft.WithService("work", b), weft.WithReference("work", &c))
	errs := callConcurrently(10, func() error { _, err := c.Work(context.Background()); return err })
	for _, err := range errs {
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
	}
	if p := b.peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want exactly 2 (actives: 2)", p)
	}
	if n := b.calls.Load(); n != 10 {
		t.Fatalf("%d calls reached the provider, want 10", n)
	}
}

func TestActivesWaitersTimeOut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	b := &block{release: make(chan struct{}), entered: make(chan struct{}, 10)}
	var c workClient
	newApp(t, fmt.Sprintf(`
protocols: {injvm: {}}
provider:
  services:
    work: {interface: org.example.Work}
consumer:
  references:
    work: {interface: org.example.Work, protocol: injvm, actives: 2, retries: 0, timeout: %d}
`, timeout.Milliseconds()), weft.WithService("work", b), weft.WithReference("work", &c))

	type outcome struct {
		err  error
		took time.Duration
	}
	results := make(chan outcome, 10)
	for range 10 {
		go func() {
			start := time.Now()
			_, err := c.Work(context.Background())
			results <- outcome{err, time.Since(start)}
		}()
	}
	<-b.entered
	<-b.entered
	waited := 0
	for range 8 {
		o := <-results
		if kernel.CodeOf(o.err) != kernel.CodeTimeout || !strings.Contains(o.err.Error(), "free slot") {
			t.Errorf("waiting caller: %v, want a timeout waiting for a free slot", o.err)
		}
		if o.took < timeout-10*time.Millisecond || o.took > timeout+150*time.Millisecond {
			t.Errorf("waiting caller failed after %v, want near %v", o.took, timeout)
		}
		waited++
	}
	close(b.release)
	for range 2 {
		<-results
	}
	if b.calls.Load() != 2 {
		t.Fatalf("%d calls reached the provider, want 2", b.calls.Load())
	}
}

// Filters from WithFilter join the same activation as built-ins; the user's
// list places them around `default`.
func TestCustomFiltersJoinActivation(t *testing.T) {
	var mu sync.Mutex
	var order []string
	record := func(name string) kernel.Factory[extension.Filter] {
		return func() (extension.Filter, error) {
			return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return next.Invoke(ctx, inv)
			}), nil
		}
	}
	var c greeterClient
	newApp(t, `
protocols: {injvm: {}}
provider:
  filter: "first,default,-timeout"
  services:
    greeter: {interface: org.example.Greeter, filter: last}
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm}
`, weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c),
		weft.WithFilter("first", nil, record("first")),
		weft.WithFilter("last", nil, record("last")),
		weft.WithFilter("auto-b", &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: 5}, record("auto-b")),
		weft.WithFilter("auto-a", &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: 5}, record("auto-a")),
		weft.WithFilter("consumer-only", &kernel.Activate{Groups: []string{kernel.GroupConsumer}, Order: 100}, record("consumer-only")),
	)
	if _, err := c.SayHello(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	want := "consumer-only,first,auto-a,auto-b,last"
	if got := strings.Join(order, ","); got != want {
		t.Fatalf("filter order %s, want %s", got, want)
	}
}

// Two Apps in one process export the same service key without clashing: the
// injvm exporter map belongs to each App.
func TestTwoAppsShareNothing(t *testing.T) {
	var c1, c2 greeterClient
	newApp(t, greeterYAML, weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c1))
	newApp(t, greeterYAML, weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c2))
	for _, c := range []greeterClient{c1, c2} {
		if _, err := c.SayHello(context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
	}
}

// Every strategy and balancer is chosen by its name in config, and a call
// goes through it.
func TestConfigComposesEveryClusterAndBalancer(t *testing.T) {
	clusters := []string{"failover", "failfast", "failsafe", "failback", "forking", "broadcast", "available"}
	balancers := []string{"random", "roundrobin", "leastactive", "shortestresponse", "consistenthash", "p2c"}
	for i, cl := range clusters {
		lb := balancers[i%len(balancers)]
		t.Run(cl+"/"+lb, func(t *testing.T) {
			var c greeterClient
			newApp(t, fmt.Sprintf(`
protocols: {injvm: {}}
provider:
  services:
    greeter: {interface: org.example.Greeter}
consumer:
  references:
    greeter:
      interface: org.example.Greeter
      protocol: injvm
      cluster: %s
      loadbalance: %s
      routers: [{rule: "method = nothing => host = nowhere", force: true}]
      methods: {sayHello: {loadbalance: %s}}
`, cl, lb, balancers[(i+1)%len(balancers)]), weft.WithService("greeter", greeter{}), weft.WithReference("greeter", &c))
			if got, err := c.SayHello(context.Background(), "x"); err != nil || got != "hello x" {
				t.Fatalf("%q %v", got, err)
			}
		})
	}
}

func TestBadRouterRuleFailsAtStartup(t *testing.T) {
	_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithConfig(weft.ConfigYAML(`
consumer:
  references:
    greeter: {interface: org.example.Greeter, protocol: injvm, routers: [{rule: "method = a => host"}]}
`)))
	if err == nil || !strings.Contains(err.Error(), "consumer.references.greeter: routers[0]") || !strings.Contains(err.Error(), `condition "host" has no value`) {
		t.Fatalf("err = %v", err)
	}
}

// A plugin is a value checked at New: an extension of a type that is no
// extension point, or without a name, fails New naming the plugin.
func TestPluginsAreCheckedAtNew(t *testing.T) {
	for _, c := range []struct {
		name string
		p    weft.Plugin
		want string
	}{
		{"no point", weft.NewPlugin("odd", weft.Provide("x", func(weft.Host) (fmt.Stringer, error) { return nil, nil }, nil)),
			"weft: plugin odd: extension \"x\": fmt.Stringer is not an extension point of weft"},
		{"no name", weft.NewPlugin("anon", weft.Provide("", func(weft.Host) (extension.Filter, error) { return nil, nil }, nil)),
			"weft: plugin anon: an extension of extension.Filter without a name"},
	} {
		_, err := weft.New(weft.WithConfig(weft.ConfigYAML(greeterYAML)), weft.WithoutEnv(), weft.WithLogger(quiet),
			weft.WithService("greeter", greeter{}), weft.WithPlugins(c.p))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
