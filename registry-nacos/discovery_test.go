package nacos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func openDiscovery(t *testing.T, addr, params string) *Discovery {
	t.Helper()
	sd, err := DiscoveryFactory{Log: discard()}.GetServiceDiscovery(kernel.MustParseURL("nacos://" + addr + "?timeout=10000" + params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sd.Close(); err != nil {
			t.Error(err)
		}
	})
	return sd.(*Discovery)
}

// uniqueApp keeps runs against a long-lived server apart.
func uniqueApp(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "=", "-", "&", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("weft-sd-%s-%d", name, time.Now().UnixNano())
}

type instRecorder struct {
	mu    sync.Mutex
	lists [][]extension.ServiceInstance
	ch    chan struct{}
}

func newInstRecorder() *instRecorder { return &instRecorder{ch: make(chan struct{}, 1)} }

func (r *instRecorder) NotifyInstances(_ string, ins []extension.ServiceInstance) {
	r.mu.Lock()
	r.lists = append(r.lists, ins)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *instRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

func ids(ins []extension.ServiceInstance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ID())
	}
	sort.Strings(out)
	return out
}

// waitFor waits until the latest list satisfies ok, and returns it.
func (r *instRecorder) waitFor(t *testing.T, what string, ok func([]extension.ServiceInstance) bool) []extension.ServiceInstance {
	t.Helper()
	deadline := time.NewTimer(pushWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		var last []extension.ServiceInstance
		have := len(r.lists) > 0
		if have {
			last = r.lists[len(r.lists)-1]
		}
		r.mu.Unlock()
		if have && ok(last) {
			return last
		}
		select {
		case <-r.ch:
		case <-deadline.C:
			t.Fatalf("no notification with %s within %v; last list %v (of %d)", what, pushWait, last, r.count())
		}
	}
}

func hasIDs(want ...string) func([]extension.ServiceInstance) bool {
	slices.Sort(want)
	return func(ins []extension.ServiceInstance) bool { return slices.Equal(ids(ins), want) }
}

// An application's instances through Nacos: the subscriber gets the
// empty list, then each instance with exactly its metadata (no key of the
// server's or dubbo-go's id), a re-registration's new metadata, another
// client's instance, and the list without the one unregistered; after
// Unsubscribe, nothing.
func TestDiscoveryRoundTrip(t *testing.T) {
	addr := serverAddr(t)
	ctx := context.Background()
	app := uniqueApp(t)
	p1, p2, c := openDiscovery(t, addr, ""), openDiscovery(t, addr, ""), openDiscovery(t, addr, "")

	rec := newInstRecorder()
	if err := c.Subscribe(ctx, app, rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the empty initial list", func(ins []extension.ServiceInstance) bool { return len(ins) == 0 })

	md := map[string]string{"dubbo.metadata.revision": "r1", "dubbo.endpoints": `[{"port":20881,"protocol":"dubbo"}]`}
	in1 := extension.ServiceInstance{App: app, Host: "127.0.0.1", Port: 20881, Metadata: md}
	if err := p1.Register(ctx, in1); err != nil {
		t.Fatal(err)
	}
	got := rec.waitFor(t, "instance 1", hasIDs("127.0.0.1:20881"))[0]
	if got.App != app || !maps.Equal(got.Metadata, md) {
		t.Fatalf("read back %+v, want app %s and metadata %v", got, app, md)
	}

	// A new revision: the same instance, its metadata replaced; twice in
	// quick succession, as an App that exports two services does (the
	// server must keep the last).
	for _, rev := range []string{"r1b", "r2"} {
		md2 := map[string]string{"dubbo.metadata.revision": rev, "dubbo.endpoints": md["dubbo.endpoints"]}
		if err := p1.Register(ctx, extension.ServiceInstance{App: app, Host: "127.0.0.1", Port: 20881, Metadata: md2}); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitFor(t, "revision r2", func(ins []extension.ServiceInstance) bool {
		return len(ins) == 1 && ins[0].Metadata["dubbo.metadata.revision"] == "r2"
	})
	// And a new subscriber (a consumer started now) reads r2 too: the
	// server stored the last registration, not only pushed it.
	fresh := newInstRecorder()
	if err := openDiscovery(t, addr, "").Subscribe(ctx, app, fresh); err != nil {
		t.Fatal(err)
	}
	fresh.waitFor(t, "revision r2 (new subscriber)", func(ins []extension.ServiceInstance) bool {
		return len(ins) == 1 && ins[0].Metadata["dubbo.metadata.revision"] == "r2"
	})

	in2 := extension.ServiceInstance{App: app, Host: "127.0.0.1", Port: 20882, Metadata: map[string]string{"dubbo.metadata.revision": "r2"}}
	if err := p2.Register(ctx, in2); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "both instances", hasIDs("127.0.0.1:20881", "127.0.0.1:20882"))

	// A late subscriber of the same client gets the current list at once.
	late := newInstRecorder()
	if err := c.Subscribe(ctx, app, late); err != nil {
		t.Fatal(err)
	}
	late.waitFor(t, "both instances (late subscriber)", hasIDs("127.0.0.1:20881", "127.0.0.1:20882"))

	if err := p1.Unregister(ctx, in1); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 1 gone", hasIDs("127.0.0.1:20882"))

	if err := c.Unsubscribe(ctx, app, late); err != nil {
		t.Fatal(err)
	}
	n := late.count()
	if err := p2.Unregister(ctx, in2); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "no instances", func(ins []extension.ServiceInstance) bool { return len(ins) == 0 })
	if late.count() != n {
		t.Errorf("an unsubscribed listener was notified")
	}
}

