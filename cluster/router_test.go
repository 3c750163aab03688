package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func urlsOf(ivs []kernel.Invoker) string {
	var out []string
	for _, iv := range ivs {
		out = append(out, iv.URL().Address())
	}
	return strings.Join(out, ",")
}

func fleet(specs ...string) []kernel.Invoker {
	out := make([]kernel.Invoker, len(specs))
	for i, s := range specs {
		out[i] = &fakeInvoker{url: kernel.MustParseURL("dubbo://" + s)}
	}
	return out
}

func TestConditionRouter(t *testing.T) {
	providers := fleet("10.0.0.1:20880/S", "10.0.0.2:20880/S", "10.0.1.1:20881/S?zone=b")
	consumer := kernel.MustParseURL("consumer://192.168.1.5/S?application=shop")
	cases := []struct {
		rule   string
		force  bool
		method string
		args   []any
		att    map[string]string
		want   string
	}{
		{"method = sayHello => host = 10.0.0.1", false, "sayHello", nil, nil, "10.0.0.1:20880"},
		{"method = sayHello => host = 10.0.0.1", false, "other", nil, nil, "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881"},
		{"=> host = 10.0.0.*", false, "m", nil, nil, "10.0.0.1:20880,10.0.0.2:20880"},
		{"=> host != 10.0.0.*", false, "m", nil, nil, "10.0.1.1:20881"},
		{"=> port = 20881", false, "m", nil, nil, "10.0.1.1:20881"},
		{"=> zone = b", false, "m", nil, nil, "10.0.1.1:20881"},
		{"host = 192.168.1.* => host = 10.0.0.2", false, "m", nil, nil, "10.0.0.2:20880"},
		{"host = 172.16.* => host = 10.0.0.2", false, "m", nil, nil, "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881"},
		{"application = shop & method = a,b => host = 10.0.0.1,10.0.1.1", false, "b", nil, nil, "10.0.0.1:20880,10.0.1.1:20881"},
		{"arguments[0] = vip => port = 20881", false, "m", []any{"vip"}, nil, "10.0.1.1:20881"},
		{"arguments[0] = vip => port = 20881", false, "m", []any{"plain"}, nil, "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881"},
		{"attachments[zone] = b => zone = b", false, "m", nil, map[string]string{"zone": "b"}, "10.0.1.1:20881"},
		// Nothing matches: ignored without force, empty with it.
		{"=> host = 1.2.3.4", false, "m", nil, nil, "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881"},
		{"=> host = 1.2.3.4", true, "m", nil, nil, ""},
		{"method = m =>", true, "m", nil, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.rule+"/"+c.method, func(t *testing.T) {
			rule, err := ParseConditionRule(c.rule, c.force, 0)
			if err != nil {
				t.Fatal(err)
			}
			inv := kernel.NewInvocation(c.method, c.args...)
			for k, v := range c.att {
				inv.SetAttachment(k, v)
			}
			if got := urlsOf(NewConditionRouter(rule).Route(providers, consumer, inv)); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestConditionRuleErrors(t *testing.T) {
	// Java reads "host = a" (no "=>") as a then side and "foo[1]" as a URL
	// parameter name; weft, stricter, refuses a key without a value.
	for _, ok := range []string{"host = a", "=> foo[1] = 2"} {
		if _, err := ParseConditionRule(ok, false, 0); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "method => host", "=> = x", "=> arguments[x] = 1", "=> host =", "=> a == 1", "=> &&"} {
		if _, err := ParseConditionRule(bad, false, 0); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Java's ConditionStateRouter syntax and matching, case by case.
func TestConditionSyntaxJava(t *testing.T) {
	providers := fleet("10.0.0.1:20880/S?region=hz&weight=10", "10.0.0.2:20880/S?region=sh&weight=50", "10.0.1.1:20881/S")
	consumer := kernel.MustParseURL("consumer://192.168.1.5/S?application=shop&region=sh")
	all := "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881"
	cases := []struct {
		rule   string
		force  bool
		method string
		args   []any
		att    map[string]string
		want   string
	}{
		{"host = 10.0.0.1", false, "m", nil, nil, "10.0.0.1:20880"},             // no "=>": a then side
		{"true => host = 10.0.0.2", false, "m", nil, nil, "10.0.0.2:20880"},     // "true": every call
		{"method = m => false", false, "m", nil, nil, ""},                       // "false": no provider
		{"method = m =>", false, "m", nil, nil, ""},                             // empty then, force or not
		{"methods = m => port = 20881", false, "m", nil, nil, "10.0.1.1:20881"}, // methods = method
		{"=> region = $region", false, "m", nil, nil, "10.0.0.2:20880"},         // the consumer's region
		{"=> region != hz", false, "m", nil, nil, "10.0.0.2:20880"},             // a missing key never holds, != too
		{"=> weight = 20~60", false, "m", nil, nil, "10.0.0.2:20880"},           // range
		{"=> weight = ~20", false, "m", nil, nil, "10.0.0.1:20880"},             // open range
		{"=> address = *:20881", false, "m", nil, nil, "10.0.1.1:20881"},        // glob suffix
		{"=> host = 10.0.*", false, "m", nil, nil, all},                         // glob prefix
		{"=> host = 10.*.0.1", false, "m", nil, nil, "10.0.0.1:20880"},          // prefix and suffix
		{"=> host = 10.*.*.1", false, "m", nil, nil, all},                       // Java: only the last '*' is a wildcard, so no
		{"=> host = 10.*.*.1", true, "m", nil, nil, ""},                         // provider matches: all without force, none with
		{"consumer.host = 192.168.* => provider.port = 20881", false, "m", nil, nil, "10.0.1.1:20881"},
		{"host = 192.168.1.5 & application = shop => region = hz", false, "m", nil, nil, "10.0.0.1:20880"},
		{"host = 192.168.1.5 application = other => region = hz", false, "m", nil, nil, all}, // a space joins too
		{"method = a,b,m & method != m => region = hz", false, "m", nil, nil, all},           // mismatch first
		{"arguments[1] = 7 => region = hz", false, "m", []any{"x", 7}, nil, "10.0.0.1:20880"},
		{"arguments[2] = 7 => region = hz", false, "m", []any{"x", 7}, nil, all},
		{"arguments[0] = * => region = hz", false, "m", nil, nil, "10.0.0.1:20880"}, // Java's not-found marker matches '*'
		{"attachments[zone] = b => region = sh", false, "m", nil, map[string]string{"zone": "b"}, "10.0.0.2:20880"},
		{"attachments[zone] != b => region = sh", false, "m", nil, nil, all}, // absent attachment: no match
		{"method = sayHello => region = sh", false, "$invoke", []any{"sayHello"}, nil, "10.0.0.2:20880"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			rule, err := ParseConditionRule(c.rule, c.force, 0)
			if err != nil {
				t.Fatal(err)
			}
			inv := kernel.NewInvocation(c.method, c.args...)
			for k, v := range c.att {
				inv.SetAttachment(k, v)
			}
			if got := urlsOf(NewConditionRouter(rule).Route(providers, consumer, inv)); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestTagRouter(t *testing.T) {
	providers := fleet("a:1/S", "b:1/S?dubbo.tag=gray", "c:1/S?dubbo.tag=gray", "d:1/S?dubbo.tag=blue")
	r := NewTagRouter(0)
	call := func(tag, force string) string {
		inv := kernel.NewInvocation("m")
		if tag != "" {
			inv.SetAttachment(KeyTag, tag)
		}
		if force != "" {
			inv.SetAttachment(KeyForceTag, force)
		}
		return urlsOf(r.Route(providers, nil, inv))
	}
	for _, c := range []struct{ tag, force, want string }{
		{"", "", "a:1"},
		{"gray", "", "b:1,c:1"},
		{"blue", "", "d:1"},
		{"red", "", "a:1"},
		{"red", "true", ""},
	} {
		if got := call(c.tag, c.force); got != c.want {
			t.Errorf("tag %q force %q: %q, want %q", c.tag, c.force, got, c.want)
		}
	}
	plain := fleet("a:1/S", "b:1/S")
	inv := kernel.NewInvocation("m")
	if a := testing.AllocsPerRun(100, func() { r.Route(plain, nil, inv) }); a != 0 {
		t.Fatalf("untagged routing allocates %v", a)
	}
}

// A tag rule moves tags by address, with Java's TagStateRouter semantics: a
// tag the rule sets is the rule's providers only; a tag it does not set is
// looked up in providers' own dubbo.tag; an untagged call avoids both; the
// rule's force forbids fallback for the tags it sets.
func TestTagRuleRouter(t *testing.T) {
	providers := fleet("a:1/S", "b:1/S?dubbo.tag=gray", "c:1/S?dubbo.tag=gray", "d:1/S?dubbo.tag=blue")
	f := TagRouterFactory{}
	route := func(r extension.Router, tag string) string {
		inv := kernel.NewInvocation("m")
		if tag != "" {
			inv.SetAttachment(KeyTag, tag)
		}
		return urlsOf(r.Route(providers, nil, inv))
	}
	r, err := f.GetRouter(kernel.NewURL("tag", "0.0.0.0", 0, "S", map[string]string{"tags": "gray=a:1; canary = d:1,x:9"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tag, want string }{
		{"", ""},          // a is gray now, b and c keep gray, d is canary: no untagged provider
		{"gray", "a:1"},   // the rule sets gray: its providers only
		{"canary", "d:1"}, // d moved from blue
		{"blue", "d:1"},   // the rule does not set blue: d's own tag
		{"red", ""},       // fallback: neither named by the rule nor tagged: none
	} {
		if got := route(r, c.tag); got != c.want {
			t.Errorf("tag %q: %q, want %q", c.tag, got, c.want)
		}
	}
	strict, err := f.GetRouter(kernel.NewURL("tag", "0.0.0.0", 0, "S", map[string]string{"tags": "gray=x:1", "force": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := route(strict, "gray"); got != "" {
		t.Errorf("forced rule, its tag's providers gone: %q, want none", got)
	}
	if got := route(strict, "red"); got != "a:1" {
		t.Errorf("forced rule, a tag it does not set: %q, want the untagged a:1", got)
	}
	loose, _ := f.GetRouter(kernel.NewURL("tag", "0.0.0.0", 0, "S", map[string]string{"tags": "gray=x:1"}))
	if got := route(loose, "gray"); got != "a:1" {
		t.Errorf("rule without force, its tag's providers gone: %q, want the fallback a:1", got)
	}
	for _, bad := range []string{"gray", "=a:1", "gray=1.2.3.4:x", "gray=1.2.3.4/99"} {
		if _, err := f.GetRouter(kernel.NewURL("tag", "0.0.0.0", 0, "S", map[string]string{"tags": bad})); err == nil {
			t.Errorf("tags %q accepted", bad)
		}
	}
}

type destroyCounter struct {
	fakeInvoker
	destroyed int
}

func (d *destroyCounter) Destroy() { d.destroyed++ }

func TestRegistryDirectoryNotify(t *testing.T) {
	referred := map[string]*destroyCounter{}
	refer := func(u *kernel.URL) (kernel.Invoker, error) {
		if u.Host == "bad" {
			return nil, fmt.Errorf("cannot connect")
		}
		d := &destroyCounter{fakeInvoker: fakeInvoker{url: u}}
		referred[u.String()] = d
		return d, nil
	}
	dir := NewRegistryDirectory(kernel.MustParseURL("consumer://h/S"), refer, quiet)
	a, b, c := kernel.MustParseURL("dubbo://a:1/S"), kernel.MustParseURL("dubbo://b:1/S"), kernel.MustParseURL("dubbo://c:1/S")
	dir.Notify([]*kernel.URL{a, b})
	first := dir.Invokers()
	if urlsOf(first) != "a:1,b:1" {
		t.Fatalf("after first push: %s", urlsOf(first))
	}
	dir.Notify([]*kernel.URL{b, c, kernel.MustParseURL("dubbo://bad:1/S")})
	if got := urlsOf(dir.Invokers()); got != "b:1,c:1" {
		t.Fatalf("after second push: %s", got)
	}
	if dir.Invokers()[0] != first[1] {
		t.Fatal("the invoker of b, which stayed, was not reused")
	}
	if referred[a.String()].destroyed != 1 || referred[b.String()].destroyed != 0 {
		t.Fatal("a left but was not destroyed, or b was")
	}
	dir.Notify(nil)
	if got := urlsOf(dir.Invokers()); got != "b:1,c:1" {
		t.Fatalf("an empty push emptied the list: %q", got)
	}
	unprotected := NewRegistryDirectory(kernel.MustParseURL("consumer://h/S?empty.protection=false"), refer, quiet)
	unprotected.Notify([]*kernel.URL{a})
	unprotected.Notify(nil)
	if len(unprotected.Invokers()) != 0 {
		t.Fatal("empty.protection=false kept the list")
	}
	dir.Destroy()
	if referred[b.String()].destroyed != 1 || referred[c.String()].destroyed != 1 {
		t.Fatal("Destroy left invokers alive")
	}
}

// swapping is a provider whose first availability check is where a
// registry replaces every provider (so it is destroyed by then), as a
// call may see it under a priority failover.
type swapping struct {
	fakeInvoker
	once      *sync.Once
	swap      func()
	destroyed atomic.Bool
}

func (s *swapping) IsAvailable() bool {
	s.once.Do(s.swap)
	return !s.destroyed.Load()
}
func (s *swapping) Destroy() { s.destroyed.Store(true) }

// TestRegistryDirectoryListLooksAgainAfterASwap: a call that loaded the
// provider list just before a notification replaced all of it gets the new
// providers, not an empty list.
func TestRegistryDirectoryListLooksAgainAfterASwap(t *testing.T) {
	var dir *RegistryDirectory
	once := &sync.Once{}
	next := []*kernel.URL{kernel.MustParseURL("dubbo://c:1/S")}
	refer := func(u *kernel.URL) (kernel.Invoker, error) {
		return &swapping{fakeInvoker: fakeInvoker{url: u}, once: once, swap: func() { dir.Notify(next) }}, nil
	}
	dir = NewRegistryDirectory(kernel.MustParseURL("consumer://h/S"), refer, quiet)
	dir.Notify([]*kernel.URL{kernel.MustParseURL("dubbo://a:1/S"), kernel.MustParseURL("dubbo://b:1/S")})
	list, err := dir.List(context.Background(), kernel.NewInvocation("m"))
	if err != nil || urlsOf(list) != "c:1" {
		t.Fatalf("List after a swap under it: %s, %v; want the new provider c:1", urlsOf(list), err)
	}
}
