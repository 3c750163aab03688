package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy/idl"
)

const helloProto = `syntax = "proto3";
package org.example.hello;
option java_multiple_files = true;
message HelloRequest { string name = 1; }
message HelloReply { string message = 1; }
service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }
`

// wasmGreeters builds the greeter service example of the Go and Rust SDKs.
func wasmGreeters(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, sdk := range []string{"go", "rust"} {
		mods, skip, err := buildSDKExamples(sdk, dir)
		if err != nil {
			t.Fatal(err)
		}
		if skip != "" {
			t.Skip(skip)
		}
		if mods["greeter"] == "" {
			t.Fatalf("sdk/%s/build.sh built no greeter", sdk)
		}
		out[sdk] = mods["greeter"]
	}
	return out
}

func httpJSON(t *testing.T, url, body string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
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
	return resp.StatusCode, string(b), resp.Header
}

type wasmGreeterClient struct {
	SayHello func(ctx context.Context, name string) (string, error)
	Echo     func(ctx context.Context, s string) (string, error)
}

// Services implemented in WASM, one module in Go and one in Rust, each
// serving an interface declared by a method table (Java types) and by a
// protobuf IDL: called over dubbo by a weft consumer, over Triple by gRPC
// binary and by curl's JSON; attachments go both ways, a business error
// keeps its Java class.
func TestWasmServices(t *testing.T) {
	mods := wasmGreeters(t)
	dir := t.TempDir()
	protoPath := filepath.Join(dir, "hello.proto")
	if err := os.WriteFile(protoPath, []byte(helloProto), 0o644); err != nil {
		t.Fatal(err)
	}
	_, triPort, _ := net.SplitHostPort(freePort(t))
	table := `methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}, echo: {params: [java.lang.String], returns: java.lang.String}}`
	startApp(t, `
application: {name: wasm-services}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}, tri: {port: `+triPort+`}}
provider:
  services:
    go: {interface: org.example.Greeter, version: go, impl: {wasm: `+mods["go"]+`}, `+table+`}
    rust: {interface: org.example.Greeter, version: rust, impl: {wasm: `+mods["rust"]+`}, `+table+`}
    proto-rust: {idl: `+protoPath+`, version: rust, impl: {wasm: `+mods["rust"]+`}}
    proto-go: {idl: `+protoPath+`, version: go, impl: {wasm: `+mods["go"]+`}}
`)
	var goc, rsc wasmGreeterClient
	consumer := startApp(t, `
application: {name: wasm-caller}
registries: {local: {address: "embedded://`+dir+`"}}
consumer:
  references:
    go: {interface: org.example.Greeter, version: go, protocol: dubbo}
    rust: {interface: org.example.Greeter, version: rust, protocol: dubbo}
    grpc: {interface: org.example.hello.Greeter, version: rust, url: "tri://127.0.0.1:`+triPort+`", check: false}
`, weft.WithReference("go", &goc), weft.WithReference("rust", &rsc))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for lang, c := range map[string]*wasmGreeterClient{"go": &goc, "rust": &rsc} {
		if got, err := c.SayHello(ctx, "dubbo"); err != nil || got != "hello dubbo" {
			t.Fatalf("%s over dubbo: %q, %v", lang, got, err)
		}
		if got, err := c.Echo(ctx, "é\"x"); err != nil || got != "é\"x" {
			t.Fatalf("%s echo over dubbo: %q, %v", lang, got, err)
		}
		_, err := c.SayHello(ctx, "")
		var ke *kernel.Error
		if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "name is empty") {
			t.Fatalf("%s business error: %v", lang, err)
		}
		if errors.As(err, &ke) && ke.Class != "" && ke.Class != "java.lang.IllegalArgumentException" {
			t.Fatalf("%s business error class %q", lang, ke.Class)
		}
		code, body, hdr := httpJSON(t, "http://127.0.0.1:"+triPort+"/org.example.Greeter/sayHello", `["curl"]`,
			map[string]string{"tri-service-version": lang, "suffix": "!"})
		if code != 200 || body != `"hello curl!"` {
			t.Fatalf("%s over HTTP/1.1 JSON: %d %s", lang, code, body)
		}
		_ = hdr
		code, body, _ = httpJSON(t, "http://127.0.0.1:"+triPort+"/org.example.hello.Greeter/SayHello", `{"name":"idl"}`,
			map[string]string{"tri-service-version": lang})
		if code != 200 || !strings.Contains(body, `"message":"hello idl"`) {
			t.Fatalf("%s proto over HTTP/1.1 JSON: %d %s", lang, code, body)
		}
	}

	// gRPC binary, with attachments both ways.
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
		t.Fatalf("gRPC binary: %q", got)
	}
	if res.Attachments["served-by"] != "wasm-rust" {
		t.Fatalf("reply attachments %v, want served-by wasm-rust", res.Attachments)
	}
}

