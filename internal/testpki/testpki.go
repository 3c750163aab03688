// Package testpki issues certificates for weft's TLS tests: a CA and
// certificates for 127.0.0.1 signed by it, as PEM, made fresh by each test.
// It is test support only; nothing of the framework imports it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate.
	PEM string
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// Issue returns a certificate for 127.0.0.1, for server and client use,
// valid from two hours ago until notAfter, and its key, as PEM.
func (ca *CA) Issue(tb testing.TB, cn string, notAfter time.Time) (certPEM, keyPEM string) {
	tb.Helper()
	return ca.IssueURI(tb, cn, notAfter)
}

// IssueURI is Issue with URI names besides 127.0.0.1: a mesh's workload
// identities (spiffe://cluster.local/ns/default/sa/echo).
func (ca *CA) IssueURI(tb testing.TB, cn string, notAfter time.Time, uris ...string) (certPEM, keyPEM string) {
	tb.Helper()
	var us []*url.URL
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		us = append(us, p)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, URIs: us}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
}

// WriteFiles writes a new CA and a certificate it issued into dir and
// returns the paths of ca.pem, cert.pem and key.pem.
func WriteFiles(tb testing.TB, dir string) (ca, cert, key string) {
	tb.Helper()
	c := NewCA(tb, "weft test CA")
	certPEM, keyPEM := c.Issue(tb, "weft", time.Now().Add(24*time.Hour))
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for p, b := range map[string]string{ca: c.PEM, cert: certPEM, key: keyPEM} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return ca, cert, key
}
