package dubbo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// BenchmarkEchoRoundTrip is one consumer call of a 1 KiB echo through the
// whole remote path in one process: invoker, exchange, codec, hessian2, TCP
// on loopback, the provider's dispatch and filters, and back. allocs/op
// counts both sides.
func BenchmarkEchoRoundTrip(b *testing.B) {
	b.Run("1KiB", func(b *testing.B) { benchEcho(b, 1024) })
	b.Run("16KiB", func(b *testing.B) { benchEcho(b, 16<<10) })
}

func benchEcho(b *testing.B, size int) {
	t := &testing.T{}
	e := start(t, "")
	defer func() {
		e.consumer.Destroy()
		e.provider.Destroy()
	}()
	iv := e.refer(t, "")
	payload := strings.Repeat("x", size)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		inv := kernel.NewInvocation("echo", payload)
		inv.ParamTypes = "Ljava/lang/String;"
		res, err := iv.Invoke(ctx, inv)
		if err != nil || len(res.Value.(string)) != size {
			b.Fatal(err)
		}
	}
}

func BenchmarkEchoRoundTripParallel(b *testing.B) {
	t := &testing.T{}
	e := start(t, "")
	defer func() {
		e.consumer.Destroy()
		e.provider.Destroy()
	}()
	iv := e.refer(t, "")
	payload := strings.Repeat("x", 1024)
	b.ReportAllocs()
	b.SetParallelism(50)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			inv := kernel.NewInvocation("echo", payload)
			inv.ParamTypes = "Ljava/lang/String;"
			if _, err := iv.Invoke(context.Background(), inv); err != nil {
				b.Fatal(err)
			}
		}
	})
}
