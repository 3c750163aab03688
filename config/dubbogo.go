package config

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FromDubboGo translates a dubbo-go 3 config (the tree under its `dubbo:`
// root, as dubbo-go-samples write dubbogo.yml) into weft's keys, so that
// such a file runs as it is. What has a meaning in weft is kept with that
// meaning (registries, protocols, services, references and their Dubbo
// keys, the config center, the logger's level); keys weft does not support
// are errors naming each one (dubbo.registries.demoZK.simplified: ...), never
// dropped in silence: a user must know that a setting does nothing.
func FromDubboGo(tree map[string]any) (map[string]any, error) {
	t := &dgTranslator{out: map[string]any{}}
	// The registries first: services and references name them.
	order := []string{"application", "registries", "protocols", "config-center", "provider", "consumer", "logger"}
	parts := map[string]func(string, any){
		"application":   t.application,
		"registries":    t.each(t.registry),
		"protocols":     t.each(t.protocol),
		"provider":      t.provider,
		"consumer":      t.consumer,
		"config-center": t.configCenter,
		"logger":        t.logger,
	}
	byNorm := map[string]string{}
	for _, k := range sortedKeys(tree) {
		byNorm[dgNorm(k)] = k
		if parts[dgNormKnown(k, parts)] == nil {
			t.unsupported("dubbo." + k)
		}
	}
	for _, k := range order {
		if orig, ok := byNorm[dgNorm(k)]; ok {
			parts[k]("dubbo."+orig, tree[orig])
		}
	}
	if len(t.unsup) > 0 {
		t.errs = append(t.errs, fmt.Sprintf("keys weft does not support: %s; remove them (docs/configuration.md lists the dubbo-go keys weft reads)",
			strings.Join(t.unsup, ", ")))
	}
	if len(t.errs) > 0 {
		return nil, fmt.Errorf("a dubbo-go config (dubbo: at the top): %s", strings.Join(t.errs, "; "))
	}
	return t.out, nil
}

type dgTranslator struct {
	out          map[string]any
	errs         []string // values weft cannot take, in the order met
	unsup        []string // keys weft has no meaning for
	registerMode string   // from the registries' registry-type
}

func (t *dgTranslator) fail(at, format string, args ...any) {
	t.errs = append(t.errs, at+": "+fmt.Sprintf(format, args...))
}

// unsupported records a key weft has no meaning for.
func (t *dgTranslator) unsupported(at string) { t.unsup = append(t.unsup, at) }

// set puts v at weft's key path.
func (t *dgTranslator) set(path string, v any) {
	m := t.out
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// block walks a map at path at, handing each known key to its function and
// reporting the others.
func (t *dgTranslator) block(at string, v any, keys map[string]func(string, any)) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			t.fail(at, "%s is not a block of keys", quoteValue(v))
		}
		return
	}
	// dubbo-go reads its keys whatever their case and dashes
	// (registry-ids, registryIDs): so does weft.
	norm := make(map[string]func(string, any), len(keys))
	for k, f := range keys {
		norm[dgNorm(k)] = f
	}
	for _, k := range sortedKeys(m) {
		if f, ok := norm[dgNorm(k)]; ok {
			f(at+"."+k, m[k])
		} else {
			t.unsupported(at + "." + k)
		}
	}
}

// dgNormKnown is the key of parts that k names, "" for none.
func dgNormKnown(k string, parts map[string]func(string, any)) string {
	for p := range parts {
		if dgNorm(p) == dgNorm(k) {
			return p
		}
	}
	return ""
}

func dgNorm(k string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
}

// each applies f to each entry of a map of ids (registries, protocols...).
func (t *dgTranslator) each(f func(at, id string, v any)) func(string, any) {
	return func(at string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			t.fail(at, "%s is not a block of ids", quoteValue(v))
			return
		}
		for _, id := range sortedKeys(m) {
			f(at+"."+id, id, m[id])
		}
	}
}

// copyTo copies a value to weft's key path as it is.
func (t *dgTranslator) copyTo(path string) func(string, any) {
	return func(_ string, v any) { t.set(path, v) }
}

// ignore accepts a key that is descriptive only (dubbo-go puts it on URLs
// for people to read): weft has nowhere it matters.
func ignore(string, any) {}

