package governance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/testcc"
	"github.com/weftrpc/weft/kernel"
)

// routedDir records the routers and the configure step governance sets.
type routedDir struct {
	mu        sync.Mutex
	routers   []extension.Router
	configure func([]*kernel.URL) []*kernel.URL
}

func (d *routedDir) URL() *kernel.URL {
	return kernel.MustParseURL("consumer://10.1.0.1/DemoInterface")
}
func (d *routedDir) List(context.Context, *kernel.Invocation) ([]kernel.Invoker, error) {
	return nil, nil
}
func (d *routedDir) IsAvailable() bool { return true }
func (d *routedDir) Destroy()          {}
func (d *routedDir) SetRouters(rs []extension.Router) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routers = rs
}
func (d *routedDir) SetConfigure(f func([]*kernel.URL) []*kernel.URL) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.configure = f
}

func (d *routedDir) mesh() *cluster.MeshRouter {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.routers {
		if m, ok := r.(*cluster.MeshRouter); ok {
			return m
		}
	}
	return nil
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("within 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Java: MeshRuleRouterTest.testNotify, at weft's Rules: the providers'
// applications (not "" or "unknown") are subscribed to, and unsubscribed
// from when their providers go; a rule pushed applies, one that does not
// parse leaves it, a delete removes it; Close unsubscribes.
func TestMeshRulesFollowProviderApplications(t *testing.T) {
	dc := testcc.New()
	dir := &routedDir{}
	var logs strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	g := Watch(dc, log, "ref", dir.URL(), "consumer-app", dir, nil)
	defer g.Close()
	eventually(t, "the configure step set", func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return dir.configure != nil })
	dir.mu.Lock()
	configure := dir.configure
	dir.mu.Unlock()
	urls := func(apps ...string) []*kernel.URL {
		var out []*kernel.URL
		for i, a := range apps {
			u := fmt.Sprintf("dubbo://10.0.0.%d:20880/DemoInterface", i+1)
			if a != "" {
				u += "?remote.application=" + a
			}
			out = append(out, kernel.MustParseURL(u))
		}
		return out
	}
	meshKeys := func() []string {
		var out []string
		for _, k := range dc.Listened() {
			if strings.Contains(k, MeshRuleSuffix) {
				out = append(out, k)
			}
		}
		return out
	}
	want := func(keys ...string) func() bool {
		return func() bool { return slices.Equal(meshKeys(), keys) }
	}
	// A rule published before the application is seen is read when it is.
	both := string(join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule2.yaml"))
	dc.PublishConfig(context.Background(), "app1.MESHAPPRULE", "dubbo", both) // no listener yet: stored only

	configure(urls("", "unknown", "app1"))
	eventually(t, "app1 subscribed", want("app1.MESHAPPRULE/dubbo"))
	eventually(t, "app1's rule applied", func() bool { m := dir.mesh(); return m != nil && slices.Equal(m.Apps(), []string{"app1"}) })

	// A push that does not parse: rejected, logged with its key, the rule stays.
	ctx := context.Background()
	dc.PublishConfig(ctx, "app1.MESHAPPRULE", "dubbo", "kind: [")
	if m := dir.mesh(); m == nil || !slices.Equal(m.Apps(), []string{"app1"}) {
		t.Fatal("a push that does not parse removed the rule")
	}
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	if !strings.Contains(logged, "rule rejected") || !strings.Contains(logged, "app1.MESHAPPRULE") || !strings.Contains(logged, "documents[0]") {
		t.Errorf("rejection not logged with key and path:\n%s", logged)
	}
	// Deleted: no mesh router.
	dc.PublishConfig(ctx, "app1.MESHAPPRULE", "dubbo", "")
	if dir.mesh() != nil {
		t.Fatal("a deleted rule still routes")
	}
	dc.PublishConfig(ctx, "app1.MESHAPPRULE", "dubbo", both)
	if dir.mesh() == nil {
		t.Fatal("a pushed rule does not route")
	}

	// app1's providers go, app2's come: app1 unsubscribed and its rules
	// dropped, app2 subscribed.
	configure(urls("unknown", "app2"))
	eventually(t, "app2 subscribed, app1 not", want("app2.MESHAPPRULE/dubbo"))
	eventually(t, "app1's rule dropped", func() bool { return dir.mesh() == nil })
	dc.PublishConfig(ctx, "app2.MESHAPPRULE", "dubbo", both)
	if m := dir.mesh(); m == nil || !slices.Equal(m.Apps(), []string{"app2"}) {
		t.Fatal("app2's rule does not route")
	}
	// Several applications at once.
	configure(urls("app2", "app3", "app2"))
	eventually(t, "app2 and app3 subscribed", want("app2.MESHAPPRULE/dubbo", "app3.MESHAPPRULE/dubbo"))

	g.Close()
	if keys := meshKeys(); len(keys) != 0 {
		t.Errorf("after Close still listening to %v", keys)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var _ io.Writer = writerFunc(nil)
