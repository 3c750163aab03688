package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/registry"
)

// openDiscovery opens a discovery whose instances and mapping live under
// /<group>, the test's own root: rootPath=/<group>/services, group=<group>.
func openDiscovery(t *testing.T, addr, group, extra string) *Discovery {
	t.Helper()
	u := kernel.MustParseURL("zookeeper://" + addr + "?group=" + group + "&rootPath=/" + group + "/services" + extra)
	sd, err := DiscoveryFactory{Log: testLog(t)}.GetServiceDiscovery(u)
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

// describe is "id@revision" per instance, sorted.
func describe(ins []extension.ServiceInstance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ID()+"@"+in.Metadata[registry.MetaRevision])
	}
	slices.Sort(out)
	return out
}

func (r *instRecorder) waitFor(t *testing.T, what string, want ...string) []extension.ServiceInstance {
	t.Helper()
	slices.Sort(want)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		var last []extension.ServiceInstance
		have := len(r.lists) > 0
		if have {
			last = r.lists[len(r.lists)-1]
		}
		r.mu.Unlock()
		if have && slices.Equal(describe(last), want) {
			return last
		}
		select {
		case <-r.ch:
		case <-deadline.C:
			t.Fatalf("no notification with %s (%v) within %v; last %v", what, want, wait, describe(last))
		}
	}
}

func instance(app string, port int, rev string) extension.ServiceInstance {
	return extension.ServiceInstance{App: app, Host: "127.0.0.1", Port: port, Metadata: map[string]string{
		registry.MetaRevision: rev, registry.MetaStorageType: registry.StorageLocal,
		registry.MetaEndpoints: fmt.Sprintf(`[{"port":%d,"protocol":"dubbo"}]`, port),
	}}
}

