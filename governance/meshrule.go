package governance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weftrpc/weft/cluster"
)

// Dubbo 3's mesh rules (Java: dubbo-cluster router/mesh, MeshRuleConstants).
const (
	// MeshRuleSuffix: a provider application's mesh rules are under
	// "<application>.MESHAPPRULE", group GovernanceGroup.
	MeshRuleSuffix = ".MESHAPPRULE"
	// MeshRuleTypeStandard is the rule type of a document whose
	// metadata.name has no '.', the one weft's router (as Java's
	// StandardMeshRuleRouter) applies; "name.type" names another type.
	MeshRuleTypeStandard = "standard"
	// KindVirtualService and KindDestinationRule are the kinds read.
	KindVirtualService  = "VirtualService"
	KindDestinationRule = "DestinationRule"
	// maxMeshFallbacks bounds a fallback chain (Java has no bound; a YAML
	// alias can make a chain that does not end).
	maxMeshFallbacks = 32
)

// MeshRuleKey is the config-center key of a provider application's mesh
// rules.
func MeshRuleKey(application string) string { return application + MeshRuleSuffix }

// MeshRules is what a "<application>.MESHAPPRULE" document holds for the
// standard router.
type MeshRules struct {
	// Group is the application's VirtualServices and DestinationRules;
	// nil when the document has no standard-type rule (an empty document
	// included), which clears the application's rules, as in Java.
	Group *cluster.MeshRuleGroup
	// Notes name what was read but does not act, for the log: documents
	// of other rule types, headers and tracingContext matches, fallbacks
	// that bind to nothing in Java.
	Notes []string
}

// ParseMeshRules parses a mesh rule document (docKey is its config-center
// key, "<application>.MESHAPPRULE"; the application is taken from it):
// YAML documents separated by "---", each a VirtualService or a
// DestinationRule:
//
//	apiVersion: service.dubbo.apache.org/v1alpha1
//	kind: DestinationRule
//	metadata: {name: shop-route}
//	spec:
//	  host: shop
//	  subsets:
//	    - {name: v1, labels: {version: v1}}
//	    - {name: v2, labels: {version: v2}}
//	---
//	apiVersion: service.dubbo.apache.org/v1alpha1
//	kind: VirtualService
//	metadata: {name: shop-route}
//	spec:
//	  hosts: [shop]
//	  dubbo:
//	    - services: [{exact: org.example.Shop}]
//	      routedetail:
//	        - name: gray
//	          match: [{attachments: {dubboContext: {user: {exact: tester}}}}]
//	          route: [{destination: {host: shop, subset: v2}}]
//	        - name: rest
//	          route:
//	            - {destination: {host: shop, subset: v1}, weight: 90}
//	            - {destination: {host: shop, subset: v2, fallback: {destination: {subset: v1}}}, weight: 10}
//
// Keys are Java's field names (case-sensitive). Java: MeshAppRuleListener,
// MeshRuleRouter.onRuleChange, the rule/ classes bound by PojoUtils.
//
// Where Java logs and skips a document, or throws at call time, weft
// refuses the whole push (the rules in force stay): a document that is no
// mapping, lacks metadata.name or a known kind; a standard group without
// both a VirtualService and a DestinationRule (Java keeps the previous
// group then too); a subset without a name; a routedetail without route;
// a route without destination; a negative argument index; an unknown
// loadBalancer.
func ParseMeshRules(docKey string, data []byte) (*MeshRules, error) {
	out, group, err := parseMeshDocuments(docKey, data)
	if err != nil || group == nil {
		return out, err
	}
	if !group.Valid() {
		return nil, &RuleError{Key: docKey, Want: fmt.Sprintf("at least one %s and one %s (got %d and %d; Java ignores such a group and keeps the rules in force)",
			KindVirtualService, KindDestinationRule, len(group.VirtualServices), len(group.DestinationRules))}
	}
	out.Group = group
	return out, nil
}

