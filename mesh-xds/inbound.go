package xds

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/weftrpc/weft/kernel"
)

// ServerListener is what a provider takes of its inbound listener (gRFC
// A36): the address it is for, and its filter chains, each saying how the
// connections it matches are secured. Routes and HTTP filters (RBAC) of
// the chains are not applied.
type ServerListener struct {
	Host   string
	Port   uint32
	Chains []FilterChain
	// Default is the default_filter_chain; nil: none.
	Default *FilterChain
}

// FilterChain is one filter chain: what it matches and its security (nil:
// plaintext).
type FilterChain struct {
	Name string
	// DestPort: 0 matches any.
	DestPort uint32
	// Dest and Source prefixes: none matches any.
	Dest, Source []netip.Prefix
	// SourceType: 0 any, 1 same IP or loopback, 2 external (Envoy's
	// ConnectionSourceType).
	SourceType  int
	SourcePorts []uint32
	Security    *SecurityConfig
}

// maxChains bounds a listener's filter chains, and maxPrefixes a chain's
// prefix ranges.
const (
	maxChains   = 1000
	maxPrefixes = 1000
)

// serverListener is grpc-go's A36 reading of an inbound listener, for the
// parts weft applies: a chain with matchers gRPC does not support
// (server_names, a transport_protocol other than raw_buffer,
// application_protocols) is dropped, as gRPC drops it.
func serverListener(l *listenerv3.Listener, certs map[string]CertificateProvider) (*ServerListener, error) {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, errors.New("no socket_address field in LDS response")
	}
	out := &ServerListener{Host: sa.GetAddress(), Port: sa.GetPortValue()}
	if n := len(l.GetFilterChains()); n > maxChains {
		return nil, fmt.Errorf("%d filter chains, over weft's bound of %d", n, maxChains)
	}
	for _, fc := range l.GetFilterChains() {
		c, ok, err := filterChain(fc)
		if err == nil && c.Security != nil {
			err = c.Security.known(certs)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out.Chains = append(out.Chains, c)
		}
	}
	if d := l.GetDefaultFilterChain(); d != nil {
		c, _, err := filterChain(d)
		if err == nil && c.Security != nil {
			err = c.Security.known(certs)
		}
		if err != nil {
			return nil, err
		}
		out.Default = &c
	}
	return out, nil
}

func filterChain(fc *listenerv3.FilterChain) (FilterChain, bool, error) {
	out := FilterChain{Name: fc.GetName()}
	m := fc.GetFilterChainMatch()
	if len(m.GetServerNames()) > 0 || (m.GetTransportProtocol() != "" && m.GetTransportProtocol() != "raw_buffer") || len(m.GetApplicationProtocols()) > 0 {
		return out, false, nil
	}
	out.DestPort = m.GetDestinationPort().GetValue()
	var err error
	if out.Dest, err = prefixes(m.GetPrefixRanges()); err != nil {
		return out, false, err
	}
	if out.Source, err = prefixes(m.GetSourcePrefixRanges()); err != nil {
		return out, false, err
	}
	out.SourceType = int(m.GetSourceType())
	if n := len(m.GetSourcePorts()); n > maxPrefixes {
		return out, false, fmt.Errorf("%d source ports, over weft's bound of %d", n, maxPrefixes)
	}
	out.SourcePorts = m.GetSourcePorts()
	ts := fc.GetTransportSocket()
	if ts == nil {
		return out, true, nil
	}
	if ts.GetName() != tlsTransportSocket {
		return out, false, fmt.Errorf("transport_socket field has unexpected name: %s", ts.GetName())
	}
	if u := ts.GetTypedConfig().GetTypeUrl(); u != downstreamTLSURL {
		return out, false, fmt.Errorf("transport_socket missing typed_config or wrong type_url: %q", u)
	}
	var down tlsv3.DownstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&down); err != nil {
		return out, false, fmt.Errorf("failed to unmarshal DownstreamTlsContext in LDS response: %v", err)
	}
	if down.GetRequireSni().GetValue() {
		return out, false, errors.New("require_sni field set to true in DownstreamTlsContext message")
	}
	if down.GetOcspStaplePolicy() != tlsv3.DownstreamTlsContext_LENIENT_STAPLING {
		return out, false, fmt.Errorf("ocsp_staple_policy field set to unsupported value in DownstreamTlsContext message")
	}
	if down.GetCommonTlsContext() == nil {
		return out, false, errors.New("DownstreamTlsContext in LDS response does not contain a CommonTlsContext")
	}
	sc, err := commonSecurity(down.GetCommonTlsContext(), true)
	if err != nil {
		return out, false, err
	}
	sc.RequireClientCert = down.GetRequireClientCertificate().GetValue()
	if sc.RequireClientCert && sc.RootInstance == "" {
		return out, false, errors.New("security configuration on the server-side does not contain root certificate provider instance name, but require_client_cert field is set")
	}
	out.Security = sc
	return out, true, nil
}

