package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

// writeTestPKI writes a CA and a certificate for 127.0.0.1 (server and
// client use) signed by it into dir: ca.pem, cert.pem, key.pem.
func writeTestPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weft test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "weft"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for p, b := range map[string]*pem.Block{ca: {Type: "CERTIFICATE", Bytes: caDER}, cert: {Type: "CERTIFICATE", Bytes: der}, key: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(p, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// Mutual TLS between Apps from config (dubbo-go's key names): a consumer
// with the CA and a certificate is served; one without TLS gets an error
// that says the server takes TLS only; a config naming a missing file fails
// at start with the key.
func TestTLSBetweenApps(t *testing.T) {
	noLeaks(t)
	ca, cert, key := writeTestPKI(t, t.TempDir())
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
