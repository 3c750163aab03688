package governance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/kernel"
)

// The documents under testdata/dubbo are Apache Dubbo's own test fixtures,
// copied verbatim from apache/dubbo at 324c62550ab22ffa53bce15f219bbc1d67b8c4a3,
// dubbo-cluster/src/test/resources/*.yml and *.yaml; MeshRuleRouterTest-ruleN.yaml
// are the strings rule1..rule4 of MeshRuleRouterTest.java there, unescaped,
// under the Java file's license header. Inline documents marked "Java:"
// are copied from the named Java test.

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dubbo", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// documents splits a multi-document fixture (SnakeYAML's load, like weft's
// parsers, reads one document).
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, part := range strings.Split(string(b), "\n---\n")[1:] {
		out = append(out, []byte("---\n"+part))
	}
	return out
}

// invoker is a provider that is only its URL: these tests route, they
// do not call.
type invoker struct{ url *kernel.URL }

func (i *invoker) URL() *kernel.URL  { return i.url }
func (i *invoker) IsAvailable() bool { return true }
func (i *invoker) Destroy()          {}
func (i *invoker) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	panic("a routing test called a provider")
}

// fleet is providers at "host:port/path?query" each.
func fleet(specs ...string) []kernel.Invoker {
	out := make([]kernel.Invoker, len(specs))
	for i, s := range specs {
		out[i] = &invoker{url: kernel.MustParseURL("dubbo://" + s)}
	}
	return out
}

// urlsOf is the providers' addresses, comma-separated, in order.
func urlsOf(ivs []kernel.Invoker) string {
	var out []string
	for _, iv := range ivs {
		out = append(out, iv.URL().Address())
	}
	return strings.Join(out, ",")
}

func ruleErr(t *testing.T, err error) *RuleError {
	t.Helper()
	var re *RuleError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RuleError", err, err)
	}
	return re
}

func TestRuleKeys(t *testing.T) {
	for _, c := range []struct{ iface, version, group, want string }{
		{"org.example.Greeter", "", "", "org.example.Greeter::"},
		{"org.example.Greeter", "1.0.0", "", "org.example.Greeter:1.0.0:"},
		{"org.example.Greeter", "", "g", "org.example.Greeter::g"},
		{"org.apache.dubbo.quickstart.Greeter", "1.0.0", "demo", "org.apache.dubbo.quickstart.Greeter:1.0.0:demo"},
	} {
		if got := RuleKey(c.iface, c.version, c.group); got != c.want {
			t.Errorf("RuleKey(%q,%q,%q) = %q, want %q", c.iface, c.version, c.group, got, c.want)
		}
	}
	u := kernel.MustParseURL("consumer://1.2.3.4/org.example.Greeter?version=2&group=blue")
	if got := RuleKeyOf(u); got != "org.example.Greeter:2:blue" {
		t.Errorf("RuleKeyOf = %q", got)
	}
	if ConditionRouterKey("shop") != "shop.condition-router" || TagRouterKey("shop") != "shop.tag-router" ||
		ConfiguratorsKey("a:b:c") != "a:b:c.configurators" || GovernanceGroup != "dubbo" {
		t.Error("suffixes or group are not Dubbo's")
	}
}

