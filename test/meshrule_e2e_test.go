package test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/testcc"
	"github.com/weftrpc/weft/kernel"
)

// meshNode answers every method with its name.
type meshNode struct {
	name  string
	calls atomic.Int64
}

func (n *meshNode) Who(ctx context.Context, s string) (string, error) {
	n.calls.Add(1)
	return n.name, nil
}

func (n *meshNode) Other(ctx context.Context, s string) (string, error) {
	n.calls.Add(1)
	return n.name, nil
}

func (n *meshNode) Num(ctx context.Context, x int64) (string, error) {
	n.calls.Add(1)
	return n.name, nil
}

type meshClient struct {
	Who   func(ctx context.Context, s string) (string, error)
	Other func(ctx context.Context, s string) (string, error)
	Num   func(ctx context.Context, x int64) (string, error)
}

// meshDR is the DestinationRule of the tests: a subset per env-sign, and
// v4, which no provider has.
const meshDR = `apiVersion: service.dubbo.apache.org/v1alpha1
kind: DestinationRule
metadata: {name: mesh-prov}
spec:
  host: mesh-prov
  subsets:
    - {name: v1, labels: {env-sign: v1}}
    - {name: v2, labels: {env-sign: v2}}
    - {name: v3, labels: {env-sign: v3}}
    - {name: v4, labels: {env-sign: v4}}
---
`

// meshVS is a VirtualService for org.weft.MeshNode with these route
// details (YAML list items, indented by 8).
func meshVS(details string) string {
	return meshDR + `apiVersion: service.dubbo.apache.org/v1alpha1
kind: VirtualService
metadata: {name: mesh-prov}
spec:
  hosts: [mesh-prov]
  dubbo:
    - services: [{exact: org.weft.MeshNode}]
      routedetail:
` + details
}

