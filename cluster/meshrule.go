package cluster

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/weftrpc/weft/kernel"
)

// Dubbo 3's mesh rules: a provider application's VirtualServices say which
// subset of its providers a call goes to (by service, method, arguments,
// attachments, consumer labels; weighted, with fallbacks), its
// DestinationRules say which providers make each subset (by URL
// parameters). The documents are read by the governance package
// (governance.ParseMeshRules); what is here is the model and the router,
// Java's StandardMeshRuleRouter (dubbo-cluster router/mesh, 3.3).

// MeshRulePriority is where the mesh rule router runs in a chain: Java's
// @Activate(order = -50) of StandardMeshRuleRouterFactory. weft's tag
// router runs at -100, so before it (Java's tag router runs at 100, after).
const MeshRulePriority = -50

// keyRemoteApplication is the provider's application on a provider URL as
// the consumer's directory holds it (registry.KeyRemoteApplication; cluster
// does not import registry).
const keyRemoteApplication = "remote.application"

// MeshRuleGroup is one provider application's mesh rules: the standard-type
// documents of "<application>.MESHAPPRULE" (Java: VsDestinationGroup).
type MeshRuleGroup struct {
	// App is the provider application the rules belong to.
	App              string
	VirtualServices  []*VirtualService
	DestinationRules []*DestinationRule
}

// Valid is Java's VsDestinationGroup.isValid: a group routes only with at
// least one VirtualService and one DestinationRule.
func (g *MeshRuleGroup) Valid() bool {
	return g != nil && len(g.VirtualServices) > 0 && len(g.DestinationRules) > 0
}

// VirtualService is a document of kind VirtualService.
type VirtualService struct {
	// Name is metadata.name.
	Name string
	// Hosts is spec.hosts; read and kept, not used to route (Java does not).
	Hosts []string
	// Routes is spec.dubbo, in order.
	Routes []*DubboRoute
}

// DubboRoute selects calls by service; its details then by the rest.
type DubboRoute struct {
	Name string
	// Services: a call of any of these services (its interface); empty: all.
	Services []*StringMatch
	// Details is routedetail, in order: the first that matches routes.
	Details []*DubboRouteDetail
}

// DubboRouteDetail routes the calls all of its Match requests match (no
// request: every call) to one of Route.
type DubboRouteDetail struct {
	Name  string
	Match []*DubboMatchRequest
	Route []*DubboRouteDestination
}

// DubboRouteDestination is a weighted destination (weight below 1 counts
// as 1, as in Java).
type DubboRouteDestination struct {
	Destination *DubboDestination
	Weight      int
}

// DubboDestination names a subset of a DestinationRule. Host and Port are
// read and kept; Java does not use them.
type DubboDestination struct {
	Host   string
	Subset string
	Port   int
	// Fallback is tried when Subset has no available provider; it may
	// have its own fallback (a chain, bounded when read).
	Fallback *DubboRouteDestination
}

// DestinationRule is a document of kind DestinationRule.
type DestinationRule struct {
	Name string
	// Host is spec.host; read and kept, not checked (Java does not).
	Host    string
	Subsets []*Subset
	// LoadBalancer is trafficPolicy.loadBalancer.simple (ROUND_ROBIN,
	// LEAST_CONN, RANDOM, PASSTHROUGH), "" when absent. Read and kept: Java
	// Dubbo 3.3 does not apply it either; the reference's loadbalance does.
	LoadBalancer string
}

// Subset is the providers whose URL parameters equal all Labels (none:
// all providers of the application).
type Subset struct {
	Name   string
	Labels []Label
}

// Label is one key and value, in a document's order.
type Label struct{ Key, Value string }

// KeyMatch is a string match on the value under Key.
type KeyMatch struct {
	Key   string
	Match *StringMatch
}

// TracingContextProvider reads a value of the call's tracing context for a
// tracingContext match (Java's TracingContextProvider SPI). Java Dubbo 3.3
// ships no implementation, so tracingContext matches nothing there; weft's
// router has none either and matches alike. ok false: absent.
type TracingContextProvider func(inv *kernel.Invocation, key string) (value string, ok bool)

// DubboMatchRequest is one match of a route detail: all its parts must
// hold. Headers are read and kept but not evaluated (Java: "TODO Match
// headers").
type DubboMatchRequest struct {
	Name   string
	Method *DubboMethodMatch
	// SourceLabels must equal the consumer URL's parameters.
	SourceLabels []Label
	Attachments  *DubboAttachmentMatch
	Headers      []KeyMatch
}

