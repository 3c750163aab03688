package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

type langGreeter struct{}

// Greet answers with the caller's "lang" attachment and sends one back.
func (langGreeter) Greet(ctx context.Context, name string) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	kernel.SetReplyAttachment(ctx, "served-by", "greeter")
	return inv.AttachmentString("lang") + ":" + name, nil
}

func startGreeter(t *testing.T) string {
	t.Helper()
	return startGreeterOn(t, "dubbo")
}

func startGreeterOn(t *testing.T, proto string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		weft.WithService("greeter", langGreeter{}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {%s: {port: %d}}
provider:
  services:
    greeter: {interface: org.weft.Greeter, protocol: %[1]s}
`, proto, port))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return fmt.Sprintf("%s://127.0.0.1:%d/org.weft.Greeter", proto, port)
}

// weft invoke sends attachments (-a, repeatable), prints the provider's
// reply attachments on stderr and the result on stdout, and calls $echo.
func TestInvokeAttachmentsAndEcho(t *testing.T) {
	for _, proto := range []string{"dubbo", "tri"} {
		t.Run(proto, func(t *testing.T) { testInvokeAttachmentsAndEcho(t, proto) })
	}
}

func testInvokeAttachmentsAndEcho(t *testing.T, proto string) {
	url := startGreeterOn(t, proto)
	var out, errb bytes.Buffer
	if code := cli([]string{"invoke", "-a", "lang=fr", "-a", "x=1", url, "greet", `["Ana"]`}, &out, &errb); code != 0 {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != `"fr:Ana"` {
		t.Fatalf("stdout %q", got)
	}
	if !strings.Contains(errb.String(), `attachments: {`) || !strings.Contains(errb.String(), `"served-by":"greeter"`) {
		t.Fatalf("stderr %q: want the reply attachments", errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := cli([]string{"invoke", url, "$echo", `["ping"]`}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != `"ping"` {
		t.Fatalf("$echo: code %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := cli([]string{"invoke", "-a", "novalue", url, "greet", `["Ana"]`}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want key=value") {
		t.Fatalf("bad -a: code %d, stderr %q", code, errb.String())
	}
}

// weft invoke through a reference: an interface through a registry, and a
// reference of config files with its own cluster settings; a reference
// with no provider fails as the App's check says.
func TestInvokeThroughReference(t *testing.T) {
	dir := t.TempDir()
	startApp(t, fmt.Sprintf(`
application: {name: greeter-app}
qos: {enable: false}
registries: {local: {address: "embedded://%s"}}
protocols: {dubbo: {port: 0}}
provider: {services: {greeter: {interface: org.weft.Greeter, version: "2.0"}}}
`, dir), weft.WithService("greeter", langGreeter{}))

	var out, errb bytes.Buffer
	if code := cli([]string{"invoke", "-version", "2.0", "-a", "lang=de", "embedded://" + dir, "org.weft.Greeter", "greet", `["Ana"]`}, &out, &errb); code != 0 ||
		strings.TrimSpace(out.String()) != `"de:Ana"` {
		t.Fatalf("through the registry: code %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}

	cfg := filepath.Join(t.TempDir(), "consumer.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
registries: {local: {address: "embedded://%s"}}
consumer:
  references:
    g: {interface: org.weft.Greeter, version: "2.0", cluster: failfast, loadbalance: roundrobin}
    missing: {interface: org.weft.Nobody}
`, dir)), 0o644)
	out.Reset()
	errb.Reset()
	if code := cli([]string{"invoke", "-c", cfg, "-a", "lang=it", "g", "greet", `["Bo"]`}, &out, &errb); code != 0 ||
		strings.TrimSpace(out.String()) != `"it:Bo"` {
		t.Fatalf("through -c: code %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := cli([]string{"invoke", "-c", cfg, "nope", "greet", `["Bo"]`}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), `the config has no reference "nope" (references: g, missing)`) {
		t.Fatalf("unknown reference: code %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := cli([]string{"invoke", "embedded://" + dir, "org.weft.Nobody", "greet", `["Bo"]`}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "no provider of org.weft.Nobody available in registries r") {
		t.Fatalf("no provider: code %d, stderr %q", code, errb.String())
	}
}

// startApp starts an App of yaml (quiet, no environment) for the test's
// length.
func startApp(t *testing.T, yaml string, opts ...weft.Option) *weft.App {
	t.Helper()
	app, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		weft.WithConfig(weft.ConfigYAML(yaml))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app
}
