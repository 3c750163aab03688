package cluster

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/weftrpc/weft/kernel"
)

// GlobMatch is Dubbo's UrlUtils.isMatchGlobPattern: "*" matches anything;
// otherwise only the last '*' is a wildcard (what is before it is a literal
// prefix, after it a literal suffix); no '*' means equality. An empty
// pattern matches only an empty value.
func GlobMatch(pattern, value string) bool {
	if pattern == "*" {
		return true
	}
	if pattern == "" || value == "" {
		return pattern == "" && value == ""
	}
	i := strings.LastIndexByte(pattern, '*')
	switch {
	case i < 0:
		return value == pattern
	case i == len(pattern)-1:
		return strings.HasPrefix(value, pattern[:i])
	case i == 0:
		return strings.HasSuffix(value, pattern[1:])
	default:
		return strings.HasPrefix(value, pattern[:i]) && strings.HasSuffix(value, pattern[i+1:])
	}
}

// IPPattern is one address of a tag rule or of an override rule's address
// match (cird): Dubbo's NetUtils.matchIpExpression. Forms: "*", "*.*.*.*",
// a CIDR, an IPv4 pattern whose parts are numbers, '*' or ranges "1-100",
// optionally with ":port"; "[v6]:port"; an IPv6 address or pattern of 8
// groups; or a host name, compared as written (Java resolves it with DNS;
// weft does not resolve on the routing path). It is exported for the
// governance package, which reads these patterns from rule documents.
type IPPattern struct {
	raw     string
	any     bool
	cidr    *net.IPNet
	port    string // "" when the pattern has none
	host    string // the host part
	v6      bool
	segs    []string // for IPv4/IPv6 patterns with '*' or '-'
	literal bool     // host is compared whole
}

// ParseIPPattern parses raw; the error says which part is wrong.
func ParseIPPattern(raw string) (*IPPattern, error) {
	p := &IPPattern{raw: raw}
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, fmt.Errorf("empty address")
	}
	if s == "*" || s == "*.*.*.*" {
		p.any = true
		return p, nil
	}
	if strings.Contains(s, "/") {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("bad CIDR: %v", err)
		}
		p.cidr = n
		return p, nil
	}
	host := s
	switch {
	case strings.HasPrefix(s, "[") && strings.Contains(s, "]:"):
		end := strings.Index(s, "]:")
		host, p.port = s[1:end], s[end+2:]
		p.v6 = true
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
		p.v6 = true
	case strings.Count(s, ":") == 1:
		host, p.port, _ = strings.Cut(s, ":")
	case strings.Count(s, ":") > 1:
		p.v6 = true
	}
	if p.port != "" && p.port != "*" {
		if n, err := strconv.Atoi(p.port); err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("bad port %q", p.port)
		}
	}
	p.host = host
	if !strings.ContainsAny(host, "*-") || (!p.v6 && !looksIPv4Pattern(host)) {
		p.literal = true
		if ip := net.ParseIP(host); ip != nil {
			p.host = ip.String()
		}
		return p, nil
	}
	sep, want := ".", 4
	if p.v6 {
		sep, want = ":", 8
	}
	p.segs = strings.Split(host, sep)
	if len(p.segs) != want {
		return nil, fmt.Errorf("an address pattern with '*' or '-' needs %d parts", want)
	}
	base := 10
	if p.v6 {
		base = 16
	}
	for _, seg := range p.segs {
		if seg == "*" {
			continue
		}
		parts := []string{seg}
		if lo, hi, ok := strings.Cut(seg, "-"); ok {
			parts = []string{lo, hi}
		}
		for _, part := range parts {
			if _, err := strconv.ParseUint(part, base, 16); err != nil {
				return nil, fmt.Errorf("bad address part %q", seg)
			}
		}
	}
	return p, nil
}

// looksIPv4Pattern: four dot-separated parts of digits, '*' and '-'.
func looksIPv4Pattern(h string) bool {
	parts := strings.Split(h, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789*-") != "" {
			return false
		}
	}
	return true
}

// String is the pattern as written.
func (p *IPPattern) String() string { return p.raw }

// Match reports whether host:port is in the pattern; a pattern with a port
// holds only for that port.
func (p *IPPattern) Match(host string, port int) bool {
	if p.any {
		return true
	}
	ip := net.ParseIP(host)
	if p.cidr != nil {
		return ip != nil && p.cidr.Contains(ip)
	}
	if p.port != "" && p.port != strconv.Itoa(port) {
		return false
	}
	if p.literal {
		if ip != nil {
			return p.host == ip.String()
		}
		return p.host == host
	}
	if ip == nil {
		return false
	}
	var parts []string
	base := 10
	if p.v6 {
		if ip.To4() != nil {
			return false
		}
		v6 := ip.To16()
		for i := 0; i < 16; i += 2 {
			parts = append(parts, strconv.FormatUint(uint64(v6[i])<<8|uint64(v6[i+1]), 16))
		}
		base = 16
	} else {
		v4 := ip.To4()
		if v4 == nil {
			return false
		}
		for _, b := range v4 {
			parts = append(parts, strconv.Itoa(int(b)))
		}
	}
	for i, seg := range p.segs {
		if seg == "*" || seg == parts[i] {
			continue
		}
		got, _ := strconv.ParseUint(parts[i], base, 16)
		if lo, hi, ok := strings.Cut(seg, "-"); ok {
			l, _ := strconv.ParseUint(lo, base, 16)
			h, _ := strconv.ParseUint(hi, base, 16)
			if got < l || got > h {
				return false
			}
			continue
		}
		if n, err := strconv.ParseUint(seg, base, 16); err != nil || n != got {
			return false
		}
	}
	return true
}

// StringMatch is Dubbo's StringMatch: the first of its fields that is set
// decides, in Java's order exact, prefix, regex, wildcard, empty, noempty.
// A value that is absent matches only empty.
type StringMatch struct {
	Exact, Prefix *string
	// Regex must match the whole input, as Java's String.matches does:
	// compile it anchored, `^(?:re)$`. It is compiled already so that no
	// call compiles and none meets a pattern that does not compile.
	Regex                    *regexp.Regexp
	Wildcard, Empty, NoEmpty *string
}

// Match reports whether input (ok false: absent) matches.
func (m *StringMatch) Match(input string, ok bool) bool {
	switch {
	case m == nil:
		return false
	case m.Exact != nil && ok:
		return input == *m.Exact
	case m.Prefix != nil && ok:
		return strings.HasPrefix(input, *m.Prefix)
	case m.Regex != nil && ok:
		return m.Regex.MatchString(input)
	case m.Wildcard != nil && ok:
		// Java: only "*", or equality.
		return input == *m.Wildcard || *m.Wildcard == "*"
	case m.Empty != nil:
		return !ok || input == ""
	case m.NoEmpty != nil:
		return ok && input != ""
	}
	return false
}

// ParamMatch selects URLs by one parameter (Dubbo's ParamMatch).
type ParamMatch struct {
	Key   string
	Value *StringMatch
}

// Match reports whether u's parameter matches.
func (m ParamMatch) Match(u *kernel.URL) bool {
	if m.Key == "" || m.Value == nil {
		return false
	}
	v, ok := u.Lookup(m.Key)
	return m.Value.Match(v, ok)
}
