package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one provider App serving org.weft.Node on its own port.
type node struct {
	name    string
	delay   time.Duration
	calls   atomic.Int64
	fails   atomic.Int64
	release chan struct{}
}

func (n *node) Who(ctx context.Context, s string) (string, error) {
	n.calls.Add(1)
	if n.delay > 0 {
		time.Sleep(n.delay)
	}
	return n.name, nil
}

func (n *node) Fail(ctx context.Context, s string) error {
	n.fails.Add(1)
	return errors.New("insufficient funds: " + s)
}

func (n *node) Hold(ctx context.Context) (string, error) {
	n.calls.Add(1)
	<-n.release
	return n.name, nil
}

type nodeClient struct {
	Who  func(ctx context.Context, s string) (string, error)
	Fail func(ctx context.Context, s string) error
	Hold func(ctx context.Context) (string, error)
}

func startNode(t *testing.T, n *node, addr string, extra string) *weft.App {
	t.Helper()
	return startNodeP(t, "dubbo", n, addr, extra)
}

// protocols are those the cluster tests run over: the same clusters,
// routers, filters and mocks over each.
var protocols = []string{"dubbo", "tri"}

func forEachProtocol(t *testing.T, test func(t *testing.T, proto string)) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) { test(t, proto) })
	}
}

func startNodeP(t *testing.T, proto string, n any, addr string, extra string) *weft.App {
	t.Helper()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("node", n),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {%s: {port: %s}}
provider:
  services:
    node: {interface: org.weft.Node, protocol: %s%s}
`, proto, port, proto, extra))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}

func consumer(t *testing.T, addrs []string, ref string) *nodeClient {
	t.Helper()
	return consumerP(t, "dubbo", addrs, ref)
}

func consumerP(t *testing.T, proto string, addrs []string, ref string) *nodeClient {
	t.Helper()
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = proto + "://" + a
	}
	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    node: {interface: org.weft.Node, url: "%s"%s}
`, strings.Join(urls, ";"), ref))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return &c
}

func threeNodes(t *testing.T, delays ...time.Duration) ([]*node, []*weft.App, []string) {
	return threeNodesP(t, "dubbo", delays...)
}

func threeNodesP(t *testing.T, proto string, delays ...time.Duration) ([]*node, []*weft.App, []string) {
	var nodes []*node
	var apps []*weft.App
	var addrs []string
	for i := range 3 {
		n := &node{name: fmt.Sprintf("n%d", i), release: make(chan struct{})}
		if i < len(delays) {
			n.delay = delays[i]
		}
		addr := freePort(t)
		app := startNodeP(t, proto, n, addr, "")
		t.Cleanup(func() { app.Stop(context.Background()) })
		nodes, apps, addrs = append(nodes, n), append(apps, app), append(addrs, addr)
	}
	return nodes, apps, addrs
}

func TestFailoverSurvivesAProviderStopping(t *testing.T) {
	forEachProtocol(t, testFailoverSurvivesAProviderStopping)
}

func testFailoverSurvivesAProviderStopping(t *testing.T, proto string) {
	nodes, apps, addrs := threeNodesP(t, proto)
	c := consumerP(t, proto, addrs, ", retries: 2, timeout: 2000")
	var failed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Who(context.Background(), "x"); err != nil {
					failed.Add(1)
					t.Logf("call failed: %v", err)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	apps[1].Stop(context.Background()) // in the middle of the run
	before := nodes[1].calls.Load()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d idempotent calls failed with failover and two providers left", failed.Load())
	}
	if nodes[0].calls.Load() == 0 || nodes[2].calls.Load() == 0 || before == 0 {
		t.Fatalf("calls per node: %d %d %d", nodes[0].calls.Load(), nodes[1].calls.Load(), nodes[2].calls.Load())
	}
	if after := nodes[1].calls.Load(); after != before {
		t.Fatalf("the stopped node served %d calls after stopping", after-before)
	}
}

func TestBusinessErrorRunsOnce(t *testing.T) { forEachProtocol(t, testBusinessErrorRunsOnce) }

func testBusinessErrorRunsOnce(t *testing.T, proto string) {
	nodes, _, addrs := threeNodesP(t, proto)
	c := consumerP(t, proto, addrs, ", retries: 2")
	err := c.Fail(context.Background(), "42")
	if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "insufficient funds: 42") {
		t.Fatalf("err %v", err)
	}
	if n := nodes[0].fails.Load() + nodes[1].fails.Load() + nodes[2].fails.Load(); n != 1 {
		t.Fatalf("the provider method ran %d times for one call with a business error", n)
	}
}

func TestForkingReturnsTheFastest(t *testing.T) { forEachProtocol(t, testForkingReturnsTheFastest) }

