package extension

import (
	"crypto/tls"
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
