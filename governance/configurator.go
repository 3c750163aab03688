package governance

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/kernel"
)

// OverrideRules is a configurators document (Dubbo's override rules), as
// Dubbo Admin writes it under "<RuleKey>.configurators" (scope service, key
// "group/interface:version") or "<application>.configurators" (scope
// application):
//
//	configVersion: v3.0
//	scope: application
//	key: shop-consumer
//	enabled: true
//	configs:
//	  - side: consumer
//	    addresses: [0.0.0.0]          # consumers it applies to; default all
//	    providerAddresses: [10.0.0.1:20880]
//	    services: [org.example.Greeter]   # application scope; default *
//	    parameters: {timeout: 6000, weight: 200}
//	    match: {param: [{key: env, value: {exact: gray}}]}   # v3.0
//
// Java: ConfigParser, ConfiguratorConfig, ConfigItem, ConditionMatch. The
// document becomes Configurators, one per (item, address, service or
// application), as Java's ConfigParser makes override URLs.
type OverrideRules struct {
	// Version is configVersion; v2.7 when absent. v3.0 reads match.
	Version string
	// Scope is service or application; service when absent (as Java).
	Scope string
	// Key is the service ("group/interface:version") or the application.
	Key string
	// Enabled false turns off every item without a type (default true).
	Enabled bool
	// Configurators, sorted as Java sorts them (see Configurators).
	Configurators Configurators
}

// Configurator is one override rule: Java's OverrideConfigurator with its
// override URL.
type Configurator struct {
	host    string // the address the rule applies to; 0.0.0.0: all
	port    int
	enabled bool
	side    string
	version string // configVersion
	// application, service are the URL conditions: "" (application) and
	// "*" (service) match all.
	application string
	service     string
	providers   []string // providerAddresses, "" when unset
	priority    int
	params      map[string]string // the override URL's parameters
	set         map[string]string // what it lays over a URL (overlay)
	match       *ConditionMatch
}

// Host is the address the rule applies to (a consumer's on the consumer
// side, a provider's on the provider side); 0.0.0.0 for all.
func (c *Configurator) Host() string { return c.host }

// Side is the side the rule applies to: consumer, provider, or "" (Java
// applies such a rule nowhere).
func (c *Configurator) Side() string { return c.side }

// Params returns a copy of the parameters the rule sets (with Java's
// condition keys, which it does not set, left out).
func (c *Configurator) Params() map[string]string {
	out := map[string]string{}
	for k, v := range c.set {
		out[k] = v
	}
	return out
}

// Keys of an override URL that are conditions, not settings
// (AbstractConfigurator.genConditionKeys), and those Java's configurator
// listener strips for safety (AbstractConfiguratorListener.securityKey).
var (
	overrideConditionKeys = []string{"category", "check", "dynamic", "enabled", "group", "version", "application",
		"side", "configVersion", "compatible_config", "interfaces"}
	overrideSecurityKeys = []string{"accesslog.fixed.path", "router", "rule", "runtime", "type"}
)

const anyHost = "0.0.0.0"

// ParseOverrideRules parses a configurators document; docKey is its
// config-center key (ConfiguratorsKey), for errors and to check the scope.
func ParseOverrideRules(docKey string, data []byte) (*OverrideRules, error) {
	d := &ruleDoc{key: docKey}
	root, err := d.load(data)
	if err != nil {
		return nil, err
	}
	h, err := d.header(root, RuleVersionV27, RuleVersionV30, RuleVersionV31)
	if err != nil {
		return nil, err
	}
	r := &OverrideRules{Version: h.version, Scope: h.scope, Key: h.key, Enabled: h.enabled}
	if r.Scope == "" {
		r.Scope = ScopeService
	}
	if r.Key == "" {
		return nil, d.fail(root, "key", "the service (group/interface:version) or application the rules are for", "")
	}
	// Java appends the raw configVersion, "null" when absent: it is never
	// empty, so the v2.7+ rules apply.
	version, ok, _ := d.str(root, "configVersion", "")
	if !ok {
		version = "null"
	}
	items, err := d.list(root, "configs", "")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// Java keeps the previous configurators.
		n, _ := d.field(root, "configs", "")
		return nil, d.fail(n, "configs", "a list of at least one config item", "")
	}
	for i, it := range items {
		cs, err := d.configItem(it, fmt.Sprintf("configs[%d]", i), r, version)
		if err != nil {
			return nil, err
		}
		r.Configurators = append(r.Configurators, cs...)
		if len(r.Configurators) > MaxRuleItems*4 {
			return nil, d.fail(it, "configs", fmt.Sprintf("at most %d rules (items × addresses × services)", MaxRuleItems*4), "more")
		}
	}
	r.Configurators.sort()
	return r, nil
}

