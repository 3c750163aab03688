package kernel

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// URL is weft's configuration bus, as in Dubbo: every exported service,
// referred provider and registry is described by one, e.g.
//
//	dubbo://127.0.0.1:20880/org.example.Greeter?timeout=500&sayHello.timeout=200
//
// A URL is immutable once built; the With* methods return modified copies, so
// a *URL can be shared between goroutines and kept as a map key source without
// locking. Lookups never allocate: the parameters are indexed at construction,
// including the method-level ones (`method.key`).
type URL struct {
	Protocol string
	Username string
	Password string
	Host     string
	Port     int
	Path     string

	params map[string]string
	// methods indexes every parameter whose name contains a dot by the part
	// before the first dot, so MethodParam needs no string concatenation.
	methods map[string]map[string]string
	// ints and methodInts hold the parameters that are integers, parsed
	// once: balancers read weight, timestamp and warmup of every provider
	// on every call.
	ints       map[string]int64
	methodInts map[string]map[string]int64
	str        string
	svcKey     string
}

// NewURL builds a URL from its parts. params is copied.
func NewURL(protocol, host string, port int, path string, params map[string]string) *URL {
	u := &URL{Protocol: protocol, Host: host, Port: port, Path: strings.TrimPrefix(path, "/")}
	u.setParams(copyParams(params, 0))
	return u
}

// ParseURL parses protocol://[user[:pass]@]host[:port][/path][?k=v&...].
// Values are query-unescaped.
func ParseURL(raw string) (*URL, error) {
	raw = strings.TrimSpace(raw)
	i := strings.Index(raw, "://")
	if i <= 0 {
		return nil, fmt.Errorf("weft: url %q: want protocol://host:port/path?k=v", raw)
	}
	u := &URL{Protocol: raw[:i]}
	rest := raw[i+3:]
	var query string
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest, query = rest[:q], rest[q+1:]
	}
	if s := strings.IndexByte(rest, '/'); s >= 0 {
		rest, u.Path = rest[:s], rest[s+1:]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		cred := rest[:at]
		rest = rest[at+1:]
		if c := strings.IndexByte(cred, ':'); c >= 0 {
			u.Username, u.Password = cred[:c], cred[c+1:]
		} else {
			u.Username = cred
		}
	}
	if rest != "" {
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			// No port given.
			u.Host = strings.Trim(rest, "[]")
		} else {
			p, perr := strconv.Atoi(port)
			if perr != nil || p < 0 || p > 65535 {
				return nil, fmt.Errorf("weft: url %q: bad port %q", raw, port)
			}
			u.Host, u.Port = host, p
		}
	}
	params := map[string]string{}
	if query != "" {
		for _, kv := range strings.Split(query, "&") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			uk, err := url.QueryUnescape(k)
			if err != nil {
				return nil, fmt.Errorf("weft: url %q: bad parameter name %q: %v", raw, k, err)
			}
			uv, err := url.QueryUnescape(v)
			if err != nil {
				return nil, fmt.Errorf("weft: url %q: bad value of %q: %v", raw, uk, err)
			}
			params[uk] = uv
		}
	}
	u.setParams(params)
	return u, nil
}

// MustParseURL is ParseURL for literals in tests and examples; it panics on error.
func MustParseURL(raw string) *URL {
	u, err := ParseURL(raw)
	if err != nil {
		panic(err)
	}
	return u
}

func copyParams(p map[string]string, extra int) map[string]string {
	c := make(map[string]string, len(p)+extra)
	for k, v := range p {
		c[k] = v
	}
	return c
}

// setParams takes ownership of p and builds the indexes and the canonical form.
func (u *URL) setParams(p map[string]string) {
	u.params = p
	u.methods, u.ints, u.methodInts = nil, nil, nil
	for k, v := range p {
		n, err := strconv.ParseInt(v, 10, 64)
		isInt := err == nil
		if isInt {
			if u.ints == nil {
				u.ints = map[string]int64{}
			}
			u.ints[k] = n
		}
		if m, key, ok := strings.Cut(k, "."); ok && m != "" && key != "" {
			if u.methods == nil {
				u.methods = map[string]map[string]string{}
			}
			mm := u.methods[m]
			if mm == nil {
				mm = map[string]string{}
				u.methods[m] = mm
			}
			mm[key] = v
			if isInt {
				if u.methodInts == nil {
					u.methodInts = map[string]map[string]int64{}
				}
				mi := u.methodInts[m]
				if mi == nil {
					mi = map[string]int64{}
					u.methodInts[m] = mi
				}
				mi[key] = n
			}
		}
	}
	u.str = u.format()
	u.svcKey = ServiceKey(u.Interface(), u.params[KeyGroup], u.params[KeyVersion])
}

// Head is the URL before its parameters: protocol://[user[:password]@]
// host:port[/path], as both its String and Dubbo's other forms of it
// (ZooKeeper's node names) begin.
func (u *URL) Head() string {
	var b strings.Builder
	b.WriteString(u.Protocol)
	b.WriteString("://")
	if u.Username != "" {
		b.WriteString(u.Username)
		if u.Password != "" {
			b.WriteByte(':')
			b.WriteString(u.Password)
		}
		b.WriteByte('@')
	}
	b.WriteString(u.Address())
	if u.Path != "" {
		b.WriteByte('/')
		b.WriteString(u.Path)
	}
	return b.String()
}

