package triple

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
)

// BenchmarkRoundTrip is a unary Triple call, weft consumer to weft
// provider over loopback, 1 KiB of text each way: go test -bench
// RoundTrip -benchmem ./plugins/protocol/triple
func BenchmarkRoundTrip(b *testing.B) {
	t := &testing.T{}
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	msg := wrapperspb.String(strings.Repeat("x", 1024))
	ctx := context.Background()
	b.ReportAllocs()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := iv.Invoke(ctx, kernel.NewInvocation("Echo", msg)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(50)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := iv.Invoke(ctx, kernel.NewInvocation("Echo", msg)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
