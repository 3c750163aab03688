package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
)

// Mutual TLS between Apps from config (dubbo-go's key names): a consumer
// with the CA and a certificate is served; one without TLS gets an error
// that says the server takes TLS only; a config naming a missing file fails
// at start with the key.
func TestTLSBetweenApps(t *testing.T) {
	noLeaks(t)
	ca, cert, key := testpki.WriteFiles(t, t.TempDir())
	tlsYAML := fmt.Sprintf("tls: {ca-cert-file: %q, tls-cert-file: %q, tls-key-file: %q}\n", ca, cert, key)
	svc := &vault{}
	addr := freePort(t)
	startApp(t, tlsYAML+fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault}
`, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("vault", svc))

	var secure, plain tokenClient
	startApp(t, tlsYAML+fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "dubbo://%s", retries: 0}
`, addr), weft.WithReference("vault", &secure))
	if got, err := secure.Secret(context.Background(), "alice"); err != nil || got != "the secret, for alice" {
		t.Fatalf("over mutual TLS: %q %v", got, err)
	}
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "dubbo://%s", retries: 0}
`, addr), weft.WithReference("vault", &plain))
	_, err := plain.Secret(context.Background(), "mallory")
	if kernel.CodeOf(err) != kernel.CodeNetwork || !strings.Contains(err.Error(), "takes TLS connections only") {
		t.Fatalf("a plain consumer: %v", err)
	}
	if got, err := secure.Secret(context.Background(), "bob"); err != nil || got != "the secret, for bob" {
		t.Fatalf("the TLS server after a plain client: %q %v", got, err)
	}

	_, err = weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("vault", svc),
		weft.WithConfig(weft.ConfigYAML(`
tls: {tls-cert-file: /nonexistent/cert.pem, tls-key-file: /nonexistent/key.pem}
protocols: {dubbo: {port: 0}}
provider:
  services:
    vault: {interface: org.weft.Vault}
`)))
	if err == nil || !strings.Contains(err.Error(), "tls-cert-file") {
		t.Fatalf("a missing certificate file: %v", err)
	}
}
