package nacos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestServerRestart restarts the PolarisMesh server under a provider and a
// consumer and checks that the SDK reconnects, re-registers and
// re-subscribes by itself. It needs the server's directory to drive
// test/nacos/polaris.sh: NACOS_TEST_POLARIS_DIR (without it the test fails
// under CI, where .ci/run sets it, and is skipped elsewhere; skipped under
// -race, see serverAddr, and run by test.sh without it).
func TestServerRestart(t *testing.T) {
	addr := serverAddr(t)
	dir := os.Getenv("NACOS_TEST_POLARIS_DIR")
	if dir == "" {
		msg := "NACOS_TEST_POLARIS_DIR is not set: the restart test drives test/nacos/polaris.sh stop/start DIR; " +
			"build and start PolarisMesh with test/nacos/polaris.sh build|start DIR and set NACOS_TEST_POLARIS_DIR=DIR"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "test", "nacos", "polaris.sh")
	polaris := func(cmd string) {
		t.Helper()
		out, err := exec.Command(script, cmd, dir).CombinedOutput()
		if err != nil {
			t.Fatalf("polaris.sh %s: %v\n%s", cmd, err, out)
		}
	}
	t.Cleanup(func() { polaris("start") }) // leave the server running

	ctx := context.Background()
	iface := uniqueInterface(t)
	p, c := open(t, addr), open(t, addr)
	u := provider(iface, 20031, "")
	if err := p.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := c.Subscribe(ctx, consumer(iface), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the provider", hasAddrs("127.0.0.1:20031"))

	polaris("stop")
	polaris("start")
	start := time.Now()
	// After the restart the server has lost the ephemeral instance until the
	// SDK registers it again; a second provider registered now proves the
	// subscription was restored too.
	u2 := provider(iface, 20032, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.Register(ctx, u2)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("register after restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	old := pushWaitOverride(30 * time.Second)
	defer old()
	rec.waitFor(t, "both providers after the restart", hasAddrs("127.0.0.1:20031", "127.0.0.1:20032"))
	t.Logf("recovered %v after the restart", time.Since(start).Round(100*time.Millisecond))
}