// ms copies a dubbo-go duration ("3s", "500ms", or a number of ms) to
// weft's key path as ms.
func (t *dgTranslator) ms(path string) func(string, any) {
	return func(at string, v any) {
		n, err := dgMillis(v)
		if err != nil {
			t.fail(at, "%v", err)
			return
		}
		t.set(path, n)
	}
}

func dgMillis(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		return int(x), nil
	case string:
		s := strings.TrimSpace(x)
		if n, err := strconv.Atoi(s); err == nil {
			return n, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%s is not a duration (3s, 500ms) or a number of ms", quoteValue(v))
		}
		return int(d / time.Millisecond), nil
	}
	return 0, fmt.Errorf("%s is not a duration (3s, 500ms) or a number of ms", quoteValue(v))
}

func (t *dgTranslator) application(at string, v any) {
	t.block(at, v, map[string]func(string, any){
		"name":    t.copyTo("application.name"),
		"version": t.copyTo("application.version"),
		// Descriptive: on dubbo-go's URLs for people, nowhere in weft.
		"organization": ignore, "module": ignore, "owner": ignore, "environment": ignore,
		"metadata-type": func(at string, v any) {
			if s, _ := v.(string); s != "local" {
				t.fail(at, "%s: weft's MetadataService is local (each instance serves its own); remove the key or set local", quoteValue(v))
			}
		},
	})
}

func (t *dgTranslator) registry(at, id string, v any) {
	var protocol, address, user, password string
	params := url.Values{}
	t.block(at, v, map[string]func(string, any){
		"protocol": func(_ string, v any) { protocol = fmt.Sprint(v) },
		"address":  func(_ string, v any) { address = fmt.Sprint(v) },
		"timeout": func(at string, v any) {
			if n, err := dgMillis(v); err != nil {
				t.fail(at, "%v", err)
			} else {
				params.Set("timeout", strconv.Itoa(n))
			}
		},
		"group":     func(_ string, v any) { params.Set("group", fmt.Sprint(v)) },
		"namespace": func(_ string, v any) { params.Set("namespace", fmt.Sprint(v)) },
		"username":  func(_ string, v any) { user = fmt.Sprint(v) },
		"password":  func(_ string, v any) { password = fmt.Sprint(v) },
		"registry-type": func(at string, v any) {
			mode := map[string]string{"interface": "interface", "service": "instance", "all": "all"}[fmt.Sprint(v)]
			switch {
			case mode == "":
				t.fail(at, "%s is not interface, service or all", quoteValue(v))
			case t.registerMode != "" && t.registerMode != mode:
				t.fail(at, "%s differs from another registry's: weft registers one way in every registry (application.register_mode)", quoteValue(v))
			default:
				t.registerMode = mode
				t.set("application.register_mode", mode)
			}
		},
		"params": func(at string, v any) {
			m, ok := v.(map[string]any)
			if !ok {
				t.fail(at, "%s is not a block of keys", quoteValue(v))
				return
			}
			for k, pv := range m {
				params.Set(k, fmt.Sprint(pv))
			}
		},
		// ttl is dubbo-go's own session setting; weft's registries keep
		// theirs (ZooKeeper's session, Nacos' heartbeats).
		"ttl": ignore,
		// What the zone-aware cluster reads, as weft's keys.
		"zone":      t.copyTo("registries." + id + ".zone"),
		"weight":    t.copyTo("registries." + id + ".weight"),
		"preferred": t.copyTo("registries." + id + ".preferred"),
	})
	if address == "" {
		t.fail(at+".address", "missing: set the registry's host:port")
		return
	}
	// address may carry its scheme (nacos://host:port), and list a
	// cluster's servers separated by commas.
	if scheme, rest, ok := strings.Cut(address, "://"); ok {
		if protocol == "" {
			protocol = scheme
		}
		address = rest
	}
	if protocol == "" {
		t.fail(at+".protocol", "missing: set zookeeper or nacos")
		return
	}
	hosts := strings.Split(address, ",")
	if len(hosts) > 1 {
		params.Set("backup", strings.Join(hosts[1:], ","))
	}
	u := url.URL{Scheme: protocol, Host: hosts[0], RawQuery: params.Encode()}
	if user != "" || password != "" {
		u.User = url.UserPassword(user, password)
	}
	t.set("registries."+id+".address", u.String())
}

