package weft_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/internal/engine"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/proxy/idl"
)

const greeterProto = `syntax = "proto3";
package org.example.hello;
option java_multiple_files = true;
option java_package = "org.example.hello";

message HelloRequest { string name = 1; }
message HelloReply { string message = 1; }

service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Chat (stream HelloRequest) returns (stream HelloReply);
}
`

func freeTCPPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// postJSON calls a Triple server's HTTP/1.1 JSON form, as curl does.
func postJSON(t *testing.T, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sleeper answers after ms, or when its call's deadline passes, and says
// which.
type sleeper struct{ cut chan time.Duration }

func (s sleeper) Sleep(ctx context.Context, ms int64) (string, error) {
	began := time.Now()
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return "slept", nil
	case <-ctx.Done():
		s.cut <- time.Since(began)
		return "", ctx.Err()
	}
}

// A bridge from config alone: a Triple face (HTTP/1.1 JSON, gRPC binary)
// and a dubbo face on a dubbo provider, declared by a method table with
// Java types and by a protobuf IDL read at start-up. Results, attachments
// and business errors arrive as they would from the provider directly.
func TestForwardBridge(t *testing.T) {
	dir := t.TempDir()
	cut := make(chan time.Duration, 1)
	protoPath := filepath.Join(t.TempDir(), "greeter.proto")
	if err := os.WriteFile(protoPath, []byte(greeterProto), 0o644); err != nil {
		t.Fatal(err)
	}
	newApp(t, `
application: {name: backend}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
    sleeper: {interface: org.example.Sleeper}
`, weft.WithService("greeter", greeter{}), weft.WithService("sleeper", sleeper{cut}))

	triPort := freeTCPPort(t)
	newApp(t, `
application: {name: bridge}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {tri: {port: `+triPort+`}, dubbo: {port: 0}}
consumer:
  references:
    backend: {interface: org.example.Greeter, version: "1.0", protocol: dubbo}
    sleeper: {interface: org.example.Sleeper, protocol: dubbo, timeout: 10000}
provider:
  services:
    sleeper:
      interface: org.example.Sleeper
      protocol: tri
      register: false
      impl: {forward: sleeper}
      methods: {sleep: {params: [long], returns: java.lang.String}}
    table:
      interface: org.example.Greeter
      protocol: tri
      register: false
      impl: {forward: backend}
      methods:
        sayHello: {params: [java.lang.String], returns: java.lang.String}
    proto:
      idl: `+protoPath+`
      impl: {forward: backend}
      methods:
        SayHello: {params: [java.lang.String]}
`)

	base := "http://127.0.0.1:" + triPort
	// The method table, called as curl calls it.
	if code, body := postJSON(t, base+"/org.example.Greeter/sayHello", `["world"]`, map[string]string{"suffix": "!"}); code != 200 || body != `"hello world!"` {
		t.Fatalf("table over HTTP/1.1 JSON: %d %s, want 200 \"hello world!\"", code, body)
	}
	// A business error comes back with its message.
	if code, body := postJSON(t, base+"/org.example.Greeter/sayHello", `[""]`, nil); code == 200 || !strings.Contains(body, "empty name") {
		t.Fatalf("business error over HTTP/1.1: %d %s, want the provider's 'empty name'", code, body)
	}
	// A wrong argument is the caller's mistake, named.
	if code, body := postJSON(t, base+"/org.example.Greeter/sayHello", `[42]`, nil); code == 200 || !strings.Contains(body, "argument 0: a number where java.lang.String is declared") {
		t.Fatalf("bad argument: %d %s", code, body)
	}
	// The IDL, by its JSON form.
	if code, body := postJSON(t, base+"/org.example.hello.Greeter/SayHello", `{"name":"idl"}`, nil); code != 200 || !strings.Contains(body, `"message":"hello idl"`) {
		t.Fatalf("proto over HTTP/1.1 JSON: %d %s", code, body)
	}

	// The IDL over gRPC binary and over dubbo (a generic call with the
	// request as a POJO), from a consumer App.
	consumer := newApp(t, `
application: {name: caller}
registries: {local: {address: "embedded://`+dir+`"}}
consumer:
  check: false
  references:
    grpc: {interface: org.example.hello.Greeter, url: "tri://127.0.0.1:`+triPort+`"}
    sleeper: {interface: org.example.Sleeper, url: "tri://127.0.0.1:`+triPort+`", timeout: 300, retries: 0}
    dubbo: {interface: org.example.hello.Greeter, protocol: dubbo}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it, err := idl.LoadProto(protoPath, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := it.Method("SayHello")
	req := dynamicpb.NewMessage(m.In)
	req.Set(m.In.Fields().ByName("name"), protoreflect.ValueOfString("grpc"))
	iv, err := consumer.Reference("grpc")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("SayHello", req)
	inv.SetAttachment("suffix", "?")
	res, err := iv.Invoke(ctx, inv)
	if err != nil {
		t.Fatalf("gRPC binary: %v", err)
	}
	reply := dynamicpb.NewMessage(m.Out)
	if err := proto.Unmarshal(res.Value.(kernel.Encoded).Bytes(), reply); err != nil {
		t.Fatal(err)
	}
	if got := reply.Get(m.Out.Fields().ByName("message")).String(); got != "hello grpc?" {
		t.Fatalf("gRPC binary: %q, want hello grpc?", got)
	}

	div, err := consumer.Reference("dubbo")
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.NewGenericClient(func() (kernel.Invoker, error) { return div, nil })
	var v any
	for ctx.Err() == nil {
		if v, err = g.GenericInvoke(ctx, "sayHello", []string{"org.example.hello.HelloRequest"}, []any{map[string]any{"name": "dubbo"}}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the bridge's registration arrives
	}
	if mv, ok := v.(map[any]any); !ok || mv["message"] != "hello dubbo" {
		if ms, ok := v.(map[string]any); !ok || ms["message"] != "hello dubbo" {
			t.Fatalf("over dubbo: %#v, %v; want a map with message hello dubbo", v, err)
		}
	}
	// The caller's deadline bounds the forward: the provider's call ends
	// with it, and the caller gets a timeout.
	siv, err := consumer.Reference("sleeper")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = siv.Invoke(ctx, kernel.NewInvocation("sleep", int64(5000)))
	if kernel.CodeOf(err) != kernel.CodeTimeout || time.Since(began) > 3*time.Second {
		t.Fatalf("sleep through the bridge: %v (code %v) after %v, want a timeout after about 300 ms", err, kernel.CodeOf(err), time.Since(began))
	}
	select {
	case d := <-cut:
		if d > 3*time.Second {
			t.Fatalf("the provider's call ended after %v, not at the caller's deadline", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's call did not end at the caller's deadline")
	}
	// A streaming rpc of a declared service is refused with its kind.
	if _, err := g.Invoke(ctx, "chat", map[string]any{"name": "x"}); err == nil || !strings.Contains(err.Error(), "bidi-streaming") {
		t.Fatalf("streaming rpc: %v", err)
	}
}

// The config of a declared service is checked at New, each mistake named
// with its key.
func TestDeclaredServiceErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.proto")
	if err := os.WriteFile(bad, []byte("syntax = \"proto3\";\nmessage A { strin name = 1; }\nservice S { rpc M (A) returns (B); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "greeter.proto")
	if err := os.WriteFile(good, []byte(greeterProto), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ svc, want string }{
		{`{interface: a.B, impl: {forward: nope}, methods: {m: {params: [long]}}}`, `impl.forward: no reference "nope" in consumer.references (references: up)`},
		{`{interface: a.B, impl: {}}`, `impl: give forward: <reference id>`},
		{`{idl: ` + bad + `, impl: {forward: up}}`, `bad.proto:2:`},
		{`{idl: /nonexistent/x.proto, impl: {forward: up}}`, `idl: /nonexistent/x.proto does not compile`},
		{`{idl: ` + good + `, service: Nope, impl: {forward: up}}`, `declares no service Nope (its services: org.example.hello.Greeter)`},
		{`{idl: ` + good + `, impl: {forward: up}, methods: {Hello: {params: [long]}}}`, `methods.Hello: org.example.hello.Greeter has no rpc Hello (its rpcs: Chat, SayHello)`},
		{`{interface: a.B, impl: {forward: up}, methods: {m: {params: ["not a type"]}}}`, `methods.m.params[0]: "not a type" is not a Java type name`},
		{`{interface: a.B, idl: ` + good + `}`, `idl and service declare the interface of a service implemented from config`},
	} {
		_, err := weft.New(weft.WithConfig(weft.ConfigYAML(`
qos: {enable: false}
consumer: {references: {up: {interface: a.B, url: "dubbo://127.0.0.1:1", check: false}}}
provider: {services: {s: `+c.svc+`}}
`)), weft.WithoutEnv(), weft.WithLogger(quiet))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.svc, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "provider.services.s") {
			t.Errorf("%s: err %v does not name the key", c.svc, err)
		}
	}
}

type upper struct{}

func (upper) Upper(s string) (string, error) { return strings.ToUpper(s), nil }

type secret struct{}

func (secret) Get() (string, error) { return "classified", nil }

// A gateway (interface "*") forwards any service on its allow-list, by the
// name the caller used, to providers it finds through the registry; a
// service not on the list is refused, naming the list.
func TestGateway(t *testing.T) {
	old := engine.CheckWait
	engine.CheckWait = 300 * time.Millisecond // how long a first call waits for a provider to be listed
	defer func() { engine.CheckWait = old }()
	dir := t.TempDir()
	newApp(t, `
application: {name: backends}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
    upper: {interface: org.example.Upper}
    secret: {interface: org.other.Secret}
`, weft.WithService("greeter", greeter{}), weft.WithService("upper", upper{}), weft.WithService("secret", secret{}))

	dubboPort, triPort := freeTCPPort(t), freeTCPPort(t)
	newApp(t, `
application: {name: gateway}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: `+dubboPort+`}, tri: {port: `+triPort+`}}
consumer:
  references:
    any: {interface: "*", protocol: dubbo, timeout: 2000}