// Match is Java's DubboMatchRequest.isMatch; consumer is the consumer URL
// (Java: the router URL's parameters), tracing the tracing-context
// providers (none in weft's router).
func (m *DubboMatchRequest) Match(inv *kernel.Invocation, consumer *kernel.URL, tracing []TracingContextProvider) bool {
	if m.Method != nil && !m.Method.Match(inv) {
		return false
	}
	for _, l := range m.SourceLabels {
		v, ok := "", false
		if consumer != nil {
			v, ok = consumer.Lookup(l.Key)
		}
		if !ok || v != l.Value {
			return false
		}
	}
	if m.Attachments != nil {
		return m.Attachments.Match(inv, tracing)
	}
	return true
}

// DubboAttachmentMatch matches the call's attachments (DubboContext) and
// its tracing context (TracingContext, through providers).
type DubboAttachmentMatch struct {
	TracingContext []KeyMatch
	DubboContext   []KeyMatch
}

// Match is Java's DubboAttachmentMatch.isMatch. An attachment that is not
// a string is absent, as Java's Invocation.getAttachment reads it.
func (m *DubboAttachmentMatch) Match(inv *kernel.Invocation, tracing []TracingContextProvider) bool {
	for _, km := range m.DubboContext {
		v, ok := stringAttachment(inv, km.Key)
		if !km.Match.Match(v, ok) {
			return false
		}
	}
	for _, km := range m.TracingContext {
		matched := false
		for _, p := range tracing {
			if v, ok := p(inv, km.Key); km.Match.Match(v, ok) {
				matched = true
			}
		}
		if !matched {
			return false
		}
	}
	return true
}

func stringAttachment(inv *kernel.Invocation, k string) (string, bool) {
	if inv == nil {
		return "", false
	}
	a, _ := inv.Attachment(k)
	s, ok := a.(string)
	return s, ok
}

// DubboMethodMatch matches the method and its arguments. Headers is read
// and kept; Java does not evaluate it.
type DubboMethodMatch struct {
	// NameMatch is on the method's name (a generic call's real method).
	NameMatch *StringMatch
	// Argc, when set, must equal the argument count.
	Argc *int
	// Args match argument values by index.
	Args []*DubboMethodArg
	// Argp match the parameter types, by Java name ("java.lang.String") or
	// simple name ("String"); their count must equal the parameters'.
	Argp    []*StringMatch
	Headers []KeyMatch
}

// Match is Java's DubboMethodMatch.isMatch. Arguments and parameter types
// are the call's own, a generic call's three included, as in Java. The
// parameter types come from the call's JVM descriptor (ParamTypes): a call
// without one (weft's typed proxies leave it to the protocol) has none and
// matches no Argp. An Args index past the arguments does not match (Java
// throws, failing the call).
func (m *DubboMethodMatch) Match(inv *kernel.Invocation) bool {
	var args []any
	var method, desc string
	if inv != nil {
		args, method, desc = inv.Args, methodName(inv), inv.ParamTypes
	}
	if m.NameMatch != nil && !m.NameMatch.Match(method, inv != nil) {
		return false
	}
	if m.Argc != nil && *m.Argc != len(args) {
		return false
	}
	if len(m.Argp) > 0 && !matchParamTypes(m.Argp, desc) {
		return false
	}
	if len(m.Args) > 0 {
		if len(args) == 0 {
			return false
		}
		for _, a := range m.Args {
			if a.Index < 0 || a.Index >= len(args) || !a.Match(args[a.Index]) {
				return false
			}
		}
	}
	return true
}

// matchParamTypes matches each parameter type of the JVM descriptor desc
// against argp, by Class.getName or Class.getSimpleName; the counts must
// be equal and desc well formed.
func matchParamTypes(argp []*StringMatch, desc string) bool {
	i := 0
	for n := 0; n < len(argp); n++ {
		if i >= len(desc) {
			return false
		}
		start := i
		for i < len(desc) && desc[i] == '[' {
			i++
		}
		if i >= len(desc) {
			return false
		}
		dims := i - start
		var name, simple string
		if p := javaPrimitive(desc[i]); p != "" {
			i++
			name, simple = p, p
			if dims > 0 {
				name = desc[start:i] // Class.getName of int[]: "[I"
			}
		} else if desc[i] == 'L' {
			end := strings.IndexByte(desc[i:], ';')
			if end < 2 {
				return false
			}
			cls := desc[i+1 : i+end]
			i += end + 1
			simple = cls[strings.LastIndexAny(cls, "/$")+1:]
			if dims > 0 {
				name = strings.ReplaceAll(desc[start:i], "/", ".") // "[Ljava.lang.String;"
			} else {
				name = strings.ReplaceAll(cls, "/", ".")
			}
		} else {
			return false
		}
		if dims > 0 {
			simple += strings.Repeat("[]", dims)
		}
		if !argp[n].Match(name, true) && !argp[n].Match(simple, true) {
			return false
		}
	}
	return i == len(desc)
}