// parseMeshDocuments reads the documents of a push; group is nil when
// none is of the standard type, and may lack a kind (not Valid).
func parseMeshDocuments(docKey string, data []byte) (*MeshRules, *cluster.MeshRuleGroup, error) {
	d := &ruleDoc{key: docKey}
	docs, err := d.loadAll(data)
	if err != nil {
		return nil, nil, err
	}
	out := &MeshRules{}
	group := &cluster.MeshRuleGroup{App: strings.TrimSuffix(docKey, MeshRuleSuffix)}
	standard := false
	for i, doc := range docs {
		p := fmt.Sprintf("documents[%d]", i)
		if doc.Kind != yaml.MappingNode {
			return nil, nil, d.fail(doc, p, "a mapping {apiVersion, kind, metadata, spec}", kindName(doc))
		}
		md, err := d.mapping(doc, "metadata", p)
		if err != nil {
			return nil, nil, err
		}
		if md == nil {
			return nil, nil, d.fail(doc, fieldPath(p, "metadata"), "metadata {name: ...} (the rule type comes from metadata.name)", "")
		}
		name, _, err := d.str(md, "name", fieldPath(p, "metadata"))
		if err != nil {
			return nil, nil, err
		}
		if name == "" {
			return nil, nil, d.fail(md, fieldPath(p, "metadata.name"), "a rule name (no '.': a standard rule)", "")
		}
		if _, typ, ok := strings.Cut(name, "."); ok && typ != MeshRuleTypeStandard {
			// Java dispatches it to the listeners of that type; none is
			// weft's.
			out.Notes = append(out.Notes, fmt.Sprintf("%s: rule type %q (metadata.name %q) has no router in weft; ignored", p, typ, name))
			continue
		}
		kind, _, err := d.str(doc, "kind", p)
		if err != nil {
			return nil, nil, err
		}
		spec, err := d.mapping(doc, "spec", p)
		if err != nil {
			return nil, nil, err
		}
		switch kind {
		case KindVirtualService:
			vs, err := d.virtualService(spec, fieldPath(p, "spec"), out)
			if err != nil {
				return nil, nil, err
			}
			vs.Name = name
			group.VirtualServices = append(group.VirtualServices, vs)
		case KindDestinationRule:
			dr, err := d.destinationRule(spec, fieldPath(p, "spec"))
			if err != nil {
				return nil, nil, err
			}
			dr.Name = name
			group.DestinationRules = append(group.DestinationRules, dr)
		default:
			n, _ := d.field(doc, "kind", p)
			if n == nil {
				n = doc
			}
			return nil, nil, d.fail(n, fieldPath(p, "kind"), KindVirtualService+" or "+KindDestinationRule, kind)
		}
		standard = true
	}
	if !standard {
		return out, nil, nil
	}
	return out, group, nil
}

