package netty

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLSConfig says where a transport's certificates come from: files (read
// again when they change, so a renewed certificate takes effect without a
// restart) or inline PEM. The names are dubbo-go's (tls_config).
//
// A server needs a certificate and key; with a CA it also requires and
// verifies client certificates (mutual TLS). A client verifies the server
// against the CA (the system's roots without one), as ServerName or the
// host it dials; with a certificate and key it presents them.
type TLSConfig struct {
	CACertFile string // ca-cert-file
	CertFile   string // tls-cert-file
	KeyFile    string // tls-key-file
	// CACert, Cert and Key are inline PEM, used where the file is not set.
	CACert, Cert, Key string
	// ServerName is the name the client verifies (default: the host).
	ServerName string
}

// IsZero reports whether nothing is configured (plain TCP). A ServerName
// alone is configured: a client that names the server it verifies speaks
// TLS, verifying against the system's roots (a config that says which name
// to check must not leave the connection in plaintext).
func (c TLSConfig) IsZero() bool {
	return c.CACertFile == "" && c.CertFile == "" && c.KeyFile == "" && c.CACert == "" && c.Cert == "" && c.Key == "" &&
		c.ServerName == ""
}

// PlainRefuser is a Codec that recognises, in the first 16 bytes a client
// sent to a TLS server, a client of its protocol that did not start TLS,
// and answers it in that protocol with why (HTTP/2: its first call gets an
// error status and the connection a GOAWAY saying it), so that the client
// reports the cause rather than a bare close. It returns false, having
// read and written nothing, for bytes that are not its protocol's. rw reads what the client sent (from its
// first byte) and writes to it, bounded by deadlines the server set (reads
// a second, writes two, so that an answer still goes out once a read
// timed out), and the server closes the connection after. why says
// what the server takes and what to configure, without a "weft: <code>:"
// prefix. Codecs that answer with a Response of their own implement
// extension.RequestPeeker instead.
type PlainRefuser interface {
	RefusePlain(rw io.ReadWriter, first16 []byte, why string) bool
}

// TLS is the material of a TLSConfig, kept current: files are checked for
// changes at most once per tlsRecheck and read again when they changed; a
// change that does not load keeps the last good material (and is logged).
type TLS struct {
	cfg TLSConfig
	log *slog.Logger

	mu      sync.Mutex
	cur     *tlsMaterial
	stamps  [3]fileStamp
	checked time.Time
}

type tlsMaterial struct {
	cert *tls.Certificate // nil: none
	pool *x509.CertPool   // nil: the system's roots (client), no client auth (server)
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// tlsRecheck is how often certificate files are looked at.
const tlsRecheck = time.Second

// tlsHandshakeTimeout bounds a handshake on either side.
const tlsHandshakeTimeout = 10 * time.Second

// NewTLS loads cfg's material. The error names the file or setting at
// fault.
func NewTLS(cfg TLSConfig, log *slog.Logger) (*TLS, error) {
	if (cfg.CertFile != "" || cfg.Cert != "") != (cfg.KeyFile != "" || cfg.Key != "") {
		return nil, errors.New("tls: a certificate needs its key and a key its certificate (tls-cert-file and tls-key-file, or tls-cert and tls-key)")
	}
	t := &TLS{cfg: cfg, log: log}
	m, err := t.load()
	if err != nil {
		return nil, err
	}
	t.cur, t.stamps, t.checked = m, t.stat(), time.Now()
	return t, nil
}

func (t *TLS) files() [3]string { return [3]string{t.cfg.CACertFile, t.cfg.CertFile, t.cfg.KeyFile} }

func (t *TLS) stat() [3]fileStamp {
	var out [3]fileStamp
	for i, f := range t.files() {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil {
			out[i] = fileStamp{st.ModTime(), st.Size()}
		}
	}
	return out
}

func readPEM(file, inline, what string) ([]byte, error) {
	if file == "" {
		return []byte(inline), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", what, err)
	}
	return b, nil
}

func (t *TLS) load() (*tlsMaterial, error) {
	m := &tlsMaterial{}
	ca, err := readPEM(t.cfg.CACertFile, t.cfg.CACert, "ca-cert-file")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(ca)) > 0 {
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("tls: the CA (%s) holds no PEM certificate", orInline(t.cfg.CACertFile, "ca-cert"))
		}
	}
	cert, err := readPEM(t.cfg.CertFile, t.cfg.Cert, "tls-cert-file")
	if err != nil {
		return nil, err
	}
	key, err := readPEM(t.cfg.KeyFile, t.cfg.Key, "tls-key-file")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(cert)) > 0 {
		c, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s with key %s: %w", orInline(t.cfg.CertFile, "tls-cert"), orInline(t.cfg.KeyFile, "tls-key"), err)
		}
		m.cert = &c
	}
	return m, nil
}

