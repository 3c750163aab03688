package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/testpki"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// pkiFiles is a CA and one certificate it issued for 127.0.0.1, as files.
type pkiFiles struct{ ca, cert, key string }

func writePKI(t *testing.T, ca *testpki.CA, name string) pkiFiles {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, name, time.Now().Add(24*time.Hour))
	f := pkiFiles{filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")}
	for p, b := range map[string]string{f.ca: ca.PEM, f.cert: cert, f.key: key} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f pkiFiles) flags() []string {
	return []string{"-tls-ca", f.ca, "-tls-cert", f.cert, "-tls-key", f.key}
}

func (f pkiFiles) yaml() string {
	return fmt.Sprintf("tls: {ca-cert-file: %q, tls-cert-file: %q, tls-key-file: %q}\n", f.ca, f.cert, f.key)
}

// buildDubbogoEcho builds cmd/dubbogo-echo: dubbo-go's TLS is process-wide
// state (dubbogo.UseTLS), so TLS peers run in their own process.
func buildDubbogoEcho(t *testing.T) string {
	t.Helper()
	return goBuild(t, ".", "./cmd/dubbogo-echo")
}

// goBuild builds the command pkg, from the module in dir, into the test's
// temporary directory, against that module's own go.mod: these modules
// are outside the repository's workspace (../../go.work), and their pins
// are what they test.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (in %s): %v\n%s", pkg, dir, err, out)
	}
	return bin
}

// startDubbogoProvider runs a dubbo-go provider in a child process and
// returns once it listens.
func startDubbogoProvider(t *testing.T, bin, addr string, args ...string) {
	t.Helper()
	if err := tryStartDubbogoProvider(t, bin, addr, args...); err != nil {
		t.Fatal(err)
	}
}

// tryStartDubbogoProvider is startDubbogoProvider returning what went wrong:
// the provider's stderr and its last lines of stdout (where dubbo-go logs).
func tryStartDubbogoProvider(t *testing.T, bin, addr string, args ...string) error {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-mode", "provider", "-addr", addr}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan bool, 1)
	var logged []string // dubbo-go's log lines before the failure, the last few
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "listening ") {
				ready <- true
				return
			}
			if logged = append(logged, sc.Text()); len(logged) > 5 {
				logged = logged[1:]
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			return fmt.Errorf("the dubbo-go provider exited: %s (its log: %s)", strings.TrimSpace(stderr.String()), strings.Join(logged, " | "))
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("the dubbo-go provider did not listen within 30 s: %s", stderr.String())
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return nil
}

// dubbogoCall makes one echo call from a dubbo-go consumer in a child
// process.
func dubbogoCall(t *testing.T, bin, addr, msg string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-mode", "call", "-addr", addr, "-msg", msg, "-timeout", "3s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// TLS between weft and dubbo-go 3.3.1's dubbo protocol, both ways. dubbo-go
// turns TLS on for its getty transport only through its old root config
// (see dubbogo.UseTLS); then a weft consumer with its certificate calls a
// dubbo-go TLS provider, verifying dubbo-go's certificate against its CA,
// and a dubbo-go TLS consumer calls a weft mutual-TLS provider, which
// verifies dubbo-go's client certificate. What each side refuses: weft
// refuses a dubbo-go client whose certificate another CA signed, and a plain
// dubbo-go client; dubbo-go's provider refuses a weft client without a
// certificate (it requires one, though it does not check who signed it),
// and weft refuses a dubbo-go server signed by another CA.
func TestTLSWithDubboGo(t *testing.T) {
	bin := buildDubbogoEcho(t)
	ca, other := testpki.NewCA(t, "interop CA"), testpki.NewCA(t, "another CA")
	weftPKI, goPKI, strangerPKI := writePKI(t, ca, "weft"), writePKI(t, ca, "dubbo-go"), writePKI(t, other, "stranger")

	t.Run("weft consumer to dubbo-go provider", func(t *testing.T) {
		addr, _ := freeAddr(t)
		startDubbogoProvider(t, bin, addr, goPKI.flags()...)
		var mtls, noCert echoClient
		startConsumer := func(tlsYAML string, stub *echoClient) {
			startWeft(t,
				weft.WithConfig(weft.ConfigYAML(tlsYAML+fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "dubbo://%s", retries: 0, timeout: 3000, check: false}
`, dubbogo.Interface, addr))), weft.WithReference("echo", stub))
		}
		startConsumer(weftPKI.yaml(), &mtls)
		ctx := context.Background()
		var got string
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, err = mtls.Echo(ctx, "over TLS"); err == nil {
				break
			}
		}
		if err != nil || got != "over TLS" {
			t.Fatalf("weft (mutual TLS) to dubbo-go: %q %v", got, err)
		}

		startConsumer(fmt.Sprintf("tls: {ca-cert-file: %q}\n", weftPKI.ca), &noCert)
		if _, err := noCert.Echo(ctx, "x"); err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("weft without a client certificate: want dubbo-go's refusal (certificate required), got %v", err)
		}
	})

	t.Run("weft refuses a dubbo-go provider another CA signed", func(t *testing.T) {
		addr, _ := freeAddr(t)
		startDubbogoProvider(t, bin, addr, strangerPKI.flags()...)
		var c echoClient
		startWeft(t,
			weft.WithConfig(weft.ConfigYAML(weftPKI.yaml()+fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "dubbo://%s", retries: 0, timeout: 3000, check: false}
`, dubbogo.Interface, addr))), weft.WithReference("echo", &c))
		if _, err := c.Echo(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "not signed by the configured CA") {
			t.Fatalf("want the wrong CA named, got %v", err)
		}
	})

	t.Run("dubbo-go consumer to weft provider", func(t *testing.T) {
		addr, port := freeAddr(t)
		svc := &weftEcho{}
		startWeft(t,
			weft.WithConfig(weft.ConfigYAML(weftPKI.yaml()+fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, port, dubbogo.Interface))), weft.WithService("echo", svc))

		if got, err := dubbogoCall(t, bin, addr, "from dubbo-go", goPKI.flags()...); err != nil || got != "from dubbo-go" {
			t.Fatalf("dubbo-go (TLS) to weft (mutual TLS): %q %v", got, err)
		}
		if n := svc.echoes.Load(); n != 1 {
			t.Fatalf("weft's echo ran %d times, want 1", n)
		}
		if got, err := dubbogoCall(t, bin, addr, "stranger", strangerPKI.flags()...); err == nil {
			t.Errorf("weft served a dubbo-go client whose certificate another CA signed: %q", got)
		}
		// The reason reaches dubbo-go, not just a closed connection.
		if got, err := dubbogoCall(t, bin, addr, "plain"); err == nil || !strings.Contains(err.Error(), "takes TLS connections only") {
			t.Errorf("a plain dubbo-go client of weft's TLS server: want the reason, got %q %v", got, err)
		}
		if n := svc.echoes.Load(); n != 1 {
			t.Fatalf("refused clients ran echo: %d calls, want 1", n)
		}
		// weft still serves the good client after refusing the others.
		if got, err := dubbogoCall(t, bin, addr, "again", goPKI.flags()...); err != nil || got != "again" {
			t.Fatalf("after the refusals: %q %v", got, err)
		}
	})
}
