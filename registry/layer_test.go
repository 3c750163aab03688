package registry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/registry/embedded"
	"github.com/weftrpc/weft/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder is a real embedded registry whose Register and Unregister calls
// are also written down, so that a test sees what the layer asked of its
// registries and in which order, consumers included (which the embedded
// registry itself ignores).
type recorder struct {
	extension.Registry
	mu  sync.Mutex
	ops []string
}

func (r *recorder) Register(ctx context.Context, u *kernel.URL) error {
	r.mu.Lock()
	r.ops = append(r.ops, "register "+u.Protocol+" "+u.Param(extension.KeyCategory))
	r.mu.Unlock()
	return r.Registry.Register(ctx, u)
}

func (r *recorder) Unregister(ctx context.Context, u *kernel.URL) error {
	r.mu.Lock()
	r.ops = append(r.ops, "unregister "+u.Protocol+" "+u.Param(extension.KeyCategory))
	r.mu.Unlock()
	return r.Registry.Unregister(ctx, u)
}

func (r *recorder) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

// open opens a layer over n embedded registries, each in a folder of its
// own, and returns it with their recorders (by id a, b, ...).
func open(t *testing.T, n int) (*registry.Layer, map[string]*recorder) {
	t.Helper()
	loader := kernel.NewLoader[extension.RegistryFactory]("registry", "embedded")
	recs := map[string]*recorder{}
	var mu sync.Mutex
	err := loader.Register("rec", func() (extension.RegistryFactory, error) {
		return factory(func(u *kernel.URL) (extension.Registry, error) {
			reg, err := embedded.Factory{Log: quiet}.GetRegistry(kernel.NewURL("embedded", "", 0, "", map[string]string{embedded.KeyDir: u.Param("dir"), embedded.KeyHeartbeat: "100"}))
			if err != nil {
				return nil, err
			}
			rec := &recorder{Registry: reg}
			mu.Lock()
			recs[u.Param("id")] = rec
			mu.Unlock()
			return rec, nil
		}), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]*kernel.URL{}
	for i := range n {
		id := string(rune('a' + i))
		addrs[id] = kernel.NewURL("rec", "", 0, "", map[string]string{"dir": t.TempDir(), "id": id})
	}
	l, err := registry.Open(addrs, registry.Options{Log: quiet, Registries: loader, RegisterMode: registry.RegisterInterface})
	if err != nil {
		t.Fatal(err)
	}
	return l, recs
}

type factory func(*kernel.URL) (extension.Registry, error)

func (f factory) GetRegistry(u *kernel.URL) (extension.Registry, error) { return f(u) }

// invoker is what the directory refers a provider URL into: the test looks
// only at which providers the directory holds.
type invoker struct{ url *kernel.URL }

func (i invoker) URL() *kernel.URL { return i.url }
func (i invoker) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, nil
}
func (i invoker) IsAvailable() bool { return true }
func (i invoker) Destroy()          {}

func refer(_ context.Context, u *kernel.URL) (kernel.Invoker, error) { return invoker{u}, nil }

type lister interface{ Invokers() []kernel.Invoker }

func addrs(d lister) []string {
	var out []string
	for _, iv := range d.Invokers() {
		out = append(out, iv.URL().Address())
	}
	sort.Strings(out)
	return out
}

