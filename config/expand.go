package config

import (
	"fmt"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"path/filepath"
	"strings"
)

// Expand replaces each ${NAME} in s with the value of the environment
// variable NAME (lookup), and each ${NAME:default} with it or, when NAME is
// not set, with default; $${ is a literal ${. A file can then keep what
// differs between machines (addresses, ports, secrets) out of its text, as
// Spring's and dubbo-go's placeholders do. An unset NAME without a default
// is an error naming it: an empty address would fail later and further
// from its cause.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has a ${ without its }: write ${NAME} or ${NAME:default}, or $${ for a literal ${", s)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":")
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s}: %q is not an environment variable's name (letters, digits and _)", ref, name)
		}
		v, ok := lookup(name)
		switch {
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("${%s}: the environment variable %s is not set; set it, or give a default: ${%s:default}", ref, name, name)
		}
		s = s[i+end+1:]
	}
}

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

// Prepare is what a YAML document goes through before weft reads it: its
// placeholders resolved (ExpandValue, lookup giving the environment), then,
// for a dubbo-go config, its keys put in weft's (FromDubboGoDoc).
func Prepare(doc map[string]any, lookup func(string) (string, bool)) (map[string]any, error) {
	v, _, err := ExpandValue("", doc, lookup)
	if err != nil {
		return nil, err
	}
	doc, _ = v.(map[string]any)
	if out, ok, err := FromDubboGoDoc(doc); ok {
		return out, err
	}
	return doc, nil
}

// ExpandValue is Expand on a decoded config value at key path at: a string,
// or the strings of a list or block, at any depth (a router's rule in a
// list of blocks). changed is false when nothing was replaced.
func ExpandValue(at string, v any, lookup func(string) (string, bool)) (any, bool, error) {
	switch x := v.(type) {
	case string:
		s, err := Expand(x, lookup)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", at, err)
		}
		return s, s != x, nil
	case []any:
		out, changed := make([]any, len(x)), false
		for i, e := range x {
			ev, c, err := ExpandValue(fmt.Sprintf("%s[%d]", at, i), e, lookup)
			if err != nil {
				return nil, false, err
			}
			out[i], changed = ev, changed || c
		}
		return out, changed, nil
	case map[string]any:
		out, changed := make(map[string]any, len(x)), false
		for k, e := range x {
			path := k
			if at != "" {
				path = at + "." + k
			}
			ev, c, err := ExpandValue(path, e, lookup)
			if err != nil {
				return nil, false, err
			}
			out[k], changed = ev, changed || c
		}
		return out, changed, nil
	}
	return v, false, nil
}

// ResolvePaths makes the relative file paths a config file set relative to
// that file's directory, as absolute paths: a config and the files it names
// (WASM modules, IDLs) are deployed together, wherever the App is started
// from. from gives, by flattened key, the file that last set it ("" for a
// YAML string or the environment, whose paths stay relative to the working
// directory).
func (c *Config) ResolvePaths(from map[string]string) error {
	wasmFrom := map[string]string{}
	for key, file := range from {
		if name, ok := wasmfilter.PathKey(key); ok {
			wasmFrom[name] = file
		}
	}
	if err := c.Wasm.ResolvePaths(wasmFrom); err != nil {
		return err
	}
	resolve := func(key, p string) (string, error) {
		file := from[key]
		if file == "" || p == "" || filepath.IsAbs(p) {
			return p, nil
		}
		dir, err := filepath.Abs(filepath.Dir(file))
		if err != nil {
			return "", fmt.Errorf("weft: config: %s: cannot resolve %q against the directory of %s: %w", key, p, file, err)
		}
		return filepath.Join(dir, p), nil
	}
	for id, sc := range c.Provider.Services {
		var err error
		base := "provider.services." + id
		if sc.IDL, err = resolve(base+".idl", sc.IDL); err != nil {
			return err
		}
		if sc.Impl != nil {
			im := *sc.Impl
			if im.Wasm, err = resolve(base+".impl.wasm", im.Wasm); err != nil {
				return err
			}
			sc.Impl = &im
		}
		c.Provider.Services[id] = sc
	}
	return nil
}
