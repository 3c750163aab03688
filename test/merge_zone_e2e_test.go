package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// Menu is a POJO whose merge is its own method (Java's MergeableCluster
// test's Menu with `merger: .merge`).
type Menu struct {
	Items []string
	Count int32
}

func (*Menu) JavaClassName() string { return "org.weft.Menu" }

func (m *Menu) Merge(o *Menu) {
	m.Items = append(m.Items, o.Items...)
	m.Count += o.Count
}

// menus is a provider of org.weft.Menus in one group.
type menus struct {
	group  string
	closed atomic.Bool // Items fails while set
}

func (m *menus) Items(_ context.Context, s string) ([]string, error) {
	if m.closed.Load() {
		return nil, errors.New("the kitchen of " + m.group + " is closed")
	}
	return []string{m.group + ":" + s}, nil
}

func (m *menus) Prices(context.Context) (map[string]int64, error) {
	return map[string]int64{m.group: int64(m.group[0]), "special": int64(m.group[0])}, nil
}

func (m *menus) Menu(context.Context) (*Menu, error) {
	return &Menu{Items: []string{m.group}, Count: 1}, nil
}

func (m *menus) Total(context.Context) (int64, error) { return int64(m.group[0]), nil }

func (m *menus) Pick(context.Context) (string, error) { return m.group, nil }

type menusClient struct {
	Items  func(ctx context.Context, s string) ([]string, error)
	Prices func(ctx context.Context) (map[string]int64, error)
	Menu   func(ctx context.Context) (*Menu, error)
	Total  func(ctx context.Context) (int64, error)
	Pick   func(ctx context.Context) (string, error)
}

// TestMergeableMergesGroupsOverTCP: three providers of three groups in an
// embedded registry; a reference of group "*" merges lists and maps by
// type and Menus with their .merge method, one of groups "a,b,c" with a
// cluster of the program's own whose merger sums; 16 callers at once. A
// group whose call fails is logged and left out; without a merger one
// group answers.
func TestMergeableMergesGroupsOverTCP(t *testing.T) {
	forEachProtocol(t, testMergeable)
}

