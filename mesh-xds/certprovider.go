package xds

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// FileWatcherProvider is grpc-go's file_watcher certificate provider (gRFC A29),
// which Istio's agent feeds: it reads the identity certificate and key and
// the root certificates from files, and again every refresh interval, so
// that a rotated certificate is taken without a restart. A read or parse
// that fails keeps the material in force and is logged, as grpc-go does;
// files whose bytes did not change are not parsed again.
//
// Its TLS configurations ask it for the current material on every
// handshake: connections made after a rotation use the new certificate,
// those already open keep theirs.
type FileWatcherProvider struct {
	cfg CertificateProvider
	log *slog.Logger

	mu    sync.RWMutex
	cert  *tls.Certificate
	roots *x509.CertPool
	// The bytes last read, to skip parsing what did not change.
	certPEM, keyPEM, caPEM []byte
	loads                  int // material taken (the first one included)

	stop chan struct{}
	done chan struct{}
}

// NewFileWatcher reads cfg's files (an error if the first read fails: a
// workload without its certificate must not start) and watches them.
func NewFileWatcher(cfg CertificateProvider, log *slog.Logger) (*FileWatcherProvider, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	w := &FileWatcherProvider{cfg: cfg, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if err := w.reload(); err != nil {
		return nil, err
	}
	go w.watch()
	return w, nil
}

func (w *FileWatcherProvider) watch() {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if err := w.reload(); err != nil {
				w.log.Warn("weft: xds: certificate files could not be read again; the material in force stays", "err", err)
			}
		}
	}
}

// maxPEM bounds a certificate file: it is read whole on every refresh.
const maxPEM = 1 << 20

func readPEM(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEM {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxPEM)
	}
	return b, nil
}

// reload reads the files and takes what changed; on any error nothing is
// taken.
func (w *FileWatcherProvider) reload() error {
	certPEM, err := readPEM(w.cfg.CertificateFile)
	if err != nil {
		return fmt.Errorf("certificate_file: %w", err)
	}
	keyPEM, err := readPEM(w.cfg.PrivateKeyFile)
	if err != nil {
		return fmt.Errorf("private_key_file: %w", err)
	}
	caPEM, err := readPEM(w.cfg.CACertificateFile)
	if err != nil {
		return fmt.Errorf("ca_certificate_file: %w", err)
	}
	w.mu.RLock()
	same := w.loads > 0 && bytes.Equal(certPEM, w.certPEM) && bytes.Equal(keyPEM, w.keyPEM) && bytes.Equal(caPEM, w.caPEM)
	w.mu.RUnlock()
	if same {
		return nil
	}
	var cert *tls.Certificate
	if certPEM != nil {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("tls.X509KeyPair(%q, %q) failed: %v", w.cfg.CertificateFile, w.cfg.PrivateKeyFile, err)
		}
		cert = &c
	}
	var roots *x509.CertPool
	if caPEM != nil {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("ca_certificate_file %s holds no PEM certificate", w.cfg.CACertificateFile)
		}
	}
	w.mu.Lock()
	w.cert, w.roots = cert, roots
	w.certPEM, w.keyPEM, w.caPEM = certPEM, keyPEM, caPEM
	w.loads++
	w.mu.Unlock()
	return nil
}

// Loads is how many times material was taken, the first read included.
func (w *FileWatcherProvider) Loads() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.loads
}

func (w *FileWatcherProvider) current() (*tls.Certificate, *x509.CertPool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.cert, w.roots
}

// errNoIdentity: a provider without certificate_file has no identity.
var errNoIdentity = errors.New("xds: the certificate provider has no identity certificate (certificate_file)")

// ClientTLS is a client's mutual TLS configuration: the current identity
// certificate, and the server verified against the current roots.
func (w *FileWatcherProvider) ClientTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c, _ := w.current(); c != nil {
				return c, nil
			}
			// No identity (a cluster of TLS without mTLS): none sent,
			// and a server that requires one says so.
			return &tls.Certificate{}, nil
		},
		// The roots can change: verify by hand with the current ones
		// (Go's RootCAs is fixed per Config).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, roots := w.current()
			return verifyChain(cs, roots, x509.ExtKeyUsageServerAuth)
		},
	}
}

// ServerTLS is a server's TLS configuration with the current identity
// certificate; with requireClient, clients must present a certificate
// the current roots verify (mutual TLS).
func (w *FileWatcherProvider) ServerTLS(requireClient bool) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c, _ := w.current(); c != nil {
				return c, nil
			}
			return nil, errNoIdentity
		},
	}
	if requireClient {
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			_, roots := w.current()
			return verifyChain(cs, roots, x509.ExtKeyUsageClientAuth)
		}
	}
	return cfg
}

// verifyChain verifies the peer's chain against roots for usage.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("xds: mTLS: the peer presented no certificate")
	}
	if roots == nil {
		return errors.New("xds: mTLS: the certificate provider has no root certificates (ca_certificate_file) to verify the peer with")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("xds: mTLS: the peer's certificate does not verify against the mesh's roots: %w", err)
	}
	return nil
}

// Close stops watching the files.
func (w *FileWatcherProvider) Close() {
	close(w.stop)
	<-w.done
}
