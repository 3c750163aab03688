package zookeeper_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

type sampleGreeter struct{ who string }

func (g sampleGreeter) SayHello(_ context.Context, name string) (string, error) {
	return g.who + " hello " + name, nil
}

// Three dubbo-go-samples client configs (helloworld, the ZooKeeper
// registry one with its registry group and a group and version, the
// Triple-with-hessian2 one; config/testdata/dubbogo, copied with their
// license) run in weft as they are: they refer, through ZooKeeper, what a
// weft provider registered, and their references call it over Triple.
func TestDubboGoSampleClientConfigs(t *testing.T) {
	addr := sampleZK(t)
	// The providers the samples' servers would be, in weft, in both
	// registry groups the configs use (the root and myGroup).
	for _, group := range []string{"", "?group=myGroup"} {
		startZKApp(t, weft.WithConfig(weft.ConfigYAML(`
application: {name: sample-provider}
registries: {zk: {address: "zookeeper://`+addr+group+`"}}
protocols: {tri: {port: 0}}
provider:
  services:
    greeter: {interface: com.apache.dubbo.sample.basic.IGreeter, ref: greeter}
    complex: {interface: com.apache.dubbo.sample.basic.ComplexProvider, ref: greeter}
    custom: {interface: com.apache.dubbo.sample.basic.IGreeter, group: myInterfaceGroup, version: myInterfaceVersion, ref: custom}
`)), weft.WithService("greeter", sampleGreeter{"weft"}), weft.WithService("custom", sampleGreeter{"custom"}))
	}
	for _, c := range []struct{ file, ref, want string }{
		{"helloworld-client.yml", "GreeterClientImpl", "weft hello sample"},
		{"registry-zookeeper-client.yml", "GreeterClientImpl", "weft hello sample"},
		{"registry-zookeeper-client.yml", "UserProviderWithCustomGroupAndVersion", "custom hello sample"},
		{"triple-hessian2-client.yml", "UserProvider", "weft hello sample"},
	} {
		t.Run(c.file+"/"+c.ref, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "config", "testdata", "dubbogo", c.file))
			if err != nil {
				t.Fatal(err)
			}
			// The samples name ZooKeeper at 127.0.0.1:2181; the test's may
			// be elsewhere.
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "127.0.0.1:2181", addr)), 0o644); err != nil {
				t.Fatal(err)
			}
			app := startZKApp(t, weft.WithConfig(weft.ConfigFiles(path)...))
			iv, err := app.Reference(c.ref)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := iv.Invoke(ctx, kernel.NewInvocation("sayHello", "sample"))
			if err != nil || res.Value != c.want {
				t.Fatalf("%s: %v, %v; want %q", c.ref, res.Value, err, c.want)
			}
		})
	}
}

// A gateway resolved through ZooKeeper: one weft App forwards calls of
// three services (two interfaces, one with a group and version) by the
// names callers use, to the providers ZooKeeper lists; a service not on its
// allow-list is refused.
func TestGatewayThroughZooKeeper(t *testing.T) {
	addr := sampleZK(t)
	start := func(yaml string, opts ...weft.Option) *weft.App {
		t.Helper()
		return startZKApp(t, append(opts, weft.WithConfig(weft.ConfigYAML(yaml)))...)
	}
	root := "zookeeper://" + addr + "?group=weft-gateway-test"
	start(`
application: {name: gateway-backends}
registries: {zk: {address: "`+root+`"}}
protocols: {tri: {port: 0}}
provider:
  services:
    a: {interface: org.example.gw.A, ref: greeter}
    b: {interface: org.example.gw.B, ref: greeter}
    c: {interface: org.example.gw.A, group: g, version: "2", ref: custom}
    secret: {interface: org.other.Secret, ref: greeter}
`, weft.WithService("greeter", sampleGreeter{"weft"}), weft.WithService("custom", sampleGreeter{"custom"}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	start(`
application: {name: gateway}
registries: {zk: {address: "` + root + `"}}
protocols: {dubbo: {port: ` + port + `}}
consumer: {references: {any: {interface: "*", protocol: tri}}}
provider: {services: {gw: {interface: "*", impl: {forward: any, allow: ["org.example.gw.*"]}}}}
`)
	caller := start(`
application: {name: gateway-caller}
consumer:
  check: false
  references:
    a: {interface: org.example.gw.A, url: "dubbo://127.0.0.1:` + port + `"}
    b: {interface: org.example.gw.B, url: "dubbo://127.0.0.1:` + port + `"}
    c: {interface: org.example.gw.A, group: g, version: "2", url: "dubbo://127.0.0.1:` + port + `"}
    secret: {interface: org.other.Secret, url: "dubbo://127.0.0.1:` + port + `", retries: 0}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ref, want := range map[string]string{"a": "weft hello x", "b": "weft hello x", "c": "custom hello x"} {
		iv, _ := caller.Reference(ref)
		res, err := iv.Invoke(ctx, kernel.NewInvocation("sayHello", "x"))
		if err != nil || res.Value != want {
			t.Fatalf("%s through the gateway: %v, %v; want %q", ref, res.Value, err, want)
		}
	}
	iv, _ := caller.Reference("secret")
	if _, err := iv.Invoke(ctx, kernel.NewInvocation("sayHello", "x")); kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "not on its allow-list") {
		t.Fatalf("secret through the gateway: %v, want forbidden", err)
	}
}

// sampleZK is the ZooKeeper of these tests: ZOOKEEPER_TEST_ADDR, required
// under CI.
func sampleZK(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ZOOKEEPER_TEST_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ZOOKEEPER_TEST_ADDR is not set: .ci/run starts ZooKeeper and sets it")
		}
		t.Skip("ZOOKEEPER_TEST_ADDR is not set: start test/zookeeper/zk.sh and set ZOOKEEPER_TEST_ADDR=127.0.0.1:2181")
	}
	return addr
}

// startZKApp starts a quiet App with the ZooKeeper plugin, stopped when
// the test ends.
func startZKApp(t *testing.T, opts ...weft.Option) *weft.App {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(zookeeper.Plugin())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app
}
