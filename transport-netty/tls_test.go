package netty

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
)

func mustTLS(t testing.TB, c TLSConfig) *TLS {
	t.Helper()
	x, err := NewTLS(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

type echoData struct{}

func (echoData) Reply(_ *Conn, req *Request) *Response {
	return &Response{Status: kernel.ResponseOK, Data: req.Data}
}

func tlsServer(t *testing.T, tr *Transporter) *ExchangeServer {
	t.Helper()
	srv, err := Bind(tr, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, echoData{}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(time.Second) })
	return srv
}

// callOnce connects a client with tr and makes one request.
func callOnce(t *testing.T, tr *Transporter, addr string) error {
	t.Helper()
	c := NewExchangeClient(tr, kernel.MustParseURL("dubbo://"+addr+"?reconnect=100000"), testCodec{}, ClientOptions{Heartbeat: -1})
	defer c.Close()
	resp, err := c.Request(context.Background(), "hello", time.Second)
	if err != nil {
		return err
	}
	if resp.Status != kernel.ResponseOK || resp.Data != "hello" {
		return kernel.ResponseError(resp.Status, resp.ErrMsg)
	}
	return nil
}

// TLS and mutual TLS: a client with the CA and its own certificate is
// served; a plain client, a client that trusts another CA, one without a
// client certificate, and one facing an expired server certificate each
// fail with an error naming the cause; the server keeps serving good
// clients throughout.
func TestTLSAndMutualTLS(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ca, other := testpki.NewCA(t, "weft test CA"), testpki.NewCA(t, "another CA")
	srvCert, srvKey := ca.Issue(t, "server", time.Now().Add(time.Hour))
	cliCert, cliKey := ca.Issue(t, "client", time.Now().Add(time.Hour))
	server := tlsServer(t, NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca.PEM, Cert: srvCert, Key: srvKey})))
	good := NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca.PEM, Cert: cliCert, Key: cliKey}))
	if err := callOnce(t, good, server.Addr()); err != nil {
		t.Fatalf("a good client: %v", err)
	}
	for _, tc := range []struct {
		name string
		tr   *Transporter
		want string
	}{
		{"wrong CA", NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: other.PEM, Cert: cliCert, Key: cliKey})), "not signed by the configured CA"},
		{"no client certificate", NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca.PEM})), "certificate required"},
		{"plain client", NewTransporter(log), "takes TLS connections only"},
	} {
		err := callOnce(t, tc.tr, server.Addr())
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), server.Addr()) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s and %q", tc.name, err, server.Addr(), tc.want)
		}
		if err := callOnce(t, good, server.Addr()); err != nil {
			t.Fatalf("a good client after the %s one: %v", tc.name, err)
		}
	}

	// A plain server and a TLS client: the client says the peer does not
	// speak TLS.
	plain := tlsServer(t, NewTransporter(log))
	err := callOnce(t, good, plain.Addr())
	t.Logf("TLS client, plain server: %v", err)
	if err == nil || !strings.Contains(err.Error(), "TLS handshake with "+plain.Addr()) || !strings.Contains(err.Error(), "is it a TLS server?") {
		t.Errorf("TLS client against a plain server: %v", err)
	}

	// An expired server certificate.
	oldCert, oldKey := ca.Issue(t, "server", time.Now().Add(-time.Hour))
	expired := tlsServer(t, NewTLSTransporter(log, mustTLS(t, TLSConfig{Cert: oldCert, Key: oldKey})))
	err = callOnce(t, NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca.PEM})), expired.Addr())
	t.Logf("expired: %v", err)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired server certificate: %v", err)
	}
}

// Certificates given as files are read again when they change: a server
// whose certificate file is replaced serves new connections with the new
// certificate, without a restart.
func TestTLSReloadsChangedFiles(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	ca1, ca2 := testpki.NewCA(t, "first CA"), testpki.NewCA(t, "second CA")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c1, k1 := ca1.Issue(t, "server", time.Now().Add(time.Hour))
	certFile, keyFile := write("server.pem", c1), write("server.key", k1)
	server := tlsServer(t, NewTLSTransporter(log, mustTLS(t, TLSConfig{CertFile: certFile, KeyFile: keyFile})))
	trust1 := NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca1.PEM}))
	trust2 := NewTLSTransporter(log, mustTLS(t, TLSConfig{CACert: ca2.PEM}))
	if err := callOnce(t, trust1, server.Addr()); err != nil {
		t.Fatalf("before the reload: %v", err)
	}
	c2, k2 := ca2.Issue(t, "server", time.Now().Add(time.Hour))
	write("server.key", k2)
	write("server.pem", c2+"\n") // another size, whatever the clock's resolution
	deadline := time.Now().Add(5 * time.Second)
	for callOnce(t, trust2, server.Addr()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 5 s of replacing the files")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := callOnce(t, trust1, server.Addr()); err == nil {
		t.Fatal("the old certificate is still served")
	}
}

func TestNewTLSErrors(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		c    TLSConfig
		want string
	}{
		{TLSConfig{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"}, "tls-cert-file"},
		{TLSConfig{Cert: "x"}, "needs its key"},
		{TLSConfig{CACert: "not pem"}, "holds no PEM certificate"},
		{TLSConfig{Cert: "x", Key: "y"}, "inline tls-cert"},
	} {
		if _, err := NewTLS(tc.c, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}

// BenchmarkTLSRoundTrip compares a request/response over one connection,
// plain and over TLS (per call), and BenchmarkTLSHandshake a connection's
// setup (per handshake, ECDSA P-256, TLS 1.3).
func BenchmarkTLSRoundTrip(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ca := testpki.NewCA(b, "bench CA")
	cert, key := ca.Issue(b, "server", time.Now().Add(time.Hour))
	for _, tc := range []struct {
		name     string
		srv, cli *Transporter
	}{
		{"plain", NewTransporter(log), NewTransporter(log)},
		{"tls", NewTLSTransporter(log, mustTLS(b, TLSConfig{Cert: cert, Key: key})), NewTLSTransporter(log, mustTLS(b, TLSConfig{CACert: ca.PEM}))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv, err := Bind(tc.srv, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, echoData{}, ServerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close(time.Second)
			c := NewExchangeClient(tc.cli, kernel.MustParseURL("dubbo://"+srv.Addr()), testCodec{}, ClientOptions{Heartbeat: -1})
			defer c.Close()
			payload := strings.Repeat("x", 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Request(context.Background(), payload, time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTLSHandshake(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ca := testpki.NewCA(b, "bench CA")
	cert, key := ca.Issue(b, "server", time.Now().Add(time.Hour))
	srv, err := Bind(NewTLSTransporter(log, mustTLS(b, TLSConfig{Cert: cert, Key: key})), kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, echoData{}, ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(time.Second)
	cli := NewTLSTransporter(log, mustTLS(b, TLSConfig{CACert: ca.PEM}))
	u := kernel.MustParseURL("dubbo://" + srv.Addr())
	b.ResetTimer()
	for range b.N {
		c, err := cli.dial(u, testCodec{}, nopHandler{})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
		c.loops.Wait()
	}
}

type nopHandler struct{}

func (nopHandler) Connected(extension.Channel)     {}
func (nopHandler) Disconnected(extension.Channel)  {}
func (nopHandler) Received(extension.Channel, any) {}
func (nopHandler) Caught(extension.Channel, error) {}