func orInline(file, key string) string {
	if file != "" {
		return file
	}
	return "inline " + key
}

// material returns the current material, reloading changed files.
func (t *TLS) material() *tlsMaterial {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); now.Sub(t.checked) >= tlsRecheck {
		t.checked = now
		if st := t.stat(); st != t.stamps {
			m, err := t.load()
			if err != nil {
				t.log.Error("weft: TLS material changed but does not load; keeping the last good one", "err", err)
			} else {
				t.cur = m
				t.log.Info("weft: TLS certificates reloaded")
			}
			t.stamps = st
		}
	}
	return t.cur
}

// server is the config of a server's handshakes: the current material at
// each one.
func (t *TLS) server(alpn []string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: alpn, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := t.material()
		if m.cert == nil {
			return nil, errors.New("tls: this server has no certificate (tls-cert-file)")
		}
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}, NextProtos: alpn}
		if m.pool != nil {
			c.ClientCAs, c.ClientAuth = m.pool, tls.RequireAndVerifyClientCert
		}
		return c, nil
	}}
}

// client is the config of a client's handshake with host.
func (t *TLS) client(host string, alpn []string) *tls.Config {
	m := t.material()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.pool, ServerName: t.cfg.ServerName, NextProtos: alpn}
	if c.ServerName == "" {
		c.ServerName = host
	}
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	return c
}

// peerRefused says why a TLS peer sends an alert.
const peerRefused = "it does not accept this side's certificate (signed by a CA it does not trust, expired, or none presented)"

// refusedTLS explains a TLS alert the peer sent: under TLS 1.3 a server
// that refuses the client's certificate says so after the client's
// handshake is done, on the connection's first read. Empty for other
// errors.
func refusedTLS(err error) string {
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "remote error" {
		return " (the peer refused this connection's TLS: " + peerRefused + ")"
	}
	return ""
}

// explainTLS adds what to check to a handshake error.
func explainTLS(err error) string {
	var unknown x509.UnknownAuthorityError
	var noRoots x509.SystemRootsError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "the peer's certificate is not signed by the configured CA (ca-cert-file; without one, the system's roots): set ca-cert-file to the CA that signed it"
	case errors.As(err, &noRoots):
		return "no CA to verify the server with: no ca-cert-file is set and the system has no roots (set ca-cert-file, or install the system's CA certificates)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "a certificate has expired (or is not valid yet): renew it"
	case errors.As(err, &hostname):
		return "the server's certificate is not for this name: set tls-server-name or dial the name it has"
	case errors.As(err, &rec):
		return "the peer does not speak TLS: is TLS configured on both sides?"
	}
	if refusedTLS(err) != "" {
		return "the peer refused the handshake: " + peerRefused
	}
	if errors.Is(err, io.EOF) {
		return "the peer closed the connection during the handshake: is it a TLS server?"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no handshake in time: is the peer a TLS server?"
	}
	return "check the certificates on both sides (a server with a CA requires client certificates)"
}
