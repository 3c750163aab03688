package test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weftrpc/weft"
)

// The cost of each resilience feature when on, on an echo round trip over
// dubbo on loopback (consumer and provider Apps in this process, both
// sides' allocations counted), beside "off" (none configured: the default
// path). provider and ref are the service's and the reference's extra
// settings. "serial" is one caller (ns/op is the round trip), "parallel"
// 32 callers (calls/s).
func BenchmarkResilienceEcho(b *testing.B) {
	for _, c := range []struct{ name, provider, ref string }{
		{"off", "", ""},
		{"circuitbreaker", "", `, params: {circuitbreaker: "true"}`},
		{"outlier", "", `, params: {outlier: "true"}`},
		{"retrybudget", "", `, params: {retry.budget.percent: "20"}`},
		{"adaptive", "", `, loadbalance: adaptive`},
		{"p2c+gradient", `, params: {limiter: gradient}`, `, loadbalance: p2c`},
		{"gradient", `, params: {limiter: gradient}`, ""},
		{"hillClimbing", `, params: {limiter: hillClimbing}`, ""},
	} {
		addr := freeAddr(b)
		startApp(b, fmt.Sprintf("protocols: {dubbo: {port: %s}}\nprovider: {services: {tracer: {interface: org.weft.Tracer%s}}}\n",
			portOf(addr), c.provider), weft.WithService("tracer", tracer{}))
		var cl tracerClient
		startApp(b, fmt.Sprintf("consumer: {references: {tracer: {interface: org.weft.Tracer, url: \"dubbo://%s\"%s}}}\n", addr, c.ref),
			weft.WithReference("tracer", &cl))
		ctx := context.Background()
		if _, err := cl.Echo(ctx, "warm"); err != nil {
			b.Fatal(err)
		}
		benchEcho(b, c.name, ctx, cl.Echo)
	}
}
