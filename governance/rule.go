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
	"github.com/weftrpc/weft/kernel"
)

// Dubbo Admin's governance rules live in the config center under these keys
// (Java: DynamicConfiguration.getRuleKey, ListenableStateRouter.RULE_SUFFIX,
// TagStateRouter.RULE_SUFFIX, registry Constants.CONFIGURATORS_SUFFIX), all
// in the group GovernanceGroup.
const (
	// GovernanceGroup is the config-center group of every rule
	// (DynamicConfiguration.DEFAULT_GROUP).
	GovernanceGroup = "dubbo"

	ConditionRouterSuffix = ".condition-router"
	TagRouterSuffix       = ".tag-router"
	ConfiguratorsSuffix   = ".configurators"
)

// Rule document versions Java Dubbo 3 reads (cluster Constants).
const (
	RuleVersionV27 = "v2.7"
	RuleVersionV30 = "v3.0"
	RuleVersionV31 = "v3.1"
)

// Scopes of a rule document: the key names a service or an application.
const (
	ScopeService     = "service"
	ScopeApplication = "application"
)

// Bounds on a rule document. Documents come from whoever can write to the
// config center: each bound keeps a hostile or broken one from costing more
// than a bounded amount of memory and time to reject.
const (
	// MaxRuleDocumentBytes bounds a whole document.
	MaxRuleDocumentBytes = 1 << 20
	// MaxRuleItems bounds every list of a document (conditions, tags,
	// configs, addresses, matches...).
	MaxRuleItems = 1024
	// MaxRuleRegexBytes bounds one regex of a match; Go's regexp is linear
	// in its input, so only the pattern's size needs a bound.
	MaxRuleRegexBytes = 1024
	// maxRuleNodes bounds the YAML nodes a parse visits, aliases included
	// (an alias is visited at each use), so "billion laughs" documents end
	// early.
	maxRuleNodes = 100_000
)

// RuleKey is the key Dubbo gives a service's rules in the config center:
// interface:version:group, each empty part left empty
// (URL.getColonSeparatedKey): "org.example.Greeter::" with neither,
// "org.example.Greeter:1.0.0:" with a version only.
func RuleKey(iface, version, group string) string {
	return iface + ":" + version + ":" + group
}

// RuleKeyOf is RuleKey for a consumer or provider URL.
func RuleKeyOf(u *kernel.URL) string {
	return RuleKey(u.Interface(), u.Param(kernel.KeyVersion), u.Param(kernel.KeyGroup))
}

// ConditionRouterKey is the config-center key of the condition rules of a
// service (target from RuleKey) or of an application (its name).
func ConditionRouterKey(target string) string { return target + ConditionRouterSuffix }

// TagRouterKey is the config-center key of a provider application's tag rule.
func TagRouterKey(application string) string { return application + TagRouterSuffix }

// ConfiguratorsKey is the config-center key of the override rules of a
// service (target from RuleKey) or of an application (its name).
func ConfiguratorsKey(target string) string { return target + ConfiguratorsSuffix }

// keyScope says whether a config-center key names a service or an
// application: RuleKey always has two colons, application names have none.
// "" when the key is empty (the caller did not say).
func keyScope(docKey string) string {
	for _, suffix := range []string{ConditionRouterSuffix, TagRouterSuffix, ConfiguratorsSuffix} {
		docKey = strings.TrimSuffix(docKey, suffix)
	}
	switch {
	case docKey == "":
		return ""
	case strings.Count(docKey, ":") >= 2:
		return ScopeService
	default:
		return ScopeApplication
	}
}

// RuleError is a rule document that cannot be used: which document, where
// in it, what was expected. It quotes at most a bounded prefix of what it
// found, so a huge document does not become a huge log line.
type RuleError struct {
	// Key is the document's config-center key, as the caller gave it.
	Key string
	// Path is the field, "conditions[2]", "configs[0].match.param[1].value".
	// Empty for the document as a whole.
	Path string
	// Line is the document line of the field, 0 when unknown.
	Line int
	// Want says what the field should be.
	Want string
	// Got is a bounded quote of what was found; empty when nothing was.
	Got string
	// Err is an underlying error (YAML syntax, regexp), if any.
	Err error
}

