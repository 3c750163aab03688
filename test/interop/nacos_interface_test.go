package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	nacos "github.com/weftrpc/weft/registry-nacos"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// Nacos between weft and dubbo-go 3.3.1 at interface level (Dubbo 2's
// registration: providers:<interface>:<version>:<group> in DEFAULT_GROUP,
// dubbo-go's registry/nacos), both ways, each side in a namespace of its
// own: a weft consumer finds and calls a dubbo-go provider, a dubbo-go
// consumer finds and calls a weft provider, and each side's registration is
// the one the other reads (the service's name and the URL rebuilt from the
// instance).
func TestNacosWithDubboGo(t *testing.T) {
	addr := nacosTestAddr(t)
	bin := buildDubbogoEcho(t)
	ctx := context.Background()
	plugin := weft.WithPlugins(nacos.Plugin())
	goNS := fmt.Sprintf("weft-interop-go-%d", time.Now().UnixNano())
	weftNS := fmt.Sprintf("weft-interop-weft-%d", time.Now().UnixNano())

	// dubbo-go provider -> Nacos -> weft consumer.
	// dubbo-go's Nacos registry registers as soon as its client exists,
	// before nacos-sdk-go has connected (weft's waits for the server);
	// on a loaded machine the first registration can fail with "Registry
	// protocol new exporter error", and the provider exits. A fresh
	// process, on a fresh port, then finds the server up.
	var goAddr string
	var goPort int
	for try := 1; ; try++ {
		goAddr, goPort = freeAddr(t)
		if try > 1 {
			// A namespace of its own: the failed try's registration may
			// have reached the server after all, and it stays there.
			goNS = fmt.Sprintf("%s-%d", goNS, try)
		}
		err := tryStartDubbogoProvider(t, bin, goAddr, "-zk", "nacos://"+addr+"?namespace="+goNS)
		if err == nil {
			break
		}
		if try == 3 || !strings.Contains(err.Error(), "Registry protocol new exporter error") {
			t.Fatal(err)
		}
		t.Logf("try %d: %v", try, err)
	}
	var c echoClient
	startWeft(t, plugin, weft.WithReference("echo", &c), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {n: {address: "nacos://%s?namespace=%s"}}
consumer:
  references:
    echo: {interface: %s, timeout: 5000, retries: 0}
`, addr, goNS, dubbogo.Interface))))
	var err error
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err = c.Echo(ctx, "via nacos"); err == nil {
			break
		}
	}
	if err != nil || got != "via nacos" {
		t.Fatalf("weft -> dubbo-go through Nacos: %q, %v", got, err)
	}
	if u, err := c.GetUser(ctx, 3); err != nil || u.ID != 3 {
		t.Fatalf("getUser: %+v, %v", u, err)
	}
	// What dubbo-go registered, read as weft reads it: under Dubbo's
	// service name for the interface, at the provider's address.
	reg, err := nacos.Factory{Log: quiet}.GetRegistry(kernel.MustParseURL("nacos://" + addr + "?namespace=" + goNS))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	all, err := reg.(extension.Catalog).Providers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := all[dubbogo.Interface]
	if len(listed) != 1 || listed[0].Port != goPort || listed[0].Param("methods") == "" {
		t.Errorf("dubbo-go's registration, as weft lists it: %v; want one provider on port %d with its methods", listed, goPort)
	}
	if name := nacos.ServiceName(kernel.NewURL("dubbo", "", 0, dubbogo.Interface, map[string]string{kernel.KeyInterface: dubbogo.Interface})); name != "providers:"+dubbogo.Interface+"::" {
		t.Errorf("weft's Nacos service name for the interface: %q", name)
	}

	// weft provider -> Nacos -> dubbo-go consumer.
	svc := &weftEcho{}
	_, weftPort := freeAddr(t)
	startWeft(t, plugin, weft.WithService("echo", svc), weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {n: {address: "nacos://%s?namespace=%s"}}
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, addr, weftNS, weftPort, dubbogo.Interface))))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, err = dubbogoCall(t, bin, "127.0.0.1:1", "from dubbo-go", "-zk", "nacos://"+addr+"?namespace="+weftNS)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || got != "from dubbo-go" {
		t.Fatalf("dubbo-go -> weft through Nacos: %q, %v", got, err)
	}
	if svc.echoes.Load() != 1 {
		t.Fatalf("the weft provider served %d echoes, want 1", svc.echoes.Load())
	}
}
