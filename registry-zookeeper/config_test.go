package zookeeper

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func openConfig(t *testing.T, addr, extra string) *ConfigCenter {
	t.Helper()
	c, err := ConfigFactory{Log: testLog(t)}.GetDynamicConfiguration(kernel.MustParseURL("zookeeper://" + addr + "?" + extra))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c.(*ConfigCenter)
}

type events struct {
	mu  sync.Mutex
	got []extension.ConfigChangedEvent
	ch  chan struct{}
}

func newEvents() *events { return &events{ch: make(chan struct{}, 1)} }

func (e *events) Process(ev extension.ConfigChangedEvent) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
}

// waitLast waits until the latest event satisfies ok.
func (e *events) waitLast(t *testing.T, what string, ok func(extension.ConfigChangedEvent) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		e.mu.Lock()
		n := len(e.got)
		var last extension.ConfigChangedEvent
		if n > 0 {
			last = e.got[n-1]
		}
		got := fmt.Sprint(e.got)
		e.mu.Unlock()
		if n > 0 && ok(last) {
			return
		}
		select {
		case <-e.ch:
		case <-deadline:
			t.Fatalf("%s: not within %v; events: %s", what, wait, got)
		}
	}
}

func content(s string) func(extension.ConfigChangedEvent) bool {
	return func(e extension.ConfigChangedEvent) bool { return !e.Deleted && e.Content == s }
}

// Get, publish, watch, delete and create again, in Dubbo's layout:
// /<namespace>/config/<group>/<key>, the document as the node's data.
func TestConfigCenter(t *testing.T) {
	addr, ns := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	pub, sub := openConfig(t, addr, "namespace="+ns), openConfig(t, addr, "namespace="+ns)
	raw := rawConn(t, addr)
	key := "app.yaml"
	if p, _ := sub.Path(key, ""); p != "/"+ns+"/config/dubbo/app.yaml" {
		t.Fatalf("path %s", p)
	}
	if got, err := sub.GetConfig(ctx, key, ""); err != nil || got != "" {
		t.Fatalf("missing document: %q, %v", got, err)
	}
	ev, evOther := newEvents(), newEvents()
	if err := sub.AddListener(key, "", ev); err != nil {
		t.Fatal(err)
	}
	if err := sub.AddListener(key+".other", "", evOther); err != nil {
		t.Fatal(err)
	}
	// Created after being absent.
	if err := pub.PublishConfig(ctx, key, "", "a: 1\n"); err != nil {
		t.Fatal(err)
	}
	ev.waitLast(t, "the first version", content("a: 1\n"))
	data, _, err := raw.Get("/" + ns + "/config/dubbo/app.yaml")
	if err != nil || string(data) != "a: 1\n" {
		t.Fatalf("node data %q, %v", data, err)
	}
	if err := pub.PublishConfig(ctx, key, "", "a: 2\n"); err != nil {
		t.Fatal(err)
	}
	ev.waitLast(t, "the second version", content("a: 2\n"))
	if got, err := sub.GetConfig(ctx, key, "dubbo"); err != nil || got != "a: 2\n" {
		t.Fatalf("GetConfig: %q, %v", got, err)
	}
	if err := pub.PublishConfig(ctx, key, "", ""); err != nil {
		t.Fatal(err)
	}
	ev.waitLast(t, "the deletion", func(e extension.ConfigChangedEvent) bool {
		return e.Deleted && e.Content == "" && e.Key == key && e.Group == "dubbo"
	})
	if err := pub.PublishConfig(ctx, key, "", "a: 3\n"); err != nil {
		t.Fatal(err)
	}
	ev.waitLast(t, "created again", content("a: 3\n"))
	evOther.mu.Lock()
	if len(evOther.got) > 0 {
		t.Errorf("a listener of another key heard: %v", evOther.got)
	}
	evOther.mu.Unlock()
	// Removed: hears nothing more.
	if err := sub.RemoveListener(key, "", ev); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	n := len(ev.got)
	ev.mu.Unlock()
	if err := pub.PublishConfig(ctx, key, "", "a: 4\n"); err != nil {
		t.Fatal(err)
	}
	late := newEvents()
	if err := sub.AddListener(key, "", late); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishConfig(ctx, key, "", "a: 5\n"); err != nil {
		t.Fatal(err)
	}
	late.waitLast(t, "a new listener hears the next change", content("a: 5\n"))
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.got) != n {
		t.Errorf("a removed listener heard %v", ev.got[n:])
	}
	if _, err := sub.Path("a/b", ""); err == nil {
		t.Error("a key with / was accepted")
	}
	if err := pub.PublishConfig(ctx, key, "", strings.Repeat("x", maxDocument+1)); err == nil {
		t.Error("an oversized document was published")
	}
}

// The group parameter sets the root when namespace is absent, as the
// registry's does.
func TestConfigRootFromGroup(t *testing.T) {
	addr, g := serverAddr(t), uniqueGroup()
	c := openConfig(t, addr, "group="+g)
	if p, _ := c.Path("k", "app"); p != "/"+g+"/config/app/k" {
		t.Fatalf("path %s", p)
	}
}

// A change made while the listener's session is away and expires reaches
// it once the new session re-arms the watch.
func TestConfigSessionExpiry(t *testing.T) {
	addr, ns := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	px := newProxy(t, addr)
	sub := openConfig(t, px.addr, "namespace="+ns+"&session=2000")
	pub := openConfig(t, addr, "namespace="+ns)
	if err := pub.PublishConfig(ctx, "k", "", "v1"); err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	if err := sub.AddListener("k", "", ev); err != nil {
		t.Fatal(err)
	}
	old := sub.c.conn.SessionID()
	px.Pause()
	time.Sleep(3500 * time.Millisecond) // past the 2 s session
	if err := pub.PublishConfig(ctx, "k", "", "v2"); err != nil {
		t.Fatal(err)
	}
	px.Resume()
	ev.waitLast(t, "the change made during the expiry", content("v2"))
	if sub.c.conn.SessionID() == old {
		t.Errorf("the session did not expire (%#x)", old)
	}
	if err := pub.PublishConfig(ctx, "k", "", ""); err != nil {
		t.Fatal(err)
	}
	ev.waitLast(t, "a deletion after the recovery", func(e extension.ConfigChangedEvent) bool { return e.Deleted })
}
