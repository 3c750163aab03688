package kernel_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

type ext interface{ Name() string }

type named struct{ name string }

func (n *named) Name() string { return n.name }

func newNamed(name string) kernel.Factory[ext] {
	return func() (ext, error) { return &named{name: name}, nil }
}

type testExt struct {
	name string
	act  *kernel.Activate
}

const (
	prov = kernel.GroupProvider
	cons = kernel.GroupConsumer
)

// activationSet is the extension set the activation cases run against.
var activationSet = []testExt{
	{"first", &kernel.Activate{Groups: []string{prov, cons}, Order: -10}},
	{"alpha", &kernel.Activate{Groups: []string{prov}}},
	{"beta", &kernel.Activate{Groups: []string{prov}}},
	{"tok", &kernel.Activate{Groups: []string{prov}, Order: 5}},
	{"token", &kernel.Activate{Groups: []string{prov}, Order: 5}},
	{"consumerOnly", &kernel.Activate{Groups: []string{cons}}},
	{"nogroup", &kernel.Activate{Order: 1}},
	{"exec", &kernel.Activate{Groups: []string{prov}, Keys: []string{"executes", "actives"}, Order: 3}},
	{"cache", &kernel.Activate{Groups: []string{prov, cons}, Keys: []string{"cache:lru"}, Order: 4}},
	{"plain", nil},
	{"manual", nil},
}

func allNames() []string {
	var n []string
	for _, e := range activationSet {
		n = append(n, e.name)
	}
	slices.Sort(n)
	return n
}

// registrationOrders returns the activation set in several orders: as
// written, reversed and shuffled with fixed seeds.
func registrationOrders() map[string][]testExt {
	orders := map[string][]testExt{
		"as written": slices.Clone(activationSet),
		"reversed":   slices.Clone(activationSet),
	}
	slices.Reverse(orders["reversed"])
	for seed := uint64(1); seed <= 3; seed++ {
		s := slices.Clone(activationSet)
		r := rand.New(rand.NewPCG(seed, seed*7919))
		r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		orders[fmt.Sprintf("shuffled %d", seed)] = s
	}
	return orders
}

func newActivationLoader(t *testing.T, exts []testExt) *kernel.Loader[ext] {
	t.Helper()
	l := kernel.NewLoader[ext]("filter", "")
	for _, e := range exts {
		if err := l.Register(e.name, newNamed(e.name), e.act); err != nil {
			t.Fatalf("Register(%q): %v", e.name, err)
		}
	}
	return l
}

