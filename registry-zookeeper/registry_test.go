package zookeeper

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

const iface = "org.weft.zk.Greeter"

func TestRegisterSubscribeUnregister(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	p1, p2, c := openRegistry(t, addr, group, ""), openRegistry(t, addr, group, ""), openRegistry(t, addr, group, "")
	u1, u2 := provider(iface, 20001, ""), provider(iface, 20002, "")

	rec := newRecorder()
	sub := consumer(iface, "")
	if err := c.Subscribe(ctx, sub, rec); err != nil {
		t.Fatal(err)
	}
	// Delivered before Subscribe returns: empty, and as empty.
	if rec.count() != 1 {
		t.Fatalf("Subscribe returned after %d notifications, want 1", rec.count())
	}
	rec.waitFor(t, "the empty initial list", func(urls []*kernel.URL) bool { return urls != nil && len(urls) == 0 })

	if err := p1.Register(ctx, u1); err != nil {
		t.Fatal(err)
	}
	if err := p2.Register(ctx, u2); err != nil {
		t.Fatal(err)
	}
	got := rec.waitFor(t, "both providers", hasAddrs("127.0.0.1:20001", "127.0.0.1:20002"))
	if got[0].String() != u1.String() {
		t.Errorf("round trip changed the URL:\n got %s\nwant %s", got[0], u1)
	}
	// Registering again is a no-op, not an error.
	if err := p1.Register(ctx, u1); err != nil {
		t.Fatal(err)
	}

	late := newRecorder()
	if err := c.Subscribe(ctx, sub, late); err != nil {
		t.Fatal(err)
	}
	late.waitFor(t, "both providers (late subscriber)", hasAddrs("127.0.0.1:20001", "127.0.0.1:20002"))

	if err := p1.Unregister(ctx, u1); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "provider 1 gone", hasAddrs("127.0.0.1:20002"))
	late.waitFor(t, "provider 1 gone (late subscriber)", hasAddrs("127.0.0.1:20002"))

	if err := c.Unsubscribe(ctx, sub, late); err != nil {
		t.Fatal(err)
	}
	n := late.count()
	// Close ends p2's session: its ephemeral node goes with it.
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "no providers after the provider's Close", func(urls []*kernel.URL) bool { return len(urls) == 0 })
	if late.count() != n {
		t.Error("an unsubscribed listener was notified")
	}
	if err := p2.Register(ctx, u2); !errors.Is(err, errClosed) {
		t.Errorf("Register after Close: %v", err)
	}
}

// The node weft writes is Dubbo's, byte for byte: the root from group, the
// encoded interface, the category, and Java's URLEncoder form of the full
// URL string (TestEncodeIsJavas has Java's output).
func TestZnodeLayout(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	r := openRegistry(t, addr, group, "")
	raw := rawConn(t, addr)
	u := kernel.MustParseURL("dubbo://127.0.0.1:20880/org.weft.zk.Greeter?application=my%20app~1*&interface=org.weft.zk.Greeter&methods=a,b&owner=Jos%C3%A9&side=provider")
	if err := r.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	dir := "/" + group + "/org.weft.zk.Greeter/providers"
	children, _, err := raw.Children(dir)
	want := "dubbo%3A%2F%2F127.0.0.1%3A20880%2Forg.weft.zk.Greeter%3Fapplication%3Dmy+app%7E1*%26interface%3Dorg.weft.zk.Greeter%26methods%3Da%2Cb%26owner%3DJos%C3%A9%26side%3Dprovider"
	if err != nil || len(children) != 1 || children[0] != want {
		t.Fatalf("children of %s: %v, %v\nwant [%s]", dir, children, err, want)
	}
	_, st, err := raw.Exists(dir + "/" + want)
	if err != nil || st.EphemeralOwner == 0 {
		t.Errorf("the provider node is not ephemeral: %+v, %v", st, err)
	}
	for _, p := range []string{"/" + group, "/" + group + "/org.weft.zk.Greeter", dir} {
		if _, st, err := raw.Exists(p); err != nil || st.EphemeralOwner != 0 {
			t.Errorf("parent %s is not persistent: %+v, %v", p, st, err)
		}
	}
	// A consumer registration goes under consumers/, and a providers
	// subscriber does not see it.
	cu := consumer("org.weft.zk.Greeter", "&application=c")
	if err := r.Register(ctx, cu); err != nil {
		t.Fatal(err)
	}
	cdir := "/" + group + "/org.weft.zk.Greeter/consumers"
	children, _, err = raw.Children(cdir)
	if err != nil || len(children) != 1 || !strings.HasPrefix(children[0], "consumer%3A%2F%2F127.0.0.1%2Forg.weft.zk.Greeter%3F") {
		t.Fatalf("children of %s: %v, %v", cdir, children, err)
	}
	rec := newRecorder()
	if err := r.Subscribe(ctx, kernel.MustParseURL("consumer://127.0.0.1/org.weft.zk.Greeter?interface=org.weft.zk.Greeter"), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the provider alone", hasAddrs("127.0.0.1:20880"))
	if err := r.Unregister(ctx, cu); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, raw, cdir, "consumer unregistered", func(c []string) bool { return len(c) == 0 })
}

