package xds

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// SecurityConfig is what a cluster's UpstreamTlsContext (or a listener's
// DownstreamTlsContext) says of its connections' TLS, as gRPC takes it
// (gRFC A29): the certificate provider instances of the bootstrap that
// give the identity and the roots, and the identities a peer may have.
type SecurityConfig struct {
	IdentityInstance, RootInstance string
	// SANs match the peer's subject alternative names (any name, any
	// matcher); none: any peer the roots verify.
	SANs []SANMatcher
	// RequireClientCert: a server asks clients for certificates (mTLS).
	RequireClientCert bool
}

// SANMatcher is an xDS StringMatcher on a subject alternative name.
type SANMatcher struct {
	Kind       string // exact, prefix, suffix, contains, regex
	Value      string
	IgnoreCase bool
	re         *regexp.Regexp
}

// The transport socket gRPC takes, and its config type.
const (
	tlsTransportSocket = "envoy.transport_sockets.tls"
	upstreamTLSURL     = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
	downstreamTLSURL   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
)

// maxSANMatchers bounds a validation context's matchers.
const maxSANMatchers = 100

// clusterSecurity is grpc-go's securityConfigFromCluster: nil without a
// transport socket; known names are the bootstrap's certificate provider
// instances.
func clusterSecurity(c *clusterv3.Cluster, known map[string]CertificateProvider) (*SecurityConfig, error) {
	if tsm := c.GetTransportSocketMatches(); len(tsm) != 0 {
		return nil, fmt.Errorf("unsupported transport_socket_matches field is non-empty: %d matches", len(tsm))
	}
	ts := c.GetTransportSocket()
	if ts == nil {
		return nil, nil
	}
	if ts.GetName() != tlsTransportSocket {
		return nil, fmt.Errorf("transport_socket field has unexpected name: %s", ts.GetName())
	}
	if u := ts.GetTypedConfig().GetTypeUrl(); u != upstreamTLSURL {
		return nil, fmt.Errorf("transport_socket missing typed_config or wrong type_url: %q", u)
	}
	var up tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&up); err != nil {
		return nil, fmt.Errorf("failed to unmarshal UpstreamTlsContext in CDS response: %v", err)
	}
	if up.GetCommonTlsContext() == nil {
		return nil, errors.New("UpstreamTlsContext in CDS response does not contain a CommonTlsContext")
	}
	sc, err := commonSecurity(up.GetCommonTlsContext(), false)
	if err != nil {
		return nil, err
	}
	return sc, sc.known(known)
}

// known checks that sc's instances are in the bootstrap, with grpc-go's
// texts.
func (sc *SecurityConfig) known(known map[string]CertificateProvider) error {
	if _, ok := known[sc.IdentityInstance]; sc.IdentityInstance != "" && !ok {
		return fmt.Errorf("identity certificate provider instance name %q missing in bootstrap configuration", sc.IdentityInstance)
	}
	if _, ok := known[sc.RootInstance]; sc.RootInstance != "" && !ok {
		return fmt.Errorf("root certificate provider instance name %q missing in bootstrap configuration", sc.RootInstance)
	}
	return nil
}

