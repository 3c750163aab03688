package dubbogo

import (
	"errors"

	"dubbo.apache.org/dubbo-go/v3/config"
)

// UseTLS turns on TLS for every dubbo-go provider and consumer this process
// starts afterwards: caFile, certFile and keyFile are PEM files (dubbo-go's
// tls_config keys ca-cert-file, tls-cert-file, tls-key-file).
//
// dubbo-go 3.3.1's dubbo protocol (getty) reads TLS only from the old global
// root config: the new API's SetClientTLS/SetServerTLS reach the URL, but
// getty's client init then expects the protocol config attribute as a map
// and finds a string, and the server init returns early without an
// application in the root config, so both stay plain TCP. Since getty
// keeps its TLS setting in package state that nothing resets, a process that
// called UseTLS cannot make plain dubbo-go connections again: run it in its
// own process (cmd/dubbogo-echo -tls-*).
//
// What getty's TLS then does, as found in dubbo-getty v1.4.10's tls.go:
// the server requires a client certificate but verifies it only when a CA
// is set (RequireAnyClientCert: any certificate, not checked against the
// CA); the client must present a certificate and never verifies the
// server's (InsecureSkipVerify).
func UseTLS(caFile, certFile, keyFile string) error {
	if certFile == "" || keyFile == "" {
		return errors.New("dubbogo: getty's TLS needs a certificate and key on both sides")
	}
	setup()
	root := config.GetRootConfig()
	c := *root
	c.Application = &config.ApplicationConfig{Name: "weft-interop"}
	c.Protocols = map[string]*config.ProtocolConfig{"dubbo": {Name: "dubbo"}}
	c.TLSConfig = &config.TLSConfig{CACertFile: caFile, TLSCertFile: certFile, TLSKeyFile: keyFile}
	config.SetRootConfig(c)
	return nil
}
