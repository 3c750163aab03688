package test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	nacos "github.com/weftrpc/weft/registry-nacos"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

const registryChildEnv = "WEFTTEST_EMBEDDED_PROVIDER"

// registryChild runs in a child process: a provider App that registers in
// the embedded registry at dir and stops gracefully on SIGTERM.
func registryChild(spec string) {
	address, name, _ := strings.Cut(spec, ";")
	// Nacos is a plugin: the same child serves the embedded and the Nacos
	// scenarios, so it always adds it (unused, it costs nothing).
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithPlugins(nacos.Plugin(), zookeeper.Plugin()), weft.WithService("node", &node{name: name}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
protocols: {dubbo: {port: 0}}
provider:
  shutdown: {wait: %d}
  services:
    node: {interface: org.weft.Node}
`, address, shutdownWait(address)))))
	if err == nil {
		err = app.Start(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	app.Stop(context.Background())
	os.Exit(0)
}

// shutdownWait gives consumers time to hear of an unregistration: the
// embedded registry tells them within ~50 ms, Nacos (PolarisMesh) within ~1 s.
func shutdownWait(address string) int {
	if strings.HasPrefix(address, "nacos:") {
		return 2000
	}
	return 300
}

func startRegistryChild(t *testing.T, address, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), registryChildEnv+"="+address+";"+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("provider %s: %q", name, line)
	}
	return cmd
}

// Providers and a consumer in different processes find each other through
// the embedded registry; a provider stopped with SIGTERM leaves without a
// failed call, and one killed with -9 is covered by failover until the
// registry drops it.
func TestEmbeddedRegistryAcrossProcesses(t *testing.T) {
	discoveryAcrossProcesses(t, "embedded://"+t.TempDir()+"?heartbeat=200", 3*time.Second)
}

// The same scenario through Nacos (PolarisMesh in CI, started by .ci/run).
func TestNacosRegistryAcrossProcesses(t *testing.T) {
	addr := nacosAddr(t)
	// A namespace of its own keeps runs apart on a shared server.
	discoveryAcrossProcesses(t, fmt.Sprintf("nacos://%s?namespace=weft-e2e-%d", addr, time.Now().UnixNano()), 10*time.Second)
}

func discoveryAcrossProcesses(t *testing.T, address string, dropWithin time.Duration) {
	a := startRegistryChild(t, address, "a")
	b := startRegistryChild(t, address, "b")
	var c nodeClient
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithPlugins(nacos.Plugin(), zookeeper.Plugin()), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer:
  references:
    node: {interface: org.weft.Node, retries: 2, timeout: 2000}
`, address))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())

	waitFor := func(want ...string) {
		t.Helper()
		seen := map[string]bool{}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if got, err := c.Who(context.Background(), "x"); err == nil {
				seen[got] = true
			}
			all := true
			for _, w := range want {
				all = all && seen[w]
			}
			if all {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("within 3 s the consumer saw %v, want %v", seen, want)
	}
	waitFor("a", "b")

	run := func(during func()) (int64, map[string]int64) {
		var failed atomic.Int64
		var mu sync.Mutex
		hits := map[string]int64{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					got, err := c.Who(context.Background(), "x")
					if err != nil {
						failed.Add(1)
						t.Logf("call failed: %v", err)
						continue
					}
					mu.Lock()
					hits[got]++
					mu.Unlock()
				}
			}()
		}
		time.Sleep(200 * time.Millisecond)
		during()
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		return failed.Load(), hits
	}

	// SIGTERM: unregister, wait, drain, close — no call may fail.
	failed, _ := run(func() { b.Process.Signal(syscall.SIGTERM) })
	if failed != 0 {
		t.Fatalf("%d calls failed while a provider stopped gracefully", failed)
	}
	startRegistryChild(t, address, "c")
	waitFor("a", "c")
	// kill -9 a while c is up: failover covers the calls it had.
	failed, _ = run(func() { a.Process.Kill() })
	if failed != 0 {
		t.Fatalf("%d calls failed after kill -9 of a provider with another one up", failed)
	}
	// Once the registry drops a, only c serves.
	deadline := time.Now().Add(dropWithin)
	var hits map[string]int64
	for {
		_, hits = run(func() {})
		if hits["a"] == 0 || time.Now().After(deadline) {
			break
		}
	}
	if hits["a"] != 0 || hits["c"] == 0 {
		t.Fatalf("calls after the registry dropped the dead provider: %v", hits)
	}
}
