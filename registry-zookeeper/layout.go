package zookeeper

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/weftrpc/weft/kernel"
)

// Dubbo's ZooKeeper layout (ZookeeperRegistry):
//
//	/<root>/<URL.encode(interface)>/<category>/<URL.encode(url.toFullString())>
//
// root is the registry URL's group parameter (default dubbo); category is
// providers, consumers, routers or configurators.
const (
	DefaultRoot         = "dubbo"
	CategoryProviders   = "providers"
	CategoryConsumers   = "consumers"
	paramCategory       = "category"
	paramEnabled        = "enabled"
	paramClassifier     = "classifier"
	paramDynamic        = "dynamic"
	anyValue            = "*"
	protocolEmpty       = "empty"
	protocolConsumer    = "consumer"
	encodedProtocolMark = "%3A%2F%2F" // "://" encoded: Java skips children without it
)

// rootPath is Dubbo's root of a registry URL: "/" + group, default /dubbo.
func rootPath(u *kernel.URL) string {
	g := u.ParamOr(kernel.KeyGroup, DefaultRoot)
	if !strings.HasPrefix(g, "/") {
		g = "/" + g
	}
	return strings.TrimSuffix(g, "/")
}

// Encode is Java's URLEncoder.encode(s, "UTF-8"), which Dubbo's URL.encode
// calls: ASCII letters, digits and . - * _ stay, a space becomes +, every
// other byte of the UTF-8 form is %XX with upper-case hex. (Go's
// url.QueryEscape differs on two bytes: it escapes * and keeps ~.)
func Encode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '*', c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// FullString is Dubbo's URL.toFullString: protocol://[user[:password]@]
// host:port/path?k=v&..., parameters sorted by name and not escaped: the
// whole string is escaped once, as a node name. A key or value that this
// form cannot carry (& or = in a key, & in a value) is an error, since Java
// and dubbo-go would read another URL back.
func FullString(u *kernel.URL) (string, error) {
	var b strings.Builder
	b.WriteString(u.Head())
	params := u.Params()
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		v := params[k]
		if k == "" || strings.ContainsAny(k, "&=") || strings.Contains(v, "&") {
			return "", fmt.Errorf("parameter %q=%q cannot be written in Dubbo's ZooKeeper layout (a key may not hold & or =, a value may not hold &)", clip(k), clip(v))
		}
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String(), nil
}

// category is where u is registered: its category parameter, else
// consumers for a consumer (side=consumer, or the consumer protocol), else
// providers.
func category(u *kernel.URL) string {
	if c := u.Param(paramCategory); c != "" {
		return c
	}
	if u.Param(kernel.KeySide) == "consumer" || u.Protocol == protocolConsumer {
		return CategoryConsumers
	}
	return CategoryProviders
}

// categoryPath is /<root>/<encoded interface>/<category>.
func categoryPath(root, iface, cat string) string {
	return root + "/" + Encode(iface) + "/" + cat
}

// NodePath is the znode Dubbo's ZookeeperRegistry.toUrlPath gives u under
// root (rootPath of the registry URL).
func NodePath(root string, u *kernel.URL) (string, error) {
	iface := u.Interface()
	if iface == "" || iface == anyValue {
		return "", errors.New("the URL names no interface (interface parameter or path)")
	}
	full, err := FullString(u)
	if err != nil {
		return "", err
	}
	cat := category(u)
	if strings.Contains(cat, "/") || cat == "." || cat == ".." {
		return "", fmt.Errorf("category %q is not a node name", clip(cat))
	}
	return categoryPath(root, iface, cat) + "/" + Encode(full), nil
}

// ParseNode reads a child name of a category node: the URL-decoded full
// string, its parameters not decoded again (Dubbo's URLStrParser). Names
// are untrusted: an oversized or malformed one is an error that shows a
// clipped prefix of it.
func ParseNode(name string) (*kernel.URL, error) {
	if len(name) > maxNodeName {
		return nil, fmt.Errorf("node name of %d bytes is over the %d-byte limit (%q)", len(name), maxNodeName, clip(name))
	}
	if !strings.Contains(name, encodedProtocolMark) {
		return nil, fmt.Errorf("node name %q is not an encoded URL (no %s)", clip(name), encodedProtocolMark)
	}
	dec, err := url.QueryUnescape(name)
	if err != nil {
		return nil, fmt.Errorf("node name %q: %v", clip(name), err)
	}
	base, query, _ := strings.Cut(dec, "?")
	u, err := kernel.ParseURL(base)
	if err != nil {
		return nil, fmt.Errorf("node name %q: %v", clip(name), err)
	}
	params := map[string]string{}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			params[k] = v
		}
	}
	return u.WithParams(params), nil
}

// isMatch is Dubbo's UrlUtils.isMatch for a consumer's subscription and a
// provider URL read under its interface: same interface (or *), the
// provider enabled (unless the consumer asks enabled=*), of the providers
// category, and the consumer's group (*, equal, or in its comma list),
// version (* or equal) and classifier (unset, * or equal).
func isMatch(sub, p *kernel.URL) bool {
	if p.Protocol == protocolEmpty {
		return false
	}
	si, pi := sub.Interface(), p.Interface()
	if si != anyValue && pi != anyValue && si != pi {
		return false
	}
	if p.ParamOr(paramCategory, CategoryProviders) != CategoryProviders {
		return false
	}
	if !p.ParamBool(paramEnabled, true) && sub.Param(paramEnabled) != anyValue {
		return false
	}
	cg, pg := sub.Param(kernel.KeyGroup), p.Param(kernel.KeyGroup)
	if cg != anyValue && cg != pg && !containsItem(cg, pg) {
		return false
	}
	cv := sub.Param(kernel.KeyVersion)
	if cv != anyValue && cv != p.Param(kernel.KeyVersion) {
		return false
	}
	cc := sub.ParamOr(paramClassifier, anyValue)
	return cc == anyValue || cc == p.Param(paramClassifier)
}

func containsItem(list, v string) bool {
	if !strings.Contains(list, ",") {
		return false
	}
	for _, x := range strings.Split(list, ",") {
		if strings.TrimSpace(x) == v {
			return true
		}
	}
	return false
}
