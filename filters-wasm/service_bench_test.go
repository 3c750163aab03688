package wasmfilter

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// BenchmarkServe: one call of a WASM service's handler, a 1 KiB echo
// (WEFT_BENCH_SERVICE names the module: sdk/rust or sdk/go's greeter).
func BenchmarkServe(b *testing.B) {
	path := os.Getenv("WEFT_BENCH_SERVICE")
	if path == "" {
		b.Skip("set WEFT_BENCH_SERVICE to a service module (bash sdk/rust/build.sh OUT: OUT/greeter.wasm)")
	}
	f, err := New(context.Background(), Config{Name: "svc", Service: true, Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	arg := strings.Repeat("x", benchSize())
	args := []byte(`["` + arg + `"]`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := f.Serve(context.Background(), kernel.NewInvocation("echo", arg), func() ([]byte, error) { return args, nil }, []any{arg})
			if _, ok := res.Value.(string); err != nil || !ok {
				b.Fatalf("%T %v %v", res.Value, res.Value, err)
			}
		}
	})
	b.StopTimer()
	st := f.Stats()
	b.Logf("instances created %d, discarded %d, calls %d", st.Created, st.Discarded, st.Calls)
}

func benchSize() int {
	if n, err := strconv.Atoi(os.Getenv("WEFT_BENCH_SIZE")); err == nil {
		return n
	}
	return 1024
}
