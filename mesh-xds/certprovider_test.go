package xds

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/internal/testpki"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	// Write then rename, as an agent rotating certificates does, so that
	// a reader never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func serial(certPEM string) string {
	b, _ := pem.Decode([]byte(certPEM))
	c, _ := x509.ParseCertificate(b.Bytes)
	return c.SerialNumber.String()
}

// TestFileWatcherRotatesAndRefuses: mutual TLS over real TCP from
// file_watcher material. A rotated certificate is presented on the next
// connections without a restart; garbage written over the files keeps the
// material in force; a client whose certificate another CA issued is
// refused with an error that says why.
func TestFileWatcherRotatesAndRefuses(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "mesh root")
	certFile, keyFile, caFile := filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "root-cert.pem")
	c1, k1 := ca.Issue(t, "workload", time.Now().Add(time.Hour))
	writeFile(t, certFile, c1)
	writeFile(t, keyFile, k1)
	writeFile(t, caFile, ca.PEM)
	cfg := CertificateProvider{Plugin: FileWatcher, CertificateFile: certFile, PrivateKeyFile: keyFile, CACertificateFile: caFile, Refresh: 20 * time.Millisecond}
	server, err := NewFileWatcher(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	client, err := NewFileWatcher(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	lis, err := tls.Listen("tcp", "127.0.0.1:0", server.ServerTLS(true))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	seen := make(chan string, 16)
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				tc := conn.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					seen <- "refused: " + err.Error()
					return
				}
				seen <- tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
				io.Copy(io.Discard, conn)
			}()
		}
	}()
	dial := func(cfg *tls.Config) (string, error) {
		conn, err := tls.Dial("tcp", lis.Addr().String(), cfg)
		if err == nil {
			err = conn.Handshake()
			conn.Close()
		}
		select {
		case s := <-seen:
			return s, err
		case <-time.After(5 * time.Second):
			return "", err
		}
	}
	if got, err := dial(client.ClientTLS()); err != nil || got != serial(c1) {
		t.Fatalf("first connection: server saw %q, %v; want the first certificate %s", got, err, serial(c1))
	}

	// Rotation: a new certificate from the same root.
	c2, k2 := ca.Issue(t, "workload", time.Now().Add(time.Hour))
	writeFile(t, keyFile, k2)
	writeFile(t, certFile, c2)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := dial(client.ClientTLS())
		if err == nil && got == serial(c2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after rotation the server saw %q (%v), want %s", got, err, serial(c2))
		}
		time.Sleep(30 * time.Millisecond)
	}

	// Garbage over the certificate: the rotated material stays.
	loads := client.Loads()
	writeFile(t, certFile, "not a certificate")
	time.Sleep(100 * time.Millisecond)
	if got, err := dial(client.ClientTLS()); err != nil || got != serial(c2) {
		t.Fatalf("with a broken file the server saw %q (%v), want the material in force %s", got, err, serial(c2))
	}
	if client.Loads() != loads {
		t.Fatalf("a broken file was taken: loads %d → %d", loads, client.Loads())
	}

	// A client whose certificate another CA issued.
	other := testpki.NewCA(t, "not the mesh")
	oc, ok := other.Issue(t, "intruder", time.Now().Add(time.Hour))
	pair, err := tls.X509KeyPair([]byte(oc), []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	intruder := client.ClientTLS()
	intruder.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	got, _ := dial(intruder)
	t.Logf("intruder: %s", got)
	if !strings.Contains(got, "refused") || !strings.Contains(got, "does not verify against the mesh's roots") {
		t.Fatalf("a client of another CA: server said %q, want a refusal that says why", got)
	}
}

func TestFileWatcherFirstReadMustWork(t *testing.T) {
	_, err := NewFileWatcher(CertificateProvider{Plugin: FileWatcher, CACertificateFile: filepath.Join(t.TempDir(), "missing.pem")}, quiet)
	if err == nil || !strings.Contains(err.Error(), "ca_certificate_file") {
		t.Fatalf("a missing file: %v", err)
	}
}