// commonSecurity is grpc-go's securityConfigFromCommonTLSContext: the
// current fields (tls_certificate_provider_instance, the validation
// context's ca_certificate_provider_instance), else the deprecated ones
// Istio also sends.
func commonSecurity(common *tlsv3.CommonTlsContext, server bool) (*SecurityConfig, error) {
	if common.GetTlsParams() != nil {
		return nil, errors.New("unsupported tls_params field in CommonTlsContext message")
	}
	if common.GetCustomHandshaker() != nil {
		return nil, errors.New("unsupported custom_handshaker field in CommonTlsContext message")
	}
	sc := &SecurityConfig{}
	if id := common.GetTlsCertificateProviderInstance(); id != nil {
		sc.IdentityInstance = id.GetInstanceName()
	} else if id := common.GetTlsCertificateCertificateProviderInstance(); id != nil {
		sc.IdentityInstance = id.GetInstanceName()
	} else if len(common.GetTlsCertificates()) != 0 || len(common.GetTlsCertificateSdsSecretConfigs()) != 0 {
		return nil, errors.New("expected field tls_certificate_provider_instance is not set, while unsupported field tls_certificates or tls_certificate_sds_secret_configs is set in CommonTlsContext message")
	}
	var vc *tlsv3.CertificateValidationContext
	switch t := common.GetValidationContextType().(type) {
	case *tlsv3.CommonTlsContext_ValidationContext:
		vc = t.ValidationContext
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		vc = t.CombinedValidationContext.GetDefaultValidationContext()
		if pi := t.CombinedValidationContext.GetValidationContextCertificateProviderInstance(); pi != nil {
			sc.RootInstance = pi.GetInstanceName()
		}
	case *tlsv3.CommonTlsContext_ValidationContextCertificateProviderInstance:
		sc.RootInstance = t.ValidationContextCertificateProviderInstance.GetInstanceName()
	case nil:
	default:
		return nil, fmt.Errorf("validation context contains unexpected type: %T", t)
	}
	if vc != nil {
		switch {
		case len(vc.GetVerifyCertificateSpki()) != 0:
			return nil, errors.New("unsupported verify_certificate_spki field in CommonTlsContext message")
		case len(vc.GetVerifyCertificateHash()) != 0:
			return nil, errors.New("unsupported verify_certificate_hash field in CommonTlsContext message")
		case vc.GetRequireSignedCertificateTimestamp().GetValue():
			return nil, errors.New("unsupported require_signed_certificate_timestamp field in CommonTlsContext message")
		case vc.GetCrl() != nil:
			return nil, errors.New("unsupported crl field in CommonTlsContext message")
		case vc.GetCustomValidatorConfig() != nil:
			return nil, errors.New("unsupported custom_validator_config field in CommonTlsContext message")
		}
		if pi := vc.GetCaCertificateProviderInstance(); pi != nil {
			sc.RootInstance = pi.GetInstanceName()
		}
		if n := len(vc.GetMatchSubjectAltNames()); n > maxSANMatchers {
			return nil, fmt.Errorf("%d match_subject_alt_names, over weft's bound of %d", n, maxSANMatchers)
		}
		for _, m := range vc.GetMatchSubjectAltNames() {
			sm, err := sanMatcher(m)
			if err != nil {
				return nil, err
			}
			sc.SANs = append(sc.SANs, sm)
		}
		if server && len(sc.SANs) != 0 {
			return nil, errors.New("match_subject_alt_names field in validation context is not supported on the server")
		}
	}
	if server && sc.IdentityInstance == "" {
		return nil, errors.New("security configuration on the server-side does not contain identity certificate provider instance name")
	}
	if !server && sc.RootInstance == "" {
		return nil, errors.New("security configuration on the client-side does not contain root certificate provider instance name")
	}
	return sc, nil
}

func sanMatcher(m *matcherv3.StringMatcher) (SANMatcher, error) {
	out := SANMatcher{IgnoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		out.Kind, out.Value = "exact", p.Exact
	case *matcherv3.StringMatcher_Prefix:
		out.Kind, out.Value = "prefix", p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		out.Kind, out.Value = "suffix", p.Suffix
	case *matcherv3.StringMatcher_Contains:
		out.Kind, out.Value = "contains", p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := compileRegex(p.SafeRegex.GetRegex())
		if err != nil {
			return out, err
		}
		out.Kind, out.Value, out.re = "regex", p.SafeRegex.GetRegex(), re
	default:
		return out, fmt.Errorf("unrecognized string matcher: %T", p)
	}
	if out.IgnoreCase && out.Kind != "regex" {
		out.Value = strings.ToLower(out.Value)
	}
	return out, nil
}

func (m *SANMatcher) match(name string) bool {
	if m.IgnoreCase {
		name = strings.ToLower(name)
	}
	switch m.Kind {
	case "exact":
		return name == m.Value
	case "prefix":
		return strings.HasPrefix(name, m.Value)
	case "suffix":
		return strings.HasSuffix(name, m.Value)
	case "contains":
		return strings.Contains(name, m.Value)
	case "regex":
		return m.re != nil && m.re.MatchString(name)
	}
	return false
}

// sanNames are a certificate's subject alternative names as strings.
func sanNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	names = append(names, c.EmailAddresses...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
}

// verifySAN is gRPC's SAN check: with matchers, some name of the leaf
// must meet some matcher.
func verifySAN(leaf *x509.Certificate, ms []SANMatcher) error {
	if len(ms) == 0 {
		return nil
	}
	names := sanNames(leaf)
	for _, n := range names {
		for i := range ms {
			if ms[i].match(n) {
				return nil
			}
		}
	}
	return fmt.Errorf("xds: mTLS: the peer's certificate (names %v) matches none of the cluster's match_subject_alt_names", names)
}

// The provider URL parameters by which the registry tells the "xds"
// ClientSecurity how to secure a connection (extension.KeySecurity).
const (
	paramCert    = extension.KeySecurity + ".cert"
	paramKey     = extension.KeySecurity + ".key"
	paramCA      = extension.KeySecurity + ".ca"
	paramRefresh = extension.KeySecurity + ".refresh"
	paramSAN     = extension.KeySecurity + ".san"
)