provider:
  services:
    gw: {interface: "*", impl: {forward: any, allow: ["org.example.*"]}}
`)

	var g greeterClient
	var u struct {
		Upper func(ctx context.Context, s string) (string, error)
	}
	var s struct {
		Get func(ctx context.Context) (string, error)
	}
	newApp(t, `
application: {name: caller}
consumer:
  check: false
  references:
    greeter: {interface: org.example.Greeter, version: "1.0", url: "dubbo://127.0.0.1:`+dubboPort+`"}
    upper: {interface: org.example.Upper, url: "dubbo://127.0.0.1:`+dubboPort+`"}
    secret: {interface: org.other.Secret, url: "dubbo://127.0.0.1:`+dubboPort+`", retries: 0}
`, weft.WithReference("greeter", &g), weft.WithReference("upper", &u), weft.WithReference("secret", &s))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := g.SayHello(ctx, "gateway"); err != nil || got != "hello gateway" {
		t.Fatalf("greeter through the gateway: %q, %v", got, err)
	}
	if got, err := u.Upper(ctx, "abc"); err != nil || got != "ABC" {
		t.Fatalf("upper through the gateway: %q, %v", got, err)
	}
	if _, err := s.Get(ctx); kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "gateway gw does not forward org.other.Secret: it is not on its allow-list (org.example.*)") {
		t.Fatalf("secret through the gateway: %v (code %v), want forbidden", err, kernel.CodeOf(err))
	}
	// The same gateway on tri, called as curl calls it.
	if code, body := postJSON(t, "http://127.0.0.1:"+triPort+"/org.example.Greeter/sayHello", `["curl"]`, map[string]string{"tri-service-version": "1.0"}); code != 200 || body != `"hello curl"` {
		t.Fatalf("over HTTP/1.1: %d %s", code, body)
	}
	// A service nobody provides: no provider, said by the reference.
	if code, body := postJSON(t, "http://127.0.0.1:"+triPort+"/org.example.Nobody/x", `[]`, nil); code == 200 || !strings.Contains(body, "org.example.Nobody") {
		t.Fatalf("no provider: %d %s", code, body)
	}
}

// An IDL named by a config file is found beside that file, wherever the
// App is started from.
func TestDeclaredPathsRelativeToConfigFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greeter.proto"), []byte(greeterProto), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "weft.yaml")
	if err := os.WriteFile(cfg, []byte(`
