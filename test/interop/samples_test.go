package interop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// Three dubbo-go-samples client configs (config/testdata/dubbogo, copied
// with their license) run in weft as they are, against dubbo-go 3.3.1's
// providers: dubbo-go serves the samples' interfaces over Triple, found
// through ZooKeeper (the registry one with its registry group, at
// interface level, with a service group and version), and each config's
// reference calls it. (registry-zookeeper's TestDubboGoSampleClientConfigs
// runs the same configs against weft's providers.)
func TestDubboGoSampleConfigsAgainstDubboGo(t *testing.T) {
	addr := zkAddr(t)
	bin := goBuild(t, ".", "./cmd/dubbogo-app")
	stamp := time.Now().UnixNano()
	provider := func(args ...string) {
		a, _ := freeAddr(t)
		startDubbogoApp(t, bin, append([]string{"-mode", "provider", "-zk", addr, "-tri", "-interface-level", "-addr", a,
			"-app", fmt.Sprintf("samples-%d-%d", stamp, len(args))}, args...)...)
	}
	provider("-interface", "com.apache.dubbo.sample.basic.IGreeter")
	provider("-interface", "com.apache.dubbo.sample.basic.ComplexProvider", "-version", "")
	provider("-interface", "com.apache.dubbo.sample.basic.IGreeter", "-registry-group", "myGroup")
	provider("-interface", "com.apache.dubbo.sample.basic.IGreeter", "-registry-group", "myGroup",
		"-group", "myInterfaceGroup", "-version", "myInterfaceVersion")
	for _, c := range []struct{ file, ref string }{
		{"helloworld-client.yml", "GreeterClientImpl"},
		{"registry-zookeeper-client.yml", "GreeterClientImpl"},
		{"registry-zookeeper-client.yml", "UserProviderWithCustomGroupAndVersion"},
		{"triple-hessian2-client.yml", "UserProvider"},
	} {
		t.Run(c.file+"/"+c.ref, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "config", "testdata", "dubbogo", c.file))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "127.0.0.1:2181", addr)), 0o644); err != nil {
				t.Fatal(err)
			}
			app := startWeft(t, weft.WithConfig(weft.ConfigFiles(path)...), weft.WithPlugins(zookeeper.Plugin()))
			iv, err := app.Reference(c.ref)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// dubbo-go serves a non-IDL method under its Go name.
			res, err := iv.Invoke(ctx, kernel.NewInvocation("Echo", "sample"))
			if err != nil || res.Value != "sample" {
				t.Fatalf("%s: %v, %v", c.ref, res.Value, err)
			}
		})
	}
}