// loadAll parses data as YAML documents ("---"), within the same bounds as
// load, the documents together; empty documents (a trailing "---") are
// left out.
func (d *ruleDoc) loadAll(data []byte) ([]*yaml.Node, error) {
	if len(data) > MaxRuleDocumentBytes {
		return nil, &RuleError{Key: d.key, Want: fmt.Sprintf("a document of at most %d bytes", MaxRuleDocumentBytes),
			Got: strconv.Itoa(len(data)) + " bytes"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.Node
	for i := 0; ; i++ {
		var root yaml.Node
		if err := dec.Decode(&root); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, &RuleError{Key: d.key, Path: fmt.Sprintf("documents[%d]", i), Want: "valid YAML", Err: err}
		}
		if i >= MaxRuleItems {
			return nil, &RuleError{Key: d.key, Want: fmt.Sprintf("at most %d YAML documents", MaxRuleItems), Got: "more"}
		}
		n := &root
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			n = n.Content[0]
		}
		if n.Kind == yaml.DocumentNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
			continue // an empty document
		}
		n, err := d.deref(n, fmt.Sprintf("documents[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
}

func (d *ruleDoc) virtualService(spec *yaml.Node, p string, out *MeshRules) (*cluster.VirtualService, error) {
	vs := &cluster.VirtualService{}
	if spec == nil {
		return nil, d.fail(nil, p, "a spec {hosts, dubbo}", "")
	}
	var err error
	if vs.Hosts, err = d.strings(spec, "hosts", p); err != nil {
		return nil, err
	}
	routes, err := d.list(spec, "dubbo", p)
	if err != nil {
		return nil, err
	}
	for i, rn := range routes {
		rp := fmt.Sprintf("%s.dubbo[%d]", p, i)
		if rn.Kind != yaml.MappingNode {
			return nil, d.fail(rn, rp, "a mapping {name, services, routedetail}", kindName(rn))
		}
		r := &cluster.DubboRoute{}
		if r.Name, _, err = d.str(rn, "name", rp); err != nil {
			return nil, err
		}
		if r.Services, err = d.stringMatches(rn, "services", rp); err != nil {
			return nil, err
		}
		details, err := d.list(rn, "routedetail", rp)
		if err != nil {
			return nil, err
		}
		for j, dn := range details {
			detail, err := d.routeDetail(dn, fmt.Sprintf("%s.routedetail[%d]", rp, j), out)
			if err != nil {
				return nil, err
			}
			r.Details = append(r.Details, detail)
		}
		vs.Routes = append(vs.Routes, r)
	}
	return vs, nil
}

func (d *ruleDoc) routeDetail(n *yaml.Node, p string, out *MeshRules) (*cluster.DubboRouteDetail, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, p, "a mapping {name, match, route}", kindName(n))
	}
	rd := &cluster.DubboRouteDetail{}
	var err error
	if rd.Name, _, err = d.str(n, "name", p); err != nil {
		return nil, err
	}
	matches, err := d.list(n, "match", p)
	if err != nil {
		return nil, err
	}
	for i, mn := range matches {
		m, err := d.matchRequest(mn, fmt.Sprintf("%s.match[%d]", p, i), out)
		if err != nil {
			return nil, err
		}
		rd.Match = append(rd.Match, m)
	}
	routes, err := d.list(n, "route", p)
	if err != nil {
		return nil, err
	}
	if len(routes) == 0 {
		// Java draws nextInt(0) for it and throws: every call it matches
		// fails.
		return nil, d.fail(n, fieldPath(p, "route"), "at least one destination {destination: {host, subset}, weight}", "")
	}
	for i, rn := range routes {
		rp := fmt.Sprintf("%s.route[%d]", p, i)
		dst, err := d.routeDestination(rn, rp, 0, out)
		if err != nil {
			return nil, err
		}
		if dst.Destination == nil {
			// Java dereferences it and throws at call time.
			return nil, d.fail(rn, fieldPath(rp, "destination"), "a destination {host, subset}", "")
		}
		if fb, _ := d.field(rn, "fallback", rp); fb != nil {
			out.Notes = append(out.Notes, rp+".fallback: a fallback beside destination binds to nothing in Java Dubbo and is ignored; write destination.fallback: {destination: {host, subset}}")
		}
		rd.Route = append(rd.Route, dst)
	}
	return rd, nil
}