func TestActivateNames(t *testing.T) {
	const base = "dubbo://127.0.0.1:20880/org.example.Greeter"
	tests := []struct {
		name  string
		query string
		group string
		want  []string
	}{
		// Groups.
		{"provider group", "", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"consumer group excludes provider-only", "", cons, []string{"first", "consumerOnly"}},
		{"empty group matches every group and none", "", "", []string{"first", "alpha", "beta", "consumerOnly", "nogroup", "tok", "token"}},
		{"unknown group", "", "other", []string{}},

		// Keys.
		{"key present", "executes=2", prov, []string{"first", "alpha", "beta", "exec", "tok", "token"}},
		{"second key present", "actives=1", prov, []string{"first", "alpha", "beta", "exec", "tok", "token"}},
		{"key present, group mismatch", "executes=2", cons, []string{"first", "consumerOnly"}},
		{"key empty", "executes=", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"key false", "executes=false", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"key 0", "executes=0", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"key null", "executes=null", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"key N/A", "executes=N%2FA", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"method-level key", "sayHello.executes=2", prov, []string{"first", "alpha", "beta", "exec", "tok", "token"}},
		{"method-level key false", "sayHello.executes=false", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"key is a prefix only", "executesx=2", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"k:v matches", "cache=lru", prov, []string{"first", "alpha", "beta", "cache", "tok", "token"}},
		{"k:v matches in consumer group", "cache=lru", cons, []string{"first", "consumerOnly", "cache"}},
		{"k:v other value", "cache=lfu", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"k:v truthy but other value", "cache=true", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"k:v method-level", "sayHello.cache=lru", prov, []string{"first", "alpha", "beta", "cache", "tok", "token"}},
		{"k:v key absent", "lru=cache", prov, []string{"first", "alpha", "beta", "tok", "token"}},

		// The user's list.
		{"default first", "service.filter=default,manual", prov, []string{"first", "alpha", "beta", "tok", "token", "manual"}},
		{"default in the middle", "service.filter=manual,default,plain", prov, []string{"manual", "first", "alpha", "beta", "tok", "token", "plain"}},
		{"default last", "service.filter=plain,manual,default", prov, []string{"plain", "manual", "first", "alpha", "beta", "tok", "token"}},
		{"default absent: user's names after, in user order", "service.filter=plain,manual", prov, []string{"first", "alpha", "beta", "tok", "token", "plain", "manual"}},
		{"default absent, other order", "service.filter=manual,plain", prov, []string{"first", "alpha", "beta", "tok", "token", "manual", "plain"}},
		{"spaces and empty entries", "service.filter=%20manual%20,,%20default", prov, []string{"manual", "first", "alpha", "beta", "tok", "token"}},
		{"remove one", "service.filter=-alpha", prov, []string{"first", "beta", "tok", "token"}},
		{"remove two and add one", "service.filter=-alpha,manual,-beta", prov, []string{"first", "tok", "token", "manual"}},
		{"remove default", "service.filter=-default", prov, []string{}},
		{"remove default keeps listed", "service.filter=-default,plain,manual", prov, []string{"plain", "manual"}},
		{"remove default keeps listed auto ext", "service.filter=beta,-default", prov, []string{"beta"}},
		{"remove default with default", "service.filter=manual,default,-default,plain", prov, []string{"manual", "plain"}},
		{"remove default also drops keyed", "executes=1&service.filter=-default", prov, []string{}},
		{"listed auto ext at user position (default after)", "service.filter=token,default", prov, []string{"token", "first", "alpha", "beta", "tok"}},
		{"listed auto ext at user position (default before)", "service.filter=default,first", prov, []string{"alpha", "beta", "tok", "token", "first"}},
		{"listed auto ext, no default", "service.filter=beta", prov, []string{"first", "alpha", "tok", "token", "beta"}},
		{"listed ext of another group", "service.filter=consumerOnly", prov, []string{"first", "alpha", "beta", "tok", "token", "consumerOnly"}},
		{"listed then removed", "service.filter=manual,-manual", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"removed then listed", "service.filter=-manual,manual,default", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"remove tok keeps token", "service.filter=-tok", prov, []string{"first", "alpha", "beta", "token"}},
		{"remove token keeps tok", "service.filter=-token", prov, []string{"first", "alpha", "beta", "tok"}},
		{"remove keyed ext", "executes=2&service.filter=-exec", prov, []string{"first", "alpha", "beta", "tok", "token"}},
		{"keyed ext listed moves", "executes=2&service.filter=exec,default", prov, []string{"exec", "first", "alpha", "beta", "tok", "token"}},
		{"other key's list is ignored", "reference.filter=-default", prov, []string{"first", "alpha", "beta", "tok", "token"}},
	}
	for order, exts := range registrationOrders() {
		l := newActivationLoader(t, exts)
		for _, tc := range tests {
			t.Run(order+"/"+tc.name, func(t *testing.T) {
				raw := base
				if tc.query != "" {
					raw += "?" + tc.query
				}
				u := kernel.MustParseURL(raw)
				got, err := l.ActivateNames(u, kernel.KeyServiceFilter, tc.group)
				if err != nil {
					t.Fatalf("ActivateNames(%q, %q): %v", raw, tc.group, err)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("ActivateNames(%q, %q) = %q, want %q", raw, tc.group, got, tc.want)
				}
				insts, err := l.Activate(u, kernel.KeyServiceFilter, tc.group)
				if err != nil {
					t.Fatalf("Activate: %v", err)
				}
				var instNames []string
				for _, x := range insts {
					instNames = append(instNames, x.Name())
				}
				if len(insts) != len(tc.want) || (len(insts) > 0 && !slices.Equal(instNames, tc.want)) {
					t.Fatalf("Activate names = %q, want %q", instNames, tc.want)
				}
				// Activate returns the same instances as Get.
				for i, x := range insts {
					y, err := l.Get(tc.want[i])
					if err != nil || x != y {
						t.Fatalf("Activate[%d] = %p, Get(%q) = %p, %v", i, x, tc.want[i], y, err)
					}
				}
			})
		}
	}
}