func TestGroupVersionFiltering(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	r := openRegistry(t, addr, group, "")
	for _, u := range []*kernel.URL{
		provider(iface, 20011, ""), // g1, 1.0.0
		kernel.MustParseURL("dubbo://127.0.0.1:20012/" + iface + "?interface=" + iface + "&group=g2&version=1.0.0"),
		kernel.MustParseURL("dubbo://127.0.0.1:20013/" + iface + "?interface=" + iface + "&group=g1&version=2.0.0"),
		kernel.MustParseURL("dubbo://127.0.0.1:20014/" + iface + "?interface=" + iface),
	} {
		if err := r.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string][]string{
		"group=g1&version=1.0.0":    {"127.0.0.1:20011"},
		"group=g2&version=1.0.0":    {"127.0.0.1:20012"},
		"group=g1,g2&version=1.0.0": {"127.0.0.1:20011", "127.0.0.1:20012"},
		"group=g1&version=2.0.0":    {"127.0.0.1:20013"},
		"x=none":                    {"127.0.0.1:20014"},
		"group=*&version=*":         {"127.0.0.1:20011", "127.0.0.1:20012", "127.0.0.1:20013", "127.0.0.1:20014"},
	} {
		rec := newRecorder()
		sub := kernel.MustParseURL("consumer://127.0.0.1/" + iface + "?interface=" + iface + "&" + q)
		if err := r.Subscribe(ctx, sub, rec); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, q, hasAddrs(want...))
	}
}

// Names a hostile or buggy writer leaves under providers/ are skipped (and
// logged once); the valid provider beside them is delivered.
func TestMalformedChildren(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	r := openRegistry(t, addr, group, "")
	raw := rawConn(t, addr)
	dir := "/" + group + "/" + iface + "/providers"
	if err := r.Register(ctx, provider(iface, 20021, "")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"garbage", "dubbo%3A%2F%2Fh%3Axx%2Fa", "dubbo%3A%2F%2F%ZZ", strings.Repeat("%3A%2F%2F", 9000)} {
		if _, err := raw.Create(dir+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("plant %.30s: %v", name, err)
		}
	}
	rec := newRecorder()
	if err := r.Subscribe(ctx, consumer(iface, ""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the valid provider only", hasAddrs("127.0.0.1:20021"))
	// A change among the siblings still delivers.
	if err := r.Register(ctx, provider(iface, 20022, "")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "two valid providers", hasAddrs("127.0.0.1:20021", "127.0.0.1:20022"))
}

// A ZooKeeper nobody answers on fails GetRegistry within the timeout,
// naming the address and the cause.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Factory{Log: discard()}.GetRegistry(kernel.MustParseURL("zookeeper://" + dead + "?timeout=700"))
	took := time.Since(start)
	if err == nil {
		t.Fatal("GetRegistry succeeded")
	}
	for _, w := range []string{dead, "within 700 ms", "connection refused"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if took > 3*time.Second {
		t.Errorf("GetRegistry took %v with timeout=700", took)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}

// Session expiry: both the provider's and the consumer's sessions go
// through a proxy that the test cuts for longer than the session timeout,
// so ZooKeeper expires them and deletes the provider's node. A provider
// registered while they are away must reach the consumer, and the old
// provider must be registered again, once the proxy is back.
func TestSessionExpiry(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	px := newProxy(t, addr)
	p := openRegistry(t, px.addr, group, "&session=2000")
	c := openRegistry(t, px.addr, group, "&session=2000")
	raw := rawConn(t, addr)
	other := openRegistry(t, addr, group, "")
	u1, u2 := provider(iface, 20031, ""), provider(iface, 20032, "")
	if err := p.Register(ctx, u1); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := c.Subscribe(ctx, consumer(iface, ""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "provider 1", hasAddrs("127.0.0.1:20031"))
	oldP, oldC := p.c.conn.SessionID(), c.c.conn.SessionID()

	px.Pause()
	dir := "/" + group + "/" + iface + "/providers"
	waitChildren(t, raw, dir, "provider 1's node deleted by the expiry", func(c []string) bool { return len(c) == 0 })
	// Give the server a moment past the provider's expiry for the
	// consumer's (they were cut at the same instant).
	time.Sleep(500 * time.Millisecond)
	if err := other.Register(ctx, u2); err != nil {
		t.Fatal(err)
	}
	px.Resume()
	start := time.Now()
	rec.waitFor(t, "both providers on the new sessions", hasAddrs("127.0.0.1:20031", "127.0.0.1:20032"))
	t.Logf("recovered %v after the proxy came back", time.Since(start).Round(10*time.Millisecond))
	if p.c.conn.SessionID() == oldP || c.c.conn.SessionID() == oldC {
		t.Errorf("sessions did not change (%#x→%#x, %#x→%#x): nothing expired", oldP, p.c.conn.SessionID(), oldC, c.c.conn.SessionID())
	}
	// And the re-created node belongs to the new session.
	children := waitChildren(t, raw, dir, "two nodes", func(c []string) bool { return len(c) == 2 })
	for _, name := range children {
		u, _ := ParseNode(name)
		_, st, err := raw.Exists(dir + "/" + name)
		if err == nil && u.Port == 20031 && st.EphemeralOwner != p.c.conn.SessionID() {
			t.Errorf("provider 1's node is owned by %#x, not the new session %#x", st.EphemeralOwner, p.c.conn.SessionID())
		}
	}
	// Still watching: a change after the recovery arrives too.
	if err := other.Unregister(ctx, u2); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "provider 2 gone after the recovery", hasAddrs("127.0.0.1:20031"))
}

// zkScript drives test/zookeeper/zk.sh on ZOOKEEPER_TEST_DIR, for the
// tests that stop and restart the server; they skip without it.
func zkScript(t *testing.T) func(cmd string) {
	t.Helper()
	dir := os.Getenv("ZOOKEEPER_TEST_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ZOOKEEPER_TEST_DIR is not set: the restart test drives test/zookeeper/zk.sh stop/start DIR")
		}
		t.Skip("ZOOKEEPER_TEST_DIR is not set: the restart test drives test/zookeeper/zk.sh stop/start DIR")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "test", "zookeeper", "zk.sh")
	run := func(cmd string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, script, cmd, dir).CombinedOutput(); err != nil {
			t.Fatalf("zk.sh %s %s: %v\n%s", cmd, dir, err, out)
		}
	}
	t.Cleanup(func() { run("start") }) // leave the server running
	return run
}

