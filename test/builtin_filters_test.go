package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

type tokenClient struct {
	Secret func(ctx context.Context, who string) (string, error)
}

// Dubbo's token over TCP: a provider exported with `token: true` publishes a
// random token in the registry; a consumer that found it there sends it and
// is served; one that calls the address directly, without the token or with
// a wrong one, is refused as forbidden and the method does not run; a fixed
// token set on a direct url works.
func TestTokenGuardsDirectCalls(t *testing.T) {
	noLeaks(t)
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	svc := &vault{}
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
protocols: {dubbo: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault, token: true}
    fixed: {interface: org.weft.Fixed, ref: vault, token: s3cret}
`, reg, port), weft.WithService("vault", svc))

	var viaRegistry, direct, wrong, fixed tokenClient
	startApp(t, fmt.Sprintf(`
registries: {r: {address: %q}}
consumer:
  references:
    viaRegistry: {interface: org.weft.Vault, retries: 0}
    direct: {interface: org.weft.Vault, url: "dubbo://%s", retries: 0}
    wrong: {interface: org.weft.Vault, url: "dubbo://%s?token=guessed", retries: 0}
    fixed: {interface: org.weft.Fixed, url: "dubbo://%s?token=s3cret", retries: 0}
`, reg, addr, addr, addr),
		weft.WithReference("viaRegistry", &viaRegistry), weft.WithReference("direct", &direct),
		weft.WithReference("wrong", &wrong), weft.WithReference("fixed", &fixed))
	ctx := context.Background()

	var got string
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, err = viaRegistry.Secret(ctx, "alice"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || got != "the secret, for alice" {
		t.Fatalf("through the registry: %q %v", got, err)
	}
	before := svc.secrets.Load()
	for name, c := range map[string]tokenClient{"without the token": direct, "with a wrong token": wrong} {
		_, err := c.Secret(ctx, "mallory")
		if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "invalid token") || !strings.Contains(err.Error(), name) {
			t.Errorf("direct call %s: %v", name, err)
		}
		if strings.Contains(fmt.Sprint(err), "s3cret") {
			t.Errorf("the error gives a token away: %v", err)
		}
	}
	if n := svc.secrets.Load() - before; n != 0 {
		t.Errorf("refused calls ran the method %d times", n)
	}
	if got, err := fixed.Secret(ctx, "bob"); err != nil || got != "the secret, for bob" {
		t.Fatalf("fixed token on a direct url: %q %v", got, err)
	}
}

// Dubbo's tps over TCP: tps 3 per 60 s window (tps_interval) on one
// provider; of 5 calls 3 are served and 2 refused as limit exceeded
// (failfast: one provider). Windows turning over: the filter's unit test.
func TestTPSLimitOverTCP(t *testing.T) {
	noLeaks(t)
	svc := &vault{}
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    vault: {interface: org.weft.Vault, tps: 3, tps_interval: 60000}
`, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("vault", svc))
	var c tokenClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    vault: {interface: org.weft.Vault, url: "dubbo://%s", cluster: failfast}
`, addr), weft.WithReference("vault", &c))
	ok, limited := 0, 0
	for range 5 {
		_, err := c.Secret(context.Background(), "x")
		switch {
		case err == nil:
			ok++
		case kernel.CodeOf(err) == kernel.CodeLimitExceeded && strings.Contains(err.Error(), "tps limit of 3 calls per 1m0s"):
			limited++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if ok != 3 || limited != 2 || svc.secrets.Load() != 3 {
		t.Fatalf("%d served, %d limited, the method ran %d times; want 3, 2, 3", ok, limited, svc.secrets.Load())
	}
}