type param struct{ k, v string }

func (d *ruleDoc) configItem(it *yaml.Node, p string, r *OverrideRules, version string) ([]*Configurator, error) {
	if it.Kind != yaml.MappingNode {
		return nil, d.fail(it, p, "a mapping {side, addresses, parameters, ...}", kindName(it))
	}
	typ, hasType, err := d.str(it, "type", p)
	if err != nil {
		return nil, err
	}
	itemEnabled := "null"
	if n, err := d.field(it, "enabled", p); err != nil {
		return nil, err
	} else if n != nil {
		b, err := d.boolean(it, "enabled", p, true)
		if err != nil {
			return nil, err
		}
		itemEnabled = strconv.FormatBool(b)
	}
	addresses, err := d.strings(it, "addresses", p)
	if err != nil {
		return nil, err
	}
	if len(addresses) == 0 {
		addresses = []string{anyHost}
	}
	providerAddrs, err := d.strings(it, "providerAddresses", p)
	if err != nil {
		return nil, err
	}
	services, err := d.strings(it, "services", p)
	if err != nil {
		return nil, err
	}
	apps, err := d.strings(it, "applications", p)
	if err != nil {
		return nil, err
	}
	side, hasSide, err := d.str(it, "side", p)
	if err != nil {
		return nil, err
	}
	if hasSide && side != kernel.SideConsumer && side != kernel.SideProvider {
		n, _ := d.field(it, "side", p)
		return nil, d.fail(n, fieldPath(p, "side"), "consumer or provider", side)
	}
	pm, err := d.mapping(it, "parameters", p)
	if err != nil {
		return nil, err
	}
	if pm == nil || len(pm.Content) == 0 {
		// Java: "please specify at least one parameter you want to change".
		return nil, d.fail(it, fieldPath(p, "parameters"), "at least one parameter to set", "")
	}
	if len(pm.Content)/2 > MaxRuleItems {
		return nil, d.fail(pm, fieldPath(p, "parameters"), fmt.Sprintf("at most %d parameters", MaxRuleItems), "more")
	}
	var params []param
	for i := 0; i+1 < len(pm.Content); i += 2 {
		k, err := d.deref(pm.Content[i], fieldPath(p, "parameters"))
		if err != nil {
			return nil, err
		}
		v, err := d.deref(pm.Content[i+1], fieldPath(p, "parameters"))
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, d.fail(k, fieldPath(p, "parameters"), "parameter names", kindName(k))
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, d.fail(v, fieldPath(p, "parameters."+k.Value), "a value", kindName(v))
		}
		params = append(params, param{k.Value, v.Value})
	}
	var match *ConditionMatch
	if mn, err := d.mapping(it, "match", p); err != nil {
		return nil, err
	} else if mn != nil {
		if match, err = d.conditionMatch(mn, fieldPath(p, "match")); err != nil {
			return nil, err
		}
	}
	enabled := strconv.FormatBool(r.Enabled)
	if hasType && typ != "general" {
		// Java: only typed items use their own enabled.
		enabled = itemEnabled
	}

	// Build the override URLs' parameters in the order Java's ConfigParser
	// writes them into the URL string (later ones win, as they do there).
	build := func(serviceKey, app string, appScope bool) []param {
		var q []param
		iface := serviceKey
		if i := strings.IndexByte(iface, '/'); i > 0 {
			q = append(q, param{"group", iface[:i]})
			iface = iface[i+1:]
		}
		if j := strings.IndexByte(iface, ':'); j > 0 {
			q = append(q, param{"version", iface[j+1:]})
			iface = iface[:j]
		}
		q = append(q, param{"interface", iface}) // the URL's path
		category := "dynamicconfigurators"
		q = append(q, param{"category", category})
		if hasSide {
			q = append(q, param{"side", side})
		}
		q = append(q, params...)
		if len(providerAddrs) > 0 {
			q = append(q, param{"providerAddresses", strings.Join(providerAddrs, ",")})
		} else if side == kernel.SideProvider {
			q = append(q, param{"providerAddresses", strings.Join(addresses, ",")})
		}
		if appScope {
			q = append(q, param{"application", r.Key}, param{"enabled", enabled},
				param{"category", "appdynamicconfigurators"}, param{"configVersion", version})
		} else {
			q = append(q, param{"enabled", enabled}, param{"configVersion", version})
			if app != "" {
				q = append(q, param{"application", app})
			}
		}
		return q
	}
	var out []*Configurator
	for _, addr := range addresses {
		host, port := addr, 0
		if h, ps, err := net.SplitHostPort(addr); err == nil {
			host = h
			port, _ = strconv.Atoi(ps)
		}
		if r.Scope == ScopeApplication {
			svcs := services
			if len(svcs) == 0 {
				svcs = []string{"*"}
			}
			for _, s := range svcs {
				if s == "" {
					return nil, d.fail(it, fieldPath(p, "services"), "service names", "an empty one")
				}
				out = append(out, newConfigurator(host, port, build(s, "", true), match))
			}
			continue
		}
		if len(apps) == 0 {
			out = append(out, newConfigurator(host, port, build(r.Key, "", false), match))
		}
		for _, app := range apps {
			out = append(out, newConfigurator(host, port, build(r.Key, app, false), match))
		}
	}
	return out, nil
}

