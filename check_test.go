package weft_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
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

// A registry's register: false and subscribe: false (Dubbo's
// RegistryConfig): nothing is registered in the first, nothing looked up
// in the second.
func TestRegistryRegisterAndSubscribeFalse(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	newApp(t, `
application: {name: regflags}
registries:
  ra: {address: "embedded://`+dirA+`", register: false}
  rb: {address: "embedded://`+dirB+`"}
protocols: {dubbo: {port: 0}}
provider: {services: {greeter: {interface: org.example.Greeter}}}
`, weft.WithService("greeter", greeter{}))
	call := func(registries string) error {
		var c greeterClient
		newApp(t, `
application: {name: regflags-consumer}
qos: {enable: false}
registries: {`+registries+`}
consumer: {check: false, references: {greeter: {interface: org.example.Greeter, retries: 0}}}
`, weft.WithReference("greeter", &c))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		for ctx.Err() == nil {
			if _, err = c.SayHello(ctx, "x"); err == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return err
	}
	if err := call(`rb: {address: "embedded://` + dirB + `"}`); err != nil {
		t.Fatalf("through rb, where it registered: %v", err)
	}
	if err := call(`ra: {address: "embedded://` + dirA + `"}`); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("through ra (register: false on the provider's side): %v, want no provider", err)
	}
	if err := call(`ra: {address: "embedded://` + dirA + `"}, rb: {address: "embedded://` + dirB + `", subscribe: false}`); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("rb with subscribe: false: %v, want no provider", err)
	}
}

// Dubbo's delay: the service is registered that long after the start
// (consumers find it then); deprecated: a consumer that refers its
// providers logs a warning naming it.
func TestDelayAndDeprecated(t *testing.T) {
	dir := t.TempDir()
	began := time.Now()
	newApp(t, `
application: {name: delayed}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider: {services: {greeter: {interface: org.example.Greeter, delay: 600, deprecated: true}}}
`, weft.WithService("greeter", greeter{}))
	var logs syncLog
	var c greeterClient
	newApp(t, `
application: {name: delayed-consumer}
qos: {enable: false}
registries: {local: {address: "embedded://`+dir+`"}}
consumer: {check: false, references: {greeter: {interface: org.example.Greeter, retries: 0}}}
`, weft.WithReference("greeter", &c), weft.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first time.Duration
	for ctx.Err() == nil {
		if _, err := c.SayHello(ctx, "x"); err == nil {
			first = time.Since(began)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if first < 600*time.Millisecond || first > 8*time.Second {
		t.Fatalf("first call answered %v after the provider started, want after its 600 ms delay", first)
	}
	if !strings.Contains(logs.String(), "the service is deprecated") || !strings.Contains(logs.String(), "interface=org.example.Greeter") {
		t.Fatalf("no deprecation warning in the consumer's log:\n%s", logs.String())
	}
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Dubbo's generic reference (generic: true: each call goes as $invoke, its
// result comes back in generic form) and lazy connect (lazy: true: the
// connection is made at the first call, so the reference starts, check
// and all, before its provider listens).
func TestGenericAndLazyReferences(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	consumer := newApp(t, `
application: {name: generic-lazy}
qos: {enable: false}
consumer:
  references:
    greeter: {interface: org.example.Greeter, url: "dubbo://127.0.0.1:`+port+`", lazy: true, generic: true}
`)
	newApp(t, `
application: {name: generic-lazy-provider}
protocols: {dubbo: {port: `+port+`}}
provider: {services: {greeter: {interface: org.example.Greeter}}}
`, weft.WithService("greeter", seenGeneric{}))
	iv, err := consumer.Reference("greeter")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inv := kernel.NewInvocation("sayHello", "lazy")
	inv.ParamTypes = "Ljava/lang/String;"
	res, err := iv.Invoke(ctx, inv)
	if err != nil || res.Value != "hello lazy (generic: true)" {
		t.Fatalf("first call: %v, %v", res.Value, err)
	}
}

// seenGeneric says whether its call came as a generic one.
type seenGeneric struct{}

func (seenGeneric) SayHello(ctx context.Context, name string) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	return "hello " + name + " (generic: " + inv.AttachmentString("generic") + ")", nil
}