// securityParams are the parameters of a provider URL in a cluster secured
// by sc, whose instances certs has.
func securityParams(sc *SecurityConfig, certs map[string]CertificateProvider, p map[string]string) {
	id, roots := certs[sc.IdentityInstance], certs[sc.RootInstance]
	p[extension.KeySecurity] = Name
	p[paramCert], p[paramKey], p[paramCA] = id.CertificateFile, id.PrivateKeyFile, roots.CACertificateFile
	refresh := min(orDefault(id.Refresh), orDefault(roots.Refresh))
	p[paramRefresh] = refresh.String()
	if len(sc.SANs) > 0 {
		q := url.Values{}
		for _, m := range sc.SANs {
			k := m.Kind
			if m.IgnoreCase {
				k += "/i"
			}
			q.Add(k, m.Value)
		}
		p[paramSAN] = q.Encode()
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultRefresh
	}
	return d
}

// Security is the ClientSecurity named "xds": it dials the providers of a
// secured cluster with the mTLS of the bootstrap's file_watcher
// certificate providers the cluster names, checking the provider's
// names against the cluster's match_subject_alt_names. It watches each set
// of files once per App, so that a rotated certificate is used by the
// next connection while those open keep going.
//
// It secures servers too (extension.ServerSecurity): a protocol whose
// params name it (security: xds) serves each connection as its inbound
// listener's matching filter chain says (gRFC A36), following the
// listener over an ADS stream of its own per bootstrap.
type Security struct {
	log *slog.Logger

	mu       sync.Mutex
	watchers map[[3]string]*FileWatcherProvider
	clients  map[string]*Client  // by bootstrap file ("": the environment's)
	inbound  map[string]*inbound // by server address
	closed   bool
}

var (
	_ extension.ClientSecurity = (*Security)(nil)
	_ extension.ServerSecurity = (*Security)(nil)
)

// NewSecurity returns the "xds" security, logging to log.
func NewSecurity(log *slog.Logger) *Security {
	if log == nil {
		log = slog.Default()
	}
	return &Security{log: log, watchers: map[[3]string]*FileWatcherProvider{}, clients: map[string]*Client{}, inbound: map[string]*inbound{}}
}

// ClientTLS is the mutual TLS of a connection to provider.
func (s *Security) ClientTLS(provider *kernel.URL) (*tls.Config, error) {
	files := [3]string{provider.Param(paramCert), provider.Param(paramKey), provider.Param(paramCA)}
	w, err := s.watcher(files, provider.Param(paramRefresh))
	if err != nil {
		return nil, err
	}
	sans, err := parseSANs(provider.Param(paramSAN))
	if err != nil {
		return nil, err
	}
	cfg := w.ClientTLS()
	chain := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := chain(cs); err != nil {
			return err
		}
		return verifySAN(cs.PeerCertificates[0], sans)
	}
	return cfg, nil
}

func (s *Security) watcher(files [3]string, refresh string) (*FileWatcherProvider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("xds: the App is stopping")
	}
	if w := s.watchers[files]; w != nil {
		return w, nil
	}
	d, _ := time.ParseDuration(refresh)
	w, err := NewFileWatcher(CertificateProvider{Plugin: FileWatcher, CertificateFile: files[0], PrivateKeyFile: files[1],
		CACertificateFile: files[2], Refresh: d}, s.log)
	if err != nil {
		return nil, err
	}
	s.watchers[files] = w
	return w, nil
}

func parseSANs(s string) ([]SANMatcher, error) {
	if s == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(s)
	if err != nil {
		return nil, err
	}
	var out []SANMatcher
	for k, vs := range q {
		kind, ci := strings.CutSuffix(k, "/i")
		for _, v := range vs {
			m := SANMatcher{Kind: kind, Value: v, IgnoreCase: ci}
			if kind == "regex" {
				if m.re, err = compileRegex(v); err != nil {
					return nil, err
				}
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// Close stops watching the files.
func (s *Security) Close() error {
	s.mu.Lock()
	ws, cs, ins := s.watchers, s.clients, s.inbound
	s.watchers, s.clients, s.inbound, s.closed = nil, nil, nil, true
	s.mu.Unlock()
	for _, in := range ins {
		in.cancel()
	}
	for _, c := range cs {
		c.Close()
	}
	for _, w := range ws {
		w.Close()
	}
	return nil
}
