package extension

import (
	"crypto/tls"
	"net"
	"sort"
	"strings"

	"github.com/weftrpc/weft/kernel"
)

// KeySecurity names, on a provider's URL, the ClientSecurity that secures
// the connections to it: a mesh's registry sets it (with its own
// "security."-prefixed parameters) on the providers whose clusters ask for
// TLS. Without it a connection has the App's tls block, or none.
const KeySecurity = "security"

// ClientSecurity secures client connections from outside the App's tls
// block: a service mesh, whose clusters name the certificate providers a
// connection takes its identity and roots from and the identities its
// providers must have. dubbo's and tri's transports ask it at each dial of
// a provider whose URL names it (KeySecurity), so that material rotated
// since the last dial is used by the next. A plugin provides one by name,
// as any extension.
type ClientSecurity interface {
	// ClientTLS is the TLS configuration to dial provider with; an error
	// says why it cannot be dialed (the call fails with it).
	ClientTLS(provider *kernel.URL) (*tls.Config, error)
}

// SecurityShareKey is what a connection to provider is shared by: its
// address and, when a ClientSecurity secures it, the security parameters,
// so that providers at one address under different security (plain, then
// mTLS) do not share one connection.
func SecurityShareKey(provider *kernel.URL) string {
	addr := provider.Address()
	if provider.Param(KeySecurity) == "" {
		return addr
	}
	var keys []string
	for k := range provider.Params() {
		if k == KeySecurity || strings.HasPrefix(k, KeySecurity+".") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(addr)
	for _, k := range keys {
		b.WriteString("|" + k + "=" + provider.Param(k))
	}
	return b.String()
}

// ServerSecurity is a ClientSecurity that also secures servers: those of a
// protocol whose URL names it (KeySecurity in the protocol's params), as a
// mesh's inbound listener says (plaintext, TLS or mutual TLS, changed
// while the server runs).
type ServerSecurity interface {
	// Serve is called once as the server binds: it starts following what
	// secures it; an error fails the export.
	Serve(server *kernel.URL) error
	// ServerTLS is how the connection nc, just accepted by the server,
	// is served: with TLS by the config, plain when nil. An error refuses
	// it (the connection is closed and the reason logged).
	ServerTLS(server *kernel.URL, nc net.Conn) (*tls.Config, error)
}

// ServerSecurityParams are the parameters of a protocol's exported URL u
// that its servers' security reads (nil: none named): KeySecurity, and
// those under "security." or under the security's own name ("xds.").
func ServerSecurityParams(u *kernel.URL) map[string]string {
	name := u.Param(KeySecurity)
	if name == "" {
		return nil
	}
	out := map[string]string{KeySecurity: name}
	for k, v := range u.Params() {
		if strings.HasPrefix(k, KeySecurity+".") || strings.HasPrefix(k, name+".") {
			out[k] = v
		}
	}
	return out
}