func TestActivateNamesUnknown(t *testing.T) {
	l := newActivationLoader(t, activationSet)
	known := allNames()
	tests := []struct {
		name  string
		list  string
		wantN string
	}{
		{"unknown name", "nosuch", "nosuch"},
		{"unknown name after default", "default,manual,nosuch", "nosuch"},
		{"unknown removal", "-nosuch", "nosuch"},
		{"unknown removal after valid", "manual,-nosuch", "nosuch"},
		{"prefix of a known name", "-to", "to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := kernel.MustParseURL("dubbo://h:1/svc").WithParam(kernel.KeyServiceFilter, tc.list)
			for _, call := range []struct {
				fn   string
				call func() error
			}{
				{"ActivateNames", func() error {
					names, err := l.ActivateNames(u, kernel.KeyServiceFilter, prov)
					if names != nil {
						t.Errorf("ActivateNames returned names %q with an error", names)
					}
					return err
				}},
				{"Activate", func() error {
					x, err := l.Activate(u, kernel.KeyServiceFilter, prov)
					if x != nil {
						t.Errorf("Activate returned %d instances with an error", len(x))
					}
					return err
				}},
				{"CheckNames", func() error { return l.CheckNames(tc.list) }},
			} {
				err := call.call()
				var ue *kernel.UnknownError
				if !errors.As(err, &ue) {
					t.Fatalf("%s(%q) error = %v (%T), want *kernel.UnknownError", call.fn, tc.list, err, err)
				}
				if ue.Name != tc.wantN || ue.Point != "filter" || !slices.Equal(ue.Known, known) {
					t.Errorf("%s: UnknownError = %+v, want name %q, point filter, known %q", call.fn, *ue, tc.wantN, known)
				}
				msg := err.Error()
				if !strings.Contains(msg, fmt.Sprintf("%q", tc.wantN)) || !strings.Contains(msg, strings.Join(known, ", ")) {
					t.Errorf("%s: message %q does not name %q and list %q", call.fn, msg, tc.wantN, known)
				}
			}
		})
	}
	if err := l.CheckNames("default,-default,manual,-tok, token"); err != nil {
		t.Errorf("CheckNames of a valid list: %v", err)
	}
	if err := l.CheckNames(""); err != nil {
		t.Errorf("CheckNames(\"\"): %v", err)
	}
}