// routeDestination reads {destination, weight}; depth counts fallbacks.
func (d *ruleDoc) routeDestination(n *yaml.Node, p string, depth int, out *MeshRules) (*cluster.DubboRouteDestination, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, p, "a mapping {destination, weight}", kindName(n))
	}
	rd := &cluster.DubboRouteDestination{}
	var err error
	if rd.Weight, err = d.integer(n, "weight", p, 0); err != nil {
		return nil, err
	}
	dn, err := d.mapping(n, "destination", p)
	if err != nil || dn == nil {
		return rd, err
	}
	dp := fieldPath(p, "destination")
	dst := &cluster.DubboDestination{}
	if dst.Host, _, err = d.str(dn, "host", dp); err != nil {
		return nil, err
	}
	if dst.Subset, _, err = d.str(dn, "subset", dp); err != nil {
		return nil, err
	}
	if dst.Port, err = d.integer(dn, "port", dp, 0); err != nil {
		return nil, err
	}
	fb, err := d.mapping(dn, "fallback", dp)
	if err != nil {
		return nil, err
	}
	if fb != nil {
		fp := fieldPath(dp, "fallback")
		if depth >= maxMeshFallbacks {
			return nil, d.fail(fb, fp, fmt.Sprintf("a fallback chain of at most %d", maxMeshFallbacks), "a longer one")
		}
		if dst.Fallback, err = d.routeDestination(fb, fp, depth+1, out); err != nil {
			return nil, err
		}
		if dst.Fallback.Destination == nil {
			// MeshRuleRouterTest's rule2 form, {host, subset}: Java binds
			// it to a DubboRouteDestination without destination, which
			// ends the chain.
			dst.Fallback = nil
			out.Notes = append(out.Notes, fp+": a fallback without destination binds to nothing (as in Java Dubbo); write fallback: {destination: {host, subset}}")
		}
	}
	rd.Destination = dst
	return rd, nil
}

func (d *ruleDoc) matchRequest(n *yaml.Node, p string, out *MeshRules) (*cluster.DubboMatchRequest, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, p, "a mapping {method, sourceLabels, attachments}", kindName(n))
	}
	m := &cluster.DubboMatchRequest{}
	var err error
	if m.Name, _, err = d.str(n, "name", p); err != nil {
		return nil, err
	}
	if mn, err := d.mapping(n, "method", p); err != nil {
		return nil, err
	} else if mn != nil {
		if m.Method, err = d.methodMatch(mn, fieldPath(p, "method"), out); err != nil {
			return nil, err
		}
	}
	if m.SourceLabels, err = d.labels(n, "sourceLabels", p); err != nil {
		return nil, err
	}
	if an, err := d.mapping(n, "attachments", p); err != nil {
		return nil, err
	} else if an != nil {
		ap := fieldPath(p, "attachments")
		m.Attachments = &cluster.DubboAttachmentMatch{}
		if m.Attachments.DubboContext, err = d.keyMatches(an, "dubboContext", ap); err != nil {
			return nil, err
		}
		if m.Attachments.TracingContext, err = d.keyMatches(an, "tracingContext", ap); err != nil {
			return nil, err
		}
		if len(m.Attachments.TracingContext) > 0 {
			out.Notes = append(out.Notes, ap+".tracingContext: no tracing context provider, so this match never holds (as in Java Dubbo 3.3, which ships none)")
		}
	}
	if m.Headers, err = d.keyMatches(n, "headers", p); err != nil {
		return nil, err
	}
	if len(m.Headers) > 0 {
		out.Notes = append(out.Notes, p+".headers: not evaluated (as in Java Dubbo 3.3)")
	}
	return m, nil
}