func newConfigurator(host string, port int, q []param, match *ConditionMatch) *Configurator {
	m := make(map[string]string, len(q))
	for _, kv := range q {
		m[kv.k] = kv.v
	}
	for _, k := range overrideSecurityKeys {
		delete(m, k)
	}
	c := &Configurator{host: host, port: port, side: m["side"], version: m["configVersion"],
		application: m["application"], match: match, params: m}
	c.enabled = true
	if v := m["enabled"]; v != "" {
		c.enabled = strings.EqualFold(v, "true")
	}
	c.service = kernel.ServiceKey(m["interface"], m["group"], m["version"])
	if v := m["providerAddresses"]; v != "" {
		c.providers = strings.Split(v, ",")
	}
	if n, err := strconv.Atoi(m["priority"]); err == nil {
		c.priority = n
	}
	c.set = c.overlay()
	return c
}

// overlay is what configure lays over a URL: the override URL's parameters
// less its condition keys (and, for a v2.7 rule, its "~key" conditions).
func (c *Configurator) overlay() map[string]string {
	out := make(map[string]string, len(c.params))
	for k, v := range c.params {
		out[k] = v
	}
	for _, k := range overrideConditionKeys {
		delete(out, k)
	}
	// "interface" is the override URL's path, not one of its parameters.
	delete(out, "interface")
	if !c.v30() {
		for k := range out {
			if strings.HasPrefix(k, "~") {
				delete(out, k)
			}
		}
	}
	return out
}

func (c *Configurator) v30() bool { return strings.HasPrefix(c.version, RuleVersionV30) }

// Configure is Java's AbstractConfigurator.configure for a URL seen from
// side (consumer in a reference's directory, provider for an exported
// service: weft's merged provider URLs keep the provider's side parameter,
// where Java's carry the consumer's). localHost is the consumer's own
// address, which consumer-side rules select by. It returns u itself when
// the rule does not apply.
//
// A rule applies when it is enabled, its side is side, its address is
// 0.0.0.0 or the host (localHost on the consumer side, u's host on the
// provider side), its providerAddresses (if any) include u's address, its
// application (if any) is u's, its service is * or u's service key, and
// (v3.0) its match holds, or (v2.7) its "~key" conditions hold.
func (c *Configurator) Configure(u *kernel.URL, side, localHost string) *kernel.URL {
	if u == nil || !c.enabled || c.side == "" || side != c.side {
		return u
	}
	host := u.Host
	if side == kernel.SideConsumer {
		host = localHost
	}
	if c.host != anyHost && c.host != host {
		return u
	}
	if !c.conditionsHold(u) {
		return u
	}
	if c.v30() {
		if c.match != nil && !c.match.Match(host, u) {
			return u
		}
	} else if !c.deprecatedConditionsHold(u, side) {
		return u
	}
	return u.WithParams(c.set)
}

