package weft_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/kernel"
)

// Dubbo's check: a reference with no available provider fails the App's
// start (default true), after waiting for the registry to list one; with
// check: false (the reference's or consumer.check) the App starts without
// it. A failed start leaves nothing behind: the same port serves again.
func TestReferenceCheck(t *testing.T) {
	old := engine.CheckWait
	engine.CheckWait = 300 * time.Millisecond
	defer func() { engine.CheckWait = old }()
	dir := t.TempDir()
	consumer := func(extra string) (*weft.App, error) {
		return weft.New(weft.WithConfig(weft.ConfigYAML(`
application: {name: check-consumer}
qos: {enable: false}
registries: {local: {address: "embedded://`+dir+`"}}
consumer:
  references:
    greeter: {interface: org.example.Greeter, version: "1.0"`+extra+`}
`)), weft.WithoutEnv(), weft.WithLogger(quiet))
	}
	start := func(a *weft.App) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return a.Start(ctx)
	}

	for _, extra := range []string{"", ", check: true"} {
		a, err := consumer(extra)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = start(a)
		var ke *kernel.Error
		if err == nil || !errors.As(err, &ke) || ke.Code != kernel.CodeNoProvider ||
			!strings.Contains(err.Error(), "no provider of org.example.Greeter:1.0 available in registries local after 300ms (check: true, Dubbo's default)") ||
			!strings.Contains(err.Error(), "set check: false") {
			t.Fatalf("check%q: start err %v, want no provider (code %d)", extra, err, kernel.CodeNoProvider)
		}
		if d := time.Since(began); d < 300*time.Millisecond {
			t.Fatalf("failed after %v, before the check's wait", d)
		}
	}
	for _, doc := range []string{", check: false"} {
		a, err := consumer(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := start(a); err != nil {
			t.Fatalf("check: false: %v", err)
		}
		a.Stop(context.Background())
	}

	// A provider listed a moment after the subscription is found within
	// the wait.
	prov, err := weft.New(weft.WithConfig(weft.ConfigYAML(`
application: {name: check-provider}
qos: {enable: false}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
`)), weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("greeter", greeter{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := start(prov); err != nil {
		t.Fatal(err)
	}
	defer prov.Stop(context.Background())
	a, err := consumer("")
	if err != nil {
		t.Fatal(err)
	}
	if err := start(a); err != nil {
		t.Fatalf("with a provider: %v", err)
	}
	defer a.Stop(context.Background())
	inv, err := a.Reference("greeter")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := inv.Invoke(context.Background(), kernel.NewInvocation("sayHello", "check")); err != nil || r.Value != "hello check" {
		t.Fatalf("call: %v %v", r, err)
	}
}

// consumer.check is every reference's default; a reference's own wins.
func TestConsumerCheckDefault(t *testing.T) {
	cfg, err := weft.LoadConfig(weft.ConfigYAML(`consumer: {check: false, references: {a: {interface: x.A}, b: {interface: x.B, check: true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Consumer.Check; c == nil || *c {
		t.Fatalf("consumer.check %v", c)
	}
	if c := cfg.Consumer.References["b"].Check; c == nil || !*c {
		t.Fatalf("b.check %v", c)
	}
}