// A WASM service's module is replaced on disk while 8 callers call it: no
// call fails, and the new module answers afterwards.
func TestWasmServiceHotReload(t *testing.T) {
	mods := wasmGreeters(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "greeter.wasm")
	copyFile(t, mods["go"], path)
	provider := startApp(t, `
application: {name: wasm-reload}
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, impl: {wasm: `+path+`}, methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}}}
`)
	var c wasmGreeterClient
	consumer := startApp(t, `
application: {name: wasm-reload-caller}
registries: {local: {address: "embedded://`+dir+`"}}
consumer: {references: {greeter: {interface: org.example.Greeter, protocol: dubbo, timeout: 5000}}}
`, weft.WithReference("greeter", &c))
	iv, err := consumer.Reference("greeter")
	if err != nil {
		t.Fatal(err)
	}
	servedBy := func(ctx context.Context) (string, error) {
		res, err := iv.Invoke(ctx, kernel.NewInvocation("sayHello", "x"))
		if err != nil {
			return "", err
		}
		s, _ := res.Attachments["served-by"].(string)
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if by, err := servedBy(ctx); err != nil || by != "wasm-go" {
		t.Fatalf("before: %q, %v", by, err)
	}
	load := callersUnderLoad(8, func() error {
		if got, err := c.SayHello(ctx, "x"); err != nil || got != "hello x" {
			return fmt.Errorf("%q, %v", got, err)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	copyFile(t, mods["rust"], path+".new")
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		by, err := servedBy(ctx)
		if err == nil && by == "wasm-rust" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new module did not answer after 30 s: %q, %v", by, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	calls, failed, firstErr := load()
	if failed != 0 {
		t.Fatalf("%d of %d calls failed during the reload; first: %v", failed, calls, firstErr)
	}
	t.Logf("%d calls by 8 callers across the reload, none failed", calls)
	// The module's metrics are the WASM filters', labelled with the
	// service.
	rec := httptest.NewRecorder()
	provider.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var lines []string
	for l := range strings.Lines(rec.Body.String()) {
		if strings.Contains(l, `filter="service:greeter"`) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{"weft_wasm_calls_total{", "weft_wasm_reloads_total{"} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %s...filter=\"service:greeter\"...; its lines of the service:\n%s", want, got)
		}
	}
}

// Bad WASM services are start-up errors naming the key; a guest that
// fails a call fails that call only.
func TestWasmServiceErrors(t *testing.T) {
	mods := wasmGreeters(t)
	filterDir := t.TempDir()
	filters, skip, err := buildSDKExamples("go", filterDir)
	if err != nil || skip != "" {
		t.Fatalf("%v %s", err, skip)
	}
	sum := sha256.Sum256(mustRead(t, mods["go"]))
	table := `methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}}`
	for _, c := range []struct{ impl, want string }{
		{`{wasm: ` + mods["go"] + `, sha256: "` + strings.Repeat("0", 64) + `"}`, "sha256"},
		{`{wasm: /nonexistent/x.wasm}`, "/nonexistent/x.wasm"},
		{`{wasm: ` + filters["authz"] + `}`, "exports no weft_on_call: a service's module answers each call in weft_on_call"},
	} {
		_, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(`
protocols: {dubbo: {port: 0}}
provider: {services: {s: {interface: a.B, impl: `+c.impl+`, `+table+`}}}
`)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "provider.services.s.impl.wasm") {
			t.Errorf("impl %s: %v, want %q at provider.services.s.impl.wasm", c.impl, err, c.want)
		}
	}
	_, err = weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(`
protocols: {dubbo: {port: 0}}
provider: {services: {s: {interface: a.B, impl: {wasm: `+mods["go"]+`}}}}
`)))
	if err == nil || !strings.Contains(err.Error(), "a WASM service declares its interface") {
		t.Errorf("undeclared: %v", err)
	}
	// The right digest loads; a method the guest does not answer fails
	// that call with the guest's message, and the next call is served.
	dir := t.TempDir()
	startApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}}
provider: {services: {s: {interface: a.B, impl: {wasm: `+mods["go"]+`, sha256: "`+hex.EncodeToString(sum[:])+`"},
  methods: {sayHello: {params: [java.lang.String], returns: java.lang.String}, nope: {params: [], returns: java.lang.String}}}}}
`)
	consumer := startApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
consumer: {references: {s: {interface: a.B, protocol: dubbo, retries: 0}}}
`)
	iv, _ := consumer.Reference("s")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := iv.Invoke(ctx, kernel.NewInvocation("nope")); err == nil || !strings.Contains(err.Error(), "no method nope") {
		t.Fatalf("unanswered method: %v", err)
	}
	if res, err := iv.Invoke(ctx, kernel.NewInvocation("sayHello", "again")); err != nil || res.Value != "hello again" {
		t.Fatalf("after a failed call: %v, %v", res.Value, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, mustRead(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// callersUnderLoad runs call in a loop on n goroutines until the returned
// stop is called, which waits for them and says how many calls were made,
// how many failed and the first failure.
func callersUnderLoad(n int, call func() error) (stop func() (calls, failed int64, first error)) {
	var nCalls, nFailed atomic.Int64
	var firstErr atomic.Pointer[error]
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				nCalls.Add(1)
				if err := call(); err != nil {
					nFailed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	return func() (int64, int64, error) {
		close(done)
		wg.Wait()
		var e error
		if p := firstErr.Load(); p != nil {
			e = *p
		}
		return nCalls.Load(), nFailed.Load(), e
	}
}
