package test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

// attachmentEcho answers with the attachments of kernel.InvokerAttachments
// its call came with, as the provider's filters saw them.
type attachmentEcho struct{}

func (attachmentEcho) Attachments(ctx context.Context) (map[string]string, error) {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("no invocation in the method's context")
	}
	out := map[string]string{}
	for _, a := range kernel.InvokerAttachments {
		if v := inv.AttachmentString(a.Key); v != "" {
			out[a.Key] = v
		}
	}
	return out, nil
}

type attachmentClient struct {
	Attachments func(ctx context.Context) (map[string]string, error)
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestInvokerAttachmentsOnBothProtocols: a `token: true` service with a
// group and a version, exported on dubbo and tri, called by a consumer that
// found it through the embedded registry, gets every attachment of
// kernel.InvokerAttachments (the token among them, so the call is served)
// over both protocols. A direct call without the token is refused as
// forbidden, saying so once.
func TestInvokerAttachmentsOnBothProtocols(t *testing.T) {
	noLeaks(t)
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	addrs := map[string]string{"dubbo": freePort(t), "tri": freePort(t)}
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
protocols: {dubbo: {port: %s}, tri: {port: %s}}
provider:
  services:
    echo: {interface: org.weft.AttachmentEcho, group: g1, version: 1.2.0, token: true, protocol: "dubbo,tri"}
`, reg, port(addrs["dubbo"]), port(addrs["tri"])), weft.WithService("echo", attachmentEcho{}))

	want := map[string]func(string) bool{
		kernel.KeyPath:      func(v string) bool { return v == "org.weft.AttachmentEcho" },
		kernel.KeyInterface: func(v string) bool { return v == "org.weft.AttachmentEcho" },
		kernel.KeyGroup:     func(v string) bool { return v == "g1" },
		kernel.KeyVersion:   func(v string) bool { return v == "1.2.0" },
		// `token: true` publishes a random UUID; the provider's token
		// filter let the call through, so it was the published one.
		kernel.KeyToken:   uuidForm.MatchString,
		kernel.KeyTimeout: func(v string) bool { return v == "2500" },
	}
	for _, a := range kernel.InvokerAttachments {
		if want[a.Key] == nil {
			t.Errorf("kernel.InvokerAttachments has %q: say here what the provider must get", a.Key)
		}
	}
	for _, proto := range []string{"dubbo", "tri"} {
		t.Run(proto, func(t *testing.T) {
			var c attachmentClient
			startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
consumer:
  references:
    echo: {interface: org.weft.AttachmentEcho, group: g1, version: 1.2.0, protocol: %s, timeout: 2500, retries: 0}
`, reg, proto), weft.WithReference("echo", &c))
			var got map[string]string
			var err error
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if got, err = c.Attachments(context.Background()); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatalf("through the registry over %s: %v", proto, err)
			}
			for _, a := range kernel.InvokerAttachments {
				if ok := want[a.Key]; ok != nil && !ok(got[a.Key]) {
					t.Errorf("over %s the provider got %s=%q", proto, a.Key, got[a.Key])
				}
			}

			// The provider called directly, bypassing the registry.
			var direct attachmentClient
			startApp(t, fmt.Sprintf(`
consumer:
  references:
    echo: {interface: org.weft.AttachmentEcho, group: g1, version: 1.2.0, url: "%s://%s", retries: 0}
`, proto, addrs[proto]), weft.WithReference("echo", &direct))
			_, err = direct.Attachments(context.Background())
			if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "invalid token") || !strings.Contains(err.Error(), "without the token") {
				t.Fatalf("a direct call without the token over %s: %v", proto, err)
			}
			if n := strings.Count(err.Error(), "forbidden:"); n != 1 {
				t.Errorf("the error says forbidden %d times: %v", n, err)
			}
		})
	}
}
