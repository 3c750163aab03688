package weft_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

// register: false exports a service without registering it: a consumer
// through the registry finds no provider, a direct url reaches it. A
// service's tag labels its providers; a reference's tag chooses them.
func TestRegisterFalseAndTags(t *testing.T) {
	dir := t.TempDir()
	freePort := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	start := func(doc string, opts ...weft.Option) *weft.App {
		t.Helper()
		a, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithConfig(weft.ConfigYAML(doc))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop(context.Background()) })
		return a
	}
	hidden := freePort()
	start(fmt.Sprintf(`
application: {name: hidden-app}
qos: {enable: false}
registries: {r: {address: "embedded://%s"}}
protocols: {dubbo: {port: %d}}
provider: {register: false, services: {greeter: {interface: org.example.Hidden}}}
`, dir, hidden), weft.WithService("greeter", greeter{}))
	start(fmt.Sprintf(`
application: {name: tagged-app}
qos: {enable: false}
registries: {r: {address: "embedded://%s"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    gray: {interface: org.example.Tagged, tag: gray, ref: greeter}
`, dir), weft.WithService("greeter", tagGreeter{"gray"}))
	start(fmt.Sprintf(`
application: {name: plain-app}
qos: {enable: false}
registries: {r: {address: "embedded://%s"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    plain: {interface: org.example.Tagged, ref: greeter}
`, dir), weft.WithService("greeter", tagGreeter{"plain"}))

	c := start(fmt.Sprintf(`
application: {name: client}
qos: {enable: false}
registries: {r: {address: "embedded://%s"}}
consumer:
  references:
    viaRegistry: {interface: org.example.Hidden, check: false, retries: 0}
    direct: {interface: org.example.Hidden, url: "dubbo://127.0.0.1:%d"}
    grayOnly: {interface: org.example.Tagged, tag: gray}
    untagged: {interface: org.example.Tagged}
`, dir, hidden))
	call := func(ref string) (any, error) {
		iv, err := c.Reference(ref)
		if err != nil {
			return nil, err
		}
		r, err := iv.Invoke(context.Background(), kernel.NewInvocation("sayHello", "x"))
		return r.Value, err
	}
	if v, err := call("viaRegistry"); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Errorf("through the registry, register: false: %v %v, want no provider", v, err)
	}
	if v, err := call("direct"); err != nil || v != "hello x" {
		t.Errorf("direct: %v %v", v, err)
	}
	// Both tagged providers are listed a moment after start: every call
	// goes to the one the tag names.
	deadline := time.Now().Add(5 * time.Second)
	for seen := map[any]int{}; time.Now().Before(deadline); {
		g, err := call("grayOnly")
		if err != nil || g != "gray x" {
			t.Fatalf("tag gray: %v %v", g, err)
		}
		u, err := call("untagged")
		if err != nil || u != "plain x" {
			t.Fatalf("no tag: %v %v (untagged calls go to untagged providers)", u, err)
		}
		if seen[g]++; seen[g] > 20 {
			break
		}
	}
}

// tagGreeter says who answered.
type tagGreeter struct{ who string }

func (g tagGreeter) SayHello(ctx context.Context, name string) (string, error) {
	return g.who + " " + name, nil
}
