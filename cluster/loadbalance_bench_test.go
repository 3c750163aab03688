package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// BenchmarkSelect measures one pick among providers whose URLs look like a
// registry's (several parameters, a start timestamp, differing weights), with
// call counters in place for the balancers that read them.
func BenchmarkSelect(b *testing.B) {
	for _, c := range lbAll {
		for _, n := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				stats := kernel.NewStatusStore()
				lb := c.new(stats)
				ivs := lbRealistic(n)
				for i, iv := range ivs {
					lbFinished(stats, iv, "sayHello", 3, time.Duration(i%7+1)*time.Millisecond)
					lbBusy(stats, iv, "sayHello", i%3)
				}
				invs := make([]*kernel.Invocation, 64)
				for i := range invs {
					invs[i] = kernel.NewInvocation("sayHello", fmt.Sprintf("user-%d", i))
				}
				for _, inv := range invs {
					lb.Select(ivs, nil, inv)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					lb.Select(ivs, nil, invs[i&63])
				}
			})
		}
	}
}

// BenchmarkWeight is the per-provider cost every weighted balancer pays:
// parameter lookups and number parsing, with and without a start timestamp.
func BenchmarkWeight(b *testing.B) {
	for _, c := range []struct{ name, url string }{
		{"plain", "dubbo://10.0.0.1:20880/org.example.Greeter?application=demo&side=provider"},
		{"weight", "dubbo://10.0.0.1:20880/org.example.Greeter?application=demo&side=provider&weight=200"},
		{"timestamp", fmt.Sprintf("dubbo://10.0.0.1:20880/org.example.Greeter?application=demo&side=provider&weight=200&timestamp=%d",
			time.Now().Add(-time.Minute).UnixMilli())},
	} {
		b.Run(c.name, func(b *testing.B) {
			u := kernel.MustParseURL(c.url)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				WeightAt(u, "sayHello", now)
			}
		})
	}
}
