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
		benchEcho(b, c.name, ctx, cl.Echo)
	}
}

// benchEcho runs name/serial (one caller: ns/op is the round trip) and
// name/parallel (32 callers: calls/s) over echo.
func benchEcho(b *testing.B, name string, ctx context.Context, echo func(context.Context, string) (string, error)) {
	b.Run(name+"/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := echo(ctx, "hello"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) { benchEchoParallel(b, ctx, echo) })
}

// benchEchoParallel calls echo from 32 callers per core and reports
// calls/s beside the allocations.
func benchEchoParallel(b *testing.B, ctx context.Context, echo func(context.Context, string) (string, error)) {
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := echo(ctx, "hello"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