func (e *RuleError) Error() string {
	var b strings.Builder
	b.WriteString("governance rule ")
	b.WriteString(strconv.Quote(echo(e.Key)))
	if e.Path != "" {
		b.WriteString(", ")
		b.WriteString(e.Path)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": want ")
	b.WriteString(e.Want)
	if e.Got != "" {
		b.WriteString(", got ")
		b.WriteString(strconv.Quote(e.Got))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(echo(e.Err.Error()))
	}
	return b.String()
}

func (e *RuleError) Unwrap() error { return e.Err }

// echo is cluster's: the same cut of a quoted text, so that rules and
// routers quote alike.
func echo(s string) string { return cluster.Echo(s) }

// ruleDoc walks one YAML document and builds its errors.
type ruleDoc struct {
	key   string
	nodes int
}

func (d *ruleDoc) fail(n *yaml.Node, path, want, got string) error {
	e := &RuleError{Key: d.key, Path: path, Want: want, Got: echo(got)}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

// load parses data as one YAML document whose top is a mapping.
func (d *ruleDoc) load(data []byte) (*yaml.Node, error) {
	if len(data) > MaxRuleDocumentBytes {
		return nil, &RuleError{Key: d.key, Want: fmt.Sprintf("a document of at most %d bytes", MaxRuleDocumentBytes),
			Got: strconv.Itoa(len(data)) + " bytes"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &RuleError{Key: d.key, Want: "a YAML mapping", Got: "an empty document"}
		}
		return nil, &RuleError{Key: d.key, Want: "valid YAML", Err: err}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &RuleError{Key: d.key, Want: "a single YAML document", Got: "more than one", Err: err}
	}
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	n, err := d.deref(n, "")
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, "", "a YAML mapping (configVersion, key, ...)", kindName(n))
	}
	return n, nil
}

// deref follows aliases and counts the node against the document's budget.
func (d *ruleDoc) deref(n *yaml.Node, path string) (*yaml.Node, error) {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 16 {
			return nil, d.fail(n, path, "aliases that end", "an alias chain")
		}
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxRuleNodes {
		return nil, d.fail(n, path, fmt.Sprintf("at most %d YAML nodes (aliases count at each use)", maxRuleNodes), "more")
	}
	if n == nil {
		return nil, d.fail(nil, path, "a value", "nothing")
	}
	return n, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return n.Value
	}
	return "a YAML node"
}

// field returns the value of key in mapping m, nil when absent or null
// (SnakeYAML gives Java a null for both).
func (d *ruleDoc) field(m *yaml.Node, key, path string) (*yaml.Node, error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, err := d.deref(m.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind == yaml.ScalarNode && k.Value == key {
			v, err := d.deref(m.Content[i+1], fieldPath(path, key))
			if err != nil {
				return nil, err
			}
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				return nil, nil
			}
			return v, nil
		}
	}
	return nil, nil
}

func fieldPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// str reads an optional scalar; ok false when absent.
func (d *ruleDoc) str(m *yaml.Node, key, path string) (s string, ok bool, err error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return "", false, err
	}
	if v.Kind != yaml.ScalarNode {
		return "", false, d.fail(v, fieldPath(path, key), "a string", kindName(v))
	}
	return v.Value, true, nil
}

// boolean reads an optional boolean, def when absent. Java reads
// Boolean.parseBoolean(value.toString()), so anything but "true" is false;
// weft refuses what is neither YAML 1.1 true nor false (SnakeYAML's set),
// since "ture" silently meaning false is how a rule does the opposite of
// what its author wanted.
func (d *ruleDoc) boolean(m *yaml.Node, key, path string, def bool) (bool, error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return def, err
	}
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on", "y":
			return true, nil
		case "false", "no", "off", "n":
			return false, nil
		}
	}
	return false, d.fail(v, fieldPath(path, key), "true or false", kindName(v))
}