// The instance as Nacos stores it, read with the naming client the way
// dubbo-go's nacosServiceDiscovery reads it (SelectAllInstances of the
// service named after the application, in the registry URL's group):
// address, weight, healthy, enabled, ephemeral, and the metadata with
// dubbo-go's id (host:port) beside weft's keys.
func TestDiscoveryInstanceAsNacosStoresIt(t *testing.T) {
	addr := serverAddr(t)
	ctx := context.Background()
	app := uniqueApp(t)
	group := "weft-sd-group"
	p := openDiscovery(t, addr, "&group="+group)
	md := map[string]string{"dubbo.metadata.revision": "abc", "dubbo.metadata.storage-type": "local"}
	if err := p.Register(ctx, extension.ServiceInstance{App: app, Host: "127.0.0.1", Port: 20891, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	// The SDK's first read subscribes and then serves its cache, and the
	// PolarisMesh server here pushes no changes of a service outside
	// DEFAULT_GROUP (a subscriber there never hears of an instance added
	// later; its own reads from a new client see it): so read once the
	// server lists the instance, from a new client.
	catalog := newCatalogClient(addr, kernel.MustParseURL("nacos://"+addr), 10000)
	for deadline := time.Now().Add(pushWait); ; time.Sleep(200 * time.Millisecond) {
		listed, err := catalog.instances(ctx, group+"@@"+app)
		if err == nil && len(listed) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not list the instance of %s in group %s: %v, %v", app, group, listed, err)
		}
	}
	raw, _, _, err := newNamingClient(kernel.MustParseURL("nacos://" + addr + "?timeout=10000"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.CloseClient()
	ins, err := raw.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: app, GroupName: group})
	if err != nil || len(ins) != 1 {
		t.Fatalf("dubbo-go's read of %s in group %s: %v, %v; want the instance", app, group, ins, err)
	}
	in := ins[0]
	if in.Ip != "127.0.0.1" || in.Port != 20891 || in.Weight != 1 || !in.Healthy || !in.Enable || !in.Ephemeral {
		t.Errorf("stored instance %+v: want 127.0.0.1:20891, weight 1, healthy, enabled, ephemeral", in)
	}
	want := map[string]string{"id": "127.0.0.1:20891"}
	maps.Copy(want, md)
	for k, v := range want {
		if in.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, in.Metadata[k], v, in.Metadata)
		}
	}
	// Not in DEFAULT_GROUP: the group parameter moved it.
	if other, err := raw.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: app, GroupName: Group}); err == nil && len(other) != 0 {
		t.Errorf("the instance is in DEFAULT_GROUP too: %v", other)
	}
}