// A point with nothing registered (no config center is built in) says so
// rather than listing nothing.
func TestLoaderGetUnknownNoneRegistered(t *testing.T) {
	_, err := kernel.NewLoader[ext]("config center", "").Get("apollo")
	if got, want := fmt.Sprint(err), `unknown config center extension "apollo" (none is registered)`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestLoaderGetUnknown(t *testing.T) {
	l := kernel.NewLoader[ext]("protocol", "dubbo")
	for _, n := range []string{"tri", "dubbo", "injvm"} {
		if err := l.Register(n, newNamed(n), nil); err != nil {
			t.Fatal(err)
		}
	}
	x, err := l.Get("grpc")
	var ue *kernel.UnknownError
	if !errors.As(err, &ue) {
		t.Fatalf("Get(grpc) = %v, %v; want *kernel.UnknownError", x, err)
	}
	if x != nil {
		t.Errorf("Get(grpc) returned instance %v", x)
	}
	want := []string{"dubbo", "injvm", "tri"}
	if ue.Name != "grpc" || ue.Point != "protocol" || !slices.Equal(ue.Known, want) {
		t.Errorf("UnknownError = %+v", *ue)
	}
	if got, wantMsg := err.Error(), `unknown protocol extension "grpc" (known: dubbo, injvm, tri)`; !strings.Contains(got, wantMsg) {
		t.Errorf("message = %q, want it to contain %q", got, wantMsg)
	}
	if !slices.Equal(l.Names(), want) {
		t.Errorf("Names() = %q, want %q", l.Names(), want)
	}
	names := l.Names()
	names[0] = "mutated"
	if l.Names()[0] != "dubbo" {
		t.Error("Names() returns the internal slice")
	}
	if !l.Has("tri") || l.Has("grpc") {
		t.Error("Has is wrong")
	}
	if l.Point() != "protocol" {
		t.Errorf("Point() = %q", l.Point())
	}
}

func TestLoaderRegisterErrors(t *testing.T) {
	l := kernel.NewLoader[ext]("filter", "")
	if err := l.Register("echo", newNamed("echo"), nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		reg  string
		f    kernel.Factory[ext]
	}{
		{"duplicate", "echo", newNamed("echo2")},
		{"empty", "", newNamed("x")},
		{"comma", "a,b", newNamed("x")},
		{"space", "a b", newNamed("x")},
		{"leading dash", "-x", newNamed("x")},
		{"default", "default", newNamed("x")},
		{"nil factory", "fine", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.Register(tc.reg, tc.f, nil); err == nil {
				t.Errorf("Register(%q) succeeded, want error", tc.reg)
			}
		})
	}
	if got := l.Names(); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("after failed registrations Names() = %q, want [echo]", got)
	}
	x, err := l.Get("echo")
	if err != nil || x.Name() != "echo" {
		t.Errorf("Get(echo) = %v, %v: the duplicate replaced the original", x, err)
	}
	// Valid names with dots and dashes inside are fine.
	for _, n := range []string{"a.b", "a-b", "x-"} {
		if err := l.Register(n, newNamed(n), nil); err != nil {
			t.Errorf("Register(%q): %v", n, err)
		}
	}
}

func TestLoadersShareNothing(t *testing.T) {
	a := kernel.NewLoader[ext]("filter", "")
	b := kernel.NewLoader[ext]("filter", "")
	if err := a.Register("x", newNamed("x"), &kernel.Activate{}); err != nil {
		t.Fatal(err)
	}
	if b.Has("x") || len(b.Names()) != 0 {
		t.Fatal("registration in one loader shows in the other")
	}
	if _, err := b.Get("x"); err == nil {
		t.Fatal("Get in the other loader succeeded")
	}
	u := kernel.MustParseURL("dubbo://h:1/svc")
	if names, _ := b.ActivateNames(u, kernel.KeyServiceFilter, ""); len(names) != 0 {
		t.Fatalf("other loader activates %q", names)
	}
	if err := b.Register("x", newNamed("x"), nil); err != nil {
		t.Fatalf("same name in a second loader: %v", err)
	}
	xa, err1 := a.Get("x")
	xb, err2 := b.Get("x")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if xa == xb {
		t.Error("two loaders returned the same instance")
	}
	if names, _ := b.ActivateNames(u, kernel.KeyServiceFilter, ""); len(names) != 0 {
		t.Errorf("b activates %q, but its x has no Activate", names)
	}
	if names, _ := a.ActivateNames(u, kernel.KeyServiceFilter, ""); !slices.Equal(names, []string{"x"}) {
		t.Errorf("a activates %q, want [x]", names)
	}
}

func TestLoaderGetConcurrentOnce(t *testing.T) {
	l := kernel.NewLoader[ext]("protocol", "")
	var calls atomic.Int32
	err := l.Register("slow", func() (ext, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return &named{name: "slow"}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	got := make([]ext, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.Get("slow")
		})
	}
	close(start)
	wg.Wait()
	if c := calls.Load(); c != 1 {
		t.Errorf("factory called %d times, want 1", c)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("goroutine %d got %p, goroutine 0 got %p", i, got[i], got[0])
		}
	}
	// Later calls return the same instance without calling the factory.
	if x, _ := l.Get("slow"); x != got[0] || calls.Load() != 1 {
		t.Error("later Get made a new instance")
	}
}