// conditionsHold is Java's isV27ConditionMatchOrUnset.
func (c *Configurator) conditionsHold(u *kernel.URL) bool {
	if len(c.providers) > 0 {
		hit := false
		for _, a := range c.providers {
			if a == u.Address() || a == anyHost || a == anyHost+":*" || a == anyHost+":"+strconv.Itoa(u.Port) || a == u.Host {
				hit = true
			}
		}
		if !hit {
			return false
		}
	}
	if c.application != "" && c.application != "*" && c.application != urlApplication(u) {
		return false
	}
	return c.service == "*" || c.service == u.ServiceKey()
}

func urlApplication(u *kernel.URL) string {
	if a := u.Param(kernel.KeyApplication); a != "" {
		return a
	}
	return u.Username
}

// deprecatedConditionsHold is Java's isDeprecatedConditionMatch: "~key",
// application and side parameters of the rule must be * or u's.
func (c *Configurator) deprecatedConditionsHold(u *kernel.URL, side string) bool {
	for k, v := range c.params {
		tilde := strings.HasPrefix(k, "~")
		if !tilde && k != "application" && k != "side" {
			continue
		}
		if v == "*" {
			continue
		}
		var got string
		switch {
		case tilde:
			got = u.Param(k[1:])
		case k == "side":
			got = side
		default:
			got = u.Param(k)
		}
		if v != got {
			return false
		}
	}
	return true
}

// Configurators is a list of override rules in the order they apply: Java
// sorts by address (as strings, so 0.0.0.0, which matches all, comes before
// a specific address, which then wins), then by the `priority` parameter,
// and applies each in turn, so a later one overrides an earlier one.
type Configurators []*Configurator

func (cs Configurators) sort() {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].host != cs[j].host {
			return cs[i].host < cs[j].host
		}
		return cs[i].priority < cs[j].priority
	})
}

// Configure applies every rule in order (see Configurator.Configure).
func (cs Configurators) Configure(u *kernel.URL, side, localHost string) *kernel.URL {
	for _, c := range cs {
		u = c.Configure(u, side, localHost)
	}
	return u
}

// ConfigureProviders is what a reference's directory does with a provider
// list on each notification, as Java's RegistryDirectory does: each URL
// (already merged with the consumer's parameters) is configured by each
// list in turn, consumer side (Java's order: the consumer application's
// "<app>.configurators", then the service's "<RuleKey>.configurators"),
// and the providers a rule disabled (ProviderEnabled false) are left out.
// The result is a new slice; providers is not changed.
func ConfigureProviders(providers []*kernel.URL, localHost string, lists ...Configurators) []*kernel.URL {
	out := make([]*kernel.URL, 0, len(providers))
	for _, u := range providers {
		for _, cs := range lists {
			u = cs.Configure(u, kernel.SideConsumer, localHost)
		}
		if ProviderEnabled(u) {
			out = append(out, u)
		}
	}
	return out
}

// ProviderEnabled is Java's RegistryDirectory.toInvokers test: a provider
// URL with disabled=true, or without disabled and with enabled=false, gets
// no invoker. An override rule's `disabled: true` takes providers out this way.
func ProviderEnabled(u *kernel.URL) bool {
	if v, ok := u.Lookup("disabled"); ok {
		return !strings.EqualFold(v, "true")
	}
	v, ok := u.Lookup("enabled")
	return !ok || v == "" || strings.EqualFold(v, "true")
}

// ConditionMatch is a v3.0 override item's match (Java's ConditionMatch):
// every part that is set must hold.
type ConditionMatch struct {
	// Address is matched against the host the rule is applied for.
	Address *AddressMatch
	// ProviderAddress is matched against the URL's host:port.
	ProviderAddress *AddressMatch
	// Service: one of them must match the URL's service key.
	Service []*cluster.StringMatch
	// App: one of them must match the URL's application.
	App   []*cluster.StringMatch
	Param []cluster.ParamMatch
}