qos: {enable: false}
consumer: {references: {up: {interface: a.B, url: "dubbo://127.0.0.1:1", check: false}}}
provider: {services: {s: {idl: greeter.proto, impl: {forward: up}}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	app, err := weft.New(weft.WithConfig(weft.ConfigFiles(cfg)...), weft.WithoutEnv(), weft.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Config().Provider.Services["s"].IDL; got != filepath.Join(dir, "greeter.proto") {
		t.Fatalf("idl resolved to %s", got)
	}
}

// A bridge's retries are its reference's, as a direct caller's would be:
// with retries, a provider that answers "service not found" (retryable) is
// passed over for the other; without, the caller gets that error, with its
// code, through the bridge.
func TestForwardRetries(t *testing.T) {
	wrong, right := freeTCPPort(t), freeTCPPort(t)
	newApp(t, `
application: {name: wrong}
protocols: {dubbo: {port: `+wrong+`}}
provider: {services: {other: {interface: org.example.Other}}}
`, weft.WithService("other", upper{}))
	newApp(t, `
application: {name: right}
protocols: {dubbo: {port: `+right+`}}
provider: {services: {greeter: {interface: org.example.Greeter}}}
`, weft.WithService("greeter", greeter{}))
	bridge := freeTCPPort(t)
	urls := `"dubbo://127.0.0.1:` + wrong + `;dubbo://127.0.0.1:` + right + `"`
	newApp(t, `
application: {name: bridge}
protocols: {tri: {port: `+bridge+`}}
consumer:
  check: false
  references:
    retrying: {interface: org.example.Greeter, url: `+urls+`, retries: 2, loadbalance: roundrobin}
    once: {interface: org.example.Greeter, url: `+urls+`, retries: 0, loadbalance: roundrobin}
provider:
  services:
    retrying: {interface: org.example.Greeter, group: retrying, impl: {forward: retrying}, methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}}}
    once: {interface: org.example.Greeter, group: once, impl: {forward: once}, methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}}}
`)
	call := func(group string) (int, string) {
		return postJSON(t, "http://127.0.0.1:"+bridge+"/org.example.Greeter/sayHello", `["r"]`, map[string]string{"tri-service-group": group})
	}
	for i := range 6 {
		if code, body := call("retrying"); code != 200 || body != `"hello r"` {
			t.Fatalf("call %d with retries: %d %s", i, code, body)
		}
	}
	notFound := 0
	for range 6 {
		code, body := call("once")
		if code != 200 {
			if !strings.Contains(body, "service not found") && !strings.Contains(body, "not found") {
				t.Fatalf("without retries: %d %s, want the provider's service-not-found", code, body)
			}
			notFound++
		}
	}
	if notFound == 0 {
		t.Fatal("without retries, no call met the provider that lacks the service: the retries above proved nothing")
	}
}