// Dubbo 3's mesh rules over real TCP: three providers of mesh-prov (env-sign
// v1, v2, v3) and one of other-prov, all found through a registry; the
// consumer reads <app>.MESHAPPRULE from its config center. Each rule moves
// the calls as Java Dubbo would, beside 8 callers none of whose calls
// fails, and rules pushed, changed, broken and deleted while 8 callers
// call fail no call.
func TestMeshRuleRouting(t *testing.T) {
	noLeaks(t)
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	nodes := map[string]*meshNode{}
	for _, p := range []struct{ app, env, name string }{
		{"mesh-prov", "v1", "p1"}, {"mesh-prov", "v2", "p2"}, {"mesh-prov", "v3", "p3"}, {"other-prov", "v1", "o1"},
	} {
		n := &meshNode{name: p.name}
		nodes[p.name] = n
		addr := freePort(t)
		startApp(t, fmt.Sprintf(`
application: {name: %s}
registries: {r: {address: %q}}
protocols: {dubbo: {port: %s}}
provider: {services: {node: {interface: org.weft.MeshNode, params: {env-sign: %s}}}}
`, p.app, reg, addr[strings.LastIndexByte(addr, ':')+1:], p.env), weft.WithService("node", n))
	}
	cc := testcc.New()
	var logs syncBuffer
	var c meshClient
	startApp(t, fmt.Sprintf(`
application: {name: mesh-client}
config_center: {address: "meshmem://here", data_id: mesh-client.yaml, check: false}
registries: {r: {address: %q}}
consumer: {references: {node: {interface: org.weft.MeshNode, retries: 0}}}
`, reg), weft.WithReference("node", &c), weft.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		weft.WithPlugins(weft.NewPlugin("meshmem", weft.Provide("meshmem", func(weft.Host) (extension.DynamicConfigurationFactory, error) { return cc, nil }, nil))))
	ctx := context.Background()
	publish := func(t *testing.T, doc string) {
		t.Helper()
		if err := cc.PublishConfig(ctx, "mesh-prov.MESHAPPRULE", "dubbo", doc); err != nil {
			t.Fatal(err)
		}
	}
	// answers makes n calls and counts who answered.
	answers := func(t *testing.T, n int, call func() (string, error)) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			who, err := call()
			if err != nil {
				t.Fatalf("call failed: %v", err)
			}
			got[who]++
		}
		return got
	}
	who := func(ctx context.Context, s string) func() (string, error) {
		return func() (string, error) { return c.Who(ctx, s) }
	}
	// onlyTo waits (at most 10 s) until 50 calls in a row go to want,
	// then checks 200 more do.
	onlyTo := func(t *testing.T, what, want string, call func() (string, error)) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			if got := answers(t, 50, call); got[want] == 50 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: within 10 s the calls did not all go to %s: %v", what, want, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := answers(t, 200, call); got[want] != 200 {
			t.Fatalf("%s: after switching to %s, calls went to %v", what, want, got)
		}
	}

	// No rule yet: every provider, other-prov's included.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got := answers(t, 200, who(ctx, "x")); len(got) == 4 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("without rules the calls reached %v, want all 4 providers", got)
		}
	}
	// Both providers' applications are watched.
	for deadline := time.Now().Add(5 * time.Second); !cc.Listening("mesh-prov.MESHAPPRULE", "dubbo") || !cc.Listening("other-prov.MESHAPPRULE", "dubbo"); {
		if time.Now().After(deadline) {
			t.Fatal("the providers' applications' mesh rules are not watched")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Each feature's calls run beside 8 callers of their own, which no
	// rule change may fail.
	bg := startLoad(8, 0, func() error { _, err := c.Who(ctx, "x"); return err })
	bgStopped := false
	defer func() {
		if !bgStopped {
			bg.stop()
		}
	}()

	t.Run("subset by labels", func(t *testing.T) {
		// All to v2: p2 only (other-prov's o1, env-sign v1 too, is of an
		// application without rules: dropped, as in Java).
		publish(t, meshVS(`        - route: [{destination: {host: mesh-prov, subset: v2}}]
`))
		onlyTo(t, "v2", "p2", who(ctx, "x"))
	})

	t.Run("weighted 90/10", func(t *testing.T) {
		publish(t, meshVS(`        - route:
            - {destination: {host: mesh-prov, subset: v1}, weight: 90}
            - {destination: {host: mesh-prov, subset: v3}, weight: 10}
`))
		onlyTo(t, "settle on the new rule", "", func() (string, error) {
			// p2 is in neither subset: wait until it gets no more calls.
			w, err := c.Who(ctx, "x")
			if w == "p2" || w == "o1" {
				return w, err
			}
			return "", err
		})
		const n = 4000
		got := answers(t, n, who(ctx, "x"))
		share := float64(got["p1"]) / n
		t.Logf("90/10 over %d calls: v1 %d (%.3f), v3 %d (%.3f); Java's pick gives 0.91/0.09", n, got["p1"], share, got["p3"], float64(got["p3"])/n)
		if got["p1"]+got["p3"] != n || share < 0.86 || share > 0.96 {
			t.Fatalf("90/10: %v (v1 share %.3f), want 0.91 ± 0.05 (Java's (w+1)/total) and no other provider", got, share)
		}
	})

	t.Run("match on attachments and consumer labels", func(t *testing.T) {
		publish(t, meshVS(`        - name: testers
          match: [{attachments: {dubboContext: {user: {exact: tester}}}}]
          route: [{destination: {host: mesh-prov, subset: v3}}]
        - name: this consumer, by its application
          match: [{sourceLabels: {application: mesh-client}, attachments: {dubboContext: {user: {prefix: gold-}}}}]
          route: [{destination: {host: mesh-prov, subset: v2}}]
        - route: [{destination: {host: mesh-prov, subset: v1}}]
`))
		onlyTo(t, "no attachment", "p1", who(ctx, "x"))
		onlyTo(t, "user=tester", "p3", who(kernel.WithAttachments(ctx, map[string]any{"user": "tester"}), "x"))
		onlyTo(t, "user=gold-1", "p2", who(kernel.WithAttachments(ctx, map[string]any{"user": "gold-1"}), "x"))
		onlyTo(t, "user=other", "p1", who(kernel.WithAttachments(ctx, map[string]any{"user": "other"}), "x"))
	})

	t.Run("match on method name", func(t *testing.T) {
		// The method's name on the wire, which Java's rules see: Go's
		// Other is "other".
		publish(t, meshVS(`        - match: [{method: {name_match: {exact: other}}}]
          route: [{destination: {host: mesh-prov, subset: v2}}]
        - route: [{destination: {host: mesh-prov, subset: v1}}]
`))
		onlyTo(t, "Who", "p1", who(ctx, "x"))
		onlyTo(t, "Other", "p2", func() (string, error) { return c.Other(ctx, "x") })
	})

	t.Run("match on arguments", func(t *testing.T) {
		publish(t, meshVS(`        - match: [{method: {name_match: {exact: num}, args: [{index: 0, num_value: {oneof: [{range: {start: 0, end: 10}}, {exact: 1, mod: 100}]}}]}}]
          route: [{destination: {host: mesh-prov, subset: v1}}]
        - match: [{method: {argc: 1, args: [{index: 0, str_value: {oneof: [{exact: vip}, {regex: 'gold-[0-9]+'}]}}]}}]
          route: [{destination: {host: mesh-prov, subset: v3}}]
        - route: [{destination: {host: mesh-prov, subset: v2}}]
`))
		num := func(x int64) func() (string, error) { return func() (string, error) { return c.Num(ctx, x) } }
		onlyTo(t, "Num(5)", "p1", num(5))
		onlyTo(t, "Num(101) by mod", "p1", num(101))
		onlyTo(t, "Num(50)", "p2", num(50))
		onlyTo(t, "Who(vip)", "p3", who(ctx, "vip"))
		onlyTo(t, "Who(gold-7)", "p3", who(ctx, "gold-7"))
		onlyTo(t, "Who(gold-x): regex matches whole", "p2", who(ctx, "gold-x"))
	})

	t.Run("fallback when a subset is empty", func(t *testing.T) {
		// v4 has no provider: its fallback v3; a chain through v4 twice
		// ends at v1.
		publish(t, meshVS(`        - match: [{method: {name_match: {exact: other}}}]
          route: [{destination: {host: mesh-prov, subset: v4, fallback: {destination: {subset: v4, fallback: {destination: {subset: v1}}}}}}]
        - route: [{destination: {host: mesh-prov, subset: v4, fallback: {destination: {host: mesh-prov, subset: v3}}}}]
`))
		onlyTo(t, "v4 falls back to v3", "p3", who(ctx, "x"))
		onlyTo(t, "v4, v4, then v1", "p1", func() (string, error) { return c.Other(ctx, "x") })
	})

	bgStopped = true
	calls, failed, last := bg.stop()
	t.Logf("beside the features' calls: %d calls by 8 callers, %d failed", calls, failed)
	if failed > 0 {
		t.Fatalf("%d of %d calls beside the features' rules failed (last: %s)", failed, calls, last)
	}

	t.Run("pushed, changed, broken and deleted under load", func(t *testing.T) {
		publish(t, "")
		ld := startLoad(8, 0, func() error { _, err := c.Who(ctx, "x"); return err })
		stopped := false
		stop := func() (int64, int64, string) { stopped = true; return ld.stop() }
		defer func() {
			if !stopped {
				ld.stop()
			}
		}()
		before := func() map[string]int64 {
			out := map[string]int64{}
			for k, n := range nodes {
				out[k] = n.calls.Load()
			}
			return out
		}
		// only waits (10 s at most) until, over 200 ms, the load reaches
		// the providers in want and no other.
		only := func(what string, want ...string) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); ; {
				b := before()
				time.Sleep(200 * time.Millisecond)
				ok := true
				for k, n := range nodes {
					moved := n.calls.Load() > b[k]
					if moved != slices.Contains(want, k) {
						ok = false
					}
				}
				if ok {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: within 10 s the load did not go to %v only", what, want)
				}
			}
		}
		only("no rule", "p1", "p2", "p3", "o1")
		for i := range 3 {
			publish(t, meshVS(`        - route: [{destination: {host: mesh-prov, subset: v1}}]
`))
			only(fmt.Sprintf("pushed (%d)", i), "p1")
			publish(t, meshVS(`        - route:
            - {destination: {host: mesh-prov, subset: v2}, weight: 50}
            - {destination: {host: mesh-prov, subset: v3}, weight: 50}
`))
			only(fmt.Sprintf("changed (%d)", i), "p2", "p3")
			publish(t, meshDR+"kind: VirtualService\nmetadata: {name: x}\nspec: {dubbo: [{routedetail: [{route: []}]}]}\n")
			only(fmt.Sprintf("broken: the rule stays (%d)", i), "p2", "p3")
			publish(t, "")
			only(fmt.Sprintf("deleted (%d)", i), "p1", "p2", "p3", "o1")
		}
		calls, failed, last := stop()
		t.Logf("under rule changes: %d calls by 8 callers, %d failed", calls, failed)
		if failed > 0 || calls < 1000 {
			t.Fatalf("%d of %d calls failed while rules changed (last: %s)", failed, calls, last)
		}
		if l := logs.String(); !strings.Contains(l, "rule rejected") || !strings.Contains(l, "mesh-prov.MESHAPPRULE") ||
			!strings.Contains(l, "documents[1].spec.dubbo[0].routedetail[0].route") {
			t.Errorf("the broken rule's rejection was not logged with its key and path:\n%s", l)
		}
	})
}