func TestLoaderFactoryError(t *testing.T) {
	l := kernel.NewLoader[ext]("registry", "")
	boom := errors.New("boom")
	var calls atomic.Int32
	if err := l.Register("bad", func() (ext, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return nil, boom
	}, &kernel.Activate{}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = l.Get("bad") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("caller %d: error %v, want it to wrap boom", i, err)
		}
		if !strings.Contains(err.Error(), `"bad"`) {
			t.Errorf("caller %d: error %q does not name the extension", i, err)
		}
	}
	if _, err := l.Get("bad"); !errors.Is(err, boom) {
		t.Errorf("later Get: %v", err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("factory called %d times, want 1", c)
	}
	// Activate reports it too.
	if _, err := l.Activate(kernel.MustParseURL("dubbo://h:1/s"), kernel.KeyServiceFilter, ""); !errors.Is(err, boom) {
		t.Errorf("Activate: %v, want boom", err)
	}
	// Close skips the failed extension.
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

type wrapped struct {
	inner ext
	by    string
}

func (w *wrapped) Name() string { return w.by + "(" + w.inner.Name() + ")" }

func wrapperNamed(name string, order int) kernel.Wrapper[ext] {
	return kernel.Wrapper[ext]{Name: name, Order: order, Wrap: func(n string, inner ext) (ext, error) {
		return &wrapped{inner: inner, by: name}, nil
	}}
}

func TestLoaderWrappers(t *testing.T) {
	tests := []struct {
		name     string
		wrappers []kernel.Wrapper[ext]
		want     string
	}{
		{"none", nil, "base"},
		{"one", []kernel.Wrapper[ext]{wrapperNamed("w1", 1)}, "w1(base)"},
		{"order 1 outermost, added first", []kernel.Wrapper[ext]{wrapperNamed("w1", 1), wrapperNamed("w2", 2)}, "w1(w2(base))"},
		{"order 1 outermost, added last", []kernel.Wrapper[ext]{wrapperNamed("w2", 2), wrapperNamed("w1", 1)}, "w1(w2(base))"},
		{"three, negative order", []kernel.Wrapper[ext]{wrapperNamed("b", 0), wrapperNamed("c", 5), wrapperNamed("a", -1)}, "a(b(c(base)))"},
		{"equal order by name", []kernel.Wrapper[ext]{wrapperNamed("y", 1), wrapperNamed("x", 1)}, "x(y(base))"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := kernel.NewLoader[ext]("protocol", "")
			if err := l.Register("base", newNamed("base"), nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wrappers {
				l.AddWrapper(w)
			}
			x, err := l.Get("base")
			if err != nil {
				t.Fatal(err)
			}
			if got := x.Name(); got != tc.want {
				t.Errorf("wrapped chain = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("wrapper receives the extension name", func(t *testing.T) {
		l := kernel.NewLoader[ext]("protocol", "")
		var seen []string
		l.AddWrapper(kernel.Wrapper[ext]{Name: "rec", Wrap: func(n string, inner ext) (ext, error) {
			seen = append(seen, n+"="+inner.Name())
			return inner, nil
		}})
		_ = l.Register("p", newNamed("pv"), nil)
		_, _ = l.Get("p")
		if !slices.Equal(seen, []string{"p=pv"}) {
			t.Errorf("wrapper saw %q", seen)
		}
	})

	t.Run("wrapper error", func(t *testing.T) {
		l := kernel.NewLoader[ext]("protocol", "")
		bad := errors.New("cannot wrap")
		l.AddWrapper(kernel.Wrapper[ext]{Name: "bad", Wrap: func(string, ext) (ext, error) { return nil, bad }})
		_ = l.Register("p", newNamed("p"), nil)
		if _, err := l.Get("p"); !errors.Is(err, bad) || !strings.Contains(err.Error(), `"bad"`) {
			t.Errorf("Get = %v, want the wrapper's error naming the wrapper", err)
		}
	})

	t.Run("wrapper added after creation does not rewrap", func(t *testing.T) {
		l := kernel.NewLoader[ext]("protocol", "")
		_ = l.Register("early", newNamed("early"), nil)
		_ = l.Register("late", newNamed("late"), nil)
		first, _ := l.Get("early")
		l.AddWrapper(wrapperNamed("w", 1))
		again, _ := l.Get("early")
		late, _ := l.Get("late")
		if first != again || again.Name() != "early" {
			t.Errorf("early = %q, want the unwrapped instance", again.Name())
		}
		if late.Name() != "w(late)" {
			t.Errorf("late = %q, want w(late)", late.Name())
		}
		// Registration after AddWrapper keeps the wrappers.
		_ = l.Register("later", newNamed("later"), nil)
		if x, _ := l.Get("later"); x.Name() != "w(later)" {
			t.Errorf("later = %q, want w(later)", x.Name())
		}
	})
}

func TestLoaderDefaultAndChoose(t *testing.T) {
	l := kernel.NewLoader[ext]("loadbalance", "random")
	for _, n := range []string{"random", "roundrobin", "leastactive"} {
		if err := l.Register(n, newNamed(n), nil); err != nil {
			t.Fatal(err)
		}
	}
	if l.DefaultName() != "random" {
		t.Errorf("DefaultName() = %q", l.DefaultName())
	}
	if d, err := l.Default(); err != nil || d.Name() != "random" {
		t.Errorf("Default() = %v, %v", d, err)
	}

	tests := []struct {
		name   string
		url    string
		method string
		want   string
	}{
		{"method level beats service level", "dubbo://h:1/s?loadbalance=roundrobin&sayHello.loadbalance=leastactive", "sayHello", "leastactive"},
		{"service level for another method", "dubbo://h:1/s?loadbalance=roundrobin&sayHello.loadbalance=leastactive", "sayBye", "roundrobin"},
		{"method level only", "dubbo://h:1/s?sayHello.loadbalance=leastactive", "sayHello", "leastactive"},
		{"method level of another method", "dubbo://h:1/s?sayHello.loadbalance=leastactive", "sayBye", "random"},
		{"default when unset", "dubbo://h:1/s", "sayHello", "random"},
		{"default when empty", "dubbo://h:1/s?loadbalance=", "sayHello", "random"},
		{"nil URL", "", "sayHello", "random"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var u *kernel.URL
			if tc.url != "" {
				u = kernel.MustParseURL(tc.url)
			}
			x, err := l.Choose(u, tc.method, kernel.KeyLoadBalance)
			if err != nil {
				t.Fatal(err)
			}
			if x.Name() != tc.want {
				t.Errorf("Choose = %q, want %q", x.Name(), tc.want)
			}
			y, _ := l.Get(tc.want)
			if x != y {
				t.Error("Choose and Get returned different instances")
			}
		})
	}

	var ue *kernel.UnknownError
	if _, err := l.Choose(kernel.MustParseURL("dubbo://h:1/s?loadbalance=nosuch"), "m", kernel.KeyLoadBalance); !errors.As(err, &ue) || ue.Name != "nosuch" {
		t.Errorf("Choose of an unknown name: %v", err)
	}

	noDefault := kernel.NewLoader[ext]("cluster", "")
	if _, err := noDefault.Default(); err == nil {
		t.Error("Default() without a default name succeeded")
	}
	missing := kernel.NewLoader[ext]("cluster", "failover")
	if _, err := missing.Default(); !errors.As(err, &ue) || ue.Name != "failover" {
		t.Errorf("Default() of an unregistered default: %v", err)
	}
}

type closer struct {
	name string
	log  *[]string
	mu   *sync.Mutex
	err  error
}

func (c *closer) Name() string { return c.name }
func (c *closer) Close() error {
	c.mu.Lock()
	*c.log = append(*c.log, "close "+c.name)
	c.mu.Unlock()
	return c.err
}

type destroyer struct {
	name string
	log  *[]string
	mu   *sync.Mutex
}

func (d *destroyer) Name() string { return d.name }
func (d *destroyer) Destroy() {
	d.mu.Lock()
	*d.log = append(*d.log, "destroy "+d.name)
	d.mu.Unlock()
}

func TestLoaderClose(t *testing.T) {
	var log []string
	var mu sync.Mutex
	l := kernel.NewLoader[ext]("registry", "")
	closeErr := errors.New("close failed")
	reg := func(name string, f kernel.Factory[ext]) {
		t.Helper()
		if err := l.Register(name, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	reg("a", func() (ext, error) { return &closer{name: "a", log: &log, mu: &mu}, nil })
	reg("b", func() (ext, error) { return &closer{name: "b", log: &log, mu: &mu}, nil }) // never created
	reg("c", func() (ext, error) { return &destroyer{name: "c", log: &log, mu: &mu}, nil })
	reg("d", func() (ext, error) { return &closer{name: "d", log: &log, mu: &mu, err: closeErr}, nil })
	reg("e", newNamed("e")) // neither Closer nor Destroy
	for _, n := range []string{"a", "c", "d", "e"} {
		if _, err := l.Get(n); err != nil {
			t.Fatal(err)
		}
	}
	err := l.Close()
	if !errors.Is(err, closeErr) || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("Close() = %v, want the error of d", err)
	}
	want := []string{"close d", "destroy c", "close a"} // reverse name order, created only
	if !slices.Equal(log, want) {
		t.Errorf("Close calls = %q, want %q", log, want)
	}

	empty := kernel.NewLoader[ext]("registry", "")
	reg2 := func() (ext, error) { return &closer{name: "z", log: &log, mu: &mu}, nil }
	_ = empty.Register("z", reg2, nil)
	log = nil
	if err := empty.Close(); err != nil || len(log) != 0 {
		t.Errorf("Close with nothing created: %v, calls %q", err, log)
	}
}

// TestLoaderConcurrentRegisterAndGet exercises the lock-free lookups under the
// race detector while registrations happen.
func TestLoaderConcurrentRegisterAndGet(t *testing.T) {
	l := kernel.NewLoader[ext]("filter", "")
	if err := l.Register("seed", newNamed("seed"), &kernel.Activate{}); err != nil {
		t.Fatal(err)
	}
	u := kernel.MustParseURL("dubbo://h:1/s?service.filter=seed")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				n := fmt.Sprintf("f%d_%d", i, j)
				if err := l.Register(n, newNamed(n), &kernel.Activate{Order: j}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 200 {
				if x, err := l.Get("seed"); err != nil || x.Name() != "seed" {
					t.Error("Get(seed)", x, err)
					return
				}
				names, err := l.ActivateNames(u, kernel.KeyServiceFilter, "")
				if err != nil || names[len(names)-1] != "seed" {
					t.Error("ActivateNames", names, err)
					return
				}
				_ = l.Names()
			}
		})
	}
	wg.Wait()
	if got := len(l.Names()); got != 201 {
		t.Errorf("%d names registered, want 201", got)
	}
}

// ptrCloser's zero value (a nil pointer) is an io.Closer too, so Close must
// tell created instances from entries never created by more than a type test.
type ptrCloser struct{ name string }

var ptrCloserLog struct {
	sync.Mutex
	calls []string
}

func (p *ptrCloser) Close() error {
	name := "<nil>"
	if p != nil {
		name = p.name
	}
	ptrCloserLog.Lock()
	ptrCloserLog.calls = append(ptrCloserLog.calls, name)
	ptrCloserLog.Unlock()
	return nil
}

func TestLoaderCloseOnlyCreated(t *testing.T) {
	ptrCloserLog.calls = nil
	l := kernel.NewLoader[*ptrCloser]("registry", "")
	boom := errors.New("boom")
	for _, n := range []string{"made", "unused"} {
		if err := l.Register(n, func() (*ptrCloser, error) { return &ptrCloser{name: n}, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Register("failed", func() (*ptrCloser, error) { return nil, boom }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("made"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("failed"); !errors.Is(err, boom) {
		t.Fatalf("Get(failed) = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ptrCloserLog.calls, []string{"made"}) {
		t.Errorf("Close called on %q, want only [made]", ptrCloserLog.calls)
	}
}