func (t *dgTranslator) protocol(at, id string, v any) {
	t.block(at, v, map[string]func(string, any){
		"name": func(at string, v any) {
			name := fmt.Sprint(v)
			if name == "triple" {
				name = "tri"
			}
			t.set("protocols."+id+".name", name)
		},
		"port": func(at string, v any) {
			n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
			if err != nil {
				t.fail(at, "%s is not a port", quoteValue(v))
				return
			}
			t.set("protocols."+id+".port", n)
		},
		"ip":     t.copyTo("protocols." + id + ".host"),
		"params": t.copyTo("protocols." + id + ".params"),
	})
}

// dgIDs reads dubbo-go's protocol-ids or registry-ids: a list, or a
// comma-separated string.
func dgIDs(v any) []string {
	var ids []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			ids = append(ids, strings.TrimSpace(fmt.Sprint(e)))
		}
	default:
		for _, s := range strings.Split(fmt.Sprint(v), ",") {
			if s = strings.TrimSpace(s); s != "" {
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// registryIDs accepts a list of registries only when it names them all:
// weft registers and subscribes in every registry of the App.
func (t *dgTranslator) registryIDs(at string, v any) {
	ids := dgIDs(v)
	if len(ids) == 0 {
		return
	}
	regs, _ := t.out["registries"].(map[string]any)
	for _, id := range ids {
		if _, ok := regs[id]; !ok {
			t.fail(at, "%q is not one of dubbo.registries", id)
			return
		}
	}
	if len(ids) < len(regs) {
		t.fail(at, "names %d of the %d registries: weft registers and subscribes in every registry of the App; remove the key or the other registries", len(ids), len(regs))
	}
}

func (t *dgTranslator) provider(at string, v any) {
	t.block(at, v, map[string]func(string, any){
		"services":     t.each(t.service),
		"filter":       t.copyTo("provider.filter"),
		"token":        t.copyTo("provider.token"),
		"registry-ids": t.registryIDs,
		"registry":     t.registryIDs,
		"protocol-ids": func(_ string, v any) { t.set("provider.protocol", strings.Join(dgIDs(v), ",")) },
	})
}

func (t *dgTranslator) service(at, id string, v any) {
	p := "provider.services." + id + "."
	keys := t.copies(p, "interface", "version", "group", "serialization", "filter", "token", "weight", "params", "tag")
	keys["not-register"] = func(at string, v any) {
		b, ok := v.(bool)
		if !ok {
			t.fail(at, "%s is not true or false", quoteValue(v))
			return
		}
		t.set(p+"register", !b)
	}
	keys["protocol-ids"] = func(_ string, v any) { t.set(p+"protocol", strings.Join(dgIDs(v), ",")) }
	keys["registry-ids"] = t.registryIDs
	keys["methods"] = t.methods(p)
	t.block(at, v, keys)
}

// copies are the keys copied as they are to the same names under p.
func (t *dgTranslator) copies(p string, names ...string) map[string]func(string, any) {
	m := make(map[string]func(string, any), len(names)+4)
	for _, n := range names {
		m[n] = t.copyTo(p + n)
	}
	return m
}

func (t *dgTranslator) consumer(at string, v any) {
	t.block(at, v, map[string]func(string, any){
		"references":      t.each(t.reference),
		"request-timeout": t.ms("consumer.timeout"),
		"check":           t.copyTo("consumer.check"),
		"filter":          t.copyTo("consumer.filter"),
		"registry-ids":    t.registryIDs,
		"registry":        t.registryIDs, // dubbo-go 1.5's name, still in samples
	})
}

func (t *dgTranslator) reference(at, id string, v any) {
	p := "consumer.references." + id + "."
	keys := t.copies(p, "interface", "version", "group", "url", "check", "cluster", "loadbalance", "retries",
		"serialization", "filter", "sticky", "params", "tag")
	keys["timeout"] = t.ms(p + "timeout")
	keys["protocol"] = func(_ string, v any) {
		name := fmt.Sprint(v)
		if name == "triple" {
			name = "tri"
		}
		t.set(p+"protocol", name)
	}
	keys["registry"] = t.registryIDs
	keys["registry-ids"] = t.registryIDs
	keys["methods"] = t.methods(p)
	keys["generic"] = func(at string, v any) {
		// dubbo-go's generic: "true" is Dubbo's (PojoUtils' maps); its
		// other forms (gson, protobuf-json, bean) weft does not speak.
		switch s := strings.ToLower(fmt.Sprint(v)); s {
		case "true", "false":
			t.set(p+"generic", s == "true")
		default:
			t.unsupported(at)
		}
	}
	t.block(at, v, keys)
}

// methods reads dubbo-go's methods: a list of {name, ...} (or a block by
// name), each with the method keys weft has.
func (t *dgTranslator) methods(p string) func(string, any) {
	return func(at string, v any) {
		byName := map[string]any{}
		switch x := v.(type) {
		case []any:
			for i, e := range x {
				m, _ := e.(map[string]any)
				name, _ := m["name"].(string)
				if name == "" {
					t.fail(fmt.Sprintf("%s[%d]", at, i), "a method without its name")
					continue
				}
				rest := map[string]any{}
				for k, mv := range m {
					if k != "name" {
						rest[k] = mv
					}
				}
				byName[name] = rest
			}
		case map[string]any:
			byName = x
		default:
			t.fail(at, "%s is not a list of methods", quoteValue(v))
			return
		}
		for _, name := range sortedKeys(byName) {
			mp := p + "methods." + name + "."
			t.block(at+"."+name, byName[name], map[string]func(string, any){
				"retries":     t.copyTo(mp + "retries"),
				"loadbalance": t.copyTo(mp + "loadbalance"),
				"timeout":     t.ms(mp + "timeout"),
				"sticky":      t.copyTo(mp + "sticky"),
			})
		}
	}
}

func (t *dgTranslator) configCenter(at string, v any) {
	var protocol, address string
	params := url.Values{}
	t.block(at, v, map[string]func(string, any){
		"protocol":  func(_ string, v any) { protocol = fmt.Sprint(v) },
		"address":   func(_ string, v any) { address = fmt.Sprint(v) },
		"data-id":   t.copyTo("config_center.data_id"),
		"group":     t.copyTo("config_center.group"),
		"namespace": func(_ string, v any) { params.Set("namespace", fmt.Sprint(v)) },
		"timeout": func(at string, v any) {
			if n, err := dgMillis(v); err != nil {
				t.fail(at, "%v", err)
			} else {
				params.Set("timeout", strconv.Itoa(n))
			}
		},
	})
	if scheme, rest, ok := strings.Cut(address, "://"); ok {
		if protocol == "" {
			protocol = scheme
		}
		address = rest
	}
	if address == "" || protocol == "" {
		t.fail(at, "needs protocol and address")
		return
	}
	t.set("config_center.address", (&url.URL{Scheme: protocol, Host: address, RawQuery: params.Encode()}).String())
}

func (t *dgTranslator) logger(at string, v any) {
	t.block(at, v, map[string]func(string, any){
		"level": t.copyTo("logger.level"),
		// dubbo-go's logger choice (zap, logrus) and its zap settings:
		// weft logs with slog.
		"driver": ignore, "zap-config": ignore,
	})
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FromDubboGoDoc is FromDubboGo on a whole document: ok is false for a
// document that is not dubbo-go's (no `dubbo:` at the top); one that has
// `dubbo:` beside weft's own keys is an error, as the two would mean the
// same things twice.
func FromDubboGoDoc(doc map[string]any) (out map[string]any, ok bool, err error) {
	tree, ok := doc["dubbo"]
	if !ok {
		return nil, false, nil
	}
	if len(doc) > 1 {
		others := make([]string, 0, len(doc)-1)
		for _, k := range sortedKeys(doc) {
			if k != "dubbo" {
				others = append(others, k)
			}
		}
		return nil, true, fmt.Errorf("a dubbo-go config (dubbo: at the top) with weft's keys beside it (%s): put each in a file of its own (weft run -c dubbogo.yml -c weft.yaml merges them)", strings.Join(others, ", "))
	}
	m, isMap := tree.(map[string]any)
	if !isMap {
		return nil, true, fmt.Errorf("dubbo: %s is not a block of keys", quoteValue(tree))
	}
	out, err = FromDubboGo(m)
	return out, true, err
}
