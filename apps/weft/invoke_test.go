package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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
