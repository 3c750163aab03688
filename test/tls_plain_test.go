package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/kernel"
)

// tlsVaultProvider starts a vault on dubbo and tri over TLS, its
// certificate signed by a test CA, and returns the two addresses.
func tlsVaultProvider(t *testing.T) map[string]string {
	t.Helper()
	_, cert, key := testpki.WriteFiles(t, t.TempDir())
	addrs := map[string]string{"dubbo": freePort(t), "tri": freePort(t)}
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	startApp(t, fmt.Sprintf(`
tls: {tls-cert-file: %q, tls-key-file: %q}
protocols: {dubbo: {port: %s}, tri: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault, protocol: "dubbo,tri"}
`, cert, key, port(addrs["dubbo"]), port(addrs["tri"])), weft.WithService("vault", &vault{}))
	return addrs
}

// A consumer whose tls block has only tls-server-name speaks TLS and
// verifies the server against the system's roots, as the README says: it
// does not fall back to plaintext. The test CA is not among the system's
// roots, so the handshake fails with a certificate error that names the
// cause (a plaintext consumer would get "takes TLS connections only").
func TestTLSServerNameAloneMeansTLS(t *testing.T) {
	noLeaks(t)
	addrs := tlsVaultProvider(t)
	for _, proto := range []string{"dubbo", "tri"} {
		t.Run(proto, func(t *testing.T) {
			var c tokenClient
			startApp(t, fmt.Sprintf(`
tls: {tls-server-name: 127.0.0.1}
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "%s://%s", retries: 0, check: false}
`, proto, addrs[proto]), weft.WithReference("vault", &c))
			_, err := c.Secret(context.Background(), "alice")
			t.Logf("%s: %v", proto, err)
			if err == nil {
				t.Fatal("a consumer trusting the system's roots was served by a server whose CA they do not hold")
			}
			msg := err.Error()
			if strings.Contains(msg, "takes TLS connections only") {
				t.Fatalf("the consumer spoke plaintext: %v", err)
			}
			if kernel.CodeOf(err) != kernel.CodeNetwork || !strings.Contains(msg, "TLS handshake with "+addrs[proto]) {
				t.Fatalf("want a failed TLS handshake with %s: %v", addrs[proto], err)
			}
			// Without ca-cert-file the client verifies with the system's
			// roots; the error says the CA is unknown (or, on a machine
			// with no roots at all, that there are none).
			if !strings.Contains(msg, "x509: certificate signed by unknown authority") && !strings.Contains(msg, "system roots") {
				t.Fatalf("want the certificate error and its cause: %v", err)
			}
			if !strings.Contains(msg, "ca-cert-file") {
				t.Errorf("the error does not say what to configure: %v", err)
			}
		})
	}
}

// A plaintext consumer of a TLS tri port is told why, as on the dubbo
// port: the server answers its HTTP/2 preface in HTTP/2 (its call with
// status UNAVAILABLE, the connection with GOAWAY INADEQUATE_SECURITY),
// saying it takes TLS only and what to configure. The consumer's first
// call and the next ones (on a connection closed already, or a new one)
// all say so.
func TestPlainConsumerOfTLSTriple(t *testing.T) {
	noLeaks(t)
	addrs := tlsVaultProvider(t)
	var c tokenClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "tri://%s", retries: 0}
`, addrs["tri"]), weft.WithReference("vault", &c))
	for i := range 3 {
		_, err := c.Secret(context.Background(), "mallory")
		t.Logf("call %d: %v", i, err)
		if err == nil {
			t.Fatal("a plaintext consumer was served by a TLS port")
		}
		msg := err.Error()
		if kernel.CodeOf(err) != kernel.CodeNetwork || !strings.Contains(msg, "server "+addrs["tri"]+" takes TLS connections only") ||
			!strings.Contains(msg, "configure tls (ca-cert-file, tls-cert-file, tls-key-file) on this consumer") {
			t.Fatalf("call %d: want the cause named: %v", i, err)
		}
		if n := strings.Count(msg, "weft: network:"); n != 1 {
			t.Errorf("call %d: the error says its code %d times: %v", i, n, err)
		}
	}

	// A consumer that connects and calls only after the server's wait for
	// a call (a second) has passed: its connection got the GOAWAY alone,
	// and the call says what it said.
	var late tokenClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "tri://%s", retries: 0}
`, addrs["tri"]), weft.WithReference("vault", &late))
	time.Sleep(1500 * time.Millisecond)
	_, err := late.Secret(context.Background(), "mallory")
	t.Logf("a call after the wait: %v", err)
	if kernel.CodeOf(err) != kernel.CodeNetwork || !strings.Contains(fmt.Sprint(err), "GOAWAY INADEQUATE_SECURITY: server "+addrs["tri"]+" takes TLS connections only") {
		t.Fatalf("a call after the wait: %v; want the GOAWAY's cause", err)
	}
}

// An HTTP/1.1 client (curl http://) on a TLS tri port gets a 400 that says
// why, as Go's HTTPS server answers one.
func TestPlainHTTP1OnTLSTriple(t *testing.T) {
	noLeaks(t)
	addrs := tlsVaultProvider(t)
	nc, err := net.DialTimeout("tcp", addrs["tri"], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, "POST /org.weft.Vault/secret HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n[]"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(nc)
	if !strings.HasPrefix(string(b), "HTTP/1.1 400 ") || !strings.Contains(string(b), "server "+addrs["tri"]+" takes TLS connections only") {
		t.Fatalf("an HTTP/1.1 request on a TLS port was answered %q", b)
	}
}