// waitFor polls d until it holds want, for at most 10 s.
func waitFor(t *testing.T, d lister, want ...string) {
	t.Helper()
	sort.Strings(want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := addrs(d)
		if equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("directory holds %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func provider(port int, params map[string]string) *kernel.URL {
	p := map[string]string{kernel.KeySide: kernel.SideProvider, "timeout": "100"}
	for k, v := range params {
		p[k] = v
	}
	return kernel.NewURL("dubbo", "127.0.0.1", port, "org.example.Greeter", p)
}

func consumer(params map[string]string) *kernel.URL {
	p := map[string]string{kernel.KeySide: kernel.SideConsumer, kernel.KeyInterface: "org.example.Greeter", "timeout": "900"}
	for k, v := range params {
		p[k] = v
	}
	return kernel.NewURL("consumer", "127.0.0.1", 0, "org.example.Greeter", p)
}

// A reference subscribed in two registries holds the union of their lists;
// each registry's change replaces only its own part; the providers carry
// the consumer's settings over theirs.
func TestSubscribeUnionOfRegistries(t *testing.T) {
	ctx := context.Background()
	l, recs := open(t, 2)
	defer l.Close(ctx)
	rd := l.Directory(ctx, consumer(nil), nil, refer)
	sub, err := l.Subscribe(ctx, consumer(nil), rd)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	// Two providers that each use one of the registries.
	provA, provB := provider(20001, nil), provider(20002, nil)
	if err := recs["a"].Registry.Register(ctx, provA); err != nil {
		t.Fatal(err)
	}
	if err := recs["b"].Registry.Register(ctx, provB); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20001", "127.0.0.1:20002")
	for _, iv := range rd.Invokers() {
		if got := iv.URL().Param("timeout"); got != "900" {
			t.Errorf("provider %s timeout %q: the consumer's 900 should win (Dubbo's mergeUrl)", iv.URL().Address(), got)
		}
		if iv.URL().Param(kernel.KeySide) != kernel.SideProvider {
			t.Errorf("provider %s lost its side: %s", iv.URL().Address(), iv.URL())
		}
	}
	// One registry's change replaces its part only.
	if err := recs["a"].Registry.Unregister(ctx, provA); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20002")
	// The layer registers in every registry; both list it, the directory
	// holds it once; offline takes it out of both.
	if err := l.Register(ctx, "greeter", provider(20003, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20002", "127.0.0.1:20003")
	if err := l.SetOnline(ctx, map[string]bool{"greeter": true}, false, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20002")
	if err := l.SetOnline(ctx, map[string]bool{"greeter": true}, true, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20002", "127.0.0.1:20003")
	// A new directory takes over the subscription with what is known now.
	rd2 := l.Directory(ctx, consumer(map[string]string{"timeout": "50"}), nil, refer)
	sub.Retarget(rd2)
	if got := addrs(rd2); !equal(got, []string{"127.0.0.1:20002", "127.0.0.1:20003"}) {
		t.Fatalf("retargeted directory starts with %v, want both providers at once", got)
	}
	if err := recs["b"].Registry.Unregister(ctx, provB); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd2, "127.0.0.1:20003")
}

// A directory that keeps registries apart (zone-aware's) gets each
// registry's list in that registry's part only, and a retarget keeps them
// apart; inside a registry, a reference of several groups splits the list
// by group.
func TestSubscribePerRegistry(t *testing.T) {
	ctx := context.Background()
	l, recs := open(t, 2)
	defer l.Close(ctx)
	c := consumer(map[string]string{kernel.KeyGroup: "*"})
	newDir := func() (*cluster.RegistriesDirectory, map[string]*cluster.GroupDirectory) {
		groups := map[string]*cluster.GroupDirectory{}
		rd, err := cluster.NewRegistriesDirectory(c, quiet, []string{"a", "b"}, func(id string) (cluster.Part, error) {
			gd := cluster.NewGroupDirectory(c, quiet, func(g string) (cluster.Part, error) {
				d := l.Directory(ctx, c.WithParam(kernel.KeyGroup, g), nil, refer)
				return cluster.Part{Dir: d, Invoker: invoker{d.URL()}}, nil
			})
			groups[id] = gd
			return cluster.Part{Dir: gd, Invoker: invoker{c.WithParam("registry", id)}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rd, groups
	}
	rd, groups := newDir()
	sub, err := l.Subscribe(ctx, c, rd)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	if err := recs["a"].Registry.Register(ctx, provider(20001, map[string]string{kernel.KeyGroup: "g1"})); err != nil {
		t.Fatal(err)
	}
	if err := recs["a"].Registry.Register(ctx, provider(20002, map[string]string{kernel.KeyGroup: "g2"})); err != nil {
		t.Fatal(err)
	}
	if err := recs["b"].Registry.Register(ctx, provider(20003, map[string]string{kernel.KeyGroup: "g1"})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, groups["a"], "127.0.0.1:20001", "127.0.0.1:20002")
	waitFor(t, groups["b"], "127.0.0.1:20003")
	waitFor(t, rd, "127.0.0.1:20001", "127.0.0.1:20002", "127.0.0.1:20003")
	parts, _ := groups["a"].List(ctx, kernel.NewInvocation("m"))
	if len(parts) != 2 || parts[0].URL().Param(kernel.KeyGroup) != "g1" || parts[1].URL().Param(kernel.KeyGroup) != "g2" {
		t.Fatalf("registry a's groups: %v", parts)
	}
	for _, iv := range groups["a"].Invokers() {
		if g := iv.URL().Param(kernel.KeyGroup); g != "g1" && g != "g2" {
			t.Errorf("provider %s has group %q: it keeps its own, not the consumer's *", iv.URL().Address(), g)
		}
	}
	rd2, groups2 := newDir()
	sub.Retarget(rd2)
	if got := addrs(groups2["b"]); !equal(got, []string{"127.0.0.1:20003"}) {
		t.Fatalf("retargeted: registry b's part holds %v", got)
	}
	rd.Destroy()
}

// The order of a provider's life in its registries: registered after
// export; on stop every provider registration leaves first (newest first),
// then the consumers' registrations with their subscriptions, then the
// registries close. A service that says register=false is never
// registered; a consumer is registered with category consumers unless it
// says register=false.
func TestRegistrationOrder(t *testing.T) {
	ctx := context.Background()
	l, recs := open(t, 1)
	rec := recs["a"]
	if err := l.Register(ctx, "one", provider(20001, nil)); err != nil {
		t.Fatal(err)
	}
	if err := l.Register(ctx, "hidden", provider(20003, map[string]string{registry.KeyRegister: "false"})); err != nil {
		t.Fatal(err)
	}
	if err := l.Register(ctx, "two", provider(20002, nil)); err != nil {
		t.Fatal(err)
	}
	rd := l.Directory(ctx, consumer(nil), nil, refer)
	if _, err := l.Subscribe(ctx, consumer(nil), rd); err != nil {
		t.Fatal(err)
	}
	rdQuiet := l.Directory(ctx, consumer(nil), nil, refer)
	if _, err := l.Subscribe(ctx, consumer(map[string]string{registry.KeyRegister: "false"}), rdQuiet); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rd, "127.0.0.1:20001", "127.0.0.1:20002")
	for _, iv := range rd.Invokers() {
		if extension.IsConsumer(iv.URL()) {
			t.Fatalf("a consumer's registration reached a subscriber: %s", iv.URL())
		}
	}
	l.UnregisterAll(ctx)
	if err := l.SetOnline(ctx, map[string]bool{"one": true}, true, nil); err == nil {
		t.Fatal("SetOnline after UnregisterAll succeeded; the App has left its registries for good")
	}
	l.Close(ctx)
	want := []string{
		"register dubbo ", "register dubbo ", "register consumer consumers",
		"unregister dubbo ", "unregister dubbo ", "unregister consumer consumers",
	}
	if got := rec.log(); !equal(got, want) {
		t.Fatalf("registry calls:\n got %q\nwant %q", got, want)
	}
	if got := l.Registrations(); len(got) != 0 {
		t.Fatalf("registrations after stop: %v", got)
	}
	if err := l.SetOnline(ctx, map[string]bool{"nope": true}, false, nil); err == nil || errors.Is(err, registry.ErrNotRegistered) {
		// After stop the layer says it is stopping, not that nothing is
		// registered.
		t.Fatalf("SetOnline after Close: %v", err)
	}
}

// A service registered nowhere cannot be taken offline: the caller is told
// so rather than told it worked.
func TestSetOnlineUnknownService(t *testing.T) {
	ctx := context.Background()
	l, _ := open(t, 1)
	defer l.Close(ctx)
	if err := l.SetOnline(ctx, map[string]bool{"ghost": true}, false, nil); !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("SetOnline of an unregistered service: %v, want ErrNotRegistered", err)
	}
}

// A registry that cannot open fails Open with its id and address, and the
// ones opened before it are closed (no heartbeat goroutine is left:
// goleak).
func TestOpenFailureNamesTheRegistry(t *testing.T) {
	loader := kernel.NewLoader[extension.RegistryFactory]("registry", "embedded")
	loader.Register("embedded", func() (extension.RegistryFactory, error) { return embedded.Factory{Log: quiet}, nil }, nil)
	loader.Register("broken", func() (extension.RegistryFactory, error) {
		return factory(func(*kernel.URL) (extension.Registry, error) { return nil, errors.New("connection refused") }), nil
	}, nil)
	_, err := registry.Open(map[string]*kernel.URL{
		"a": kernel.NewURL("embedded", "", 0, "", map[string]string{embedded.KeyDir: t.TempDir()}),
		"b": kernel.NewURL("broken", "10.0.0.1", 1, "", nil),
	}, registry.Options{Log: quiet, Registries: loader})
	if err == nil || !contains(err.Error(), "registries.b", "broken://10.0.0.1:1", "connection refused") {
		t.Fatalf("Open: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
