package governance

import (
	"slices"
	"strings"
	"testing"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/kernel"
)

// join makes one push of several fixtures.
func join(t testing.TB, names ...string) []byte {
	var parts []string
	for _, n := range names {
		parts = append(parts, string(fixture(t, n)))
	}
	return []byte(strings.Join(parts, "\n---\n"))
}

// Java: VirtualServiceRuleTest.parserTest on VirtualServiceTest.yaml, read
// as weft reads a push (a VirtualService alone is no group).
func TestMeshRulesJavaVirtualServiceFixture(t *testing.T) {
	out, g, err := parseMeshDocuments("demo.MESHAPPRULE", fixture(t, "VirtualServiceTest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Notes) != 0 || len(g.VirtualServices) != 1 || len(g.DestinationRules) != 0 || g.App != "demo" {
		t.Fatalf("group %+v, notes %v", g, out.Notes)
	}
	vs := g.VirtualServices[0]
	if vs.Name != "demo-route" || !slices.Equal(vs.Hosts, []string{"demo"}) || len(vs.Routes) != 1 {
		t.Fatalf("vs %+v", vs)
	}
	r := vs.Routes[0]
	if r.Name != "" || len(r.Services) != 1 || r.Services[0].Regex.String() != "^(?:ccc)$" || len(r.Details) != 3 {
		t.Fatalf("route %+v", r)
	}
	for i, want := range []struct{ name, label, subset string }{
		{"xxx-project", "xxx", "isolation"}, {"testing-trunk", "testing-trunk", "testing-trunk"}, {"testing", "", "testing"},
	} {
		d := r.Details[i]
		if d.Name != want.name || d.Route[0].Destination.Host != "demo" || d.Route[0].Destination.Subset != want.subset {
			t.Errorf("routedetail[%d] %+v", i, d)
		}
		if want.label == "" {
			if d.Match != nil {
				t.Errorf("routedetail[%d] match %v, want none", i, d.Match)
			}
		} else if d.Match[0].SourceLabels[0] != (cluster.Label{Key: "trafficLabel", Value: want.label}) {
			t.Errorf("routedetail[%d] sourceLabels %v", i, d.Match[0].SourceLabels)
		}
	}
	// Alone, it is no group that routes: refused, naming what is missing.
	if _, err := ParseMeshRules("demo.MESHAPPRULE", fixture(t, "VirtualServiceTest.yaml")); err == nil ||
		!strings.Contains(err.Error(), "at least one VirtualService and one DestinationRule (got 1 and 0") {
		t.Fatalf("a VirtualService alone: %v", err)
	}
}

// Java: DestinationRuleTest.parserTest and parserMultiRuleTest.
func TestMeshRulesJavaDestinationRuleFixtures(t *testing.T) {
	_, g, err := parseMeshDocuments("demo.MESHAPPRULE", fixture(t, "DestinationRuleTest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dr := g.DestinationRules[0]
	if dr.Name != "demo-route" || dr.Host != "demo" || len(dr.Subsets) != 3 || dr.LoadBalancer != "ROUND_ROBIN" {
		t.Fatalf("dr %+v", dr)
	}
	want := []cluster.Subset{
		{Name: "isolation", Labels: []cluster.Label{{Key: "env-sign", Value: "xxx"}, {Key: "tag1", Value: "hello"}}},
		{Name: "testing-trunk", Labels: []cluster.Label{{Key: "env-sign", Value: "yyy"}}},
		{Name: "testing", Labels: []cluster.Label{{Key: "env-sign", Value: "zzz"}}},
	}
	for i, s := range dr.Subsets {
		if s.Name != want[i].Name || !slices.Equal(s.Labels, want[i].Labels) {
			t.Errorf("subset %d = %+v, want %+v", i, s, want[i])
		}
	}
	// DestinationRuleTest2.yaml: a DestinationRule and a VirtualService in
	// one push, a group that routes.
	r, err := ParseMeshRules("demo.MESHAPPRULE", fixture(t, "DestinationRuleTest2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Group.Valid() || len(r.Group.VirtualServices) != 1 || len(r.Group.DestinationRules) != 1 {
		t.Fatalf("group %+v", r.Group)
	}
	// And the two single fixtures as one push, either order.
	for _, names := range [][]string{{"DestinationRuleTest.yaml", "VirtualServiceTest.yaml"}, {"VirtualServiceTest.yaml", "DestinationRuleTest.yaml"}} {
		if r, err := ParseMeshRules("demo.MESHAPPRULE", join(t, names...)); err != nil || !r.Group.Valid() {
			t.Errorf("%v: %v", names, err)
		}
	}
}

// meshInvoker is Java's MeshRuleRouterTest.createInvoker: a provider of
// app1 (unless app says otherwise) with parameters.
func meshInvoker(app string, params ...string) kernel.Invoker {
	q := ""
	if app != "" {
		q = "?remote.application=" + app
	}
	u := kernel.MustParseURL("dubbo://localhost/DemoInterface" + q)
	if len(params) > 0 {
		m := map[string]string{}
		for i := 0; i+1 < len(params); i += 2 {
			m[params[i]] = params[i+1]
		}
		u = u.WithParams(m)
	}
	return &invoker{url: u}
}

// meshRouter parses the pushes of app1 (and more apps) into a router.
func meshRouter(t *testing.T, pushes map[string][]byte) *cluster.MeshRouter {
	t.Helper()
	var groups []*cluster.MeshRuleGroup
	for app, data := range pushes {
		r, err := ParseMeshRules(MeshRuleKey(app), data)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, r.Group)
	}
	return cluster.NewMeshRouter(cluster.MeshRulePriority, groups)
}

// Java: MeshRuleRouterTest.testRuleChange, at the router: rule1 (a
// DestinationRule) alone is no group; with rule2 it is; app1 and app2 both
// have rules, then app1's are cleared.
func TestMeshRulesJavaRuleChange(t *testing.T) {
	rule1 := fixture(t, "MeshRuleRouterTest-rule1.yaml")
	if _, err := ParseMeshRules("app1.MESHAPPRULE", rule1); err == nil {
		t.Fatal("rule1 alone: want an error (Java: no group)")
	}
	both := join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule2.yaml")
	if apps := meshRouter(t, map[string][]byte{"app1": both}).Apps(); !slices.Equal(apps, []string{"app1"}) {
		t.Fatalf("apps %v", apps)
	}
	if apps := meshRouter(t, map[string][]byte{"app1": both, "app2": both}).Apps(); !slices.Equal(apps, []string{"app1", "app2"}) {
		t.Fatalf("apps %v", apps)
	}
	if apps := meshRouter(t, map[string][]byte{"app2": both}).Apps(); !slices.Equal(apps, []string{"app2"}) {
		t.Fatalf("apps %v", apps)
	}
	// rule2's fallback {host, subset} binds to nothing, as in Java: noted.
	r, err := ParseMeshRules("app1.MESHAPPRULE", both)
	if err != nil {
		t.Fatal(err)
	}
	if fb := r.Group.VirtualServices[0].Routes[0].Details[1].Route[0].Destination.Fallback; fb != nil {
		t.Errorf("rule2's fallback {host, subset} bound to %+v, want nothing", fb)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "routedetail[1].route[0].destination.fallback: a fallback without destination binds to nothing") {
		t.Errorf("notes %q", r.Notes)
	}
	// rule4's fallback {destination: {...}} binds.
	r, err = ParseMeshRules("app1.MESHAPPRULE", join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	route := r.Group.VirtualServices[0].Routes[0].Details[1].Route
	if fb := route[0].Destination.Fallback; fb == nil || fb.Destination.Subset != "testing" || route[1].Weight != 10 || len(r.Notes) != 0 {
		t.Errorf("rule4: route %+v, notes %v", route, r.Notes)
	}
}

// Java: MeshRuleRouterTest.testRoute1 and testRoute2.
func TestMeshRulesJavaRoute(t *testing.T) {
	// testRoute1: without rules, every provider.
	plain := []kernel.Invoker{meshInvoker(""), meshInvoker("unknown"), meshInvoker("app1")}
	if got := cluster.NewMeshRouter(cluster.MeshRulePriority, nil).Route(plain, nil, nil); len(got) != 3 {
		t.Fatalf("no rules: %d providers", len(got))
	}

	isolation := meshInvoker("app1", "env-sign", "xxx", "tag1", "hello")
	testingTrunk := meshInvoker("app1", "env-sign", "yyy")
	testing_ := meshInvoker("app1", "env-sign", "zzz")
	invokers := []kernel.Invoker{isolation, testingTrunk, testing_}
	names := map[kernel.Invoker]string{isolation: "isolation", testingTrunk: "testingTrunk", testing_: "testing"}
	service := func(s string) *kernel.URL { return kernel.MustParseURL("consumer://localhost/" + s) }
	call := func(label string) *kernel.Invocation {
		inv := kernel.NewInvocation("m")
		if label != "" {
			inv.SetAttachment("trafficLabel", label)
		}
		return inv
	}
	route := func(r *cluster.MeshRouter, ivs []kernel.Invoker, svc, label string) string {
		var out []string
		for _, iv := range r.Route(ivs, service(svc), call(label)) {
			out = append(out, names[iv])
		}
		return strings.Join(out, ",")
	}
	all := "isolation,testingTrunk,testing"

	r := meshRouter(t, map[string][]byte{"app1": join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule2.yaml")})
	for _, c := range []struct{ svc, label, want string }{
		{"ccc", "xxx", "isolation"},
		{"ccc", "testing-trunk", "testingTrunk"},
		{"ccc", "", "testing"},
		{"aaa", "", all}, // "Empty protection after routed."
	} {
		if got := route(r, invokers, c.svc, c.label); got != c.want {
			t.Errorf("rule2, service %s, trafficLabel %q: %s, want %s", c.svc, c.label, got, c.want)
		}
	}

	r = meshRouter(t, map[string][]byte{"app1": join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule3.yaml")})
	for _, c := range []struct{ svc, label, want string }{
		{"ccc", "xxx", "isolation"},
		{"ccc", "testing-trunk", "testingTrunk"},
		{"ccc", "testing", "testing"},
		{"aaa", "testing", "testing"},
		{"aaa", "", all},
	} {
		if got := route(r, invokers, c.svc, c.label); got != c.want {
			t.Errorf("rule3, service %s, trafficLabel %q: %s, want %s", c.svc, c.label, got, c.want)
		}
	}

	// rule4: testing-trunk (weight 0, counted 1, falling back to testing)
	// and isolation (weight 10). Java asserts isolation > 10 x testing
	// counting testingTrunk as isolation; with Java's "<= 0" pick the
	// first destination takes 2 draws of 11.
	r = meshRouter(t, map[string][]byte{"app1": join(t, "MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule4.yaml")})
	counts := map[string]int{}
	const n = 11000
	for range n {
		counts[route(r, invokers, "aaa", "testing-trunk")]++
	}
	if counts["testing"]*10 >= counts["isolation"]+counts["testingTrunk"] || len(counts) != 2 {
		t.Errorf("rule4 split %v", counts)
	}
	if got := counts["testingTrunk"]; got < 2000-250 || got > 2000+250 {
		t.Errorf("rule4: testingTrunk took %d of %d calls, want about 2/11 (2000): Java's pick", got, n)
	}
	// isolation and testingTrunk gone from the call's list (not yet
	// from the router's view): testing, through the fallback.
	for range 1000 {
		if got := route(r, []kernel.Invoker{testing_}, "aaa", "testing-trunk"); got != "testing" {
			t.Fatalf("only testing left: %s", got)
		}
	}
	// A provider in no subset alone: empty protection.
	mock := meshInvoker("app1", "env-sign", "mock")
	names[mock] = "mock"
	if got := route(r, []kernel.Invoker{mock}, "aaa", "testing-trunk"); got != "mock" {
		t.Fatalf("only mock: %s", got)
	}
	if got := route(r, []kernel.Invoker{isolation, testingTrunk, testing_, mock}, "aaa", "testing-trunk"); got == all+",mock" {
		t.Fatalf("mock kept with a subset picked")
	}
}

// Weighted destinations 90/10 route 91/9 (Java's pick), an empty subset
// falls back down a chain, and a subset that is not defined anywhere
// falls back too.
func TestMeshRulesWeightsAndFallbacks(t *testing.T) {
	doc := `
kind: DestinationRule
metadata: {name: r}
spec:
  subsets:
    - {name: v1, labels: {version: v1}}
    - {name: v2, labels: {version: v2}}
    - {name: v3, labels: {version: v3}}
---
kind: VirtualService
metadata: {name: r}
spec:
  dubbo:
    - routedetail:
        - match: [{method: {name_match: {exact: split}}}]
          route:
            - {destination: {subset: v1}, weight: 90}
            - {destination: {subset: v2}, weight: 10}
        - match: [{method: {name_match: {exact: chain}}}]
          route:
            - destination:
                subset: nowhere
                fallback: {destination: {subset: v3, fallback: {destination: {subset: v2}}}}
`
	r := meshRouter(t, map[string][]byte{"app": []byte(doc)})
	v1 := meshInvoker("app", "version", "v1")
	v2 := meshInvoker("app", "version", "v2")
	v3 := meshInvoker("app", "version", "v3")
	ivs := []kernel.Invoker{v1, v2, v3}
	n1 := 0
	const n = 20000
	for range n {
		got := r.Route(ivs, nil, kernel.NewInvocation("split"))
		if len(got) != 1 {
			t.Fatalf("split: %d providers", len(got))
		}
		if got[0] == v1 {
			n1++
		}
	}
	if share := float64(n1) / n; share < 0.90 || share > 0.92 {
		t.Errorf("v1 took %.3f of the calls, want 0.91 (Java's (w+1)/total)", share)
	}
	for _, c := range []struct {
		ivs  []kernel.Invoker
		want kernel.Invoker
	}{{ivs, v3}, {[]kernel.Invoker{v1, v2}, v2}} {
		if got := r.Route(c.ivs, nil, kernel.NewInvocation("chain")); len(got) != 1 || got[0] != c.want {
			t.Errorf("chain over %d providers: %v", len(c.ivs), urlsOf(got))
		}
	}
	// The chain ends without v2 and v3: empty protection.
	if got := r.Route([]kernel.Invoker{v1}, nil, kernel.NewInvocation("chain")); len(got) != 1 || got[0] != v1 {
		t.Errorf("chain with v1 only: %v", urlsOf(got))
	}
}

func TestMeshRulesPushes(t *testing.T) {
	// No document, an empty one, other rule types only: no group, which
	// clears the application's rules.
	for _, doc := range []string{"", "# nothing\n", "---\n---\n", "kind: VirtualService\nmetadata: {name: a.b}\n"} {
		r, err := ParseMeshRules("app.MESHAPPRULE", []byte(doc))
		if err != nil || r.Group != nil {
			t.Errorf("%q: group %v, err %v", doc, r, err)
		}
	}
	r, _ := ParseMeshRules("app.MESHAPPRULE", []byte("kind: VirtualService\nmetadata: {name: a.xds}\n"))
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], `rule type "xds"`) {
		t.Errorf("notes %v", r.Notes)
	}
	// "a.standard" is standard (Java: the text after the first '.').
	r, err := ParseMeshRules("app.MESHAPPRULE", []byte(strings.ReplaceAll(string(fixture(t, "DestinationRuleTest2.yaml")), "demo-route", "demo.standard")))
	if err != nil || r.Group == nil {
		t.Errorf("name.standard: %v", err)
	}
}

func TestMeshRulesMalformed(t *testing.T) {
	base := "kind: DestinationRule\nmetadata: {name: r}\nspec: {subsets: [{name: s}]}\n---\n"
	vs := func(detail string) string {
		return base + "kind: VirtualService\nmetadata: {name: r}\nspec:\n  dubbo:\n    - routedetail:\n        - " + detail + "\n"
	}
	cases := []struct {
		name, doc, path, want string
	}{
		{"not a mapping", "[1]", "documents[0]", "a mapping {apiVersion, kind, metadata, spec}"},
		{"no metadata", "kind: VirtualService\n", "documents[0].metadata", "rule type comes from metadata.name"},
		{"no name", "kind: VirtualService\nmetadata: {x: y}\n", "documents[0].metadata.name", "a rule name"},
		{"unknown kind", "kind: VirtualSevice\nmetadata: {name: r}\n", "documents[0].kind", "VirtualService or DestinationRule"},
		{"bad YAML in 2nd", base + "kind: [\n", "documents[1]", "valid YAML"},
		{"subset without name", "kind: DestinationRule\nmetadata: {name: r}\nspec: {subsets: [{labels: {a: b}}]}\n", "documents[0].spec.subsets[0].name", "a subset name"},
		{"label not a string", "kind: DestinationRule\nmetadata: {name: r}\nspec: {subsets: [{name: s, labels: {a: [b]}}]}\n", "documents[0].spec.subsets[0].labels.a", "a string"},
		{"unknown lb", "kind: DestinationRule\nmetadata: {name: r}\nspec: {subsets: [{name: s}], trafficPolicy: {loadBalancer: {simple: FASTEST}}}\n",
			"documents[0].spec.trafficPolicy.loadBalancer.simple", "ROUND_ROBIN, LEAST_CONN, RANDOM or PASSTHROUGH"},
		{"no route", vs("{name: x}"), "documents[1].spec.dubbo[0].routedetail[0].route", "at least one destination"},
		{"route without destination", vs("{route: [{weight: 1}]}"), "documents[1].spec.dubbo[0].routedetail[0].route[0].destination", "a destination {host, subset}"},
		{"weight not a number", vs("{route: [{destination: {subset: s}, weight: lots}]}"), "documents[1].spec.dubbo[0].routedetail[0].route[0].weight", "a 32-bit integer"},
		{"bad regex", vs("{match: [{attachments: {dubboContext: {k: {regex: 'a(?=b)'}}}}], route: [{destination: {subset: s}}]}"),
			"documents[1].spec.dubbo[0].routedetail[0].match[0].attachments.dubboContext.k.regex", "RE2 syntax"},
		{"empty string match", vs("{match: [{method: {name_match: {}}}], route: [{destination: {subset: s}}]}"),
			"documents[1].spec.dubbo[0].routedetail[0].match[0].method.name_match", "one of exact, prefix"},
		{"negative index", vs("{match: [{method: {args: [{index: -1, bool_value: {exact: true}}]}}], route: [{destination: {subset: s}}]}"),
			"documents[1].spec.dubbo[0].routedetail[0].match[0].method.args[0].index", "an argument index of 0 or more"},
		{"num not a number", vs("{match: [{method: {args: [{num_value: {oneof: [{exact: ten}]}}]}}], route: [{destination: {subset: s}}]}"),
			"documents[1].spec.dubbo[0].routedetail[0].match[0].method.args[0].num_value.oneof[0].exact", "a number"},
		{"bool not a bool", vs("{match: [{method: {args: [{bool_value: {exact: maybe}}]}}], route: [{destination: {subset: s}}]}"),
			"documents[1].spec.dubbo[0].routedetail[0].match[0].method.args[0].bool_value.exact", "true or false"},
		{"services not a list", base + "kind: VirtualService\nmetadata: {name: r}\nspec: {dubbo: [{services: {exact: a}}]}\n", "documents[1].spec.dubbo[0].services", "a list"},
	}
	for _, c := range cases {
		_, err := ParseMeshRules("app.MESHAPPRULE", []byte(c.doc))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if re := ruleErr(t, err); re.Path != c.path || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"app.MESHAPPRULE"`) {
			t.Errorf("%s: %v (path %q, want %q)", c.name, err, re.Path, c.path)
		}
	}
	// A fallback chain through an alias does not end: bounded.
	loop := base + "kind: VirtualService\nmetadata: {name: r}\nspec:\n  dubbo:\n    - routedetail:\n        - route:\n            - destination: &d {subset: s, fallback: {destination: *d}}\n"
	if _, err := ParseMeshRules("app.MESHAPPRULE", []byte(loop)); err == nil || !strings.Contains(err.Error(), "fallback chain of at most") {
		t.Errorf("alias loop: %v", err)
	}
	// Billion laughs: a million route details from 8 KB, stopped by the
	// node budget.
	laugh := base + "d: &d {route: [{destination: {subset: s}}]}\nc: &c [" + strings.Repeat("*d,", 1000) + "]\nr: &r {routedetail: *c}\n" +
		"kind: VirtualService\nmetadata: {name: r}\nspec: {dubbo: [" + strings.Repeat("*r,", 1000) + "]}\n"
	if _, err := ParseMeshRules("app.MESHAPPRULE", []byte(laugh)); err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Errorf("laughs: %v", err)
	}
	// Too big.
	if _, err := ParseMeshRules("app.MESHAPPRULE", make([]byte, MaxRuleDocumentBytes+1)); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("too big: %v", err)
	}
}

// FuzzMeshRules parses a push and routes calls of several shapes with
// what it gives: neither may panic, errors stay short.
func FuzzMeshRules(f *testing.F) {
	for _, n := range []string{"VirtualServiceTest.yaml", "DestinationRuleTest.yaml", "DestinationRuleTest2.yaml",
		"MeshRuleRouterTest-rule1.yaml", "MeshRuleRouterTest-rule2.yaml", "MeshRuleRouterTest-rule3.yaml", "MeshRuleRouterTest-rule4.yaml"} {
		f.Add(fixture(f, n))
	}
	for _, pair := range [][2]string{{"rule1", "rule2"}, {"rule1", "rule3"}, {"rule1", "rule4"}} {
		f.Add(join(f, "MeshRuleRouterTest-"+pair[0]+".yaml", "MeshRuleRouterTest-"+pair[1]+".yaml"))
	}
	f.Add([]byte(`kind: DestinationRule
metadata: {name: r}
spec: {subsets: [{name: a, labels: {k: aa}}, {name: b}]}
---
kind: VirtualService
metadata: {name: r}
spec:
  dubbo:
    - services: [{prefix: S}]
      routedetail:
        - match: [{method: {name_match: {regex: 'm.*'}, argc: 2, argp: [{exact: java.lang.String}, {wildcard: '*'}],
                   args: [{index: 1, num_value: {oneof: [{range: {start: 0, end: 2}}, {exact: 1, mod: 2}]}}]},
                   sourceLabels: {application: shop}, attachments: {dubboContext: {k: {noempty: x}}, tracingContext: {t: {empty: x}}},
                   headers: {h: {exact: y}}}]
          route: [{destination: {subset: a, fallback: {destination: {subset: b}}}, weight: 3}, {destination: {subset: b}}]
`))
	providers := []kernel.Invoker{
		meshInvoker("app", "k", "aa"), meshInvoker("app"), meshInvoker("other", "k", "aa"), meshInvoker(""),
	}
	consumers := []*kernel.URL{nil, kernel.MustParseURL("consumer://10.1.0.1/S?application=shop"), kernel.MustParseURL("consumer://10.1.0.1/ccc")}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseMeshRules("app.MESHAPPRULE", data)
		if err != nil {
			if len(err.Error()) > 4096 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if r.Group == nil {
			return
		}
		router := cluster.NewMeshRouter(cluster.MeshRulePriority, []*cluster.MeshRuleGroup{r.Group})
		calls := []*kernel.Invocation{nil, kernel.NewInvocation("m", "x", 1), kernel.NewInvocation("$invoke", "m", []string{"int"}, []any{1})}
		calls[1].ParamTypes = "Ljava/lang/String;I"
		calls[1].SetAttachment("k", "v")
		calls[1].SetAttachment("trafficLabel", "xxx")
		for _, c := range consumers {
			for _, inv := range calls {
				got := router.Route(providers, c, inv)
				if len(got) == 0 || len(got) > len(providers) {
					t.Fatalf("routed to %d of %d providers", len(got), len(providers))
				}
				router.Route(providers[:1], c, inv)
				router.Route(nil, c, inv)
			}
		}
	})
}
