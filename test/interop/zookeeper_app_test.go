package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// Application-level service discovery (Dubbo 3) through ZooKeeper between
// weft and dubbo-go 3.3.1, both ways, in ZooKeeper's default roots (the
// ones dubbo-go uses without a group: /services, /dubbo/mapping):
//
//   - a dubbo-go provider registered at application level only
//     (registry-type service: its instance under /services/<app>, the
//     interface mapped to it under /dubbo/mapping, its MetadataService on
//     the dubbo protocol) is found by a weft consumer with migration step
//     FORCE_APPLICATION, which reads the mapping, watches the instance,
//     calls dubbo-go's MetadataService (decoding its hessian MetadataInfo)
//     and then the service;
//   - a weft provider with register_mode instance is found by a dubbo-go
//     consumer at application level, which reads weft's mapping and
//     instance node and calls weft's MetadataService, then the service.
func TestZookeeperApplicationLevelWithDubboGo(t *testing.T) {
	addr := zkAddr(t)
	bin := goBuild(t, ".", "./cmd/dubbogo-app")
	raw, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Application names of this run: the mapping node of the interface is
	// shared by every run (and keeps the names of earlier ones, whose
	// instances are gone with their sessions).
	stamp := time.Now().UnixNano()
	goApp, weftApp := fmt.Sprintf("go-app-%d", stamp), fmt.Sprintf("weft-app-%d", stamp)
	plugin := weft.WithPlugins(zookeeper.Plugin())
	ctx := context.Background()
	mapping := "/dubbo/mapping/" + dubbogo.Interface

	// dubbo-go provider -> ZooKeeper (application level) -> weft consumer.
	goAddr, goPort := freeAddr(t)
	stopGo := startDubbogoApp(t, bin, "-mode", "provider", "-zk", addr, "-app", goApp, "-addr", goAddr)
	goNode := fmt.Sprintf("/services/%s/127.0.0.1:%d", goApp, goPort)
	data, _ := zkData(t, raw, goNode)
	t.Logf("dubbo-go wrote %s = %s", goNode, data)
	if apps, _ := zkData(t, raw, mapping); !slices.Contains(strings.Split(apps, ","), goApp) {
		t.Fatalf("%s = %q, does not map %s", mapping, apps, goApp)
	}

	var c echoClient
	startWeft(t, plugin, weft.WithLogger(zkWarnLog(t)), weft.WithReference("echo", &c), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: weft-client-%d, migration_step: FORCE_APPLICATION}
qos: {enable: false}
registries: {zk: {address: "zookeeper://%s"}}
consumer:
  references:
    echo: {interface: %s, timeout: 5000, retries: 0}
`, stamp, addr, dubbogo.Interface))))
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got, err = c.Echo(ctx, "via the application level"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || got != "via the application level" {
		t.Fatalf("weft -> dubbo-go at application level: %q, %v", got, err)
	}
	if u, err := c.GetUser(ctx, 3); err != nil || u.ID != 3 {
		t.Fatalf("getUser: %+v, %v", u, err)
	}
	// The dubbo-go provider leaves (its instance with its session), so
	// that the dubbo-go consumer below can only find weft.
	stopGo()

	// weft provider -> ZooKeeper (application level) -> dubbo-go consumer.
	svc := &weftEcho{}
	_, weftPort := freeAddr(t)
	startWeft(t, plugin, weft.WithLogger(zkWarnLog(t)), weft.WithService("echo", svc), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: %s, register_mode: instance}
qos: {enable: false}
registries: {zk: {address: "zookeeper://%s"}}
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, weftApp, addr, weftPort, dubbogo.Interface))))
	weftNode := fmt.Sprintf("/services/%s/127.0.0.1:%d", weftApp, weftPort)
	data, _ = zkData(t, raw, weftNode)
	t.Logf("weft wrote %s = %s", weftNode, data)
	if apps, _ := zkData(t, raw, mapping); !slices.Contains(strings.Split(apps, ","), weftApp) {
		t.Fatalf("%s = %q, does not map %s", mapping, apps, weftApp)
	}
	out, err := runDubbogoApp(t, bin, "-mode", "call", "-zk", addr, "-app", fmt.Sprintf("go-client-%d", stamp), "-msg", "from dubbo-go")
	if err != nil || out != "from dubbo-go" {
		t.Fatalf("dubbo-go -> weft at application level: %q, %v", out, err)
	}
	if n := svc.echoes.Load(); n != 1 {
		t.Fatalf("the weft provider served %d echoes, want 1", n)
	}
}

// zkData waits until path exists and returns its data.
func zkData(t *testing.T, c *zk.Conn, path string) (string, *zk.Stat) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, st, err := c.Get(path)
		if err == nil {
			return string(data), st
		}
		if time.Now().After(deadline) {
			t.Fatalf("get %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDubbogoApp runs cmd/dubbogo-app as a provider and returns once it
// listens; stop ends it (SIGTERM, then the process's exit closes its
// ZooKeeper sessions).
func startDubbogoApp(t *testing.T, bin string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-log", "error"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-waited
		}
	}
	t.Cleanup(stop)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "listening ") {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			stop()
			t.Fatalf("the dubbo-go application-level provider exited: %s", stderr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("the dubbo-go application-level provider did not listen within 45 s: %s", stderr.String())
	}
	return stop
}

// runDubbogoApp runs cmd/dubbogo-app to its end and returns the last line
// of its stdout.
func runDubbogoApp(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-log", "error"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	// The last line: dubbo-go's logger writes to stdout too.
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}

// zkWarnLog sends weft's warnings to the test's log: a failing interop test
// shows what weft said about the peer.
func zkWarnLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimSpace(p))
	return len(p), nil
}