func javaPrimitive(c byte) string {
	switch c {
	case 'Z':
		return "boolean"
	case 'B':
		return "byte"
	case 'C':
		return "char"
	case 'S':
		return "short"
	case 'I':
		return "int"
	case 'J':
		return "long"
	case 'F':
		return "float"
	case 'D':
		return "double"
	}
	return ""
}

// DubboMethodArg matches the argument at Index: the first of StrValue,
// NumValue, BoolValue that is set decides. Type is read and kept (Java
// does not use it).
type DubboMethodArg struct {
	Index     int
	Type      string
	StrValue  *ListStringMatch
	NumValue  *ListDoubleMatch
	BoolValue *BoolMatch
}

// Match is Java's DubboMethodArg.isMatch: StrValue needs a string,
// NumValue a number (or a string that reads as one: Java reads
// Double.valueOf(arg.toString()); where Java throws, weft does not
// match), BoolValue a bool.
func (a *DubboMethodArg) Match(v any) bool {
	switch {
	case a.StrValue != nil:
		s, ok := v.(string)
		return ok && a.StrValue.Match(s, true)
	case a.NumValue != nil:
		x, ok := argNumber(v)
		return ok && a.NumValue.Match(x)
	case a.BoolValue != nil:
		b, ok := v.(bool)
		return ok && a.BoolValue.Match(b)
	}
	return false
}

func argNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

// ListStringMatch holds when any of OneOf does.
type ListStringMatch struct{ OneOf []*StringMatch }

func (m *ListStringMatch) Match(s string, ok bool) bool {
	for _, sm := range m.OneOf {
		if sm.Match(s, ok) {
			return true
		}
	}
	return false
}

// ListDoubleMatch holds when any of OneOf does.
type ListDoubleMatch struct{ OneOf []*DoubleMatch }

func (m *ListDoubleMatch) Match(x float64) bool {
	for _, dm := range m.OneOf {
		if dm.Match(x) {
			return true
		}
	}
	return false
}

// BoolMatch holds when Exact is set and equal.
type BoolMatch struct{ Exact *bool }

func (m *BoolMatch) Match(b bool) bool { return m != nil && m.Exact != nil && *m.Exact == b }

// DoubleMatch is Java's: Exact alone is equality; else Range; else Exact
// with Mod is x % Mod == Exact (Java's floating remainder: math.Mod).
type DoubleMatch struct {
	Exact *float64
	Range *DoubleRangeMatch
	Mod   *float64
}

func (m *DoubleMatch) Match(x float64) bool {
	switch {
	case m.Exact != nil && m.Mod == nil:
		return javaDoubleEquals(x, *m.Exact)
	case m.Range != nil:
		return m.Range.Match(x)
	case m.Exact != nil:
		return javaDoubleEquals(math.Mod(x, *m.Mod), *m.Exact)
	}
	return false
}

// DoubleRangeMatch is [Start, End), either end optional; neither: nothing.
type DoubleRangeMatch struct{ Start, End *float64 }

func (m *DoubleRangeMatch) Match(x float64) bool {
	switch {
	case m.Start != nil && m.End != nil:
		return javaDoubleCompare(x, *m.Start) >= 0 && javaDoubleCompare(x, *m.End) < 0
	case m.Start != nil:
		return javaDoubleCompare(x, *m.Start) >= 0
	case m.End != nil:
		return javaDoubleCompare(x, *m.End) < 0
	}
	return false
}