// The mapping: absent reads as none; two writers at once (two processes'
// clients) both end up in the document, which is Dubbo's comma-separated
// list; adding an application already there changes nothing.
func TestDiscoveryMappingTwoWriters(t *testing.T) {
	addr := serverAddr(t)
	ctx := context.Background()
	iface := uniqueInterface(t)
	a, b, r := openDiscovery(t, addr, ""), openDiscovery(t, addr, ""), openDiscovery(t, addr, "")
	if apps, err := r.Mapping(ctx, iface); err != nil || len(apps) != 0 {
		t.Fatalf("absent mapping: %v, %v", apps, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range []struct {
		d   *Discovery
		app string
	}{{a, "app-a"}, {b, "app-b"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.d.AddMapping(ctx, iface, w.app)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var apps []string
	for deadline := time.Now().Add(pushWait); ; time.Sleep(200 * time.Millisecond) {
		var err error
		apps, err = r.Mapping(ctx, iface)
		slices.Sort(apps)
		if err == nil && slices.Equal(apps, []string{"app-a", "app-b"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mapping of %s: %v, %v; want app-a and app-b", iface, apps, err)
		}
	}
	if err := a.AddMapping(ctx, iface, "app-a"); err != nil {
		t.Fatal(err)
	}
	doc, err := r.cfg.GetConfig(ctx, iface, MappingGroup)
	if err != nil || (doc != "app-a,app-b" && doc != "app-b,app-a") {
		t.Fatalf("the document is %q, %v; want Dubbo's comma-separated list of the two", doc, err)
	}
}

// The following need no server.

func TestParseMapping(t *testing.T) {
	long := strings.Repeat("x", maxAppName+1)
	for in, want := range map[string][]string{
		"":                      nil,
		"a":                     {"a"},
		"a,b":                   {"a", "b"},
		" a , b ,,a":            {"a", "b"},
		"a," + long + ",c":      {"a", "c"},
		strings.Repeat("z,", 3): {"z"},
	} {
		if got := parseMapping(in); !slices.Equal(got, want) {
			t.Errorf("parseMapping(%.40q) = %v, want %v", in, got, want)
		}
	}
	many := make([]string, maxMappingApps+10)
	for i := range many {
		many[i] = fmt.Sprintf("app%d", i)
	}
	if got := parseMapping(strings.Join(many, ",")); len(got) != maxMappingApps {
		t.Errorf("%d applications read, want the bound %d", len(got), maxMappingApps)
	}
}

func TestServiceInstances(t *testing.T) {
	md := map[string]string{"id": "10.0.0.1:1", "internal-nacos-cluster": "DEFAULT", "dubbo.metadata.revision": "r"}
	got := serviceInstances("app", []model.Instance{
		{Ip: "10.0.0.2", Port: 1, Healthy: true, Enable: true, Metadata: md},
		{Ip: "10.0.0.1", Port: 1, Healthy: true, Enable: true, Metadata: md},
		{Ip: "10.0.0.3", Port: 1, Healthy: false, Enable: true, Metadata: md},
		{Ip: "10.0.0.4", Port: 1, Healthy: true, Enable: false, Metadata: md},
		{Ip: "10.0.0.5", Port: 0, Healthy: true, Enable: true, Metadata: md},
	})
	if !slices.Equal(ids(got), []string{"10.0.0.1:1", "10.0.0.2:1"}) {
		t.Fatalf("instances %v, want the healthy, enabled ones", ids(got))
	}
	if want := map[string]string{"dubbo.metadata.revision": "r"}; !maps.Equal(got[0].Metadata, want) {
		t.Errorf("metadata %v, want %v", got[0].Metadata, want)
	}
	if len(md) != 3 {
		t.Errorf("the SDK's metadata map was changed: %v", md)
	}
}
