package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// protoRecorder counts the calls per provider protocol it sees pass.
type protoRecorder struct {
	mu     *sync.Mutex
	protos map[string]int
}

func (r protoRecorder) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	r.mu.Lock()
	r.protos[next.URL().Protocol]++
	r.mu.Unlock()
	return next.Invoke(ctx, inv)
}

// TestOneServiceOnDubboAndTriple: one service exported on dubbo and tri at
// once; the registry lists both; a consumer picks one by `protocol`, and
// one that names none takes both.
func TestOneServiceOnDubboAndTriple(t *testing.T) {
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	provider, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("node", &node{name: "p"}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
protocols: {dubbo: {port: 0}, tri: {port: 0}}
provider:
  services:
    node: {interface: org.weft.Node, protocol: "dubbo,tri"}
`, reg))))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer provider.Stop(context.Background())

	for _, want := range []string{"dubbo", "tri", ""} {
		t.Run("protocol="+want, func(t *testing.T) {
			rec := protoRecorder{mu: &sync.Mutex{}, protos: map[string]int{}}
			var c nodeClient
			proto := ""
			if want != "" {
				proto = ", protocol: " + want
			}
			app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
				weft.WithFilter("rec", nil, func() (extension.Filter, error) { return rec, nil }),
				weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer:
  references:
    node: {interface: org.weft.Node, filter: rec, loadbalance: roundrobin%s}
`, reg, proto))))
			if err != nil {
				t.Fatal(err)
			}
			if err := app.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer app.Stop(context.Background())
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := c.Who(context.Background(), "x")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no provider found: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for range 20 {
				if got, err := c.Who(context.Background(), "x"); err != nil || got != "p" {
					t.Fatalf("who: %q %v", got, err)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			switch want {
			case "":
				if rec.protos["dubbo"] == 0 || rec.protos["tri"] == 0 {
					t.Fatalf("calls per protocol %v, want both", rec.protos)
				}
			default:
				if len(rec.protos) != 1 || rec.protos[want] == 0 {
					t.Fatalf("calls per protocol %v, want only %s", rec.protos, want)
				}
			}
		})
	}
}