func testMergeable(t *testing.T, proto string) {
	hessian2.RegisterPOJO(&Menu{})
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	groups := map[string]*menus{}
	for _, g := range []string{"a", "b", "c"} {
		groups[g] = &menus{group: g}
		startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
protocols: {%s: {port: 0}}
provider: {services: {menus: {interface: org.weft.Menus, group: %s}}}
`, reg, proto, g), weft.WithService("menus", groups[g]))
	}
	// A merger of the program's own, by name (Java's Merger SPI): it sums
	// the groups' totals.
	sum := cluster.MergerFunc(func(answers []any) (any, error) {
		var n int64
		for _, a := range answers {
			v, ok := a.(int64)
			if !ok {
				return nil, fmt.Errorf("sum: %T is not a long", a)
			}
			n += v
		}
		return n, nil
	})
	plugin := weft.NewPlugin("menus", weft.Provide("sum", func(weft.Host) (extension.Merger, error) { return sum, nil }, nil))
	var logs syncBuffer
	var all, listed menusClient
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
consumer:
  check: false
  references:
    all:
      interface: org.weft.Menus
      protocol: %s
      group: "*"
      merger: true
      methods: {menu: {merger: .merge}, pick: {merger: "false"}}
    listed: {interface: org.weft.Menus, protocol: %s, group: "a,b,c", methods: {total: {merger: sum}}}
`, reg, proto, proto), weft.WithReference("all", &all), weft.WithReference("listed", &listed),
		weft.WithPlugins(plugin), weft.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	ctx := context.Background()
	wantItems := []string{"a:x", "b:x", "c:x"}
	var items []string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if items, err = all.Items(ctx, "x"); err == nil && reflect.DeepEqual(items, wantItems) {
			break
		}
	}
	if !reflect.DeepEqual(items, wantItems) {
		t.Fatalf("the three groups never merged: %v %v", items, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err := listed.Total(ctx); err == nil && n == 'a'+'b'+'c' {
			break
		}
	}

	const callers, each = 16, 25
	var wg sync.WaitGroup
	var bad atomic.Int64
	var last atomic.Value
	fail := func(format string, args ...any) {
		bad.Add(1)
		last.Store(fmt.Sprintf(format, args...))
	}
	for w := range callers {
		wg.Go(func() {
			for i := range each {
				s := fmt.Sprint(w*each + i)
				if got, err := all.Items(ctx, s); err != nil || !reflect.DeepEqual(got, []string{"a:" + s, "b:" + s, "c:" + s}) {
					fail("items: %v %v", got, err)
				}
				// Groups in the order of their names: c wins "special".
				if got, err := all.Prices(ctx); err != nil || !reflect.DeepEqual(got, map[string]int64{"a": 'a', "b": 'b', "c": 'c', "special": 'c'}) {
					fail("prices: %v %v", got, err)
				}
				if got, err := all.Menu(ctx); err != nil || got == nil || !reflect.DeepEqual(got.Items, []string{"a", "b", "c"}) || got.Count != 3 {
					fail("menu: %+v %v", got, err)
				}
				if got, err := listed.Total(ctx); err != nil || got != 'a'+'b'+'c' {
					fail("total: %v %v", got, err)
				}
				if got, err := listed.Items(ctx, s); err != nil || !reflect.DeepEqual(got, []string{"a:" + s}) {
					// No merger on listed: the first group answers.
					fail("listed items without a merger: %v %v", got, err)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d calls by %d callers went wrong; the last: %v", n, callers*each*5, callers, last.Load())
	}
	if got, err := all.Pick(ctx); err != nil || got != "a" {
		t.Fatalf("pick with merger false: %q %v, want group a's answer alone", got, err)
	}

	// A group that fails is logged and left out.
	groups["b"].closed.Store(true)
	if got, err := all.Items(ctx, "y"); err != nil || !reflect.DeepEqual(got, []string{"a:y", "c:y"}) {
		t.Fatalf("with group b failing: %v %v, want a's and c's", got, err)
	}
	if s := logs.String(); !strings.Contains(s, "invoke group [ b ] failed; its answer is left out of the merge") || !strings.Contains(s, "the kitchen of b is closed") {
		t.Fatalf("no log of the failed group:\n%s", s)
	}
	for _, g := range groups {
		g.closed.Store(true)
	}
	if _, err := all.Items(ctx, "z"); !kernel.IsBiz(err) || !strings.Contains(err.Error(), "none of its 3 groups answered") {
		t.Fatalf("every group failing: %v", err)
	}
}

// A merger that names nothing fails New at its key, with the names known.
func TestMergerNamesAreChecked(t *testing.T) {
	_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(`
registries: {r: {address: "embedded:///tmp/x"}}
consumer:
  references:
    all: {interface: org.weft.Menus, group: "*", methods: {menu: {merger: lists}}}
`)))
	if err == nil || !strings.Contains(err.Error(), `consumer.references.all.methods.menu.merger: unknown merger "lists" (known: boolean, byte, char, default, double, float, int, list, long, map, set, short, true, or .methodName`) {
		t.Fatalf("New: %v", err)
	}
}

// zoneNode is a provider of org.weft.Node registered in one registry.
func zoneNode(t *testing.T, proto, reg, name string) (*node, *weft.App) {
	n := &node{name: name}
	app := startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
protocols: {%s: {port: 0}}
provider:
  shutdown: {wait: 300}
  services: {node: {interface: org.weft.Node}}
`, reg, proto), weft.WithService("node", n))
	return n, app
}

// TestZoneAwarePrefersTheLocalZoneAndFailsOver: two registries, zones hz
// and sh, two providers registered in each; a consumer in hz (its
// reference's registry_zone) sends 16 callers' calls to hz only, a call
// that names sh (registry.zone, dubbo-go's attachment) goes there, one
// that forces a zone no registry has fails saying so; once hz's providers
// stop, the calls go to sh without failing. A preferred registry wins
// over the zone, and without a zone the registries share the calls by
// weight.
func TestZoneAwarePrefersTheLocalZoneAndFailsOver(t *testing.T) {
	forEachProtocol(t, testZoneAware)
}

func testZoneAware(t *testing.T, proto string) {
	regs := map[string]string{"hz": "embedded://" + t.TempDir() + "?heartbeat=200", "sh": "embedded://" + t.TempDir() + "?heartbeat=200"}
	nodes := map[string][]*node{}
	var hzApps []*weft.App
	for _, zone := range []string{"hz", "sh"} {
		for i := range 2 {
			n, app := zoneNode(t, proto, regs[zone], fmt.Sprintf("%s%d", zone, i))
			nodes[zone] = append(nodes[zone], n)
			if zone == "hz" {
				hzApps = append(hzApps, app)
			}
		}
	}
	consumerOf := func(registries, ref string) *nodeClient {
		var c nodeClient
		startApp(t, fmt.Sprintf(`
registries: {%s}
consumer:
  check: false
  references:
    node: {interface: org.weft.Node, protocol: %s, timeout: 1000%s}
`, registries, proto, ref), weft.WithReference("node", &c))
		return &c
	}
	hz, sh := fmt.Sprintf("hz: {address: %q, zone: hz}", regs["hz"]), fmt.Sprintf("sh: {address: %q, zone: sh}", regs["sh"])
	local := consumerOf(hz+", "+sh, ", params: {registry_zone: hz}")
	ctx := context.Background()
	inZone := func(zone string) context.Context {
		return kernel.WithAttachments(ctx, map[string]any{"registry.zone": zone})
	}
	// Wait until each registry lists its providers.
	for _, zone := range []string{"hz", "sh"} {
		zctx := kernel.WithAttachments(ctx, map[string]any{"registry_zone": zone, "registry_zone_force": "true"})
		var who string
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if who, err = local.Who(zctx, "x"); err == nil && strings.HasPrefix(who, zone) {
				break
			}
		}
		if !strings.HasPrefix(who, zone) {
			t.Fatalf("zone %s never answered: %q %v", zone, who, err)
		}
	}
	calls := func(zone string) (n int64) {
		for _, nd := range nodes[zone] {
			n += nd.calls.Load()
		}
		return n
	}

	// The local zone takes every call.
	shBefore := calls("sh")
	l := startLoad(16, 0, func() error { _, err := local.Who(ctx, "x"); return err })
	time.Sleep(400 * time.Millisecond)
	n, failed, last := l.stop()
	if failed > 0 || calls("sh") != shBefore {
		t.Fatalf("local zone: %d of %d calls failed (%s), %d went to sh", failed, n, last, calls("sh")-shBefore)
	}
	t.Logf("%s: 16 callers, %d calls in 400ms, all to hz", proto, n)
	// A call's own zone wins; dubbo-go's and Java's spellings.
	for _, c := range []context.Context{inZone("sh"), kernel.WithAttachments(ctx, map[string]any{"registry_zone": "sh"})} {
		if who, err := local.Who(c, "x"); err != nil || !strings.HasPrefix(who, "sh") {
			t.Fatalf("a call in zone sh: %q %v", who, err)
		}
	}
	// A zone no registry has: forced, the call fails; else it goes anywhere.
	_, err := local.Who(kernel.WithAttachments(ctx, map[string]any{"registry.zone": "bj", "registry.zone.force": "true"}), "x")
	if kernel.CodeOf(err) != kernel.CodeNoProvider || !strings.Contains(err.Error(), "No registry instance in zone or no available providers in the registry, zone: bj, registries: hz (zone hz), sh (zone sh)") {
		t.Fatalf("forced zone bj: %v", err)
	}
	if _, err := local.Who(inZone("bj"), "x"); err != nil {
		t.Fatalf("zone bj, not forced: %v", err)
	}

	// A preferred registry wins over the zone; without either, the weights
	// share the calls (sh 300 to hz 100: three quarters to sh).
	preferred := consumerOf(hz+", "+strings.TrimSuffix(sh, "}")+", preferred: true}", ", params: {registry_zone: hz}")
	weighted := consumerOf(strings.TrimSuffix(hz, "}")+", weight: 100}, "+strings.TrimSuffix(sh, "}")+", weight: 300}", "")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, err1 := preferred.Who(inZone("sh"), "x")
		_, err2 := weighted.Who(kernel.WithAttachments(ctx, map[string]any{"registry_zone": "hz", "registry_zone_force": "true"}), "x")
		if err1 == nil && err2 == nil {
			break
		}
	}
	shWeighted := 0
	for range 400 {
		who, err := preferred.Who(ctx, "x")
		if err != nil || !strings.HasPrefix(who, "sh") {
			t.Fatalf("preferred sh, zone hz: %q %v", who, err)
		}
		if who, err = weighted.Who(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(who, "sh") {
			shWeighted++
		}
	}
	if shWeighted < 240 || shWeighted > 360 {
		t.Errorf("weights sh 300, hz 100: %d of 400 calls to sh, want about 300", shWeighted)
	}
	t.Logf("%s: weights 300:100, %d of 400 calls to the heavier registry", proto, shWeighted)

	// hz's providers stop (gracefully) under load: the calls go to sh.
	l = startLoad(16, 0, func() error { _, err := local.Who(ctx, "x"); return err })
	time.Sleep(200 * time.Millisecond)
	var stops sync.WaitGroup
	for _, app := range hzApps {
		stops.Go(func() { app.Stop(context.Background()) })
	}
	stops.Wait()
	hzAfter, shAfter := calls("hz"), calls("sh")
	time.Sleep(300 * time.Millisecond)
	n, failed, last = l.stop()
	if failed > 0 {
		t.Errorf("while hz stopped: %d of %d calls failed, the last: %s", failed, n, last)
	}
	if calls("hz") != hzAfter || calls("sh") == shAfter {
		t.Fatalf("after hz stopped: %d calls to hz, %d to sh", calls("hz")-hzAfter, calls("sh")-shAfter)
	}
	t.Logf("%s: 16 callers, %d calls while hz stopped, %d failed; sh took %d after", proto, n, failed, calls("sh")-shAfter)
	// hz has no provider now: forced to hz, the call fails clearly.
	_, err = local.Who(kernel.WithAttachments(ctx, map[string]any{"registry_zone": "hz", "registry_zone_force": "true"}), "x")
	if kernel.CodeOf(err) != kernel.CodeNoProvider || !strings.Contains(err.Error(), "zone: hz") {
		t.Fatalf("forced to hz after it stopped: %v", err)
	}
}
