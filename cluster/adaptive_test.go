package cluster

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// fakeClock gives an AdaptiveMetrics a clock the test moves.
func adaptiveAt(t0 time.Time) (*AdaptiveMetrics, *time.Time) {
	m := NewAdaptiveMetrics()
	now := t0
	m.now = func() time.Time { return now }
	return m, &now
}

// The load of one provider after one call, worked through Java's
// AdaptiveMetrics by hand (Java Dubbo has no exact vector: its
// AdaptiveLoadBalanceTest is statistical): weight 1, timeout 1000 ms, a
// call picked and answered in 10 ms with the report "curTime:T,load:10".
// setProviderMetrics makes ewma 0.5·0 + 0.5·10 = 5; the first getLoad
// applies the penalty (lastLatency = 2·1000, ewma = 0.5·5 + 0.5·2000 =
// 1002.5), in flight 1 - 1 - 0 = 0, success ratio 1/(1+1):
// 10·(√1002.5 + 1)·1 / (0.5·1 + 1) = 217.7489...
func TestAdaptiveLoadJavaVector(t *testing.T) {
	t0 := time.UnixMilli(1729780000000)
	m, now := adaptiveAt(t0)
	m.Picked("p")
	m.Answered("p", fmt.Sprintf("curTime:%d,load:10", t0.UnixMilli()), 10*time.Millisecond)
	// The consumer reads it a few ms after the provider wrote it.
	*now = t0.Add(5 * time.Millisecond)
	want := 10 * (math.Sqrt(1002.5) + 1) / 1.5
	if got := m.Load("p", 1, 1000); math.Abs(got-want) > 1e-9 || math.Abs(got-217.7489) > 1e-3 {
		t.Fatalf("load %.6f, want %.6f (≈217.75)", got, want)
	}
	// The next look, 300 ms later: one timeout or less has passed
	// (multiple 1), so the last latency halves: 2000 >> 1 = 1000, ewma =
	// 0.5·1002.5 + 0.5·1000 = 1001.25.
	*now = t0.Add(300 * time.Millisecond)
	want = 10 * (math.Sqrt(1001.25) + 1) / 1.5
	if got := m.Load("p", 1, 1000); math.Abs(got-want) > 1e-9 {
		t.Fatalf("second load %.6f, want %.6f", got, want)
	}
	// Not picked for over twice the timeout: 0, so that it is tried
	// again ("mandatory selected").
	*now = t0.Add(2001 * time.Millisecond)
	if got := m.Load("p", 1, 1000); got != 0 {
		t.Fatalf("load after 2×timeout unpicked = %v, want 0", got)
	}
}

// Reports as Java providers write them (ProfilerServerFilter: Java's
// Double.toString of load average × 100 / CPUs), and what Java's
// setProviderMetrics takes of each: StringUtils.isNumeric admits digits
// and one dot, so a negative load (no load average on the system) and the
// exponent form count as 0.
func TestAdaptiveReportsAsJavaWritesThem(t *testing.T) {
	t0 := time.UnixMilli(1729780000000)
	for _, c := range []struct {
		report string
		load   float64 // what the provider's load counts as
	}{
		{"curTime:1729780000000,load:37.5", 37.5},
		{"curTime:1729780000000,load:0.0", 0},
		{"curTime:1729780000000,load:-1.0", 0},
		{"curTime:1729780000000,load:1.0E-4", 0},
		{"curTime:1729780000000 , load:250.0", 250},
		{"load:12.25,curTime:1729780000000", 12.25},
		{"curTime:1729780000000,load:1.2.3", 0},
		{"curTime:1729780000000,load:7:8", 0},
		{"", 0},
	} {
		m, _ := adaptiveAt(t0)
		m.Picked("p")
		m.Answered("p", c.report, 10*time.Millisecond)
		// With the load factored out: weight 1, as in the vector above.
		unit := (math.Sqrt(1002.5) + 1) / 1.5
		if c.report == "" {
			unit = 1 / 1.5 // no report: the EWMA stays 0 and no penalty
		}
		if got := m.Load("p", 1, 1000); math.Abs(got-c.load*unit) > 1e-9 {
			t.Errorf("report %q: load %.4f, want %.4f", c.report, got, c.load*unit)
		}
	}
}

