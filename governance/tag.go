package governance

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weftrpc/weft/cluster"
)

// ParseTagRules parses a tag-router document, as Dubbo Admin writes it
// under "<provider application>.tag-router" (TagRouterKey); docKey is its
// config-center key, for errors:
//
//	configVersion: v3.0
//	force: false
//	enabled: true
//	runtime: true
//	key: shop-provider
//	tags:
//	  - name: gray
//	    addresses: [10.0.0.1:20880, 10.0.1.*]
//	  - name: canary
//	    match:
//	      - key: env
//	        value: {exact: canary}
//
// Version is v2.7 when the document has none; only v3.0 reads match. The
// rule is cluster's (cluster.TagRules, whose Router routes by it). Java:
// TagRuleParser, TagRouterRule, Tag, ParamMatch.
func ParseTagRules(docKey string, data []byte) (*cluster.TagRules, error) {
	d := &ruleDoc{key: docKey}
	root, err := d.load(data)
	if err != nil {
		return nil, err
	}
	h, err := d.header(root, RuleVersionV27, RuleVersionV30)
	if err != nil {
		return nil, err
	}
	if h.scope == ScopeService {
		n, _ := d.field(root, "scope", "")
		return nil, d.fail(n, "scope", "application (tag rules belong to a provider application)", h.scope)
	}
	r := &cluster.TagRules{Version: h.version, Key: h.key, Enabled: h.enabled, Force: h.force, Runtime: h.runtime, Priority: h.priority}
	v30 := strings.HasPrefix(strings.ToLower(h.version), RuleVersionV30)
	items, err := d.list(root, "tags", "")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// Java marks the rule invalid: providers' own tags decide.
		n, _ := d.field(root, "tags", "")
		return nil, d.fail(n, "tags", "a list of at least one tag {name, addresses or match}", "")
	}
	for i, it := range items {
		p := fmt.Sprintf("tags[%d]", i)
		if it.Kind != yaml.MappingNode {
			return nil, d.fail(it, p, "a mapping {name, addresses, match}", kindName(it))
		}
		var t cluster.Tag
		var ok bool
		if t.Name, ok, err = d.str(it, "name", p); err != nil {
			return nil, err
		}
		if !ok || t.Name == "" {
			return nil, d.fail(it, fieldPath(p, "name"), "a tag name", "")
		}
		addresses, err := d.strings(it, "addresses", p)
		if err != nil {
			return nil, err
		}
		for j, a := range addresses {
			ip, err := cluster.ParseIPPattern(a)
			if err != nil {
				e := d.fail(it, fmt.Sprintf("%s.addresses[%d]", p, j), "an address or IP pattern", a).(*RuleError)
				e.Err = err
				return nil, e
			}
			t.Addresses = append(t.Addresses, ip)
		}
		if v30 {
			// Java reads match only in v3.0 documents, and ignores it in
			// others; a tag with neither addresses nor match sets nothing.
			if t.Match, err = d.paramMatches(it, "match", p); err != nil {
				return nil, err
			}
		}
		r.Tags = append(r.Tags, t)
	}
	return r, nil
}