func prefixes(rs []*corev3.CidrRange) ([]netip.Prefix, error) {
	if len(rs) > maxPrefixes {
		return nil, fmt.Errorf("%d prefix ranges, over weft's bound of %d", len(rs), maxPrefixes)
	}
	var out []netip.Prefix
	for _, r := range rs {
		a, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, fmt.Errorf("failed to parse destination prefix range: %+v", r)
		}
		p, err := a.Prefix(int(r.GetPrefixLen().GetValue()))
		if err != nil {
			return nil, fmt.Errorf("failed to parse destination prefix range: %+v", r)
		}
		out = append(out, p)
	}
	return out, nil
}

// chainFor is A36's choice of the chain for a connection from src to dst:
// the destination port, then the longest destination prefix, the source
// type, the longest source prefix and the source port narrow the chains
// in turn; none left: the default chain (nil: the connection is closed).
func (l *ServerListener) chainFor(dst, src netip.AddrPort) *FilterChain {
	cands := make([]*FilterChain, 0, len(l.Chains))
	for i := range l.Chains {
		if c := &l.Chains[i]; c.DestPort == 0 || c.DestPort == uint32(dst.Port()) {
			cands = append(cands, c)
		}
	}
	cands = longest(cands, dst.Addr(), func(c *FilterChain) []netip.Prefix { return c.Dest })
	same := src.Addr().Unmap() == dst.Addr().Unmap() || src.Addr().IsLoopback()
	best := -1
	var typed []*FilterChain
	for _, c := range cands {
		rank := -1
		switch {
		case c.SourceType == 1 && same, c.SourceType == 2 && !same:
			rank = 1
		case c.SourceType == 0:
			rank = 0
		}
		if rank > best {
			best, typed = rank, typed[:0]
		}
		if rank == best && rank >= 0 {
			typed = append(typed, c)
		}
	}
	cands = longest(typed, src.Addr(), func(c *FilterChain) []netip.Prefix { return c.Source })
	var any *FilterChain
	for _, c := range cands {
		if len(c.SourcePorts) == 0 {
			any = c
			continue
		}
		for _, p := range c.SourcePorts {
			if p == uint32(src.Port()) {
				return c
			}
		}
	}
	if any != nil {
		return any
	}
	return l.Default
}

// longest keeps the chains whose prefixes hold a (one with none holds any
// address, as the shortest), those of the longest match.
func longest(cands []*FilterChain, a netip.Addr, of func(*FilterChain) []netip.Prefix) []*FilterChain {
	a = a.Unmap()
	best := -2
	var out []*FilterChain
	for _, c := range cands {
		n := -1 // no prefixes: matches all, below any prefix
		ps := of(c)
		if len(ps) > 0 {
			n = -2
			for _, p := range ps {
				if p.Contains(a) && p.Bits() > n {
					n = p.Bits()
				}
			}
			if n == -2 {
				continue
			}
		}
		if n > best {
			best, out = n, out[:0]
		}
		if n == best {
			out = append(out, c)
		}
	}
	return out
}

// addrPort is nc's address as netip.
func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// inboundTLS is the TLS of a connection matched to chain: nil for
// plaintext, else the identity of its identity instance, verifying
// clients against its root instance when it requires their certificates.
func (s *Security) inboundTLS(b *Bootstrap, chain *FilterChain) (*tls.Config, error) {
	sc := chain.Security
	if sc == nil {
		return nil, nil
	}
	if err := sc.known(b.CertificateProviders); err != nil {
		return nil, err
	}
	id, roots := b.CertificateProviders[sc.IdentityInstance], b.CertificateProviders[sc.RootInstance]
	files := [3]string{id.CertificateFile, id.PrivateKeyFile, roots.CACertificateFile}
	w, err := s.watcher(files, min(orDefault(id.Refresh), orDefault(roots.Refresh)).String())
	if err != nil {
		return nil, err
	}
	return w.ServerTLS(sc.RequireClientCert), nil
}

