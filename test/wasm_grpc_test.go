package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// proxy_grpc_call: a proxy-wasm filter (filters-wasm/testdata/
// proxywasm_grpc.wat, written from the spec) on a dubbo provider calls a
// gRPC service, weft's Triple provider of org.weft.PbEcho, through a
// cluster that is its URL (HTTP/2 cleartext, as any gRPC server is called)
// or a weft reference to it (ref:), and puts the answer into the call: the
// reply's message, and proxy_on_grpc_close's status and message; an unknown
// method closes with UNIMPLEMENTED, an unreachable server with UNAVAILABLE.
func TestProxyWasmGRPCCallout(t *testing.T) {
	mod := buildProxyWasmWAT(t, t.TempDir(), "proxywasm_grpc")
	grpcAddr := freePort(t)
	startApp(t, fmt.Sprintf("protocols: {tri: {port: %s}}\nprovider: {services: {pb: {interface: org.weft.PbEcho, protocol: tri}}}\n",
		grpcAddr[strings.LastIndexByte(grpcAddr, ':')+1:]), weft.WithService("pb", pbEcho{}))
	for _, tc := range []struct{ name, cluster string }{
		{"url", "http://" + grpcAddr},
		{"ref", "ref:pb"},
		{"down", "http://" + freePort(t)}, // free: nothing listens there
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen map[string]any
			rec := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
				mu.Lock()
				seen = map[string]any{}
				for k, v := range inv.Attachments() {
					seen[k] = v
				}
				mu.Unlock()
				return next.Invoke(ctx, inv)
			})
			addr := freePort(t)
			var pb pbEchoClient
			startApp(t, fmt.Sprintf(`protocols: {dubbo: {port: %s}}
wasm: {filters: {pw-grpc: {abi: proxy-wasm, path: %q, groups: [provider], order: -100, clusters: {up: %q}}}}
provider: {services: {tracer: {interface: org.weft.Tracer}}}
consumer: {references: {pb: {interface: org.weft.PbEcho, url: "tri://%s", retries: 0}}}
`, addr[strings.LastIndexByte(addr, ':')+1:], mod, tc.cluster, grpcAddr),
				weft.WithService("tracer", tracer{}), weft.WithReference("pb", &pb),
				weft.WithFilter("rec", &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: 100},
					func() (extension.Filter, error) { return rec, nil }))
			app := startApp(t, fmt.Sprintf("consumer: {references: {tracer: {interface: org.weft.Tracer, url: \"dubbo://%s\", retries: 0}}}\n", addr),
				weft.WithReference("tracer", &tracerClient{}))
			iv, err := app.Reference("tracer")
			if err != nil {
				t.Fatal(err)
			}
			call := func(method string) map[string]any {
				t.Helper()
				inv := kernel.NewInvocation("echo", "x")
				inv.SetAttachment("x-method", method)
				if _, err := iv.Invoke(context.Background(), inv); err != nil {
					t.Fatalf("call (gRPC method %s): %v", method, err)
				}
				mu.Lock()
				defer mu.Unlock()
				return seen
			}
			if tc.name == "down" {
				if got := call("Echo"); got["x-grpc-status"] != "14" || got["x-grpc-reply"] != nil {
					t.Fatalf("an unreachable gRPC server: the provider got %v; want x-grpc-status 14 (UNAVAILABLE) and no reply", got)
				}
				return
			}
			got := call("Echo")
			if got["x-grpc-reply"] != "\n\x05hello" || got["x-grpc-status"] != "0" {
				t.Fatalf("the provider got %q; want x-grpc-reply 0a 05 hello (StringValue hello) and x-grpc-status 0", got)
			}
			t.Logf("Echo: x-grpc-reply %q, x-grpc-status %v", got["x-grpc-reply"], got["x-grpc-status"])
			got = call("Nope")
			t.Logf("Nope: x-grpc-status %v, x-grpc-message %q", got["x-grpc-status"], got["x-grpc-message"])
			if got["x-grpc-status"] != "12" || got["x-grpc-message"] == nil || got["x-grpc-reply"] != nil {
				t.Fatalf("an unknown method: the provider got %q; want x-grpc-status 12 (UNIMPLEMENTED) with a message", got)
			}
		})
	}
}