// Match reports whether the match holds for host and u.
func (m *ConditionMatch) Match(host string, u *kernel.URL) bool {
	if m.Address != nil && !m.Address.Match(host) {
		return false
	}
	if m.ProviderAddress != nil && !m.ProviderAddress.Match(u.Address()) {
		return false
	}
	if m.Service != nil && !oneOf(m.Service, u.ServiceKey(), true) {
		return false
	}
	if m.App != nil {
		app, ok := u.Lookup(kernel.KeyApplication)
		if !oneOf(m.App, app, ok) {
			return false
		}
	}
	for _, p := range m.Param {
		if !p.Match(u) {
			return false
		}
	}
	return true
}

func oneOf(ms []*cluster.StringMatch, v string, ok bool) bool {
	for _, m := range ms {
		if m.Match(v, ok) {
			return true
		}
	}
	return false
}

// AddressMatch is Dubbo's AddressMatch: cird (an IP pattern, NetUtils'
// matchIpExpression), else wildcard (0.0.0.0 or * for all, else a glob),
// else exact.
type AddressMatch struct {
	Cird, Wildcard, Exact *string

	cird *cluster.IPPattern
}

// Match reports whether input, a host or host:port, matches.
func (m *AddressMatch) Match(input string) bool {
	if m.cird != nil {
		if input == *m.Cird {
			return true
		}
		return m.cird.Match(input, 0)
	}
	if m.Wildcard != nil {
		return *m.Wildcard == anyHost || *m.Wildcard == "*" || cluster.GlobMatch(*m.Wildcard, input)
	}
	if m.Exact != nil {
		return input == *m.Exact
	}
	return false
}

func (d *ruleDoc) addressMatch(parent *yaml.Node, key, path string) (*AddressMatch, error) {
	n, err := d.mapping(parent, key, path)
	if err != nil || n == nil {
		return nil, err
	}
	p := fieldPath(path, key)
	m := &AddressMatch{}
	set := 0
	for _, f := range []struct {
		name string
		dst  **string
	}{{"cird", &m.Cird}, {"wildcard", &m.Wildcard}, {"exact", &m.Exact}} {
		s, ok, err := d.str(n, f.name, p)
		if err != nil {
			return nil, err
		}
		if ok {
			*f.dst = &s
			set++
		}
	}
	if set == 0 {
		return nil, d.fail(n, p, "one of cird, wildcard, exact", "none")
	}
	if m.Cird != nil {
		ip, err := cluster.ParseIPPattern(*m.Cird)
		if err != nil {
			e := d.fail(n, fieldPath(p, "cird"), "a CIDR or IP pattern", *m.Cird).(*RuleError)
			e.Err = err
			return nil, e
		}
		m.cird = ip
	}
	return m, nil
}

func (d *ruleDoc) listStringMatch(parent *yaml.Node, key, path string) ([]*cluster.StringMatch, error) {
	n, err := d.mapping(parent, key, path)
	if err != nil || n == nil {
		return nil, err
	}
	p := fieldPath(path, key)
	items, err := d.list(n, "oneof", p)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, d.fail(n, fieldPath(p, "oneof"), "a list of string matches", "")
	}
	out := make([]*cluster.StringMatch, 0, len(items))
	for i, it := range items {
		m, err := d.stringMatch(it, fmt.Sprintf("%s.oneof[%d]", p, i))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (d *ruleDoc) conditionMatch(n *yaml.Node, path string) (*ConditionMatch, error) {
	m := &ConditionMatch{}
	var err error
	if m.Address, err = d.addressMatch(n, "address", path); err != nil {
		return nil, err
	}
	if m.ProviderAddress, err = d.addressMatch(n, "providerAddress", path); err != nil {
		return nil, err
	}
	if m.Service, err = d.listStringMatch(n, "service", path); err != nil {
		return nil, err
	}
	if m.App, err = d.listStringMatch(n, "app", path); err != nil {
		return nil, err
	}
	if m.Param, err = d.paramMatches(n, "param", path); err != nil {
		return nil, err
	}
	return m, nil
}