func (d *ruleDoc) methodMatch(n *yaml.Node, p string, out *MeshRules) (*cluster.DubboMethodMatch, error) {
	m := &cluster.DubboMethodMatch{}
	var err error
	nm, err := d.field(n, "name_match", p)
	if err != nil {
		return nil, err
	}
	if m.NameMatch, err = d.stringMatch(nm, fieldPath(p, "name_match")); err != nil {
		return nil, err
	}
	if v, _ := d.field(n, "argc", p); v != nil {
		argc, err := d.integer(n, "argc", p, 0)
		if err != nil {
			return nil, err
		}
		m.Argc = &argc
	}
	if m.Argp, err = d.stringMatches(n, "argp", p); err != nil {
		return nil, err
	}
	args, err := d.list(n, "args", p)
	if err != nil {
		return nil, err
	}
	for i, an := range args {
		ap := fmt.Sprintf("%s.args[%d]", p, i)
		if an.Kind != yaml.MappingNode {
			return nil, d.fail(an, ap, "a mapping {index, str_value, num_value, bool_value}", kindName(an))
		}
		a := &cluster.DubboMethodArg{}
		if a.Index, err = d.integer(an, "index", ap, 0); err != nil {
			return nil, err
		}
		if a.Index < 0 {
			v, _ := d.field(an, "index", ap)
			return nil, d.fail(v, fieldPath(ap, "index"), "an argument index of 0 or more", strconv.Itoa(a.Index))
		}
		if a.Type, _, err = d.str(an, "type", ap); err != nil {
			return nil, err
		}
		if sv, err := d.mapping(an, "str_value", ap); err != nil {
			return nil, err
		} else if sv != nil {
			a.StrValue = &cluster.ListStringMatch{}
			if a.StrValue.OneOf, err = d.stringMatches(sv, "oneof", fieldPath(ap, "str_value")); err != nil {
				return nil, err
			}
		}
		if nv, err := d.mapping(an, "num_value", ap); err != nil {
			return nil, err
		} else if nv != nil {
			a.NumValue = &cluster.ListDoubleMatch{}
			np := fieldPath(ap, "num_value")
			items, err := d.list(nv, "oneof", np)
			if err != nil {
				return nil, err
			}
			for j, it := range items {
				dm, err := d.doubleMatch(it, fmt.Sprintf("%s.oneof[%d]", np, j))
				if err != nil {
					return nil, err
				}
				a.NumValue.OneOf = append(a.NumValue.OneOf, dm)
			}
		}
		if bv, err := d.mapping(an, "bool_value", ap); err != nil {
			return nil, err
		} else if bv != nil {
			a.BoolValue = &cluster.BoolMatch{}
			if v, _ := d.field(bv, "exact", fieldPath(ap, "bool_value")); v != nil {
				b, err := d.boolean(bv, "exact", fieldPath(ap, "bool_value"), false)
				if err != nil {
					return nil, err
				}
				a.BoolValue.Exact = &b
			}
		}
		m.Args = append(m.Args, a)
	}
	if m.Headers, err = d.keyMatches(n, "headers", p); err != nil {
		return nil, err
	}
	if len(m.Headers) > 0 {
		out.Notes = append(out.Notes, p+".headers: not evaluated (as in Java Dubbo 3.3)")
	}
	return m, nil
}

func (d *ruleDoc) doubleMatch(n *yaml.Node, p string) (*cluster.DoubleMatch, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, p, "a number match {exact, range, mod}", kindName(n))
	}
	m := &cluster.DoubleMatch{}
	var err error
	if m.Exact, err = d.float(n, "exact", p); err != nil {
		return nil, err
	}
	if m.Mod, err = d.float(n, "mod", p); err != nil {
		return nil, err
	}
	rn, err := d.mapping(n, "range", p)
	if err != nil {
		return nil, err
	}
	if rn != nil {
		m.Range = &cluster.DoubleRangeMatch{}
		rp := fieldPath(p, "range")
		if m.Range.Start, err = d.float(rn, "start", rp); err != nil {
			return nil, err
		}
		if m.Range.End, err = d.float(rn, "end", rp); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// float reads an optional number (Java: a Double), nil when absent.
func (d *ruleDoc) float(m *yaml.Node, key, path string) (*float64, error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return nil, err
	}
	if v.Kind == yaml.ScalarNode {
		s := v.Value
		switch strings.ToLower(s) {
		case ".inf", "+.inf":
			s = "+Inf"
		case "-.inf":
			s = "-Inf"
		case ".nan":
			s = "NaN"
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return &f, nil
		}
	}
	return nil, d.fail(v, fieldPath(path, key), "a number", kindName(v))
}

