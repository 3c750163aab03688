package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	nacos "github.com/weftrpc/weft/registry-nacos"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// nacosTestAddr returns NACOS_TEST_ADDR; without it the test fails under CI
// and is skipped elsewhere.
func nacosTestAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("NACOS_TEST_ADDR")
	if addr == "" {
		msg := "NACOS_TEST_ADDR is not set: start PolarisMesh with `test/nacos/polaris.sh start DIR` and set NACOS_TEST_ADDR=127.0.0.1:8848"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return addr
}

// Application-level service discovery (Dubbo 3) through Nacos between weft
// and dubbo-go 3.3.1, both ways, each side in a namespace of its own so
// that each finds only the other:
//
//   - a dubbo-go provider in instance mode (its instance under its
//     application's name, the mapping, its MetadataService; no
//     interface-level registration) is found by a weft consumer with
//     migration_step FORCE_APPLICATION, which reads the mapping, the
//     instance, and the revision's MetadataInfo from dubbo-go's
//     MetadataService, and calls it;
//   - a weft provider with register_mode instance is found the same way by
//     a dubbo-go consumer, which calls weft's MetadataService and decodes
//     its MetadataInfo.
//
// The dubbo-go sides are child processes (cmd/dubbogo-app): dubbo-go keeps
// its registries, metadata and MetadataService in process-global state.
func TestNacosApplicationDiscoveryWithDubboGo(t *testing.T) {
	addr := nacosTestAddr(t)
	bin := goBuild(t, ".", "./cmd/dubbogo-app-nacos")
	plugin := weft.WithPlugins(nacos.Plugin())
	ctx := context.Background()

	t.Run("dubbo-go provider to weft consumer", func(t *testing.T) {
		ns := fmt.Sprintf("weft-interop-sd-go-%d", time.Now().UnixNano())
		goAddr, _ := freeAddr(t)
		startDubbogoProvider(t, bin, goAddr, "-nacos", addr, "-namespace", ns, "-app", "dubbogo-echo-app")

		var c echoClient
		startWeft(t, plugin, weft.WithReference("echo", &c), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: weft-consumer-app, migration_step: FORCE_APPLICATION}
registries: {nacos: {address: "nacos://%s?namespace=%s"}}
consumer:
  references:
    echo: {interface: %s, timeout: 3000, retries: 0}
`, addr, ns, dubbogo.Interface))))
		var got string
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got, err = c.Echo(ctx, "via nacos, app level"); err == nil {
				break
			}
		}
		if err != nil || got != "via nacos, app level" {
			t.Fatalf("weft -> dubbo-go at application level: %q, %v", got, err)
		}
		if u, err := c.GetUser(ctx, 7); err != nil || u.ID != 7 {
			t.Fatalf("getUser: %+v, %v", u, err)
		}
	})

	t.Run("weft provider to dubbo-go consumer", func(t *testing.T) {
		ns := fmt.Sprintf("weft-interop-sd-weft-%d", time.Now().UnixNano())
		svc := &weftEcho{}
		_, port := freeAddr(t)
		startWeft(t, plugin, weft.WithService("echo", svc), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
application: {name: weft-echo-app, register_mode: instance}
registries: {nacos: {address: "nacos://%s?namespace=%s"}}
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, addr, ns, port, dubbogo.Interface))))
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-mode", "call", "-nacos", addr, "-namespace", ns,
			"-app", "dubbogo-consumer-app", "-msg", "from dubbo-go, app level", "-wait", "30s")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("dubbo-go -> weft at application level: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		// The reply is the last line: dubbo-go logs to stdout too.
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if got := lines[len(lines)-1]; got != "from dubbo-go, app level" {
			t.Fatalf("dubbo-go got %q", got)
		}
		if svc.echoes.Load() != 1 {
			t.Fatalf("the weft provider served %d echoes, want 1", svc.echoes.Load())
		}
	})
}