func testForkingReturnsTheFastest(t *testing.T, proto string) {
	_, _, addrs := threeNodesP(t, proto, 300*time.Millisecond, 10*time.Millisecond, 200*time.Millisecond)
	c := consumerP(t, proto, addrs, ", cluster: forking, methods: {who: {forks: 3}}, timeout: 2000")
	start := time.Now()
	got, err := c.Who(context.Background(), "x")
	if err != nil || got != "n1" {
		t.Fatalf("forking answered %q, %v; want n1, the fastest", got, err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Fatalf("forking took %v, the fastest answers in 10ms", took)
	}
}

func TestFailbackRetriesReachTheProvider(t *testing.T) {
	forEachProtocol(t, testFailbackRetriesReachTheProvider)
}

func testFailbackRetriesReachTheProvider(t *testing.T, proto string) {
	n := &node{name: "only", release: make(chan struct{})}
	addr := freePort(t)
	app := startNodeP(t, proto, n, addr, ", executes: 1")
	defer app.Stop(context.Background())
	c := consumerP(t, proto, []string{addr}, ", cluster: failback, timeout: 3000, params: {retry.period: 100}")
	// The first call takes the only slot...
	held := make(chan error, 1)
	go func() { _, err := c.Hold(context.Background()); held <- err }()
	for n.calls.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	// ...so the second is rejected (limit exceeded): failback answers at
	// once with an empty result and retries in the background.
	got, err := c.Hold(context.Background())
	if err != nil || got != "" {
		t.Fatalf("failback answered %q, %v; want an empty result", got, err)
	}
	close(n.release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for n.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n.calls.Load() != 2 {
		t.Fatalf("provider ran %d calls; the failback retry never arrived", n.calls.Load())
	}
}

func TestRoutersChooseProviders(t *testing.T) { forEachProtocol(t, testRoutersChooseProviders) }

func testRoutersChooseProviders(t *testing.T, proto string) {
	_, _, addrs := threeNodesP(t, proto)
	port1 := addrs[1][strings.LastIndexByte(addrs[1], ':')+1:]
	c := consumerP(t, proto, addrs, fmt.Sprintf(`, routers: [{rule: "method = who => port = %s"}]`, port1))
	for range 20 {
		if got, err := c.Who(context.Background(), "x"); err != nil || got != "n1" {
			t.Fatalf("routed call went to %q (%v), want n1", got, err)
		}
	}
}

func TestMockForceAndFail(t *testing.T) { forEachProtocol(t, testMockForceAndFail) }

func testMockForceAndFail(t *testing.T, proto string) {
	_, apps, addrs := threeNodesP(t, proto)
	forced := consumerP(t, proto, addrs, `, methods: {who: {mock: "force:return 'mocked'"}}`)
	if got, err := forced.Who(context.Background(), "x"); err != nil || got != "mocked" {
		t.Fatalf("force mock: %q %v", got, err)
	}
	for _, a := range apps {
		a.Stop(context.Background())
	}
	onFail := consumerP(t, proto, addrs, `, retries: 0, check: false, methods: {who: {mock: "fail:return 'fallback'"}}`)
	if got, err := onFail.Who(context.Background(), "x"); err != nil || got != "fallback" {
		t.Fatalf("fail mock with every provider down: %q %v", got, err)
	}
}

type whoFallback struct{}

func (whoFallback) Who(ctx context.Context, s string) (string, error) { return "from-go-fallback", nil }

func TestMockTrueCallsGoFallback(t *testing.T) {
	addr := freePort(t) // nothing listens there
	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
		weft.WithMock("org.weft.Node", whoFallback{}),
		weft.WithConfig(weft.ConfigYAML(`
consumer:
  references:
    node: {interface: org.weft.Node, url: "dubbo://`+addr+`", mock: "true", retries: 0, check: false}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	if got, err := c.Who(context.Background(), "x"); err != nil || got != "from-go-fallback" {
		t.Fatalf("mock=true: %q %v", got, err)
	}
}

// tagger is a cluster-scoped consumer filter: it runs before routing, so
// the tag it sets decides where the call goes.
type tagger struct{ seen *atomic.Int64 }

func (tagger) ClusterScope() {}
func (t tagger) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	t.seen.Add(1)
	inv.SetAttachment("dubbo.tag", "gray")
	return next.Invoke(ctx, inv)
}

// recorder is a per-invoker filter: it runs after the choice and sees the
// chosen provider.
type recorder struct {
	mu    *sync.Mutex
	addrs map[string]int
}

func (r recorder) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	r.mu.Lock()
	r.addrs[next.URL().Address()]++
	r.mu.Unlock()
	return next.Invoke(ctx, inv)
}

func TestClusterFiltersRunBeforeRoutingInvokerFiltersAfter(t *testing.T) {
	forEachProtocol(t, testClusterFiltersRunBeforeRoutingInvokerFiltersAfter)
}

func testClusterFiltersRunBeforeRoutingInvokerFiltersAfter(t *testing.T, proto string) {
	nodes, _, addrs := threeNodesP(t, proto)
	var seen atomic.Int64
	rec := recorder{mu: &sync.Mutex{}, addrs: map[string]int{}}
	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
		weft.WithFilter("tagger", nil, func() (extension.Filter, error) { return tagger{&seen}, nil }),
		weft.WithFilter("recorder", nil, func() (extension.Filter, error) { return rec, nil }),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    node: {interface: org.weft.Node, url: "%[1]s://%[2]s?dubbo.tag=gray;%[1]s://%[3]s;%[1]s://%[4]s", filter: "recorder,tagger"}
`, proto, addrs[0], addrs[1], addrs[2]))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	for range 20 {
		if got, err := c.Who(context.Background(), "x"); err != nil || got != "n0" {
			t.Fatalf("tagged call went to %q (%v), want n0, the gray one", got, err)
		}
	}
	if seen.Load() != 20 || rec.addrs[addrs[0]] != 20 || len(rec.addrs) != 1 {
		t.Fatalf("cluster filter ran %d times; per-invoker filter saw %v", seen.Load(), rec.addrs)
	}
	if nodes[1].calls.Load()+nodes[2].calls.Load() != 0 {
		t.Fatal("untagged providers got tagged calls")
	}
}
