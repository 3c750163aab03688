package cluster

import (
	"context"
	"math"
	"regexp"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// The tests below port the assertions of Java Dubbo's
// dubbo-cluster/src/test/java/org/apache/dubbo/rpc/cluster/router/mesh/rule/virtualservice/
// match/*Test.java and DubboMatchRequestTest.java (apache/dubbo 3.3,
// 324c62550ab22ffa53bce15f219bbc1d67b8c4a3). ListBoolMatchTest has no
// counterpart: no rule field is a ListBoolMatch (bool_value is a BoolMatch).

func sp(s string) *string         { return &s }
func fp(f float64) *float64       { return &f }
func bp(b bool) *bool             { return &b }
func ip(i int) *int               { return &i }
func exact(s string) *StringMatch { return &StringMatch{Exact: &s} }

func TestMeshStringMatchJava(t *testing.T) {
	type in struct {
		s    string
		ok   bool
		want bool
	}
	cases := []struct {
		name string
		m    *StringMatch
		ins  []in
	}{
		{"exact", exact("qinliujie"), []in{{"qinliujie", true, true}, {"other", true, false}, {"", false, false}}},
		{"prefix", &StringMatch{Prefix: sp("org.apache.dubbo.rpc.cluster.router.mesh")}, []in{
			{"org.apache.dubbo.rpc.cluster.router.mesh.test", true, true}, {"com.alibaba.hsf", true, false}, {"", false, false}}},
		{"regex", &StringMatch{Regex: regexp.MustCompile(`^(?:org.apache.dubbo.rpc.cluster.router.mesh.*)$`)}, []in{
			{"org.apache.dubbo.rpc.cluster.router.mesh", true, true}, {"org.apache.dubbo.rpc.cluster.router.mesh.test", true, true},
			{"com.alibaba.hsf", true, false}, {"com.taobao", true, false}}},
		{"empty", &StringMatch{Empty: sp("empty")}, []in{{"com.alibaba.hsf", true, false}, {"", true, true}, {"", false, true}}},
		{"noempty", &StringMatch{NoEmpty: sp("noempty")}, []in{{"com.alibaba.hsf", true, true}, {"", true, false}, {"", false, false}}},
		// weft: precedence and absent input, Java's else-if chain.
		{"exact before prefix", &StringMatch{Exact: sp("a"), Prefix: sp("b")}, []in{{"a", true, true}, {"bc", true, false}}},
		{"absent falls through to empty", &StringMatch{Exact: sp("a"), Empty: sp("")}, []in{{"", false, true}, {"b", true, false}}},
		{"wildcard *", &StringMatch{Wildcard: sp("*")}, []in{{"x", true, true}, {"", false, false}}},
		{"wildcard literal", &StringMatch{Wildcard: sp("a*")}, []in{{"a*", true, true}, {"ab", true, false}}},
	}
	for _, c := range cases {
		for _, i := range c.ins {
			if got := c.m.Match(i.s, i.ok); got != i.want {
				t.Errorf("%s: Match(%q, %v) = %v, want %v", c.name, i.s, i.ok, got, i.want)
			}
		}
	}
}

func TestMeshBoolAndListMatchJava(t *testing.T) {
	// BoolMatchTest
	if m := (&BoolMatch{Exact: bp(true)}); !m.Match(true) || m.Match(false) {
		t.Error("BoolMatch exact true")
	}
	if m := (&BoolMatch{Exact: bp(false)}); m.Match(true) || !m.Match(false) {
		t.Error("BoolMatch exact false")
	}
	if (&BoolMatch{}).Match(true) {
		t.Error("BoolMatch without exact matched")
	}
	// ListStringMatchTest
	ls := &ListStringMatch{OneOf: []*StringMatch{exact("1"), exact("2")}}
	for s, want := range map[string]bool{"1": true, "2": true, "3": false} {
		if ls.Match(s, true) != want {
			t.Errorf("ListStringMatch(%q) != %v", s, want)
		}
	}
	// ListDoubleMatchTest
	ld := &ListDoubleMatch{OneOf: []*DoubleMatch{{Exact: fp(10)}, {Exact: fp(11)}}}
	for x, want := range map[float64]bool{10: true, 11: true, 12: false} {
		if ld.Match(x) != want {
			t.Errorf("ListDoubleMatch(%v) != %v", x, want)
		}
	}
}

func TestMeshDoubleMatchJava(t *testing.T) {
	cases := []struct {
		name string
		m    DoubleMatch
		in   map[float64]bool
	}{
		{"exactMatch", DoubleMatch{Exact: fp(10)}, map[float64]bool{10: true, 9: false}},
		{"rangeStartMatch", DoubleMatch{Range: &DoubleRangeMatch{Start: fp(10)}}, map[float64]bool{10: true, 9: false}},
		{"rangeEndMatch", DoubleMatch{Range: &DoubleRangeMatch{End: fp(10)}}, map[float64]bool{10: false, 9: true}},
		{"rangeStartEndMatch", DoubleMatch{Range: &DoubleRangeMatch{Start: fp(5), End: fp(10)}},
			map[float64]bool{5: true, 10: false, 4.9: false, 10.1: false, 6: true}},
		{"modMatch exact 3", DoubleMatch{Mod: fp(2), Exact: fp(3)}, map[float64]bool{3: false}},
		{"modMatch exact 1", DoubleMatch{Mod: fp(2), Exact: fp(1)}, map[float64]bool{1: true, 2: false, 3: true}},
		// weft: Java's Double semantics at the edges.
		{"mod of a negative keeps its sign", DoubleMatch{Mod: fp(2), Exact: fp(-1)}, map[float64]bool{-3: true, 3: false}},
		{"range without ends", DoubleMatch{Range: &DoubleRangeMatch{}}, map[float64]bool{0: false}},
		{"mod alone", DoubleMatch{Mod: fp(2)}, map[float64]bool{2: false}},
		{"NaN equals NaN", DoubleMatch{Exact: fp(math.NaN())}, map[float64]bool{math.NaN(): true, 0: false}},
		{"-0 is not 0", DoubleMatch{Exact: fp(0)}, map[float64]bool{math.Copysign(0, -1): false, 0: true}},
	}
	for _, c := range cases {
		for x, want := range c.in {
			if got := c.m.Match(x); got != want {
				t.Errorf("%s: Match(%v) = %v, want %v", c.name, x, got, want)
			}
		}
	}
}

// attach is an invocation with string attachments.
func attach(kv ...string) *kernel.Invocation {
	inv := kernel.NewInvocation("m")
	for i := 0; i+1 < len(kv); i += 2 {
		inv.SetAttachment(kv[i], kv[i+1])
	}
	return inv
}

// tracingFrom is Java's TracingContextProvider over a map.
func tracingFrom(m map[string]string) TracingContextProvider {
	return func(_ *kernel.Invocation, k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestMeshAttachmentMatchJava(t *testing.T) {
	// dubboContextMatch
	m := &DubboAttachmentMatch{DubboContext: []KeyMatch{{"name", exact("qinliujie")}, {"machineGroup", exact("test_host")}}}
	if !m.Match(attach("name", "qinliujie", "machineGroup", "test_host", "other", "other"), nil) {
		t.Error("dubboContext: all equal")
	}
	if m.Match(attach("name", "jack", "machineGroup", "test_host", "other", "other"), nil) {
		t.Error("dubboContext: name differs")
	}
	if m.Match(attach("name", "qinliujie", "machineGroup", "my_host", "other", "other"), nil) {
		t.Error("dubboContext: machineGroup differs")
	}
	// weft, as Java's getAttachment: a value that is not a string is absent.
	inv := kernel.NewInvocation("m")
	inv.SetAttachment("n", 5)
	if (&DubboAttachmentMatch{DubboContext: []KeyMatch{{"n", exact("5")}}}).Match(inv, nil) ||
		!(&DubboAttachmentMatch{DubboContext: []KeyMatch{{"n", &StringMatch{Empty: sp("")}}}}).Match(inv, nil) {
		t.Error("a non-string attachment should be absent")
	}

	// tracingContextMatch
	m = &DubboAttachmentMatch{TracingContext: []KeyMatch{{"name", exact("qinliujie")}, {"machineGroup", exact("test_host")}}}
	tc := func(kv ...string) []TracingContextProvider {
		mm := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			mm[kv[i]] = kv[i+1]
		}
		return []TracingContextProvider{tracingFrom(mm)}
	}
	if !m.Match(nil, tc("name", "qinliujie", "machineGroup", "test_host", "other", "other")) {
		t.Error("tracingContext: all equal")
	}
	if m.Match(nil, tc("name", "jack", "machineGroup", "test_host", "other", "other")) {
		t.Error("tracingContext: name differs")
	}
	if m.Match(nil, tc("name", "qinliujie", "machineGroup", "my_host", "other", "other")) {
		t.Error("tracingContext: machineGroup differs")
	}
	// weft's router has no provider, as Java 3.3 ships none: never.
	if m.Match(attach("name", "qinliujie", "machineGroup", "test_host"), nil) {
		t.Error("tracingContext without providers matched")
	}

	// contextMatch
	m = &DubboAttachmentMatch{TracingContext: []KeyMatch{{"name", exact("qinliujie")}}, DubboContext: []KeyMatch{{"dpath", exact("PRE")}}}
	good := tc("name", "qinliujie", "machineGroup", "test_host", "other", "other")
	bad := tc("name", "jack", "machineGroup", "test_host", "other", "other")
	none := tc("machineGroup", "test_host", "other", "other")
	for i, c := range []struct {
		inv  *kernel.Invocation
		tc   []TracingContextProvider
		want bool
	}{
		{attach("dpath", "PRE"), good, true},
		{attach("dpath", "PRE"), bad, false},
		{attach("dpath", "PRE-2"), good, false},
		{attach("dpath", "PRE-2"), bad, false},
		{attach("dpath", "PRE"), none, false},
		{attach(), good, false},
		{attach(), none, false},
	} {
		if got := m.Match(c.inv, c.tc); got != c.want {
			t.Errorf("contextMatch %d = %v, want %v", i, got, c.want)
		}
	}
}

func TestMeshMethodMatchJava(t *testing.T) {
	call := func(method, desc string, args ...any) *kernel.Invocation {
		inv := kernel.NewInvocation(method, args...)
		inv.ParamTypes = desc
		return inv
	}
	// nameMatch
	if !(&DubboMethodMatch{NameMatch: exact("sayHello")}).Match(call("sayHello", "")) {
		t.Error("nameMatch")
	}
	// argcMatch
	argc := &DubboMethodMatch{Argc: ip(1)}
	if argc.Match(call("sayHello", "")) || !argc.Match(call("sayHello", "", "1")) {
		t.Error("argcMatch")
	}
	// argpMatch: java.lang.Long by name, .* for the other.
	argp := &DubboMethodMatch{Argp: []*StringMatch{exact("java.lang.Long"), {Regex: regexp.MustCompile(`^(?:.*)$`)}}}
	if !argp.Match(call("sayHello", "Ljava/lang/Long;Ljava/lang/String;")) {
		t.Error("argp: Long, String")
	}
	if argp.Match(call("sayHello", "Ljava/lang/Long;Ljava/lang/String;Ljava/lang/String;")) {
		t.Error("argp: three parameters")
	}
	if argp.Match(call("sayHello", "")) {
		t.Error("argp: no parameters")
	}
	// weft: simple names, primitives, arrays and nested classes, as
	// Class.getName / getSimpleName give them.
	for _, c := range []struct {
		desc, name string
		want       bool
	}{
		{"Ljava/lang/Long;", "Long", true},
		{"J", "long", true},
		{"[I", "[I", true},
		{"[I", "int[]", true},
		{"[[Ljava/lang/String;", "[[Ljava.lang.String;", true},
		{"[[Ljava/lang/String;", "String[][]", true},
		{"Lcom/x/Outer$Inner;", "com.x.Outer$Inner", true},
		{"Lcom/x/Outer$Inner;", "Inner", true},
		{"Ljava/lang/Long;", "java/lang/Long", false},
		{"Ljava/lang/Long", "java.lang.Long", false}, // malformed
		{"Q", "Q", false},
	} {
		if got := (&DubboMethodMatch{Argp: []*StringMatch{exact(c.name)}}).Match(call("m", c.desc)); got != c.want {
			t.Errorf("argp %q against %q = %v, want %v", c.name, c.desc, got, c.want)
		}
	}

	// parametersMatch: index 0 num 10, index 1 str sayHello.
	pm := &DubboMethodMatch{Args: []*DubboMethodArg{
		{Index: 0, NumValue: &ListDoubleMatch{OneOf: []*DoubleMatch{{Exact: fp(10)}}}},
		{Index: 1, StrValue: &ListStringMatch{OneOf: []*StringMatch{exact("sayHello")}}},
	}}
	if !pm.Match(call("test", "ILjava/lang/String;", 10, "sayHello")) || pm.Match(call("test", "ILjava/lang/String;", 10, "sayHi")) {
		t.Error("parametersMatch: num and str")
	}
	pm.Args = append(pm.Args, &DubboMethodArg{Index: 2, BoolValue: &BoolMatch{Exact: bp(true)}})
	if !pm.Match(call("test", "ILjava/lang/String;Z", 10, "sayHello", true)) || pm.Match(call("test", "ILjava/lang/String;Z", 10, "sayHello", false)) {
		t.Error("parametersMatch: bool")
	}
	// weft: Java throws for an index past the arguments; weft does not match.
	if pm.Match(call("test", "ILjava/lang/String;", 10, "sayHello")) {
		t.Error("an index past the arguments matched")
	}
	// num_value reads numbers of any Go kind, and strings that are numbers
	// (Java: Double.valueOf(arg.toString())); others do not match.
	num := &DubboMethodArg{NumValue: &ListDoubleMatch{OneOf: []*DoubleMatch{{Exact: fp(10)}}}}
	for _, v := range []any{10, int8(10), int32(10), int64(10), uint16(10), float32(10), 10.0, "10", " 1e1 "} {
		if !num.Match(v) {
			t.Errorf("num_value 10 against %T %v", v, v)
		}
	}
	for _, v := range []any{"ten", true, nil, []int{10}} {
		if num.Match(v) {
			t.Errorf("num_value 10 matched %T %v", v, v)
		}
	}
	if (&DubboMethodArg{StrValue: &ListStringMatch{OneOf: []*StringMatch{exact("10")}}}).Match(10) {
		t.Error("str_value matched an int")
	}
	if (&DubboMethodArg{BoolValue: &BoolMatch{Exact: bp(true)}}).Match("true") {
		t.Error("bool_value matched a string")
	}
	if (&DubboMethodArg{}).Match("x") {
		t.Error("an argument match without a value matched")
	}
	// A generic call's name is its real method (RpcUtils.getMethodName);
	// its arguments stay the three of $invoke, as in Java.
	gen := call("$invoke", "", "sayHello", []string{"java.lang.String"}, []any{"x"})
	if !(&DubboMethodMatch{NameMatch: exact("sayHello"), Argc: ip(3)}).Match(gen) {
		t.Error("generic call")
	}
}

func TestMeshMatchRequestJava(t *testing.T) {
	m := &DubboMatchRequest{Method: &DubboMethodMatch{NameMatch: exact("sayHello")}}
	inv := kernel.NewInvocation("sayHello")
	none := kernel.MustParseURL("consumer://10.0.0.1/S")
	if !m.Match(inv, none, nil) {
		t.Error("method sayHello")
	}
	if m.Match(kernel.NewInvocation("satHi"), none, nil) {
		t.Error("method satHi")
	}
	// sourceLabels against the consumer's parameters.
	m.SourceLabels = []Label{{"key1", "value1"}, {"key2", "value2"}}
	in1 := kernel.MustParseURL("consumer://10.0.0.1/S?key1=value1&key2=value2&key3=value3")
	in2 := kernel.MustParseURL("consumer://10.0.0.1/S?key1=other&key2=value2&key3=value3")
	if !m.Match(inv, in1, nil) || m.Match(inv, in2, nil) {
		t.Error("sourceLabels")
	}
	// tracingContext
	m.Attachments = &DubboAttachmentMatch{TracingContext: []KeyMatch{{"name", exact("qinliujie")}}}
	tc1 := []TracingContextProvider{tracingFrom(map[string]string{"name": "qinliujie", "machineGroup": "test_host", "other": "other"})}
	tc2 := []TracingContextProvider{tracingFrom(map[string]string{"name": "jack", "machineGroup": "test_host", "other": "other"})}
	if !m.Match(inv, in1, tc1) || m.Match(inv, in1, tc2) {
		t.Error("tracingContext")
	}
	// dubbo context
	m.Attachments = &DubboAttachmentMatch{TracingContext: []KeyMatch{{"name", exact("qinliujie")}}, DubboContext: []KeyMatch{{"dpath", exact("PRE")}}}
	inv.SetAttachment("dpath", "PRE")
	if !m.Match(inv, in1, tc1) {
		t.Error("dubboContext PRE")
	}
	inv.SetAttachments(map[string]any{})
	if m.Match(inv, in1, tc1) {
		t.Error("dubboContext absent")
	}
	// weft: headers are read but not evaluated, as in Java.
	h := &DubboMatchRequest{Headers: []KeyMatch{{"x", exact("never")}}}
	if !h.Match(inv, in1, nil) {
		t.Error("headers were evaluated")
	}
	// A nil invocation (a router asked without a call) matches no method.
	if m.Match(nil, in1, tc1) {
		t.Error("nil invocation")
	}
}

// meshInvoker is a provider that is only its URL.
type meshInvoker struct{ url *kernel.URL }

func (i *meshInvoker) URL() *kernel.URL  { return i.url }
func (i *meshInvoker) IsAvailable() bool { return true }
func (i *meshInvoker) Destroy()          {}
func (i *meshInvoker) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, nil
}

// A router over three subsets of one application, plus a provider of an
// application without rules and one of none: routing allocates nothing
// when it keeps all, one slice when it narrows, and never computes a
// subset twice for the same URLs.
func TestMeshRouterMembershipAndAllocations(t *testing.T) {
	g := &MeshRuleGroup{App: "app1",
		DestinationRules: []*DestinationRule{{Subsets: []*Subset{
			{Name: "a", Labels: []Label{{"env", "a"}}}, {Name: "b", Labels: []Label{{"env", "b"}}}, {Name: "all"}}}},
		VirtualServices: []*VirtualService{{Routes: []*DubboRoute{{Details: []*DubboRouteDetail{
			{Match: []*DubboMatchRequest{{Method: &DubboMethodMatch{NameMatch: exact("toA")}}}, Route: []*DubboRouteDestination{{Destination: &DubboDestination{Subset: "a"}}}},
			{Match: []*DubboMatchRequest{{Method: &DubboMethodMatch{NameMatch: exact("toNone")}}}, Route: []*DubboRouteDestination{{Destination: &DubboDestination{Subset: "zzz"}}}},
			{Route: []*DubboRouteDestination{{Destination: &DubboDestination{Subset: "all"}}}},
		}}}}},
	}
	r := NewMeshRouter(MeshRulePriority, []*MeshRuleGroup{g, {App: "invalid"}})
	if apps := r.Apps(); len(apps) != 1 || apps[0] != "app1" {
		t.Fatalf("apps %v: an invalid group should be left out", apps)
	}
	ivs := []kernel.Invoker{
		&meshInvoker{kernel.MustParseURL("dubbo://10.0.0.1:1/S?remote.application=app1&env=a")},
		&meshInvoker{kernel.MustParseURL("dubbo://10.0.0.2:1/S?remote.application=app1&env=b")},
		&meshInvoker{kernel.MustParseURL("dubbo://10.0.0.3:1/S?remote.application=other")},
		&meshInvoker{kernel.MustParseURL("dubbo://10.0.0.4:1/S")},
	}
	consumer := kernel.MustParseURL("consumer://10.1.0.1/S")
	toA, all, toNone := kernel.NewInvocation("toA"), kernel.NewInvocation("x"), kernel.NewInvocation("toNone")
	if got := r.Route(ivs, consumer, toA); len(got) != 1 || got[0] != ivs[0] {
		t.Fatalf("toA: %d providers", len(got))
	}
	// "all" keeps app1's providers, drops the others (Java drops providers
	// of applications without a match).
	if got := r.Route(ivs, consumer, all); len(got) != 2 {
		t.Fatalf("all: %d providers, want app1's 2", len(got))
	}
	// No available subset: empty protection, everything.
	if got := r.Route(ivs, consumer, toNone); len(got) != 4 {
		t.Fatalf("toNone: %d providers, want all 4", len(got))
	}
	table := r.members.Load()
	if n := testing.AllocsPerRun(200, func() { r.Route(ivs, consumer, toA) }); n > 1 {
		t.Errorf("Route that narrows: %.1f allocations, want at most 1", n)
	}
	if n := testing.AllocsPerRun(200, func() { r.Route(ivs[:2], consumer, toNone) }); n > 0 {
		t.Errorf("Route that keeps all: %.1f allocations, want 0", n)
	}
	if r.members.Load() != table {
		t.Error("subset membership was recomputed for URLs already seen")
	}
}
