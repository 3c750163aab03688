package wasmfilter_test

import (
	"context"
	"testing"

	"github.com/weftrpc/weft/extension"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// nop is the trivial next invoker of the overhead benchmarks.
type nop struct{ url *kernel.URL }

func (n nop) URL() *kernel.URL  { return n.url }
func (n nop) IsAvailable() bool { return true }
func (n nop) Destroy()          {}
func (n nop) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, nil
}

// The extra cost of a WASM filter per call is the difference between these
// and native-noop: the filter called directly, with a next invoker that does
// nothing, one invocation reused (as a chain node sees it).
func BenchmarkFilter(b *testing.B) {
	dir := b.TempDir()
	next := nop{url: newEndpoint().url}
	native := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
		return next.Invoke(ctx, inv)
	})
	cases := []struct {
		name  string
		guest string
		f     extension.Filter
		att   string // the "in" attachment, for the attach guest
		pw    string // a proxy-wasm guest's configuration (testdata/proxywasm.wat's mode)
	}{
		{name: "native-noop", f: native},
		{name: "wasm-noop", guest: "noop"},
		{name: "wasm-attach-rw", guest: "attach", att: "trace-id-0123456789"},
		{name: "wasm-request+response", guest: "misbehave"}, // two callbacks, each one get_attachment (absent)
		// proxy-wasm: six callbacks a call (context create, request and
		// response headers, done, log, delete).
		{name: "proxy-wasm-noop", pw: "z"},
		{name: "proxy-wasm-header-read", pw: "r", att: "trace-id-0123456789"}, // builds the request's header map
	}
	for _, c := range cases {
		f := c.f
		if c.guest != "" {
			f = newFilter(b, buildGuest(b, dir, c.guest), wasmfilter.Config{})
		}
		if c.pw != "" {
			f = newFilter(b, buildWAT(b, dir, "proxywasm", ""), wasmfilter.Config{Name: c.name, ABI: wasmfilter.ABIProxyWasm, Configuration: []byte(c.pw)})
		}
		for _, deadline := range []bool{false, true} {
			name := c.name
			ctx := context.Background()
			if deadline {
				name += "/ctx-deadline"
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 1e12)
				defer cancel()
			}
			b.Run(name, func(b *testing.B) {
				inv := kernel.NewInvocation("sayHello", "world")
				if c.att != "" {
					inv.SetAttachment("in", c.att)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.Invoke(ctx, next, inv); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The same, with all cores calling at once through one filter (the pool under
// contention).
func BenchmarkFilterParallel(b *testing.B) {
	next := nop{url: newEndpoint().url}
	f := newFilter(b, buildGuest(b, b.TempDir(), "noop"), wasmfilter.Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		inv := kernel.NewInvocation("sayHello", "world")
		for pb.Next() {
			if _, err := f.Invoke(context.Background(), next, inv); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
