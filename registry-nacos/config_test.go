package nacos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func openConfig(t *testing.T, addr string) extension.DynamicConfiguration {
	t.Helper()
	c, err := ConfigFactory{Log: discard()}.GetDynamicConfiguration(kernel.MustParseURL("nacos://" + addr + "?timeout=3000"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

type events struct {
	mu  sync.Mutex
	got []extension.ConfigChangedEvent
	ch  chan struct{}
}

func (e *events) Process(ev extension.ConfigChangedEvent) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
}

// waitFor waits for an event satisfying ok, with a deadline.
func (e *events) waitFor(t *testing.T, what string, d time.Duration, ok func(extension.ConfigChangedEvent) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		e.mu.Lock()
		for _, ev := range e.got {
			if ok(ev) {
				e.mu.Unlock()
				return
			}
		}
		got := fmt.Sprint(e.got)
		e.mu.Unlock()
		select {
		case <-e.ch:
		case <-deadline:
			t.Fatalf("%s: not within %v; events: %s", what, d, got)
		}
	}
}

// A document published by one client is read and pushed to another; a
// missing one reads as "" without error; a deletion is an event; two data
// ids with one listener each hear only their own changes.
func TestConfigCenter(t *testing.T) {
	addr := serverAddr(t)
	ctx := context.Background()
	pub, sub := openConfig(t, addr), openConfig(t, addr)
	key := fmt.Sprintf("weft-test-%d.yaml", time.Now().UnixNano())
	other := key + ".other"
	for _, grp := range []string{"", "DEFAULT_GROUP"} {
		t.Run("group="+grp, func(t *testing.T) {
			if got, err := sub.GetConfig(ctx, key, grp); err != nil || got != "" {
				t.Fatalf("missing data id: %q, %v", got, err)
			}
			ev, evOther := &events{ch: make(chan struct{}, 1)}, &events{ch: make(chan struct{}, 1)}
			if err := sub.AddListener(key, grp, ev); err != nil {
				t.Fatal(err)
			}
			if err := sub.AddListener(other, grp, evOther); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := pub.PublishConfig(ctx, key, grp, "a: 1\n"); err != nil {
				t.Fatal(err)
			}
			ev.waitFor(t, "the first version", 10*time.Second, func(e extension.ConfigChangedEvent) bool { return e.Content == "a: 1\n" })
			t.Logf("first version heard in %v (the SDK sends a new watch to the server within 5 s)", time.Since(start).Round(10*time.Millisecond))
			// The watch is live now: the next change is pushed, not found by
			// the SDK's 5 s listen loop.
			start = time.Now()
			if err := pub.PublishConfig(ctx, key, grp, "a: 2\n"); err != nil {
				t.Fatal(err)
			}
			ev.waitFor(t, "the second version", 10*time.Second, func(e extension.ConfigChangedEvent) bool { return e.Content == "a: 2\n" })
			t.Logf("second change pushed in %v", time.Since(start).Round(10*time.Millisecond))
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err := sub.GetConfig(ctx, key, grp)
				if err == nil && got == "a: 2\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("GetConfig after publish: %q, %v", got, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := pub.PublishConfig(ctx, key, grp, ""); err != nil {
				t.Fatal(err)
			}
			ev.waitFor(t, "the deletion", 10*time.Second, func(e extension.ConfigChangedEvent) bool { return e.Deleted && e.Content == "" })
			evOther.mu.Lock()
			defer evOther.mu.Unlock()
			if len(evOther.got) > 0 {
				t.Errorf("a listener of another data id heard: %v", evOther.got)
			}
			if err := sub.RemoveListener(key, grp, ev); err != nil {
				t.Fatal(err)
			}
			if err := sub.RemoveListener(other, grp, evOther); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// startingClient is the SDK's config client while it connects: its first
// reads fail with the SDK's "client not connected" error.
type startingClient struct {
	config_client.IConfigClient
	fails int
	reads int
}

func (c *startingClient) GetConfig(vo.ConfigParam) (string, error) {
	if c.reads++; c.reads <= c.fails {
		return "", errors.New("get config from remote nacos server fail, and is not allowed to read local file, err:client not connected, current status:STARTING")
	}
	return "doc", nil
}

// A read while the SDK's client still connects (CI under load: a start-up
// read failed with "client not connected, current status:STARTING") waits
// for it, within the caller's context, rather than failing the App's start.
func TestReadWaitsForTheClientToConnect(t *testing.T) {
	sc := &startingClient{fails: 3}
	c := &ConfigCenter{client: sc, where: "test", log: discard()}
	got, err := c.GetConfig(context.Background(), "k", "g")
	if err != nil || got != "doc" || sc.reads != 4 {
		t.Fatalf("got %q, %v after %d reads, want doc after 4", got, err, sc.reads)
	}
	// Within the context: a client that never connects fails the read
	// when the caller's deadline ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := (&ConfigCenter{client: &startingClient{fails: 1 << 30}, where: "test", log: discard()}).GetConfig(ctx, "k", "g"); err == nil {
		t.Fatal("a client that never connects gave a document")
	}
}
