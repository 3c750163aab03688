package governance

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/weftrpc/weft/cluster"
)

// The matchers themselves are cluster's (its tag router runs them); what
// is here reads them from a rule document.

func (d *ruleDoc) stringMatch(n *yaml.Node, path string) (*cluster.StringMatch, error) {
	if n == nil {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, path, "a string match (exact, prefix, regex, wildcard, empty, noempty)", kindName(n))
	}
	m := &cluster.StringMatch{}
	var regex *string
	set := 0
	for _, f := range []struct {
		name string
		dst  **string
	}{{"exact", &m.Exact}, {"prefix", &m.Prefix}, {"regex", &regex}, {"wildcard", &m.Wildcard}, {"empty", &m.Empty}, {"noempty", &m.NoEmpty}} {
		s, ok, err := d.str(n, f.name, path)
		if err != nil {
			return nil, err
		}
		if ok {
			*f.dst = &s
			set++
		}
	}
	if set == 0 {
		return nil, d.fail(n, path, "one of exact, prefix, regex, wildcard, empty, noempty", "none")
	}
	if regex != nil {
		p := fieldPath(path, "regex")
		if len(*regex) > MaxRuleRegexBytes {
			return nil, d.fail(n, p, fmt.Sprintf("a regex of at most %d bytes", MaxRuleRegexBytes), *regex)
		}
		// Java's String.matches: the whole input.
		re, err := regexp.Compile(`^(?:` + *regex + `)$`)
		if err != nil {
			e := d.fail(n, p, "a regular expression (RE2 syntax)", *regex).(*RuleError)
			e.Err = err
			return nil, e
		}
		m.Regex = re
	}
	return m, nil
}

func (d *ruleDoc) paramMatches(parent *yaml.Node, key, path string) ([]cluster.ParamMatch, error) {
	items, err := d.list(parent, key, path)
	if err != nil {
		return nil, err
	}
	out := make([]cluster.ParamMatch, 0, len(items))
	for i, it := range items {
		p := fmt.Sprintf("%s[%d]", fieldPath(path, key), i)
		if it.Kind != yaml.MappingNode {
			return nil, d.fail(it, p, "a mapping {key, value}", kindName(it))
		}
		k, ok, err := d.str(it, "key", p)
		if err != nil {
			return nil, err
		}
		if !ok || k == "" {
			return nil, d.fail(it, fieldPath(p, "key"), "a parameter name", "")
		}
		vn, err := d.field(it, "value", p)
		if err != nil {
			return nil, err
		}
		if vn == nil {
			return nil, d.fail(it, fieldPath(p, "value"), "a string match", "")
		}
		sm, err := d.stringMatch(vn, fieldPath(p, "value"))
		if err != nil {
			return nil, err
		}
		out = append(out, cluster.ParamMatch{Key: k, Value: sm})
	}
	return out, nil
}
