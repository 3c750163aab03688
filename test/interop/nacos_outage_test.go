package interop_test

// The Nacos outage test lives in this module, not in test/ with the other
// cross-process registry tests, because it cannot run under -race:
// nacos-sdk-go v2.3.2's RpcClient.reconnect writes currentConnection while
// notifyConnectionEvent reads it (rpc_client.go:448 vs :486), a data race in
// the SDK that -race reports on every reconnect, and this test makes every
// client reconnect. The interop module is run without -race already (dubbo-go
// races too), by the README's test command.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	nacos "github.com/weftrpc/weft/registry-nacos"
)

// outageNode is one provider App's implementation: it answers its own name.
type outageNode struct {
	name  string
	calls atomic.Int64
}

func (n *outageNode) Who(ctx context.Context, s string) (string, error) {
	n.calls.Add(1)
	return n.name, nil
}

type outageClient struct {
	Who func(ctx context.Context, s string) (string, error)
}

// warnLog keeps the warnings and errors the Apps log, for the test's
// report: e.g. the directory's "registry pushed an empty provider list;
// keeping the last one".
type warnLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *warnLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *warnLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// nacosHosts returns the healthy, enabled instances' ports of service svc in
// DEFAULT_GROUP, from the server's Nacos v1 HTTP API.
func nacosHosts(addr, svc string) (map[int]bool, error) {
	q := url.Values{"serviceName": {svc}, "groupName": {"DEFAULT_GROUP"}}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/nacos/v1/ns/instance/list?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("instance list: %s", resp.Status)
	}
	var body struct {
		Hosts []struct {
			IP      string `json:"ip"`
			Port    int    `json:"port"`
			Healthy bool   `json:"healthy"`
			Enabled bool   `json:"enabled"`
		} `json:"hosts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("instance list: %w", err)
	}
	ports := map[int]bool{}
	for _, h := range body.Hosts {
		if h.Healthy && h.Enabled && h.IP == "127.0.0.1" {
			ports[h.Port] = true
		}
	}
	return ports, nil
}

// TestNacosOutage stops the Nacos server (PolarisMesh, driven through
// test/nacos/polaris.sh) under a consumer App calling two provider Apps in a
// loop: no call may fail and both providers keep getting calls while the
// server is down. After the server returns (having lost every ephemeral
// instance), the providers' registrations must be restored (the server lists
// them again) and so must the consumer's subscription (a provider started
// after the restart gets calls), still without a failed call.
func TestNacosOutage(t *testing.T) {
	addr, dir := os.Getenv("NACOS_TEST_ADDR"), os.Getenv("NACOS_TEST_POLARIS_DIR")
	if addr == "" || dir == "" {
		msg := "NACOS_TEST_ADDR and NACOS_TEST_POLARIS_DIR must be set: build and start PolarisMesh with test/nacos/polaris.sh build|start DIR, then NACOS_TEST_ADDR=127.0.0.1:8848 NACOS_TEST_POLARIS_DIR=DIR (the test stops and restarts the server from DIR)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "nacos", "polaris.sh")
	polaris := func(cmd string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, script, cmd, dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("polaris.sh %s %s: %v\n%s", cmd, dir, err, out)
		}
		return nil
	}
	// Leave the server running whatever happens (this runs last).
	t.Cleanup(func() {
		if err := polaris("start"); err != nil {
			t.Error(err)
		}
	})
	if err := polaris("start"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	logs := &warnLog{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() {
		if l := logs.String(); l != "" {
			t.Logf("app log:\n%s", l)
		}
	})
	ctx := context.Background()
	// A new interface per run: registrations left by other runs never matter.
	iface := fmt.Sprintf("org.weft.outage.Node%d", time.Now().UnixNano())
	svc := "providers:" + iface + "::" // registry-nacos ServiceName, no version or group
	registry := fmt.Sprintf(`registries: {nacos: {address: "nacos://%s"}}`, addr)

	stopApp := func(name string, app *weft.App) {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Stop(sctx); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
	}

	// startProvider starts a provider App on a port of its own (port 0) and
	// returns the port it registered, read back from the server.
	nodes := map[string]*outageNode{}
	known := map[int]bool{}
	startProvider := func(name string, within time.Duration) int {
		t.Helper()
		n := &outageNode{name: name}
		nodes[name] = n
		app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(log.With("app", name)), weft.WithPlugins(nacos.Plugin()), weft.WithService("node", n),
			weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
%s
protocols: {dubbo: {port: 0}}
provider:
  services:
    node: {interface: %s}
`, registry, iface))))
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Start(ctx); err != nil {
			t.Fatalf("start provider %s: %v", name, err)
		}
		// Stopped after the consumer (cleanups run last in, first out), so
		// no shutdown.wait is needed for it to hear of the unregistration.
		t.Cleanup(func() { stopApp("provider "+name, app) })
		deadline := time.Now().Add(within)
		for {
			ports, err := nacosHosts(addr, svc)
			var fresh []int
			for p := range ports {
				if !known[p] {
					fresh = append(fresh, p)
				}
			}
			if err == nil && len(fresh) == 1 {
				known[fresh[0]] = true
				return fresh[0]
			}
			if len(fresh) > 1 {
				t.Fatalf("provider %s: the server lists %v for %s, more than one new port", name, ports, svc)
			}
			if time.Now().After(deadline) {
				t.Fatalf("provider %s is not listed by the server within %v: %v %v", name, within, ports, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	portA := startProvider("a", 10*time.Second)
	portB := startProvider("b", 10*time.Second)

	var c outageClient
	consumer, err := weft.New(weft.WithoutEnv(), weft.WithLogger(log.With("app", "consumer")), weft.WithPlugins(nacos.Plugin()), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
%s
consumer:
  references:
    node: {interface: %s, cluster: failover, timeout: 1000}
`, registry, iface))))
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopApp("consumer", consumer) })

	// Both providers answer before the counted run starts.
	seen := map[string]bool{}
	warmupFails := 0
	for deadline := time.Now().Add(30 * time.Second); !seen["a"] || !seen["b"]; {
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s the consumer reached %v (%d failed calls), want a and b", seen, warmupFails)
		}
		got, err := c.Who(ctx, "warmup")
		if err != nil {
			warmupFails++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		seen[got] = true
	}

	// The callers: 4 goroutines, each paced to a call every 2 ms (a few
	// thousand calls a second in all, leaving CPU for the server's restart).
	var phase atomic.Pointer[string]
	setPhase := func(p string) { phase.Store(&p) }
	setPhase("before the outage")
	hits := map[string]*atomic.Int64{"a": {}, "b": {}, "c": {}}
	firstHit := map[string]*atomic.Int64{"a": {}, "b": {}, "c": {}} // ns since start
	var calls, failures atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				got, err := c.Who(cctx, fmt.Sprintf("caller-%d", i))
				cancel()
				calls.Add(1)
				h := hits[got]
				if err == nil && h == nil {
					err = fmt.Errorf("unexpected answer %q", got)
				}
				if err != nil {
					failures.Add(1)
					errMu.Lock()
					if len(firstErrs) < 5 {
						firstErrs = append(firstErrs, fmt.Sprintf("+%v (%s): %v", time.Since(start).Round(time.Millisecond), *phase.Load(), err))
					}
					errMu.Unlock()
					continue
				}
				h.Add(1)
				firstHit[got].CompareAndSwap(0, int64(time.Since(start)))
			}
		})
	}
	var stopOnce sync.Once
	stopCallers := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopCallers) // before the Apps stop
	failed := func() string {
		errMu.Lock()
		defer errMu.Unlock()
		return fmt.Sprintf("%d of %d calls failed; first errors:\n\t%s", failures.Load(), calls.Load(), strings.Join(firstErrs, "\n\t"))
	}

	// The monitor: the longest time each provider went without a call, and
	// in which phase, from the consumer's side (with a call every 2 ms per
	// caller, a provider that goes ~0.5 s without one was dropped).
	type gap struct {
		longest time.Duration
		phase   string
	}
	var gapMu sync.Mutex
	gaps := map[string]*gap{"a": {}, "b": {}}
	monStop := make(chan struct{})
	var monWG sync.WaitGroup
	monWG.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		last := map[string]int64{}
		since := map[string]time.Time{"a": time.Now(), "b": time.Now()}
		for {
			select {
			case <-monStop:
				return
			case now := <-tick.C:
				gapMu.Lock()
				for name, g := range gaps {
					n := hits[name].Load()
					if n != last[name] {
						last[name], since[name] = n, now
					} else if d := now.Sub(since[name]); d > g.longest {
						g.longest, g.phase = d, *phase.Load()
					}
				}
				gapMu.Unlock()
			}
		}
	})
	var monOnce sync.Once
	stopMonitor := func() { monOnce.Do(func() { close(monStop); monWG.Wait() }) }
	t.Cleanup(stopMonitor)

	// waitHits waits until each of names got at least one call after from
	// (counts taken before) and at least min has passed.
	count := func() map[string]int64 {
		m := map[string]int64{}
		for name, h := range hits {
			m[name] = h.Load()
		}
		return m
	}
	waitHits := func(what string, from map[string]int64, min, within time.Duration, names ...string) map[string]int64 {
		t.Helper()
		began := time.Now()
		for {
			now := count()
			ok := time.Since(began) >= min
			for _, n := range names {
				ok = ok && now[n] > from[n]
			}
			if ok {
				d := map[string]int64{}
				for n := range now {
					d[n] = now[n] - from[n]
				}
				return d
			}
			if time.Since(began) > within {
				t.Fatalf("%s: within %v the providers got %v calls (before: %v), want calls to each of %v; %s", what, within, now, from, names, failed())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitHits("before the outage", count(), 500*time.Millisecond, 10*time.Second, "a", "b")

	// The outage. The App cleanups stop the providers after this cleanup
	// has started the server again, so they can unregister.
	t.Cleanup(func() {
		if err := polaris("start"); err != nil {
			t.Error(err)
		}
	})
	setPhase("stopping the server")
	stopBegan := time.Now()
	if err := polaris("stop"); err != nil {
		t.Fatal(err)
	}
	stopTook := time.Since(stopBegan)
	setPhase("server down")
	if _, err := nacosHosts(addr, svc); err == nil {
		t.Fatal("the server still answers after polaris.sh stop")
	}
	callsBefore := calls.Load()
	outageBegan := time.Now()
	during := waitHits("while the server is down", count(), 3*time.Second, 15*time.Second, "a", "b")
	outageCalls := calls.Load() - callsBefore
	outage := time.Since(outageBegan)
	if n := failures.Load(); n != 0 {
		t.Fatalf("calls failed up to the end of the outage: %s", failed())
	}

	setPhase("restarting the server")
	startBegan := time.Now()
	if err := polaris("start"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	startTook := restarted.Sub(startBegan)
	setPhase("after the restart")

	// (a) The server lists a and b again once their SDK clients have
	// reconnected and registered them again.
	var regRestored time.Duration
	for deadline := restarted.Add(60 * time.Second); ; {
		ports, err := nacosHosts(addr, svc)
		if err == nil && ports[portA] && ports[portB] {
			regRestored = time.Since(restarted)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrations not restored 60 s after the restart: the server lists %v (%v), want a=%d and b=%d", ports, err, portA, portB)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// (b) A provider started after the restart: calls reaching it prove the
	// consumer's subscription was restored (the server pushes it only to
	// subscribers it knows).
	cStarted := time.Now()
	portC := startProvider("c", 30*time.Second)
	for deadline := cStarted.Add(60 * time.Second); hits["c"].Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer never called provider c (port %d) within 60 s of its start after the restart: its subscription was not restored; %s", portC, failed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	firstC := start.Add(time.Duration(firstHit["c"].Load()))
	// All three serve once it has settled.
	setPhase("settled")
	after := waitHits("after the restart", count(), time.Second, 30*time.Second, "a", "b", "c")

	stopCallers()
	if n := failures.Load(); n != 0 {
		t.Fatalf("calls failed: %s", failed())
	}
	stopMonitor()
	t.Logf("interface %s; providers a=%d b=%d c=%d", iface, portA, portB, portC)
	t.Logf("%d calls in %v, 0 failed (warm-up: %d failed before both providers answered); per provider: %v",
		calls.Load(), time.Since(start).Round(time.Millisecond), warmupFails, count())
	t.Logf("served (provider side, warm-up included): a=%d b=%d c=%d", nodes["a"].calls.Load(), nodes["b"].calls.Load(), nodes["c"].calls.Load())
	t.Logf("polaris.sh stop took %v, start %v", stopTook.Round(time.Millisecond), startTook.Round(time.Millisecond))
	t.Logf("server down for %v after the stop: %d calls, per provider %v", outage.Round(time.Millisecond), outageCalls, during)
	t.Logf("after the restart: a and b listed again within %v; c started then, its first call %v after its start (%v after the restart); then %v",
		regRestored.Round(time.Millisecond), firstC.Sub(cStarted).Round(time.Millisecond), firstC.Sub(restarted).Round(time.Millisecond), after)
	for _, n := range []string{"a", "b"} {
		if g := gaps[n]; g.longest == 0 {
			t.Logf("provider %s never went 20 ms without a call", n)
		} else {
			t.Logf("longest time without a call to %s: %v (%s)", n, g.longest.Round(time.Millisecond), g.phase)
		}
	}
}