// javaDoubleEquals is Double.equals: NaN equals NaN, 0.0 is not -0.0.
func javaDoubleEquals(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

// javaDoubleCompare is Double.compareTo: -0.0 < 0.0, NaN above all.
func javaDoubleCompare(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := math.Float64bits(a), math.Float64bits(b)
	if math.IsNaN(a) {
		ab = 0x7ff8000000000000
	}
	if math.IsNaN(b) {
		bb = 0x7ff8000000000000
	}
	switch {
	case ab == bb:
		return 0
	case int64(ab) < int64(bb):
		return -1
	}
	return 1
}

// destinations is Java's getDubboRouteDestination for one group: in the
// first VirtualService that has a DubboRoute for the service (only that
// one counts), the route of the first detail whose matches all hold; nil
// when none.
func (g *MeshRuleGroup) destinations(service string, hasService bool, consumer *kernel.URL, inv *kernel.Invocation,
	tracing []TracingContextProvider) []*DubboRouteDestination {
	for _, vs := range g.VirtualServices {
		route := vs.route(service, hasService)
		if route == nil {
			continue
		}
	details:
		for _, d := range route.Details {
			for _, m := range d.Match {
				if !m.Match(inv, consumer, tracing) {
					continue details
				}
			}
			return d.Route
		}
		return nil
	}
	return nil
}

func (vs *VirtualService) route(service string, hasService bool) *DubboRoute {
	for _, r := range vs.Routes {
		if len(r.Services) == 0 {
			return r
		}
		for _, sm := range r.Services {
			if sm.Match(service, hasService) {
				return r
			}
		}
	}
	return nil
}

// MeshRouter routes by the mesh rules of the providers' applications
// (Java: MeshRuleRouter, StandardMeshRuleRouter). For each application
// with rules, a call's destinations come from its VirtualServices; one is
// picked by weight (Java's pick, see pick) and, when its subset has no
// available provider, its fallbacks; the call goes to the union of the
// picked subsets. Providers of applications without a picked subset are
// dropped; when nothing is left, the call goes to all the providers it
// was given ("empty protection").
//
// A router is immutable: new rules make a new router. Subset membership
// depends only on a provider's URL, so it is computed once per URL and
// kept (members), not per call.
type MeshRouter struct {
	priority int
	apps     []meshApp
	byName   map[string]int
	tracing  []TracingContextProvider
	members  atomic.Pointer[meshMembers]
}

type meshApp struct {
	group *MeshRuleGroup
	// subsets maps a subset name to its index; labels[i] are the label
	// sets of the subsets named so across the DestinationRules (a
	// provider in any of them is in the subset, as Java's merge by name).
	subsets map[string]int
	labels  [][][]Label
}

// meshMember is one provider URL's place: its application's index in
// apps (-1: none with rules) and the subsets it is in (bits by index).
type meshMember struct {
	app int
	in  []uint64
}

func (m meshMember) has(subset int) bool {
	return subset>>6 < len(m.in) && m.in[subset>>6]&(1<<(subset&63)) != 0
}

type meshMembers struct{ m map[*kernel.URL]meshMember }

// NewMeshRouter returns a router applying groups (by application; a group
// that is not Valid is left out, as Java leaves it out).
func NewMeshRouter(priority int, groups []*MeshRuleGroup) *MeshRouter {
	r := &MeshRouter{priority: priority, byName: map[string]int{}}
	valid := make([]*MeshRuleGroup, 0, len(groups))
	for _, g := range groups {
		if g.Valid() {
			valid = append(valid, g)
		}
	}
	sort.SliceStable(valid, func(i, j int) bool { return valid[i].App < valid[j].App })
	for _, g := range valid {
		if _, dup := r.byName[g.App]; dup {
			continue
		}
		a := meshApp{group: g, subsets: map[string]int{}}
		for _, dr := range g.DestinationRules {
			for _, s := range dr.Subsets {
				i, ok := a.subsets[s.Name]
				if !ok {
					i = len(a.labels)
					a.subsets[s.Name] = i
					a.labels = append(a.labels, nil)
				}
				a.labels[i] = append(a.labels[i], s.Labels)
			}
		}
		r.byName[g.App] = len(r.apps)
		r.apps = append(r.apps, a)
	}
	return r
}

// Priority orders the router in a chain.
func (r *MeshRouter) Priority() int { return r.priority }

// Apps returns the applications whose rules the router applies, sorted.
func (r *MeshRouter) Apps() []string {
	out := make([]string, len(r.apps))
	for i, a := range r.apps {
		out[i] = a.group.App
	}
	return out
}

// IsMeshRouter says whether router is a mesh rule router.
func IsMeshRouter(router any) bool {
	_, ok := router.(*MeshRouter)
	return ok
}

// member computes u's place (Java's MeshRuleCache.build for one invoker):
// subset labels equal to the URL's parameters. weft's provider URLs carry
// the consumer's parameters merged over the provider's, so a label the
// consumer also sets is read with the consumer's value (Java reads the
// provider's original parameter).
func (r *MeshRouter) member(u *kernel.URL) meshMember {
	ai, ok := r.byName[u.Param(keyRemoteApplication)]
	if !ok {
		return meshMember{app: -1}
	}
	a := &r.apps[ai]
	m := meshMember{app: ai, in: make([]uint64, (len(a.labels)+63)/64)}
	for i, sets := range a.labels {
	sets:
		for _, labels := range sets {
			for _, l := range labels {
				if v, ok := u.Lookup(l.Key); !ok || v != l.Value {
					continue sets
				}
			}
			m.in[i>>6] |= 1 << (i & 63)
			break
		}
	}
	return m
}

// membership returns the places of invokers' URLs, computing those not
// seen yet. The table keeps URLs seen before (a list narrowed by an
// earlier router, then the whole list again, costs nothing) up to twice
// the current list, then starts again from it.
func (r *MeshRouter) membership(invokers []kernel.Invoker) *meshMembers {
	cur := r.members.Load()
	if cur != nil {
		known := true
		for _, iv := range invokers {
			if _, ok := cur.m[iv.URL()]; !ok {
				known = false
				break
			}
		}
		if known {
			return cur
		}
	}
	next := &meshMembers{m: make(map[*kernel.URL]meshMember, len(invokers))}
	if cur != nil && len(cur.m) <= 2*len(invokers)+16 {
		for u, m := range cur.m {
			next.m[u] = m
		}
	}
	for _, iv := range invokers {
		u := iv.URL()
		if _, ok := next.m[u]; !ok {
			next.m[u] = r.member(u)
		}
	}
	r.members.Store(next)
	return next
}

// Route keeps the providers of the subsets the call's rules pick.
func (r *MeshRouter) Route(invokers []kernel.Invoker, consumer *kernel.URL, inv *kernel.Invocation) []kernel.Invoker {
	if len(invokers) == 0 || len(r.apps) == 0 {
		return invokers
	}
	mem := r.membership(invokers)
	service, hasService := "", false
	if consumer != nil {
		service = consumer.Interface()
		hasService = service != ""
	}
	var buf [8]int
	chosen := buf[:0]
	if len(r.apps) > len(buf) {
		chosen = make([]int, 0, len(r.apps))
	}
	picked := false
	for ai := range r.apps {
		c := -1
		if dests := r.apps[ai].group.destinations(service, hasService, consumer, inv, r.tracing); len(dests) > 0 {
			c = r.pick(ai, dests, invokers, mem)
		}
		chosen = append(chosen, c)
		picked = picked || c >= 0
	}
	if !picked {
		return invokers // Java: "Empty protection after routed."
	}
	keep := func(iv kernel.Invoker) bool {
		m := mem.m[iv.URL()]
		return m.app >= 0 && chosen[m.app] >= 0 && m.has(chosen[m.app])
	}
	for i, iv := range invokers {
		if !keep(iv) {
			out := append(make([]kernel.Invoker, 0, len(invokers)-1), invokers[:i]...)
			for _, rest := range invokers[i+1:] {
				if keep(rest) {
					out = append(out, rest)
				}
			}
			if len(out) == 0 {
				return invokers
			}
			return out
		}
	}
	return invokers
}

// pick is Java's randomSelectDestination, quirk included: each weight
// counts as max(w, 1), target is uniform in [0, total), and the first
// destination at which target - (weights so far) <= 0 is tried. Because
// of "<= 0" rather than "< 0", the first destination wins one draw more
// and the last one draw fewer than their weights: 90/10 routes 91/9, and
// a destination that fails makes every later one "picked" too. When the
// picked ones fail, each destination is tried in order. -1: none has an
// available provider.
func (r *MeshRouter) pick(ai int, dests []*DubboRouteDestination, invokers []kernel.Invoker, mem *meshMembers) int {
	total := 0
	for _, d := range dests {
		total += max(d.Weight, 1)
	}
	target := rand.IntN(total)
	for _, d := range dests {
		target -= max(d.Weight, 1)
		if target <= 0 {
			if s := r.resolve(ai, d.Destination, invokers, mem); s >= 0 {
				return s
			}
		}
	}
	for _, d := range dests {
		if s := r.resolve(ai, d.Destination, invokers, mem); s >= 0 {
			return s
		}
	}
	return -1
}

// resolve is Java's computeDestination: the destination's subset when one
// of invokers is in it, else its fallback's, down the chain.
func (r *MeshRouter) resolve(ai int, d *DubboDestination, invokers []kernel.Invoker, mem *meshMembers) int {
	a := &r.apps[ai]
	for d != nil {
		if s, ok := a.subsets[d.Subset]; ok {
			for _, iv := range invokers {
				if m := mem.m[iv.URL()]; m.app == ai && m.has(s) {
					return s
				}
			}
		}
		if d.Fallback == nil {
			break
		}
		d = d.Fallback.Destination
	}
	return -1
}
