package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weftrpc/weft"
)

// The cost of tracing on an echo round trip over dubbo on loopback, a
// consumer App and a provider App in this process (allocations of both
// sides count): off (the default: no tracing filter in either chain),
// on with every new trace sampled, and on with none sampled (the context
// still propagates). The exporter is none: spans are recorded and batched
// by the SDK, then dropped, so the figure is weft's and the SDK's cost, not
// a collector's. "serial" is one caller (ns/op is the round trip),
// "parallel" 32 callers (calls/s).
func BenchmarkTracingEcho(b *testing.B) {
	for _, c := range []struct{ name, tracing string }{
		{"off", ""},
		{"on-ratio1", "tracing: {enable: true, sampling: {probability: 1.0}, exporter: {type: none}}\n"},
		{"on-ratio0", "tracing: {enable: true, sampling: {probability: 0}, exporter: {type: none}}\n"},
	} {
		addr := freeAddr(b)
		startApp(b, fmt.Sprintf("%sprotocols: {dubbo: {port: %s}}\nprovider: {services: {tracer: {interface: org.weft.Tracer}}}\n",
			c.tracing, portOf(addr)), weft.WithService("tracer", tracer{}))
		var cl tracerClient
		startApp(b, fmt.Sprintf("%sconsumer: {references: {tracer: {interface: org.weft.Tracer, url: \"dubbo://%s\"}}}\n", c.tracing, addr),
			weft.WithReference("tracer", &cl))
		ctx := context.Background()
		if _, err := cl.Echo(ctx, "warm"); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cl.Echo(ctx, "hello"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(32)
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cl.Echo(ctx, "hello"); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