func (d *ruleDoc) destinationRule(spec *yaml.Node, p string) (*cluster.DestinationRule, error) {
	if spec == nil {
		return nil, d.fail(nil, p, "a spec {host, subsets}", "")
	}
	dr := &cluster.DestinationRule{}
	var err error
	if dr.Host, _, err = d.str(spec, "host", p); err != nil {
		return nil, err
	}
	subsets, err := d.list(spec, "subsets", p)
	if err != nil {
		return nil, err
	}
	for i, sn := range subsets {
		sp := fmt.Sprintf("%s.subsets[%d]", p, i)
		if sn.Kind != yaml.MappingNode {
			return nil, d.fail(sn, sp, "a mapping {name, labels}", kindName(sn))
		}
		s := &cluster.Subset{}
		if s.Name, _, err = d.str(sn, "name", sp); err != nil {
			return nil, err
		}
		if s.Name == "" {
			return nil, d.fail(sn, fieldPath(sp, "name"), "a subset name (destinations name it)", "")
		}
		if s.Labels, err = d.labels(sn, "labels", sp); err != nil {
			return nil, err
		}
		dr.Subsets = append(dr.Subsets, s)
	}
	tp, err := d.mapping(spec, "trafficPolicy", p)
	if err != nil || tp == nil {
		return dr, err
	}
	lb, err := d.mapping(tp, "loadBalancer", fieldPath(p, "trafficPolicy"))
	if err != nil || lb == nil {
		return dr, err
	}
	lp := fieldPath(p, "trafficPolicy.loadBalancer")
	if dr.LoadBalancer, _, err = d.str(lb, "simple", lp); err != nil {
		return nil, err
	}
	switch dr.LoadBalancer {
	case "", "ROUND_ROBIN", "LEAST_CONN", "RANDOM", "PASSTHROUGH":
	default:
		// Java binds it to the SimpleLB enum and fails the group.
		v, _ := d.field(lb, "simple", lp)
		return nil, d.fail(v, fieldPath(lp, "simple"), "ROUND_ROBIN, LEAST_CONN, RANDOM or PASSTHROUGH", dr.LoadBalancer)
	}
	return dr, nil
}

// labels reads an optional mapping of scalars, in the document's order.
func (d *ruleDoc) labels(m *yaml.Node, key, path string) ([]cluster.Label, error) {
	var out []cluster.Label
	err := d.entries(m, key, path, func(k string, v *yaml.Node, p string) error {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return d.fail(v, p, "a string", kindName(v))
		}
		out = append(out, cluster.Label{Key: k, Value: v.Value})
		return nil
	})
	return out, err
}

// keyMatches reads an optional mapping of string matches.
func (d *ruleDoc) keyMatches(m *yaml.Node, key, path string) ([]cluster.KeyMatch, error) {
	var out []cluster.KeyMatch
	err := d.entries(m, key, path, func(k string, v *yaml.Node, p string) error {
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return d.fail(v, p, "a string match", "null")
		}
		sm, err := d.stringMatch(v, p)
		if err != nil {
			return err
		}
		out = append(out, cluster.KeyMatch{Key: k, Match: sm})
		return nil
	})
	return out, err
}

// entries walks an optional mapping's entries, bounded by MaxRuleItems.
func (d *ruleDoc) entries(m *yaml.Node, key, path string, each func(k string, v *yaml.Node, path string) error) error {
	n, err := d.mapping(m, key, path)
	if err != nil || n == nil {
		return err
	}
	p := fieldPath(path, key)
	if len(n.Content)/2 > MaxRuleItems {
		return d.fail(n, p, fmt.Sprintf("at most %d entries", MaxRuleItems), strconv.Itoa(len(n.Content)/2)+" entries")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := d.deref(n.Content[i], p)
		if err != nil {
			return err
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return d.fail(k, p, "string keys", kindName(k))
		}
		kp := fieldPath(p, k.Value)
		v, err := d.deref(n.Content[i+1], kp)
		if err != nil {
			return err
		}
		if err := each(k.Value, v, kp); err != nil {
			return err
		}
	}
	return nil
}

// stringMatches reads an optional list of string matches.
func (d *ruleDoc) stringMatches(m *yaml.Node, key, path string) ([]*cluster.StringMatch, error) {
	items, err := d.list(m, key, path)
	if err != nil {
		return nil, err
	}
	out := make([]*cluster.StringMatch, 0, len(items))
	for i, it := range items {
		sm, err := d.stringMatch(it, fmt.Sprintf("%s[%d]", fieldPath(path, key), i))
		if err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}