func (u *URL) format() string {
	var b strings.Builder
	b.WriteString(u.Head())
	keys := make([]string, 0, len(u.params))
	for k := range u.params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(u.params[k]))
	}
	return b.String()
}

// String returns the canonical form: parameters sorted by name. Two URLs with
// the same parts and parameters have the same String, so it is usable as an
// identity key (computed once at construction).
func (u *URL) String() string { return u.str }

// Address is host:port, or host alone when the port is 0.
func (u *URL) Address() string {
	if u.Port == 0 {
		return u.Host
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}

// Param returns the parameter k, or "".
func (u *URL) Param(k string) string { return u.params[k] }

// Lookup returns the parameter k and whether it is set.
func (u *URL) Lookup(k string) (string, bool) {
	v, ok := u.params[k]
	return v, ok
}

// ParamOr returns the parameter k, or def when it is unset or empty.
func (u *URL) ParamOr(k, def string) string {
	if v := u.params[k]; v != "" {
		return v
	}
	return def
}

// ParamInt returns the parameter k as an integer, or def when it is unset or
// not a number.
func (u *URL) ParamInt(k string, def int64) int64 {
	if n, ok := u.ints[k]; ok {
		return n
	}
	return def
}

// ParamBool returns the parameter k as a boolean, or def when unset.
func (u *URL) ParamBool(k string, def bool) bool { return boolOr(u.params[k], def) }

// MethodParam returns `method.k` when set, else `k` (Dubbo's
// getMethodParameter): a method-level setting beats the service-level one.
func (u *URL) MethodParam(method, k string) string {
	if v, ok := u.methods[method][k]; ok && v != "" {
		return v
	}
	return u.params[k]
}

// MethodParamOr is MethodParam with a default for unset or empty values.
func (u *URL) MethodParamOr(method, k, def string) string {
	if v := u.MethodParam(method, k); v != "" {
		return v
	}
	return def
}

// MethodParamInt is MethodParam as an integer, or def.
func (u *URL) MethodParamInt(method, k string, def int64) int64 {
	if v, ok := u.methods[method][k]; ok && v != "" {
		if n, ok := u.methodInts[method][k]; ok {
			return n
		}
		return def
	}
	return u.ParamInt(k, def)
}

// MethodParamBool is MethodParam as a boolean, or def.
func (u *URL) MethodParamBool(method, k string, def bool) bool {
	return boolOr(u.MethodParam(method, k), def)
}

// MethodTimeout is the method's `timeout` parameter (milliseconds, Dubbo's
// unit) as a duration, or def when unset or not positive.
func (u *URL) MethodTimeout(method string, def time.Duration) time.Duration {
	if ms := u.MethodParamInt(method, KeyTimeout, 0); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return def
}

// Params returns a copy of all parameters.
func (u *URL) Params() map[string]string { return copyParams(u.params, 0) }

// RangeParams calls f for every parameter, in no particular order, until f
// returns false. It does not copy.
func (u *URL) RangeParams(f func(k, v string) bool) {
	for k, v := range u.params {
		if !f(k, v) {
			return
		}
	}
}

// WithParam returns a copy with k set to v.
func (u *URL) WithParam(k, v string) *URL {
	return u.WithParams(map[string]string{k: v})
}

// WithParams returns a copy with every entry of p set; empty values are kept.
func (u *URL) WithParams(p map[string]string) *URL {
	c := *u
	np := copyParams(u.params, len(p))
	for k, v := range p {
		np[k] = v
	}
	c.setParams(np)
	return &c
}

// WithoutParams returns a copy without the named parameters.
func (u *URL) WithoutParams(keys ...string) *URL {
	c := *u
	np := copyParams(u.params, 0)
	for _, k := range keys {
		delete(np, k)
	}
	c.setParams(np)
	return &c
}

// WithAddress returns a copy with another protocol, host and port.
func (u *URL) WithAddress(protocol, host string, port int) *URL {
	c := *u
	c.Protocol, c.Host, c.Port = protocol, host, port
	c.str = c.format()
	c.svcKey = ServiceKey(c.Interface(), c.params[KeyGroup], c.params[KeyVersion])
	return &c
}

// Interface is the `interface` parameter, or the path.
func (u *URL) Interface() string { return u.ParamOr(KeyInterface, u.Path) }

// ServiceKey is Dubbo's group/interface:version, with the group and version
// parts left out when empty. Exporters are found by it.
func (u *URL) ServiceKey() string { return u.svcKey }

// ServiceKey formats group/interface:version as Dubbo does.
func ServiceKey(iface, group, version string) string {
	if group == "" && version == "" {
		return iface
	}
	var b strings.Builder
	if group != "" {
		b.WriteString(group)
		b.WriteByte('/')
	}
	b.WriteString(iface)
	if version != "" {
		b.WriteByte(':')
		b.WriteString(version)
	}
	return b.String()
}

func boolOr(s string, def bool) bool {
	if s == "" {
		return def
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return def
	}
	return b
}

// IsTruthy reports whether a parameter value counts as "set" for activation,
// as Dubbo's ConfigUtils.isNotEmpty: not empty and not false, 0, null or N/A.
func IsTruthy(v string) bool {
	switch strings.ToLower(v) {
	case "", "false", "0", "null", "n/a":
		return false
	}
	return true
}
