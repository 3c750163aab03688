package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// Dubbo's token between weft and dubbo-go, both ways: a consumer whose url
// carries the provider's token is served, one without it is refused (weft:
// forbidden; dubbo-go: its token filter's "Invalid token!").
func TestTokenDubboGoConsumerToWeftProvider(t *testing.T) {
	addr, port := freeAddr(t)
	svc := &weftEcho{}
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s, token: s3cret}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc))

	with, err := dubbogo.NewClient("dubbo://" + addr + "?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if got, err := with.Echo(context.Background(), "hi"); err != nil || got != "hi" {
		t.Fatalf("dubbo-go consumer with the token: %q %v", got, err)
	}
	// dubbo-go shares one connection per address: the second client is a
	// second invoker on it, without the token.
	without, err := dubbogo.NewClient("dubbo://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	before := svc.echoes.Load()
	_, err = without.Echo(context.Background(), "hi")
	if err == nil || !strings.Contains(err.Error(), "weft: forbidden: invalid token") {
		t.Fatalf("dubbo-go consumer without the token: %v", err)
	}
	if n := svc.echoes.Load() - before; n != 0 {
		t.Fatalf("the refused call ran echo %d times", n)
	}
}

func TestTokenWeftConsumerToDubboGoProvider(t *testing.T) {
	addr, _ := freeAddr(t)
	stop, err := dubbogo.StartProvider(addr, dubbogo.WithProviderToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var with, without echoClient
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    with: {interface: %s, url: "dubbo://%s?token=s3cret", retries: 0}
    without: {interface: %s, url: "dubbo://%s", retries: 0}
`, dubbogo.Interface, addr, dubbogo.Interface, addr))),
		weft.WithReference("with", &with), weft.WithReference("without", &without))
	if got, err := with.Echo(context.Background(), "hi"); err != nil || got != "hi" {
		t.Fatalf("weft consumer with the token: %q %v", got, err)
	}
	_, err = without.Echo(context.Background(), "hi")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "invalid token") {
		t.Fatalf("weft consumer without the token: %v", err)
	}
	t.Logf("dubbo-go's refusal as a weft consumer sees it: %v", err)
}