// A server restart under a subscription: the sessions survive it (the
// server restores them from its log), go-zookeeper reconnects and re-sets
// the watch, and the listener hears a change made after the restart.
func TestServerRestart(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	zkSh := zkScript(t)
	ctx := context.Background()
	p, c := openRegistry(t, addr, group, ""), openRegistry(t, addr, group, "")
	if err := p.Register(ctx, provider(iface, 20041, "")); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := c.Subscribe(ctx, consumer(iface, ""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "provider 1", hasAddrs("127.0.0.1:20041"))
	zkSh("stop")
	zkSh("start")
	start := time.Now()
	deadline := time.Now().Add(wait)
	for {
		err := p.Register(ctx, provider(iface, 20042, ""))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("register after the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec.waitFor(t, "both providers after the restart", hasAddrs("127.0.0.1:20041", "127.0.0.1:20042"))
	t.Logf("recovered %v after the restart", time.Since(start).Round(10*time.Millisecond))
}

func TestCatalog(t *testing.T) {
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	r := openRegistry(t, addr, group, "")
	raw := rawConn(t, addr)
	other := "org.weft.zk.Other"
	for _, u := range []*kernel.URL{provider(iface, 20051, ""), provider(iface, 20052, ""), provider(other, 20053, "")} {
		if err := r.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// Consumers only, and junk: neither is a provider.
	if err := r.Register(ctx, consumer("org.weft.zk.OnlyConsumed", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/"+group+"/"+iface+"/providers/junk", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	all, err := r.Providers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, " ") != "g1/org.weft.zk.Greeter:1.0.0 g1/org.weft.zk.Other:1.0.0" {
		t.Fatalf("catalog keys %v", keys)
	}
	if got := addrs(all["g1/org.weft.zk.Greeter:1.0.0"]); strings.Join(got, ",") != "127.0.0.1:20051,127.0.0.1:20052" {
		t.Fatalf("catalog of the greeter: %v", got)
	}
	var _ extension.Catalog = r
	empty := openRegistry(t, addr, uniqueGroup(), "")
	if all, err := empty.Providers(ctx); err != nil || len(all) != 0 {
		t.Fatalf("empty root: %v, %v", all, err)
	}
}