func TestConditionRulesDefaults(t *testing.T) {
	c, err := ParseConditionRules("", []byte("conditions: ['=> host = 1.1.1.1']"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != RuleVersionV27 || c.Scope != "" || !c.Enabled || c.Force || !c.Runtime || c.Priority != 0 || len(c.Rules) != 1 {
		t.Fatalf("defaults: %+v", c)
	}
	if r := c.Rules[0]; !r.Enabled || r.Force {
		t.Fatalf("rule defaults: %+v", r)
	}
}

// Java: dubbo-cluster/src/test/resources/ConditionRule.yml, three documents.
func TestConditionRulesJavaFixture(t *testing.T) {
	docs := documents(fixture(t, "ConditionRule.yml"))
	if len(docs) != 3 {
		t.Fatalf("%d documents", len(docs))
	}
	providers := fleet("30.5.120.16:20880/org.apache.dubbo.demo.DemoService", "30.5.120.16:20881/org.apache.dubbo.demo.DemoService",
		"30.5.120.17:20880/org.apache.dubbo.demo.DemoService")
	consumer := kernel.MustParseURL("consumer://30.5.121.1/org.apache.dubbo.demo.DemoService?interface=org.apache.dubbo.demo.DemoService&application=demo-consumer")
	route := func(c *ConditionRules, method string) string {
		return urlsOf(c.Router(AppConditionRouterPriority).Route(providers, consumer, kernel.NewInvocation(method)))
	}
	app, err := ParseConditionRules("demo-consumer.condition-router", docs[0])
	if err != nil {
		t.Fatal(err)
	}
	if app.Scope != ScopeApplication || app.Key != "demo-consumer" || !app.Force || app.Runtime || !app.Enabled || app.Priority != 1 {
		t.Fatalf("header: %+v", app)
	}
	for _, c := range []struct{ method, want string }{
		{"sayHello", "30.5.120.16:20880,30.5.120.16:20881,30.5.120.17:20880"}, // no rule matches the call
		{"other", "30.5.120.16:20880"},
		{"routeMethod1", ""}, // first rule narrows, the second's empty then gives none
	} {
		if got := route(app, c.method); got != c.want {
			t.Errorf("app rule, %s: %q, want %q", c.method, got, c.want)
		}
	}
	iface, err := ParseConditionRules("demo-consumer.condition-router", docs[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := route(iface, "routeMethod1"); got != "30.5.120.16:20880" {
		t.Errorf("interface rule: %q", got)
	}
	// The third document is scope service: under an application's key it is
	// refused, under a service key it parses.
	_, err = ParseConditionRules("demo-consumer.condition-router", docs[2])
	if re := ruleErr(t, err); re.Path != "scope" || !strings.Contains(re.Want, "application") {
		t.Fatalf("scope check: %v", err)
	}
	svc, err := ParseConditionRules(ConditionRouterKey(RuleKey("org.apache.dubbo.demo.DemoService", "", "")), docs[2])
	if err != nil {
		t.Fatal(err)
	}
	if got := route(svc, "x"); got != "" {
		t.Errorf("service rule, method!=sayHello =>: %q, want none", got)
	}
	if got := route(svc, "sayHello"); got != "30.5.120.16:20880,30.5.120.16:20881,30.5.120.17:20880" {
		t.Errorf("service rule, sayHello: %q", got)
	}
}

// The rule of apache/dubbo-go#3656, verbatim: dubbo-go v3.0 read enabled as
// force and force as enabled, so this rule was skipped. Java reads each as
// itself.
const dubboGo3656 = `configVersion: v3.0
priority: 1
enabled: true
force: false
runtime: true
key: org.apache.dubbo.quickstart.Greeter:1.0.0:demo
scope: service
conditions:
  - method=SayHello => application=router-rule-e2e-condition-provider-hangzhou
`

func TestConditionRulesEnabledForceNotSwapped(t *testing.T) {
	providers := fleet("10.0.0.1:1/G?application=router-rule-e2e-condition-provider-hangzhou", "10.0.0.2:1/G?application=router-rule-e2e-condition-provider-beijing")
	consumer := kernel.MustParseURL("consumer://10.1.0.1/org.apache.dubbo.quickstart.Greeter?version=1.0.0&group=demo")
	key := ConditionRouterKey(RuleKeyOf(consumer))
	for _, c := range []struct {
		enabled, force string
		method, want   string
	}{
		{"true", "false", "SayHello", "10.0.0.1:1"},
		{"true", "false", "Other", "10.0.0.1:1,10.0.0.2:1"},
		{"false", "true", "SayHello", "10.0.0.1:1,10.0.0.2:1"}, // disabled: routes nothing, force or not
	} {
		doc := strings.Replace(strings.Replace(dubboGo3656, "enabled: true", "enabled: "+c.enabled, 1), "force: false", "force: "+c.force, 1)
		rules, err := ParseConditionRules(key, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if rules.Enabled != (c.enabled == "true") || rules.Force != (c.force == "true") {
			t.Fatalf("enabled %s force %s read as %v %v", c.enabled, c.force, rules.Enabled, rules.Force)
		}
		got := urlsOf(rules.Router(ServiceConditionRouterPriority).Route(providers, consumer, kernel.NewInvocation(c.method)))
		if got != c.want {
			t.Errorf("enabled %s force %s %s: %q, want %q", c.enabled, c.force, c.method, got, c.want)
		}
	}
	// force: a then side nobody matches keeps the list without force and
	// empties it with force.
	for force, want := range map[string]string{"false": "10.0.0.1:1,10.0.0.2:1", "true": ""} {
		doc := strings.Replace(strings.Replace(dubboGo3656, "hangzhou", "shanghai", 1), "force: false", "force: "+force, 1)
		rules, err := ParseConditionRules(key, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := urlsOf(rules.Router(0).Route(providers, consumer, kernel.NewInvocation("SayHello"))); got != want {
			t.Errorf("force %s, no provider matches: %q, want %q", force, got, want)
		}
	}
}

func TestConditionRulesMalformed(t *testing.T) {
	huge := strings.Repeat("x", 900_000)
	for _, c := range []struct {
		name, key, doc string
		path, want     string
	}{
		{"yaml", "k.condition-router", "conditions: [", "", "valid YAML"},
		{"empty", "k.condition-router", "", "", "a YAML mapping"},
		{"list", "k.condition-router", "- a", "", "a YAML mapping"},
		{"two documents", "k.condition-router", "conditions: ['=> a=1']\n---\nconditions: ['=> a=2']", "", "a single YAML document"},
		{"unknown version", "k.condition-router", "configVersion: v9.9\nconditions: ['=> a=1']", "configVersion", "one of v2.7, v3.0"},
		{"v3.1", "k.condition-router", "configVersion: v3.1\nconditions: [{from: {match: a=1}}]", "configVersion", "v3.1"},
		{"version not a string", "k.condition-router", "configVersion: [v3.0]\nconditions: ['=> a=1']", "configVersion", "a string"},
		{"no conditions", "k.condition-router", "configVersion: v3.0\nscope: application", "conditions", "at least one"},
		{"conditions not a list", "k.condition-router", "conditions: '=> a=1'", "conditions", "a list"},
		{"condition not a string", "k.condition-router", "conditions: [{a: 1}]", "conditions[0]", "string"},
		{"bad condition", "k.condition-router", "conditions: ['=> a=1', '=> = x']", "conditions[1]", "rule"},
		{"bad bool", "k.condition-router", "enabled: ture\nconditions: ['=> a=1']", "enabled", "true or false"},
		{"bad priority", "k.condition-router", "priority: high\nconditions: ['=> a=1']", "priority", "integer"},
		{"bad scope", "k.condition-router", "scope: global\nconditions: ['=> a=1']", "scope", "service or application"},
		{"wrong scope", "org.Foo:1.0:.condition-router", "scope: application\nconditions: ['=> a=1']", "scope", "service"},
		{"huge bad condition", "k.condition-router", "conditions: ['=> " + huge + " ==']", "conditions[0]", "rule"},
		{"too big", "k.condition-router", "conditions: ['" + strings.Repeat("y", MaxRuleDocumentBytes) + "']", "", "at most"},
		{"too many", "k.condition-router", "conditions: [" + strings.Repeat("'=> a=1',", MaxRuleItems+1) + "]", "conditions", "at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConditionRules(c.key, []byte(c.doc))
			if err == nil {
				t.Fatal("parsed")
			}
			re := ruleErr(t, err)
			if re.Key != c.key || !strings.HasPrefix(re.Path, c.path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: key %q path %q", err, re.Key, re.Path)
			}
			if n := len(err.Error()); n > 1024 {
				t.Fatalf("error of %d bytes", n)
			}
		})
	}
}

// laughs is a "billion laughs" tag document: 12 KB of text whose aliases
// make a million addresses for a parser that follows them.
func laughs() string {
	var b strings.Builder
	b.WriteString("b: &b [" + strings.Repeat("1.1.1.1,", 1000) + "]\n")
	b.WriteString("t: &t {name: x, addresses: *b}\n")
	b.WriteString("tags: [" + strings.Repeat("*t,", 1000) + "]\n")
	return b.String()
}

func TestRuleDocumentAliasBudget(t *testing.T) {
	_, err := ParseTagRules("app.tag-router", []byte(laughs()))
	if err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Fatalf("laughs: %v", err)
	}
	if n := len(err.Error()); n > 1024 {
		t.Fatalf("error of %d bytes", n)
	}
}

// Java: dubbo-cluster/src/test/resources/TagRule.yml.
func TestTagRulesJavaFixture(t *testing.T) {
	r, err := ParseTagRules(TagRouterKey("demo-provider"), fixture(t, "TagRule.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != RuleVersionV27 || !r.Force || r.Runtime || !r.Enabled || r.Priority != 1 || r.Key != "demo-provider" || len(r.Tags) != 2 {
		t.Fatalf("header: %+v", r)
	}
	providers := fleet("30.5.120.16:20880/S", "30.5.120.16:20881/S", "30.5.120.17:20880/S", "30.5.120.18:20880/S?dubbo.tag=tag3")
	router := r.Router(-100)
	for _, c := range []struct{ tag, want string }{
		{"", "30.5.120.17:20880"},
		{"tag1", "30.5.120.16:20880"},
		{"tag2", "30.5.120.16:20881"},
		{"tag3", "30.5.120.18:20880"}, // not in the rule: the provider's own tag
		{"tag9", "30.5.120.17:20880"}, // fallback: untagged and not named by the rule
	} {
		inv := kernel.NewInvocation("m")
		if c.tag != "" {
			inv.SetAttachment(cluster.KeyTag, c.tag)
		}
		if got := urlsOf(router.Route(providers, nil, inv)); got != c.want {
			t.Errorf("tag %q: %q, want %q", c.tag, got, c.want)
		}
	}
	// The consumer URL's dubbo.tag is the call's tag when it has none.
	consumer := kernel.MustParseURL("consumer://1.1.1.1/S?dubbo.tag=tag2")
	if got := urlsOf(router.Route(providers, consumer, kernel.NewInvocation("m"))); got != "30.5.120.16:20881" {
		t.Errorf("consumer tag: %q", got)
	}
	// force: the rule's tag with its providers gone gives none.
	gone := fleet("30.5.120.17:20880/S")
	inv := kernel.NewInvocation("m")
	inv.SetAttachment(cluster.KeyTag, "tag1")
	if got := router.Route(gone, nil, inv); len(got) != 0 {
		t.Errorf("forced rule: %q", urlsOf(got))
	}
}

// Java: TagStateRouterTest.tagRouterRuleParseTest (addresses null, [] and ~
// set no tag) and tagRouterRuleParseTestV3 (match tags).
func TestTagRulesJavaInline(t *testing.T) {
	v27 := "---\n" + "force: false\n" + "runtime: true\n" + "enabled: false\n" + "priority: 1\n" + "key: demo-provider\n" +
		"tags:\n" + "  - name: tag1\n" + "    addresses: null\n" + "  - name: tag2\n" + "    addresses: [\"30.5.120.37:20880\"]\n" +
		"  - name: tag3\n" + "    addresses: []\n" + "  - name: tag4\n" + "    addresses: ~\n" + "..."
	r, err := ParseTagRules("demo-provider.tag-router", []byte(v27))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tags) != 4 || r.Enabled {
		t.Fatalf("v2.7: %d tags, enabled %v", len(r.Tags), r.Enabled)
	}
	for _, tag := range r.Tags {
		want := 0
		if tag.Name == "tag2" {
			want = 1
		}
		if len(tag.Addresses) != want || len(tag.Match) != 0 {
			t.Errorf("v2.7 %s: %d addresses, %d matches; want %d, 0", tag.Name, len(tag.Addresses), len(tag.Match), want)
		}
	}
	v30 := "---\n" + "configVersion: v3.0\n" + "force: false\n" + "runtime: true\n" + "enabled: true\n" + "priority: 1\n" +
		"key: demo-provider\n" + "tags:\n" + "  - name: tag1\n" + "    match:\n" + "    - key: match_key1\n" + "      value:\n" +
		"       exact: value1\n" + "  - name: tag2\n" + "    addresses:\n" + "     - \"10.20.3.3:20880\"\n" +
		"     - \"10.20.3.4:20880\"\n" + "    match:\n" + "    - key: match_key2\n" + "      value:\n" + "       exact: value2\n" +
		"  - name: tag3\n" + "    match:\n" + "    - key: match_key2\n" + "      value:\n" + "       exact: value2\n" +
		"  - name: tag4\n" + "    match:\n" + "    - key: not_exist\n" + "      value:\n" + "       exact: not_exist\n" +
		"  - name: tag5\n" + "    match:\n" + "    - key: match_key2\n" + "      value:\n" + "       wildcard: \"*\"\n" + "..."
	r, err = ParseTagRules("demo-provider.tag-router", []byte(v30))
	if err != nil {
		t.Fatal(err)
	}
	providers := fleet("10.20.3.3:20880/com.foo.BarService?match_key1=value1&match_key2=value2", "10.20.3.4:20880/com.foo.BarService?match_key1=value1")
	router := r.Router(-100)
	for _, c := range []struct{ tag, want string }{
		{"tag1", "10.20.3.3:20880,10.20.3.4:20880"},
		{"tag2", "10.20.3.3:20880,10.20.3.4:20880"}, // addresses win over match
		{"tag3", "10.20.3.3:20880"},
		{"tag5", "10.20.3.3:20880"}, // wildcard needs the key present
		{"tag4", ""},                // selects nobody: not set; no own tag, and every provider is named by the rule
		{"", ""},                    // every provider is in a tag of the rule
	} {
		inv := kernel.NewInvocation("m")
		if c.tag != "" {
			inv.SetAttachment(cluster.KeyTag, c.tag)
		}
		if got := urlsOf(router.Route(providers, nil, inv)); got != c.want {
			t.Errorf("tag %q: %q, want %q", c.tag, got, c.want)
		}
	}
	// A new provider list is evaluated afresh.
	more := append(fleet("10.20.3.9:20880/com.foo.BarService?match_key2=value2"), providers...)
	inv := kernel.NewInvocation("m")
	inv.SetAttachment(cluster.KeyTag, "tag3")
	if got := urlsOf(router.Route(more, nil, inv)); got != "10.20.3.9:20880,10.20.3.3:20880" {
		t.Errorf("new list: %q", got)
	}
}

func TestTagRulesStaticAndLevels(t *testing.T) {
	providers := fleet("10.0.0.1:1/S", "10.0.0.2:1/S", "10.0.1.1:1/S")
	doc := `configVersion: v3.0
key: app
tags:
  - name: beta
    addresses: ["10.0.0.*"]
  - name: beta|team1
    addresses: ["10.0.1.0/24"]
`
	r, err := ParseTagRules("app.tag-router", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	router := r.Router(-100)
	for _, c := range []struct{ tag, force, want string }{
		{"beta|team1", "", "10.0.1.1:1"},
		{"beta|team2", "", "10.0.0.1:1,10.0.0.2:1"}, // falls back a level
		{"beta|team2", "true", ""},                  // forced: no level fallback, nothing
	} {
		inv := kernel.NewInvocation("m")
		inv.SetAttachment(cluster.KeyTag, c.tag)
		if c.force != "" {
			inv.SetAttachment(cluster.KeyForceTag, c.force)
		}
		if got := urlsOf(router.Route(providers, nil, inv)); got != c.want {
			t.Errorf("tag %q force %q: %q, want %q", c.tag, c.force, got, c.want)
		}
	}
	for _, c := range []struct{ name, doc, path, want string }{
		{"service scope", "scope: service\ntags: [{name: a, addresses: [1.1.1.1]}]", "scope", "application"},
		{"no tags", "key: app", "tags", "at least one"},
		{"no name", "tags: [{addresses: [1.1.1.1]}]", "tags[0].name", "name"},
		{"bad address", "tags: [{name: a, addresses: [1.1.1.1/40]}]", "tags[0].addresses[0]", "IP pattern"},
		{"bad regex", "configVersion: v3.0\ntags: [{name: a, match: [{key: k, value: {regex: '(?<=x)'}}]}]", "tags[0].match[0].value.regex", "RE2"},
		{"long regex", "configVersion: v3.0\ntags: [{name: a, match: [{key: k, value: {regex: '" + strings.Repeat("a", MaxRuleRegexBytes+1) + "'}}]}]", "tags[0].match[0].value.regex", "at most"},
		{"empty match", "configVersion: v3.0\ntags: [{name: a, match: [{key: k, value: {}}]}]", "tags[0].match[0].value", "one of"},
	} {
		_, err := ParseTagRules("app.tag-router", []byte(c.doc))
		if err == nil {
			t.Errorf("%s: parsed", c.name)
			continue
		}
		if re := ruleErr(t, err); re.Path != c.path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (path %q)", c.name, err, re.Path)
		}
	}
}

// Java: ConfigParserTest over the fixtures; counts and addresses as Java's
// assertions, then what the rules do to URLs.
func TestOverrideRulesJavaFixtures(t *testing.T) {
	for _, c := range []struct {
		file  string
		n     int
		hosts string
	}{
		{"ServiceNoApp.yml", 2, "0.0.0.0,127.0.0.1"},
		{"ServiceGroupVersion.yml", 1, "127.0.0.1"},
		{"ServiceMultiApps.yml", 4, "0.0.0.0,0.0.0.0,127.0.0.1,127.0.0.1"},
		{"AppMultiServices.yml", 4, "0.0.0.0,0.0.0.0,127.0.0.1,127.0.0.1"},
		{"AppAnyServices.yml", 2, "0.0.0.0,127.0.0.1"},
		{"AppNoService.yml", 1, "127.0.0.1"},
		{"ConsumerSpecificProviders.yml", 1, "127.0.0.1"},
		{"ConfiguratorV3.yml", 1, "0.0.0.0"},
		{"ConfiguratorV3Compatibility.yml", 1, "10.0.0.1"},
		{"ConfiguratorV3Duplicate.yml", 1, "10.0.0.1"},
	} {
		r, err := ParseOverrideRules("", fixture(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		var hosts []string
		for _, cf := range r.Configurators {
			hosts = append(hosts, cf.Host())
		}
		if len(r.Configurators) != c.n || strings.Join(hosts, ",") != c.hosts {
			t.Errorf("%s: %d rules at %v, want %d at %s", c.file, len(r.Configurators), hosts, c.n, c.hosts)
		}
	}
	_, err := ParseOverrideRules(ConfiguratorsKey(RuleKey("serviceKey", "", "")), fixture(t, "ServiceNoRule.yml"))
	if re := ruleErr(t, err); re.Path != "configs[0].parameters" {
		t.Errorf("ServiceNoRule: %v", err)
	}

	// ServiceGroupVersion: the key's group and version are the rule's.
	r, _ := ParseOverrideRules("", fixture(t, "ServiceGroupVersion.yml"))
	if r.Configurators[0].service != "testgroup/servicekey:1.0.0" || r.Configurators[0].Params()["weight"] != "222" {
		t.Errorf("ServiceGroupVersion: %+v", r.Configurators[0])
	}
	// AppAnyServices has no side: Java applies such a rule nowhere.
	r, _ = ParseOverrideRules("", fixture(t, "AppAnyServices.yml"))
	u := kernel.MustParseURL("dubbo://10.0.0.1:20880/S?application=demo-consumer")
	if got := r.Configurators.Configure(u, kernel.SideConsumer, "127.0.0.1"); got != u {
		t.Errorf("a rule without side applied: %s", got)
	}

	// ConfiguratorV3 (Java: parseProviderConfigurationV3), provider side.
	r, _ = ParseOverrideRules("", fixture(t, "ConfiguratorV3.yml"))
	for _, c := range []struct {
		url  string
		want string
	}{
		{"dubbo://10.0.0.1:20880/DemoService?match_key1=value1&application=demo-provider", "200"},
		{"dubbo://10.0.0.1:20880/DemoService2?match_key1=value1&application=demo-provider", "200"},
		{"dubbo://10.0.0.2:20880/DemoService?match_key1=value1&application=demo-provider", ""},         // address
		{"dubbo://10.0.0.1:20880/DemoServiceNotMatch?match_key1=value1&application=demo-provider", ""}, // service
		{"dubbo://10.0.0.1:20880/DemoService?match_key1=value_not_match&application=demo-provider", ""},
		{"dubbo://10.0.0.1:20880/DemoService?match_key1=value1&application=other", ""}, // application
	} {
		// Java's test matches the address against host:port; configure
		// passes the host alone, so wildcard "10.0.0.1:20880" needs the
		// address form here: the matcher is tested directly.
		u := kernel.MustParseURL(c.url)
		m := r.Configurators[0].match
		hit := m.Match(u.Address(), u) && r.Configurators[0].conditionsHold(u)
		if (c.want == "200") != hit {
			t.Errorf("%s: match %v", c.url, hit)
		}
	}
	// ConfiguratorV3Compatibility, applied on the provider side.
	r, _ = ParseOverrideRules("", fixture(t, "ConfiguratorV3Compatibility.yml"))
	for url, want := range map[string]string{
		"dubbo://10.0.0.1:20880/DemoService?match_key1=value1&application=demo-provider":          "200",
		"dubbo://10.0.0.1:20880/DemoService?match_key1=value_not_match&application=demo-provider": "",
		"dubbo://10.0.0.1:20881/DemoService?match_key1=value1&application=demo-provider":          "", // providerAddresses
	} {
		got := r.Configurators.Configure(kernel.MustParseURL(url), kernel.SideProvider, "")
		if got.Param("weight") != want {
			t.Errorf("%s: weight %q, want %q", url, got.Param("weight"), want)
		}
	}
}

// Java: OverrideConfiguratorTest.testOverrideForVersion27 and 3, as documents.
func TestOverrideRulesConfigure(t *testing.T) {
	doc := `configVersion: v2.7
scope: application
key: foo
configs:
  - side: consumer
    parameters: {timeout: 10000}
  - side: provider
    addresses: ["172.24.160.179:21880"]
    parameters: {weight: 200}
`
	r, err := ParseOverrideRules("foo.configurators", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	consumerView := kernel.MustParseURL("dubbo://172.24.160.179/com.foo.BarService?application=foo&side=provider&timeout=100")
	if got := r.Configurators.Configure(consumerView, kernel.SideConsumer, "10.9.9.9"); got.Param("timeout") != "10000" || got.Param("weight") != "" {
		t.Errorf("consumer side: %s", got)
	}
	provider := kernel.MustParseURL("dubbo://172.24.160.179:21880/com.foo.BarService?application=foo&side=provider&weight=100")
	got := r.Configurators.Configure(provider, kernel.SideProvider, "")
	if got.Param("weight") != "200" || got.Param("timeout") != "" {
		t.Errorf("provider side: %s", got)
	}
	// Java lays the override URL's providerAddresses over the URL too.
	if got.Param("providerAddresses") != "172.24.160.179:21880" || got.Param("side") != "provider" || got.Param("category") != "" {
		t.Errorf("overlay: %s", got)
	}
	other := kernel.MustParseURL("dubbo://172.24.160.180:21880/com.foo.BarService?application=foo&weight=100")
	if got := r.Configurators.Configure(other, kernel.SideProvider, ""); got != other {
		t.Errorf("another provider configured: %s", got)
	}
	otherApp := kernel.MustParseURL("dubbo://172.24.160.179/com.foo.BarService?application=bar")
	if got := r.Configurators.Configure(otherApp, kernel.SideConsumer, "1.1.1.1"); got != otherApp {
		t.Errorf("another application configured: %s", got)
	}

	v3 := `configVersion: v3.0
scope: service
key: com.foo.BarService
configs:
  - side: consumer
    applications: [foo]
    match:
      param:
        - key: match_key
          value: {exact: value}
    parameters: {timeout: 10000}
`
	r, err = ParseOverrideRules(ConfiguratorsKey(RuleKey("com.foo.BarService", "", "")), []byte(v3))
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]string{
		"dubbo://172.24.160.179/com.foo.BarService?match_key=value&application=foo&timeout=100":           "10000",
		"dubbo://172.24.160.179/com.foo.BarService?match_key=not_match_value&application=foo&timeout=100": "100",
		"dubbo://172.24.160.179/com.foo.BarService?version=2&match_key=value&application=foo&timeout=100": "100", // service key
	} {
		if got := r.Configurators.Configure(kernel.MustParseURL(url), kernel.SideConsumer, "1.1.1.1"); got.Param("timeout") != want {
			t.Errorf("%s: timeout %q, want %q", url, got.Param("timeout"), want)
		}
	}
}

func TestOverrideRulesOrderEnabledDisabled(t *testing.T) {
	doc := `configVersion: v3.0
scope: service
key: g/S:1
configs:
  - side: consumer
    addresses: [10.1.1.1]
    parameters: {timeout: 3000}
  - side: consumer
    parameters: {timeout: 1000, retries: 5}
  - side: consumer
    addresses: [10.1.1.2]
    type: weight
    enabled: false
    parameters: {timeout: 9}
  - side: consumer
    providerAddresses: [10.0.0.2:20880]
    parameters: {disabled: true}
`
	r, err := ParseOverrideRules(ConfiguratorsKey(RuleKey("S", "1", "g")), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if r.Scope != ScopeService || !r.Enabled || r.Version != "v3.0" {
		t.Fatalf("header: %+v", r)
	}
	u := kernel.MustParseURL("dubbo://10.0.0.1:20880/S?group=g&version=1&timeout=500")
	// 0.0.0.0 sorts first, so the specific consumer's 3000 wins.
	if got := r.Configurators.Configure(u, kernel.SideConsumer, "10.1.1.1"); got.Param("timeout") != "3000" || got.Param("retries") != "5" {
		t.Errorf("specific consumer: %s", got)
	}
	if got := r.Configurators.Configure(u, kernel.SideConsumer, "10.1.1.9"); got.Param("timeout") != "1000" {
		t.Errorf("any consumer: %s", got)
	}
	// A typed item uses its own enabled.
	if got := r.Configurators.Configure(u, kernel.SideConsumer, "10.1.1.2"); got.Param("timeout") != "1000" {
		t.Errorf("disabled typed item applied: %s", got)
	}
	providers := []*kernel.URL{u, kernel.MustParseURL("dubbo://10.0.0.2:20880/S?group=g&version=1")}
	out := ConfigureProviders(providers, "10.1.1.9", nil, r.Configurators)
	if len(out) != 1 || out[0].Address() != "10.0.0.1:20880" || out[0].Param("timeout") != "1000" {
		t.Errorf("ConfigureProviders: %v", out)
	}
	if providers[0].Param("timeout") != "500" {
		t.Error("ConfigureProviders changed its input")
	}
	// The document's enabled: false turns every untyped item off.
	off, err := ParseOverrideRules("", []byte(strings.Replace(doc, "key: g/S:1", "key: g/S:1\nenabled: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := off.Configurators.Configure(u, kernel.SideConsumer, "10.1.1.1"); got != u {
		t.Errorf("disabled document applied: %s", got)
	}
	if !ProviderEnabled(kernel.MustParseURL("dubbo://a:1/S?disabled=false&enabled=false")) ||
		ProviderEnabled(kernel.MustParseURL("dubbo://a:1/S?enabled=false")) || !ProviderEnabled(u) {
		t.Error("ProviderEnabled")
	}
}

func TestOverrideRulesV27Tilde(t *testing.T) {
	doc := `configVersion: v2.7
key: S
configs:
  - side: consumer
    parameters: {"~timeout": 100, timeout: 200}
`
	r, err := ParseOverrideRules("", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for from, want := range map[string]string{"100": "200", "300": "300"} {
		u := kernel.MustParseURL("dubbo://a:1/S?timeout=" + from)
		got := r.Configurators.Configure(u, kernel.SideConsumer, "h")
		if got.Param("timeout") != want || got.Param("~timeout") != "" {
			t.Errorf("timeout %s: %s", from, got)
		}
	}
}

func TestOverrideRulesMalformed(t *testing.T) {
	for _, c := range []struct{ name, key, doc, path, want string }{
		{"no key", "", "configs: [{side: consumer, parameters: {a: 1}}]", "key", "service"},
		{"no configs", "", "key: S", "configs", "at least one"},
		{"bad side", "", "key: S\nconfigs: [{side: both, parameters: {a: 1}}]", "configs[0].side", "consumer or provider"},
		{"null parameter", "", "key: S\nconfigs: [{side: consumer, parameters: {a: null}}]", "configs[0].parameters.a", "a value"},
		{"parameters list", "", "key: S\nconfigs: [{side: consumer, parameters: [a]}]", "configs[0].parameters", "a mapping"},
		{"bad match", "", "configVersion: v3.0\nkey: S\nconfigs: [{side: consumer, parameters: {a: 1}, match: {service: {oneof: []}}}]", "configs[0].match.service.oneof", "string matches"},
		{"bad cird", "", "configVersion: v3.0\nkey: S\nconfigs: [{side: consumer, parameters: {a: 1}, match: {address: {cird: 1.1.1.1/99}}}]", "configs[0].match.address.cird", "CIDR"},
		{"wrong scope", "shop.configurators", "scope: service\nkey: S\nconfigs: [{side: consumer, parameters: {a: 1}}]", "scope", "application"},
		{"unknown version", "", "configVersion: v4\nkey: S\nconfigs: [{side: consumer, parameters: {a: 1}}]", "configVersion", "one of"},
	} {
		_, err := ParseOverrideRules(c.key, []byte(c.doc))
		if err == nil {
			t.Errorf("%s: parsed", c.name)
			continue
		}
		if re := ruleErr(t, err); re.Path != c.path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (path %q)", c.name, err, re.Path)
		}
	}
}

func FuzzRuleDocuments(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "dubbo"))
	for _, e := range entries {
		b := fixture(f, e.Name())
		f.Add(b)
		for _, d := range documents(b) {
			f.Add(d)
		}
	}
	f.Add([]byte(dubboGo3656))
	f.Add([]byte("configVersion: v3.0\ntags: [{name: a, match: [{key: k, value: {regex: 'a+'}}]}]"))
	providers := fleet("10.0.0.1:20880/S?dubbo.tag=a&k=aa", "10.0.0.2:20881/S", "[::1]:20880/S?application=x")
	consumer := kernel.MustParseURL("consumer://10.1.0.1/S?application=shop&dubbo.tag=a")
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := kernel.NewInvocation("m", "x", 1)
		inv.SetAttachment("k", "v")
		if c, err := ParseConditionRules("fuzz.condition-router", data); err == nil {
			c.Router(0).Route(providers, consumer, inv)
		} else if len(err.Error()) > 4096 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		if r, err := ParseTagRules("fuzz.tag-router", data); err == nil {
			r.Router(0).Route(providers, consumer, inv)
			r.Router(0).Route(providers, nil, nil)
		} else if len(err.Error()) > 4096 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		if r, err := ParseOverrideRules("fuzz.configurators", data); err == nil {
			for _, p := range providers {
				r.Configurators.Configure(p.URL(), kernel.SideConsumer, "10.1.0.1")
				r.Configurators.Configure(p.URL(), kernel.SideProvider, "")
			}
		} else if len(err.Error()) > 4096 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		// The condition syntax alone, too.
		if len(data) < 4096 {
			if rule, err := cluster.ParseConditionRule(string(data), true, 0); err == nil {
				cluster.NewConditionRouter(rule).Route(providers, consumer, inv)
			}
		}
	})
}