// integer reads an optional int (Java: Integer.parseInt(value.toString())).
func (d *ruleDoc) integer(m *yaml.Node, key, path string, def int) (int, error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return def, err
	}
	if v.Kind == yaml.ScalarNode {
		if n, err := strconv.ParseInt(v.Value, 10, 32); err == nil {
			return int(n), nil
		}
	}
	return 0, d.fail(v, fieldPath(path, key), "a 32-bit integer", kindName(v))
}

// list reads an optional sequence, bounded by MaxRuleItems.
func (d *ruleDoc) list(m *yaml.Node, key, path string) ([]*yaml.Node, error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return nil, err
	}
	p := fieldPath(path, key)
	if v.Kind != yaml.SequenceNode {
		return nil, d.fail(v, p, "a list", kindName(v))
	}
	if len(v.Content) > MaxRuleItems {
		return nil, d.fail(v, p, fmt.Sprintf("at most %d items", MaxRuleItems), strconv.Itoa(len(v.Content))+" items")
	}
	out := make([]*yaml.Node, len(v.Content))
	for i, it := range v.Content {
		if out[i], err = d.deref(it, fmt.Sprintf("%s[%d]", p, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// strings reads an optional list of scalars (Java: String.valueOf of each).
func (d *ruleDoc) strings(m *yaml.Node, key, path string) ([]string, error) {
	items, err := d.list(m, key, path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if it.Kind != yaml.ScalarNode {
			return nil, d.fail(it, fmt.Sprintf("%s[%d]", fieldPath(path, key), i), "a string", kindName(it))
		}
		out = append(out, it.Value)
	}
	return out, nil
}

// mapping reads an optional mapping.
func (d *ruleDoc) mapping(m *yaml.Node, key, path string) (*yaml.Node, error) {
	v, err := d.field(m, key, path)
	if err != nil || v == nil {
		return nil, err
	}
	if v.Kind != yaml.MappingNode {
		return nil, d.fail(v, fieldPath(path, key), "a mapping", kindName(v))
	}
	return v, nil
}

// ruleHeader is what every rule document starts with (AbstractRouterRule,
// ConfiguratorConfig).
type ruleHeader struct {
	version  string
	scope    string
	key      string
	enabled  bool
	force    bool
	runtime  bool
	priority int
}

// header reads the common fields; versions lists the configVersions the
// kind accepts. A missing configVersion is read as v2.7, as Java does (its
// own test documents have none).
func (d *ruleDoc) header(root *yaml.Node, versions ...string) (ruleHeader, error) {
	h := ruleHeader{}
	var err error
	var ok bool
	if h.version, ok, err = d.str(root, "configVersion", ""); err != nil {
		return h, err
	}
	if !ok {
		h.version = RuleVersionV27
	} else {
		known := false
		for _, v := range versions {
			// Java compares case-insensitively and by prefix ("v3.0.1").
			if strings.HasPrefix(strings.ToLower(h.version), v) {
				known = true
			}
		}
		if !known {
			v, _ := d.field(root, "configVersion", "")
			return h, d.fail(v, "configVersion", "one of "+strings.Join(versions, ", "), h.version)
		}
	}
	if h.scope, _, err = d.str(root, "scope", ""); err != nil {
		return h, err
	}
	if h.scope != "" && h.scope != ScopeService && h.scope != ScopeApplication {
		v, _ := d.field(root, "scope", "")
		return h, d.fail(v, "scope", "service or application", h.scope)
	}
	if ks := keyScope(d.key); ks != "" && h.scope != "" && h.scope != ks {
		v, _ := d.field(root, "scope", "")
		return h, d.fail(v, "scope", ks+" (the config-center key names "+article(ks)+")", h.scope)
	}
	if h.key, _, err = d.str(root, "key", ""); err != nil {
		return h, err
	}
	if h.enabled, err = d.boolean(root, "enabled", "", true); err != nil {
		return h, err
	}
	if h.force, err = d.boolean(root, "force", "", false); err != nil {
		return h, err
	}
	if h.runtime, err = d.boolean(root, "runtime", "", true); err != nil {
		return h, err
	}
	if h.priority, err = d.integer(root, "priority", "", 0); err != nil {
		return h, err
	}
	return h, nil
}

func article(scope string) string {
	if scope == ScopeApplication {
		return "an application"
	}
	return "a service"
}
