package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
)

// End to end over dubbo on loopback: a consumer App calling an echo provider
// App whose chain has no extra filter, or one WASM filter (weft ABI: no-op,
// or the attachment read+write guest; proxy-wasm: testdata/proxywasm.wat's
// no-op mode "z" or header-reading mode "r"). Compare calls/s across the
// sub-benchmarks for the qps ratio.
func BenchmarkWasmEcho(b *testing.B) {
	dir := b.TempDir()
	for _, c := range []struct{ name, guest, pw string }{
		{"no-filter", "", ""},
		{"wasm-noop", "noop", ""},
		{"wasm-attach-rw", "attach", ""},
		{"proxy-wasm-noop", "", "z"},
		{"proxy-wasm-header-read", "", "r"},
	} {
		b.Run(c.name, func(b *testing.B) {
			addr := freeAddr(b)
			wasm := ""
			if c.guest != "" {
				wasm = fmt.Sprintf("wasm: {filters: {wasm-x: {path: %q, groups: [provider]}}}\n", buildWasmGuest(b, dir, c.guest))
			}
			if c.pw != "" {
				wasm = fmt.Sprintf("wasm: {filters: {pw-x: {abi: proxy-wasm, path: %q, configuration: %s, groups: [provider]}}}\n",
					buildProxyWasmWAT(b, dir, "proxywasm"), c.pw)
			}
			startApp(b, fmt.Sprintf("%sprotocols: {dubbo: {port: %s}}\nprovider: {services: {tracer: {interface: org.weft.Tracer}}}\n",
				wasm, addr[strings.LastIndexByte(addr, ':')+1:]), weft.WithService("tracer", tracer{}))
			var cl tracerClient
			startApp(b, fmt.Sprintf("consumer: {references: {tracer: {interface: org.weft.Tracer, url: \"dubbo://%s\"}}}\n", addr),
				weft.WithReference("tracer", &cl))
			// Every call carries an attachment for the attach guest to read.
			ctx := kernel.WithAttachments(context.Background(), map[string]any{"in": "trace-id-0123456789"})
			if _, err := cl.Echo(ctx, "warm"); err != nil {
				b.Fatal(err)
			}
			benchEchoParallel(b, ctx, cl.Echo)
		})
	}
}