// inbound is a server's inbound listener in force (nil: none, the server
// is not serving) and the bootstrap it came by.
type inbound struct {
	b      *Bootstrap
	name   string
	l      atomic.Pointer[ServerListener]
	cancel func()
}

// KeySecurityBootstrap is a protocol's bootstrap file for its servers'
// inbound listeners (params: {security: xds, xds.bootstrap: PATH}: not
// under "security.", which config would nest under the string "xds");
// without it, GRPC_XDS_BOOTSTRAP's, as grpc-go's xDS server reads it.
const KeySecurityBootstrap = "xds.bootstrap"

// Serve follows the inbound listener of the server at url (A36): the
// bootstrap's server_listener_resource_name_template with "%s" its
// host:port.
func (s *Security) Serve(url *kernel.URL) error {
	var b *Bootstrap
	var err error
	key := url.Param(KeySecurityBootstrap)
	if key != "" {
		b, err = ReadBootstrap(key)
	} else {
		var ok bool
		if b, ok, err = BootstrapFromEnv(); err == nil && !ok {
			err = fmt.Errorf("no bootstrap: set %s=PATH in the protocol's params, or %s", KeySecurityBootstrap, EnvBootstrap)
		}
	}
	if err != nil {
		return err
	}
	if b.ServerListenerTemplate == "" {
		return errors.New("the bootstrap has no server_listener_resource_name_template: a provider cannot name its inbound listener (Istio's is xds.istio.io/grpc/lds/inbound/%s)")
	}
	addr := url.Address()
	name := strings.ReplaceAll(b.ServerListenerTemplate, "%s", addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the App is stopping")
	}
	if s.inbound[addr] != nil {
		return nil
	}
	c := s.clients[key]
	if c == nil {
		if c, err = newClient(b.Servers[0], b.Node, b.CertificateProviders, s.log); err != nil {
			return err
		}
		s.clients[key] = c
	}
	in := &inbound{b: b, name: name}
	in.cancel = c.Watch(ListenerType, name, func(v any, exists bool) {
		sl, ok := v.(*ServerListener)
		switch {
		case !exists:
			s.log.Warn("weft: xds: inbound listener not found or removed: the server refuses connections until it comes", "server", addr, "listener", name)
			in.l.Store(nil)
		case !ok:
			s.log.Warn("weft: xds: the inbound listener is a client listener; it is not applied", "server", addr, "listener", name)
		case !sameAddress(sl, url):
			s.log.Warn("weft: xds: the inbound listener is for another address: the server refuses connections", "server", addr, "listener", name,
				"listener_address", net.JoinHostPort(sl.Host, portString(sl.Port)))
			in.l.Store(nil)
		default:
			in.l.Store(sl)
		}
	})
	s.inbound[addr] = in
	return nil
}

// sameAddress is A36's check that an inbound listener is the server's:
// the same port, and the same host unless the server listens on all.
func sameAddress(sl *ServerListener, url *kernel.URL) bool {
	if sl.Port != uint32(url.Port) {
		return false
	}
	a, err1 := netip.ParseAddr(sl.Host)
	b, err2 := netip.ParseAddr(url.Host)
	if err1 != nil || err2 != nil {
		return sl.Host == url.Host
	}
	return a == b || b.IsUnspecified()
}

// ServerTLS serves nc by its filter chain of the server's inbound
// listener: plaintext, TLS, or mutual TLS.
func (s *Security) ServerTLS(url *kernel.URL, nc net.Conn) (*tls.Config, error) {
	s.mu.Lock()
	in := s.inbound[url.Address()]
	s.mu.Unlock()
	if in == nil {
		return nil, fmt.Errorf("xds: server %s is not serving: it follows no inbound listener", url.Address())
	}
	l := in.l.Load()
	if l == nil {
		return nil, fmt.Errorf("xds: server %s is not serving: the mesh has not sent its inbound listener %q (or removed it)", url.Address(), in.name)
	}
	chain := l.chainFor(addrPort(nc.LocalAddr()), addrPort(nc.RemoteAddr()))
	if chain == nil {
		return nil, fmt.Errorf("xds: no filter chain of the inbound listener %q matches a connection from %s", in.name, nc.RemoteAddr())
	}
	return s.inboundTLS(in.b, chain)
}

func portString(p uint32) string { return strconv.FormatUint(uint64(p), 10) }
