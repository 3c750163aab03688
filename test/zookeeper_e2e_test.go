package test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	nacos "github.com/weftrpc/weft/registry-nacos"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// zkShortSession is zkRegistry with a short session, so that a killed
// provider's nodes go within seconds rather than Dubbo's default minute.
func zkShortSession(t *testing.T) string { return zkRegistry(t) + "&session=4000" }

// Two provider processes and a consumer find each other through
// ZooKeeper; SIGTERM of a provider under load fails no call, kill -9 of
// one is covered by failover until its session expires and its node goes.
func TestZookeeperRegistryAcrossProcesses(t *testing.T) {
	discoveryAcrossProcesses(t, zkShortSession(t), 15*time.Second)
}

// The graceful stop through ZooKeeper: no call fails, none runs twice.
func TestGracefulStopZookeeperRegistry(t *testing.T) {
	for _, cl := range []string{"failover", "failfast"} {
		t.Run(cl, func(t *testing.T) { gracefulStopThroughRegistry(t, zkShortSession(t), cl) })
	}
}

// ZooKeeper restarted under load, twice: calls go on (they never touch
// ZooKeeper), the providers' registrations are there after it, a provider
// started after the restarts is found by the running consumer, and a
// consumer started then finds them all.
//
// Not covered: a server that comes back with an empty tree (rebuilt from
// nothing). go-zookeeper keeps the last zxid it saw across reconnects and
// such a server refuses it; Curator (Java's client) gives up the session
// locally after the session timeout and reconnects afresh, weft's client
// does not yet.
func TestZookeeperRestartUnderLoad(t *testing.T) {
	address := zkShortSession(t)
	dir := os.Getenv("ZOOKEEPER_TEST_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ZOOKEEPER_TEST_DIR is not set but CI is: .ci/run sets it to the server's folder")
		}
		t.Skip("ZOOKEEPER_TEST_DIR is not set: the test restarts ZooKeeper with test/zookeeper/zk.sh stop/start DIR")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "zookeeper", "zk.sh")
	zk := func(cmd string) {
		t.Helper()
		c := exec.Command(script, cmd, dir)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("zk.sh %s: %v\n%s", cmd, err, out)
		}
	}
	// However the test ends, ZooKeeper runs again for the tests after it.
	t.Cleanup(func() { exec.Command(script, "start", dir).Run() })

	startRegistryChild(t, address, "a")
	startRegistryChild(t, address, "b")
	var c nodeClient
	// The consumer's debug lines (its watches re-armed, its connection's
	// states) show if the test fails: what its watch went through.
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(testLoggerAt(t, slog.LevelDebug)), weft.WithPlugins(nacos.Plugin(), zookeeper.Plugin()), weft.WithReference("node", &c),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer: {references: {node: {interface: org.weft.Node, retries: 2, timeout: 2000}}}
`, address))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	seenBoth := func(c *nodeClient, within time.Duration) bool {
		seen := map[string]bool{}
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if got, err := c.Who(context.Background(), "x"); err == nil {
				seen[got] = true
			}
			if seen["a"] && seen["b"] {
				return true
			}
		}
		return false
	}
	if !seenBoth(&c, 10*time.Second) {
		t.Fatal("the consumer did not reach both providers")
	}

	ld := startLoad(4, time.Millisecond, func() error { _, err := c.Who(context.Background(), "x"); return err })
	defer ld.stop()
	// Two restarts, the first one longer than a heartbeat.
	zk("stop")
	time.Sleep(2 * time.Second)
	zk("start")
	time.Sleep(time.Second)
	zk("stop")
	time.Sleep(500 * time.Millisecond)
	zk("start")

	// The providers' nodes are there: the registry's catalog lists both.
	reg, err := zookeeper.Factory{Log: quietLog}.GetRegistry(kernel.MustParseURL(address))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all, err := reg.(extension.Catalog).Providers(context.Background())
		if err == nil && len(all["org.weft.Node"]) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after ZooKeeper came back, the providers listed are %v (err %v); want both", all["org.weft.Node"], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if calls, failed, last := ld.stop(); failed > 0 {
		t.Errorf("%d of %d calls failed while ZooKeeper restarted; last: %v", failed, calls, last)
	}
	// A provider started now is found by the running consumer.
	startRegistryChild(t, address, "c")
	seen := map[string]bool{}
	for deadline := time.Now().Add(10 * time.Second); !seen["c"] && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, err := c.Who(context.Background(), "x"); err == nil {
			seen[got] = true
		}
	}
	if !seen["c"] {
		t.Fatal("the running consumer did not find a provider registered after the restarts: its watch did not survive them")
	}
	// A consumer that starts now finds them.
	var fresh nodeClient
	startApp(t, fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer: {references: {node: {interface: org.weft.Node}}}
`, address), weft.WithReference("node", &fresh), weft.WithPlugins(zookeeper.Plugin()))
	if !seenBoth(&fresh, 10*time.Second) {
		t.Fatal("a consumer started after the restart did not reach both providers")
	}
}