func TestDiscoveryRegisterSubscribe(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	p1, p2, c := openDiscovery(t, addr, group, ""), openDiscovery(t, addr, group, ""), openDiscovery(t, addr, group, "")
	const app = "vault-app"
	rec := newInstRecorder()
	if err := c.Subscribe(ctx, app, rec); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatalf("Subscribe returned after %d notifications, want 1 (the empty list)", rec.count())
	}
	rec.waitFor(t, "the empty initial list")

	if err := p1.Register(ctx, instance(app, 20001, "r1")); err != nil {
		t.Fatal(err)
	}
	if err := p2.Register(ctx, instance(app, 20002, "r1")); err != nil {
		t.Fatal(err)
	}
	got := rec.waitFor(t, "both instances", "127.0.0.1:20001@r1", "127.0.0.1:20002@r1")
	if got[0].App != app || got[0].Metadata[registry.MetaEndpoints] != `[{"port":20001,"protocol":"dubbo"}]` {
		t.Errorf("round trip changed the instance: %+v", got[0])
	}

	// A new revision replaces the node's data: the children do not change,
	// the data watch sees it.
	if err := p1.Register(ctx, instance(app, 20001, "r2")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 1's new revision", "127.0.0.1:20001@r2", "127.0.0.1:20002@r1")

	late := newInstRecorder()
	if err := c.Subscribe(ctx, app, late); err != nil {
		t.Fatal(err)
	}
	late.waitFor(t, "both instances (late subscriber)", "127.0.0.1:20001@r2", "127.0.0.1:20002@r1")

	if err := p1.Unregister(ctx, instance(app, 20001, "r2")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 1 gone", "127.0.0.1:20002@r1")
	if err := c.Unsubscribe(ctx, app, late); err != nil {
		t.Fatal(err)
	}
	n := late.count()
	// Close ends p2's session: its ephemeral node goes with it.
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "no instances after the provider's Close")
	if late.count() != n {
		t.Error("an unsubscribed listener was notified")
	}
	if err := p2.Register(ctx, instance(app, 20002, "r1")); !errors.Is(err, errDiscoveryClosed) {
		t.Errorf("Register after Close: %v", err)
	}
	// Re-registering an instance again, unchanged, is not an error.
	for range 2 {
		if err := p1.Register(ctx, instance(app, 20003, "r3")); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitFor(t, "instance 3", "127.0.0.1:20003@r3")
}

// The node is Curator's ServiceInstance JSON, the fields Java's
// JsonInstanceSerializer writes, each one present, and what Java writes
// (payload id null, metadata not sorted, an unknown field) reads back.
func TestDiscoveryNodeLayout(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	d := openDiscovery(t, addr, group, "")
	raw := rawConn(t, addr)
	in := instance("shape-app", 20880, "abc")
	if err := d.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	path := "/" + group + "/services/shape-app/127.0.0.1:20880"
	data, st, err := raw.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	if st.EphemeralOwner == 0 {
		t.Error("the instance node is not ephemeral")
	}
	t.Logf("%s = %s", path, data)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "address,id,name,payload,port,registrationTimeUTC,serviceType,sslPort,uriSpec" {
		t.Errorf("top-level fields %v", keys)
	}
	for k, want := range map[string]string{"name": `"shape-app"`, "id": `"127.0.0.1:20880"`, "address": `"127.0.0.1"`,
		"port": `20880`, "sslPort": `null`, "serviceType": `"DYNAMIC"`, "uriSpec": `null`} {
		if string(doc[k]) != want {
			t.Errorf("%s = %s, want %s", k, doc[k], want)
		}
	}
	var payload map[string]json.RawMessage
	if err := json.Unmarshal(doc["payload"], &payload); err != nil {
		t.Fatal(err)
	}
	if string(payload["@class"]) != `"org.apache.dubbo.registry.zookeeper.ZookeeperInstance"` || string(payload["name"]) != `"shape-app"` {
		t.Errorf("payload %s", doc["payload"])
	}
	var meta map[string]string
	if err := json.Unmarshal(payload["metadata"], &meta); err != nil || meta[registry.MetaRevision] != "abc" || len(meta) != 3 {
		t.Errorf("payload metadata %s: %v", payload["metadata"], err)
	}
	// The metadata keys are sorted, as Java's getSortedMetadata.
	if i, j := strings.Index(string(data), registry.MetaEndpoints), strings.Index(string(data), registry.MetaRevision); i < 0 || j < i {
		t.Errorf("metadata not sorted by key: %s", payload["metadata"])
	}

	// A Java-written node beside it, and two malformed ones.
	java := `{"name":"shape-app","id":"127.0.0.1:20990","address":"127.0.0.1","port":20990,"sslPort":null,` +
		`"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":null,"name":"shape-app",` +
		`"metadata":{"dubbo.metadata.revision":"javarev","dubbo.metadata.storage-type":"local","weight":100}},` +
		`"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null,"enabled":true}`
	acl := zk.WorldACL(zk.PermAll)
	for name, body := range map[string]string{
		"127.0.0.1:20990": java,
		"127.0.0.1:1":     `not json`,
		"127.0.0.1:2":     `{"name":"shape-app","address":"127.0.0.1"}`,
	} {
		if _, err := raw.Create("/"+group+"/services/shape-app/"+name, []byte(body), 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	rec := newInstRecorder()
	if err := d.Subscribe(ctx, "shape-app", rec); err != nil {
		t.Fatal(err)
	}
	got := rec.waitFor(t, "weft's and Java's instances", "127.0.0.1:20880@abc", "127.0.0.1:20990@javarev")
	if got[1].Metadata["weight"] != "100" {
		t.Errorf("a number in Java's metadata read as %q, want its JSON text", got[1].Metadata["weight"])
	}
}

// Two writers adding applications to one interface's mapping at once:
// every application ends up in it (compare-and-set on the node's version),
// in Dubbo's comma form.
func TestDiscoveryMappingCAS(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	a, b := openDiscovery(t, addr, group, ""), openDiscovery(t, addr, group, "")
	const svc = "org.weft.zk.Mapped"
	if apps, err := a.Mapping(ctx, svc); err != nil || len(apps) != 0 {
		t.Fatalf("mapping of an unmapped interface: %v, %v", apps, err)
	}
	var wg sync.WaitGroup
	var want []string
	errs := make(chan error, 40)
	for i := range 20 {
		for _, d := range []*Discovery{a, b} {
			app := fmt.Sprintf("app-%p-%d", d, i)
			want = append(want, app)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.AddMapping(ctx, svc, app); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := b.Mapping(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("mapping after 40 concurrent adds:\n got %v\nwant %v", got, want)
	}
	raw := rawConn(t, addr)
	path := "/" + group + "/mapping/" + svc
	data, _, err := raw.Get(path)
	if err != nil || strings.Count(string(data), ",") != 39 || strings.Contains(string(data), " ") {
		t.Errorf("%s = %q, %v; want 40 names joined by commas", path, data, err)
	}
	// Adding a mapped application again changes nothing.
	if err := a.AddMapping(ctx, svc, want[0]); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := raw.Get(path); string(again) != string(data) {
		t.Errorf("re-adding %s changed the mapping", want[0])
	}
	// What dubbo-go or a person may write: blanks and repeats are dropped.
	if _, err := raw.Create("/"+group+"/mapping/org.weft.zk.Hand", []byte("x, y,,x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if apps, err := a.Mapping(ctx, "org.weft.zk.Hand"); err != nil || strings.Join(apps, ",") != "x,y" {
		t.Errorf("hand-written mapping read as %v, %v", apps, err)
	}
	if err := a.AddMapping(ctx, "a/b", "x"); err == nil || !strings.Contains(err.Error(), "not a ZooKeeper node name") {
		t.Errorf("mapping an interface with a /: %v", err)
	}
}

// Session expiry: the provider's and the consumer's sessions go through a
// proxy the test cuts for longer than the session timeout. The provider's
// instance comes back with its current data, owned by the new session; the
// consumer's watches re-arm and see an instance registered meanwhile, and
// later revisions too.
func TestDiscoverySessionExpiry(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	px := newProxy(t, addr)
	p := openDiscovery(t, px.addr, group, "&session=2000")
	c := openDiscovery(t, px.addr, group, "&session=2000")
	other := openDiscovery(t, addr, group, "")
	raw := rawConn(t, addr)
	const app = "expiry-app"
	if err := p.Register(ctx, instance(app, 20031, "r1")); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(ctx, instance(app, 20031, "r2")); err != nil {
		t.Fatal(err)
	}
	rec := newInstRecorder()
	if err := c.Subscribe(ctx, app, rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 1", "127.0.0.1:20031@r2")
	oldP := p.c.conn.SessionID()

	px.Pause()
	dir := "/" + group + "/services/" + app
	waitChildren(t, raw, dir, "instance 1's node deleted by the expiry", func(c []string) bool { return len(c) == 0 })
	time.Sleep(500 * time.Millisecond)
	if err := other.Register(ctx, instance(app, 20032, "r1")); err != nil {
		t.Fatal(err)
	}
	px.Resume()
	start := time.Now()
	rec.waitFor(t, "both instances on the new sessions", "127.0.0.1:20031@r2", "127.0.0.1:20032@r1")
	t.Logf("recovered %v after the proxy came back", time.Since(start).Round(10*time.Millisecond))
	if p.c.conn.SessionID() == oldP {
		t.Errorf("the provider's session did not change (%#x): nothing expired", oldP)
	}
	_, st, err := raw.Exists(dir + "/127.0.0.1:20031")
	if err != nil || st.EphemeralOwner != p.c.conn.SessionID() {
		t.Errorf("instance 1's node: %+v, %v; want it owned by the new session %#x", st, err, p.c.conn.SessionID())
	}
	// The data watches are armed again: a new revision arrives.
	if err := other.Register(ctx, instance(app, 20032, "r2")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 2's new revision after the recovery", "127.0.0.1:20031@r2", "127.0.0.1:20032@r2")
	if err := p.Register(ctx, instance(app, 20031, "r3")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "instance 1's new revision after the recovery", "127.0.0.1:20031@r3", "127.0.0.1:20032@r2")
}

func TestDiscoveryRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"zookeeper://127.0.0.1:1?rootPath=/", "rootPath"},
		{"zookeeper://127.0.0.1:1?rootPath=/a//b", "rootPath"},
	} {
		_, err := DiscoveryFactory{Log: discard()}.GetServiceDiscovery(kernel.MustParseURL(tc.url))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.url, err, tc.want)
		}
	}
	if _, err := DecodeInstance("a", []byte(strings.Repeat(" ", maxInstanceData+1))); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized instance data: %v", err)
	}
	if _, err := DecodeInstance("a", []byte(`{"name":"b","address":"h","port":1}`)); err == nil {
		t.Error("an instance naming another application was accepted")
	}
	var many []string
	for i := range maxMappedApps + 1 {
		many = append(many, fmt.Sprint("app", i))
	}
	if _, err := parseMapping("/m", []byte(strings.Join(many, ","))); err == nil {
		t.Error("an oversized mapping was accepted")
	}
}