func TestAdaptiveDropsReportsOutOfOrder(t *testing.T) {
	t0 := time.UnixMilli(1729780000000)
	m, _ := adaptiveAt(t0)
	m.Picked("p")
	m.Answered("p", "curTime:1729780000000,load:10", 10*time.Millisecond)
	m.Picked("p")
	m.Answered("p", "curTime:1729779999000,load:90", 10*time.Millisecond) // older
	unit := (math.Sqrt(1002.5) + 1) / (2.0/3*1 + 1)
	if got := m.Load("p", 1, 1000); math.Abs(got-10*unit) > 1e-9 {
		t.Fatalf("load %.4f: the older report was taken (want %.4f)", got, 10*unit)
	}
}

// Java's AdaptiveLoadBalanceTest.testSelectByAdaptive, with weft's clock:
// three providers of weights 1, 9 and 15 each report after every pick, the
// first fast and light (10 ms, load 10), the second slower (100 ms, load
// 40), the third slow, loaded and failing (5 s, load 400). The failing one
// must get the fewest calls and the light one the most per unit of weight.
func TestAdaptiveSelectsByReportedLoad(t *testing.T) {
	ivs := lbList("dubbo://127.0.0.1:11/DemoService?weight=1", "dubbo://127.0.0.1:12/DemoService?weight=9", "dubbo://127.0.0.1:15/DemoService?weight=15")
	m := NewAdaptiveMetrics()
	lb := NewAdaptive(m)
	inv := &kernel.Invocation{Method: "sayHello"}
	counts := make([]int, 3)
	for range 10000 {
		iv := lb.Select(ivs, nil, inv)
		i := lbIndex(ivs, iv)
		counts[i]++
		key := iv.URL().String()
		m.Picked(key)
		now := time.Now().UnixMilli()
		switch i {
		case 0:
			m.Answered(key, fmt.Sprintf("curTime:%d,load:10", now-10), 10*time.Millisecond)
		case 1:
			m.Answered(key, fmt.Sprintf("curTime:%d,load:40", now-100), 100*time.Millisecond)
		case 2:
			// As Java's test: a report, and the call counted failed.
			m.takeReport(key, fmt.Sprintf("curTime:%d,load:400", now-5000), 5000*time.Millisecond)
			m.Failed(key)
		}
	}
	if !(counts[2] < counts[1] && counts[2] < counts[0]) {
		t.Fatalf("calls %v: the failing, loaded provider is not picked least", counts)
	}
	if perWeight0, perWeight1 := float64(counts[0])/1, float64(counts[1])/9; perWeight0 <= perWeight1 {
		t.Fatalf("calls %v: per unit of weight the light provider (%.0f) got no more than the loaded one (%.0f)", counts, perWeight0, perWeight1)
	}
}

// Without reports every load is 0 and the balancer is weighted random
// between two providers drawn at random.
func TestAdaptiveWithoutReportsIsWeightedRandom(t *testing.T) {
	ivs := lbWeighted(100, 300)
	lbCheckShares(t, lbShares(NewAdaptive(nil), ivs, &kernel.Invocation{Method: "m"}, 40000), []float64{0.25, 0.75}, 0.02)
}

func TestAdaptiveMetricsBounded(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	m, now := adaptiveAt(t0)
	for i := range maxAdaptiveEntries {
		m.Picked(fmt.Sprintf("p%d", i))
	}
	*now = t0.Add(adaptiveIdle + time.Second)
	m.Picked("fresh")
	if n := len(m.entries); n != 1 {
		t.Fatalf("%d entries after the idle ones were due to go, want 1", n)
	}
}

// p2c balances on the providers' remaining capacity (dubbo-go's adaptive
// service report) when both of a pair reported in the last second, and on
// the consumer's own counts otherwise.
func TestP2CPrefersRemainingCapacity(t *testing.T) {
	ivs := lbWeighted(100, 100)
	stats := kernel.NewStatusStore()
	m, now := adaptiveAt(time.Unix(1_000_000, 0))
	inv := &kernel.Invocation{Method: "m"}
	// The consumer sees the first provider idle and the second busy...
	lbBusy(stats, ivs[1], "m", 5)
	lb := NewP2C(stats, m)
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{1, 0}, 0)
	// ...but the providers say the first has 2 calls of room left and
	// the second 40: theirs is the better word.
	m.SetRemaining(ivs[0].URL().String(), "m", 2, 48)
	m.SetRemaining(ivs[1].URL().String(), "m", 40, 10)
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{0, 1}, 0)
	// A report of one method says nothing of another.
	lbCheckShares(t, lbShares(lb, ivs, &kernel.Invocation{Method: "other"}, 1000), []float64{0.5, 0.5}, 0.06)
	// Reports over a second old are stale: back to the consumer's counts.
	*now = now.Add(1500 * time.Millisecond)
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{1, 0}, 0)
}
