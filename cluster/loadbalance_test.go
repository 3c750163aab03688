package cluster

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// lbInvoker is an invoker with only a URL: load balancers look at nothing else.
type lbInvoker struct{ url *kernel.URL }

func (f *lbInvoker) URL() *kernel.URL  { return f.url }
func (f *lbInvoker) IsAvailable() bool { return true }
func (f *lbInvoker) Destroy()          {}
func (f *lbInvoker) Invoke(context.Context, *kernel.Invocation) (kernel.Result, error) {
	return kernel.Result{}, nil
}

func lbList(urls ...string) []kernel.Invoker {
	out := make([]kernel.Invoker, len(urls))
	for i, u := range urls {
		out[i] = &lbInvoker{url: kernel.MustParseURL(u)}
	}
	return out
}

// lbWeighted returns providers 10.0.0.i:20880 of service S with the weights.
func lbWeighted(weights ...int64) []kernel.Invoker {
	urls := make([]string, len(weights))
	for i, w := range weights {
		urls[i] = fmt.Sprintf("dubbo://10.0.0.%d:20880/S?weight=%d", i+1, w)
	}
	return lbList(urls...)
}

func lbIndex(ivs []kernel.Invoker, iv kernel.Invoker) int {
	i := slices.Index(ivs, iv)
	if i < 0 {
		panic(fmt.Sprintf("selected %v, not in the list", iv))
	}
	return i
}

func lbLetters(ivs, picks []kernel.Invoker) string {
	var b strings.Builder
	for _, p := range picks {
		b.WriteByte(byte('A' + lbIndex(ivs, p)))
	}
	return b.String()
}

// lbBusy makes n calls of method to iv active in stats, as the activelimit
// filter does.
func lbBusy(stats *kernel.StatusStore, iv kernel.Invoker, method string, n int) {
	st := stats.Get(iv.URL().String(), method)
	for range n {
		st.TryBegin(0)
	}
}

// lbFinished records n finished calls of method to iv that took d each.
func lbFinished(stats *kernel.StatusStore, iv kernel.Invoker, method string, n int, d time.Duration) {
	st := stats.Get(iv.URL().String(), method)
	for range n {
		st.TryBegin(0)
		st.End(d, true)
	}
}

func lbShares(lb extension.LoadBalance, ivs []kernel.Invoker, inv *kernel.Invocation, n int) []float64 {
	counts := make([]int, len(ivs))
	for range n {
		counts[lbIndex(ivs, lb.Select(ivs, nil, inv))]++
	}
	shares := make([]float64, len(ivs))
	for i, c := range counts {
		shares[i] = float64(c) / float64(n)
	}
	return shares
}

func lbWeightShares(weights ...int64) []float64 {
	var total int64
	for _, w := range weights {
		total += w
	}
	out := make([]float64, len(weights))
	for i, w := range weights {
		out[i] = float64(w) / float64(total)
	}
	return out
}

func lbCheckShares(t *testing.T, got, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol {
			t.Fatalf("shares %.4f, want %.4f ± %.3f", got, want, tol)
		}
	}
}

func TestWarmupWeight(t *testing.T) {
	// Expected values from Dubbo's calculateWarmupWeight run on a JVM.
	for _, c := range []struct{ uptime, warmup, weight, want int64 }{
		{60_000, 600_000, 100, 10},
		{300_000, 600_000, 100, 50},
		{500, 600_000, 100, 1},
		{599_999, 600_000, 100, 99},
		{1, 600_000, 100, 1},
		{12_345, 600_000, 7, 1},
		{100_000, 600_000, 7, 1},
		{333_333, 600_000, 3, 1},
		{59_999, 60_000, 100, 99},
		{1000, 60_000, 37, 1},
		{7, 10, 1000, 700},
	} {
		if got := warmupWeight(c.uptime, c.warmup, c.weight); got != c.want {
			t.Errorf("warmupWeight(%d, %d, %d) = %d, want %d", c.uptime, c.warmup, c.weight, got, c.want)
		}
	}
}

func TestWeightFromURL(t *testing.T) {
	const ts = 1_700_000_000_000
	at := func(uptime int64) time.Time { return time.UnixMilli(ts + uptime) }
	for _, c := range []struct {
		name   string
		url    string
		method string
		now    time.Time
		want   int64
	}{
		{"default", "dubbo://a:1/S", "m", at(0), DefaultWeight},
		{"service weight", "dubbo://a:1/S?weight=7", "m", at(0), 7},
		{"method weight first", "dubbo://a:1/S?weight=7&m.weight=3", "m", at(0), 3},
		{"other method", "dubbo://a:1/S?weight=7&m.weight=3", "n", at(0), 7},
		{"negative is zero", "dubbo://a:1/S?weight=-5", "m", at(0), 0},
		{"garbage is default", "dubbo://a:1/S?weight=abc", "m", at(0), DefaultWeight},
		{"60s into warmup", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(60_000), 10},
		{"300s into warmup", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(300_000), 50},
		{"0.5s into warmup: at least 1", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(500), 1},
		{"warmup over", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(600_000), 100},
		{"long after", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(86_400_000), 100},
		{"uptime 0 is not warming", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(0), 100},
		{"provider clock ahead", fmt.Sprintf("dubbo://a:1/S?timestamp=%d", ts), "m", at(-1000), 1},
		{"custom warmup", fmt.Sprintf("dubbo://a:1/S?timestamp=%d&warmup=60000&weight=200", ts), "m", at(30_000), 100},
		{"method weight warms", fmt.Sprintf("dubbo://a:1/S?timestamp=%d&m.weight=10", ts), "m", at(300_000), 5},
		{"zero weight stays zero", fmt.Sprintf("dubbo://a:1/S?timestamp=%d&weight=0", ts), "m", at(60_000), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := WeightAt(kernel.MustParseURL(c.url), c.method, c.now); got != c.want {
				t.Fatalf("WeightAt = %d, want %d", got, c.want)
			}
		})
	}
	// Weight reads the wall clock: a provider started 300 s ago is at half.
	u := kernel.MustParseURL(fmt.Sprintf("dubbo://a:1/S?timestamp=%d", time.Now().UnixMilli()-300_000))
	if got := Weight(u, "m"); got != 50 {
		t.Fatalf("Weight 300 s after start = %d, want 50", got)
	}
}

func TestWeightedBalancersFollowWeights(t *testing.T) {
	const picks = 100_000
	for _, c := range []struct {
		name    string
		lb      func() extension.LoadBalance
		weights []int64
		tol     float64
	}{
		// Random: the tolerance is 1 point of share, about 8 standard
		// deviations at 100k picks.
		{"random 100:200:300", NewRandom, []int64{100, 200, 300}, 0.01},
		{"random 5:1:1", NewRandom, []int64{5, 1, 1}, 0.01},
		{"random 0:1", NewRandom, []int64{0, 1}, 0},
		// Round robin is exact up to one unfinished cycle.
		{"roundrobin 100:200:300", NewRoundRobin, []int64{100, 200, 300}, 0.001},
		{"roundrobin 5:1:1", NewRoundRobin, []int64{5, 1, 1}, 0.001},
		{"roundrobin 0:1", NewRoundRobin, []int64{0, 1}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ivs := lbWeighted(c.weights...)
			got := lbShares(c.lb(), ivs, kernel.NewInvocation("m"), picks)
			lbCheckShares(t, got, lbWeightShares(c.weights...), c.tol)
		})
	}
}

func TestRandomBeyondItsStackBuffer(t *testing.T) {
	// More providers than Select keeps cumulative weights for: it weighs
	// them again instead, with the same result.
	weights := make([]int64, randomStack+72)
	for i := range weights {
		weights[i] = 1
	}
	weights[len(weights)-1] = int64(len(weights) - 1) // half of the total
	ivs := lbWeighted(weights...)
	lb, inv := NewRandom(), kernel.NewInvocation("m")
	got := lbShares(lb, ivs, inv, 10_000)
	lbCheckShares(t, got[len(got)-1:], []float64{0.5}, 0.03)
	if a := testing.AllocsPerRun(100, func() { lb.Select(ivs, nil, inv) }); a != 0 {
		t.Fatalf("Select allocates %v times", a)
	}
}

// dubboRoundRobin is Dubbo 3's RoundRobinLoadBalance.doSelect transcribed,
// with its WeightedRoundRobin map keyed by URL.toIdentityString.
type dubboRoundRobin struct {
	m map[string]*struct{ weight, current, last int64 }
}

func (d *dubboRoundRobin) sel(ivs []kernel.Invoker, method string, now int64) kernel.Invoker {
	if d.m == nil {
		d.m = map[string]*struct{ weight, current, last int64 }{}
	}
	var (
		total    int64
		maxCur   int64 = math.MinInt64
		selected kernel.Invoker
		selWRR   *struct{ weight, current, last int64 }
	)
	for _, iv := range ivs {
		u := iv.URL()
		id := u.Protocol + "://" + u.Address() + "/" + u.Path
		w := WeightAt(u, method, time.UnixMilli(now))
		wrr, ok := d.m[id]
		if !ok {
			wrr = &struct{ weight, current, last int64 }{weight: w}
			d.m[id] = wrr
		}
		if w != wrr.weight {
			wrr.weight, wrr.current = w, 0
		}
		wrr.current += w
		wrr.last = now
		if wrr.current > maxCur {
			maxCur, selected, selWRR = wrr.current, iv, wrr
		}
		total += w
	}
	if len(ivs) != len(d.m) {
		for id, wrr := range d.m {
			if now-wrr.last > 60_000 {
				delete(d.m, id)
			}
		}
	}
	selWRR.current -= total
	return selected
}

func TestRoundRobinIsSmoothLikeDubbo(t *testing.T) {
	ivs := lbList("dubbo://a:1/S?weight=5", "dubbo://b:1/S?weight=1", "dubbo://c:1/S?weight=1")
	inv := kernel.NewInvocation("m")
	lb := NewRoundRobin()
	var sim dubboRoundRobin
	var got, want []kernel.Invoker
	for range 7 {
		got = append(got, lb.Select(ivs, nil, inv))
		want = append(want, sim.sel(ivs, "m", time.Now().UnixMilli()))
	}
	if g, w := lbLetters(ivs, got), lbLetters(ivs, want); g != w || g != "AABACAA" {
		t.Fatalf("first 7 picks %s, Dubbo's algorithm gives %s (expected AABACAA)", g, w)
	}
}

func TestRoundRobinFollowsListChangesLikeDubbo(t *testing.T) {
	a, b, c := "dubbo://a:1/S?weight=5", "dubbo://b:1/S?weight=1", "dubbo://c:1/S?weight=1"
	base := lbList(a, b, c)
	d := lbList("dubbo://d:1/S?weight=3")[0]
	b4 := lbList("dubbo://b:1/S?weight=4")[0] // b re-registered with another weight
	steps := []struct {
		name  string
		at    int64 // ms
		list  []kernel.Invoker
		picks int
		peers int // state entries after the step
	}{
		{"A B C", 0, base, 10, 3},
		{"C gone", 1_000, base[:2], 9, 3},
		{"C back before recycling, D new", 2_000, []kernel.Invoker{base[0], base[1], base[2], d}, 11, 4},
		{"B weight 4", 3_000, []kernel.Invoker{base[0], b4, base[2], d}, 13, 4},
		{"C and D recycled", 70_000, []kernel.Invoker{base[0], b4}, 8, 2},
		{"fresh C, method-level weight", 71_000, lbList(a, b, "dubbo://c:1/S?weight=1&m.weight=9"), 15, 3},
	}
	now := int64(1_700_000_000_000)
	lb := &roundRobin{nowMillis: func() int64 { return now }}
	inv := kernel.NewInvocation("m")
	var sim dubboRoundRobin
	start := now
	for _, s := range steps {
		now = start + s.at
		for i := range s.picks {
			got, want := lb.Select(s.list, nil, inv), sim.sel(s.list, "m", now)
			if got != want {
				t.Fatalf("%s: pick %d is %s, Dubbo's algorithm picks %s",
					s.name, i, got.URL().Address(), want.URL().Address())
			}
		}
		st := lb.states.get(lbKey{"S", "m"})
		if len(st.peers) != s.peers || len(sim.m) != s.peers {
			t.Fatalf("%s: %d round-robin entries (Dubbo %d), want %d", s.name, len(st.peers), len(sim.m), s.peers)
		}
	}
}

func TestRoundRobinConcurrentCallsKeepExactShares(t *testing.T) {
	ivs := lbWeighted(5, 1, 1)
	lb := NewRoundRobin()
	inv := kernel.NewInvocation("m")
	const workers, cycles = 4, 500
	var (
		mu     sync.Mutex
		counts = make([]int, 3)
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			local := make([]int, 3)
			for range cycles * 7 {
				local[lbIndex(ivs, lb.Select(ivs, nil, inv))]++
			}
			mu.Lock()
			for i, n := range local {
				counts[i] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if want := []int{5 * workers * cycles, workers * cycles, workers * cycles}; !slices.Equal(counts, want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
}

func TestLeastActiveNeverPicksABusierProvider(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		stats := kernel.NewStatusStore()
		lb := NewLeastActive(stats)
		ivs := lbWeighted(100, 50, 200, 100, 0, 300)
		actives := make([]int, len(ivs))
		for i, iv := range ivs {
			actives[i] = r.IntN(4)
			lbBusy(stats, iv, "m", actives[i])
		}
		least := slices.Min(actives)
		inv := kernel.NewInvocation("m")
		for range 50 {
			i := lbIndex(ivs, lb.Select(ivs, nil, inv))
			if actives[i] != least {
				t.Fatalf("round %d: actives %v, picked #%d with %d active", round, actives, i, actives[i])
			}
		}
	}
}

func TestLeastActiveTiesFollowWeights(t *testing.T) {
	for _, c := range []struct {
		name    string
		weights []int64
		actives []int
		want    []float64
	}{
		{"single least", []int64{100, 100, 100}, []int{3, 1, 2}, []float64{0, 1, 0}},
		{"ties by weight", []int64{100, 300, 100}, []int{0, 0, 5}, []float64{0.25, 0.75, 0}},
		{"equal weights uniform", []int64{100, 100, 100, 100}, []int{1, 1, 1, 2}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 0}},
		{"zero weight never wins a tie", []int64{0, 100, 100}, []int{0, 0, 1}, []float64{0, 1, 0}},
		{"all zero weights uniform", []int64{0, 0, 0}, []int{0, 0, 0}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"zero weight alone is still least", []int64{0, 100}, []int{0, 1}, []float64{1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stats := kernel.NewStatusStore()
			ivs := lbWeighted(c.weights...)
			for i, iv := range ivs {
				lbBusy(stats, iv, "m", c.actives[i])
			}
			// Counters of another method do not count.
			lbBusy(stats, ivs[len(ivs)-1], "other", 10)
			got := lbShares(NewLeastActive(stats), ivs, kernel.NewInvocation("m"), 40_000)
			lbCheckShares(t, got, c.want, 0.015)
		})
	}
}

func TestShortestResponsePrefersTheFasterProvider(t *testing.T) {
	stats := kernel.NewStatusStore()
	now := int64(1_700_000_000_000)
	lb := NewShortestResponse(stats).(*shortestResponse)
	lb.nowMillis = func() int64 { return now }
	lb.lastReset.Store(now)
	ivs := lbWeighted(100, 100)
	inv := kernel.NewInvocation("m")
	slow, fast := ivs[0], ivs[1]
	lbFinished(stats, slow, "m", 10, 10*time.Millisecond)
	lbFinished(stats, fast, "m", 10, time.Millisecond)
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{0, 1}, 0)

	// 20 calls in flight make the fast one's estimate 1 ms × 21 > 10 ms.
	lbBusy(stats, fast, "m", 20)
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{1, 0}, 0)
	for range 20 {
		stats.Get(fast.URL().String(), "m").End(time.Millisecond, true)
	}

	// After the slide period the window restarts: no call in it, all tie.
	now += srSlidePeriodMillis + 1
	lb.Select(ivs, nil, inv)
	lbCheckShares(t, lbShares(lb, ivs, inv, 20_000), []float64{0.5, 0.5}, 0.02)
	// Only calls in the new window count: the formerly slow provider is
	// now the fast one, though its all-time average is still the higher.
	lbFinished(stats, slow, "m", 10, time.Millisecond)
	lbFinished(stats, fast, "m", 10, 10*time.Millisecond)
	if s, f := stats.Get(slow.URL().String(), "m").AverageElapsed(), stats.Get(fast.URL().String(), "m").AverageElapsed(); s <= f {
		t.Fatalf("setup: all-time averages slow %v fast %v", s, f)
	}
	lbCheckShares(t, lbShares(lb, ivs, inv, 1000), []float64{1, 0}, 0)
}

func TestP2CPrefersTheLessLoadedOfTwo(t *testing.T) {
	inv := kernel.NewInvocation("m")
	t.Run("two providers, fewer active wins", func(t *testing.T) {
		stats := kernel.NewStatusStore()
		ivs := lbWeighted(100, 100)
		lbBusy(stats, ivs[0], "m", 3)
		lbBusy(stats, ivs[1], "m", 1)
		lbCheckShares(t, lbShares(NewP2C(stats, nil), ivs, inv, 1000), []float64{0, 1}, 0)
	})
	t.Run("equal actives, faster wins", func(t *testing.T) {
		stats := kernel.NewStatusStore()
		ivs := lbWeighted(100, 100)
		lbFinished(stats, ivs[0], "m", 5, 5*time.Millisecond)
		lbFinished(stats, ivs[1], "m", 5, time.Millisecond)
		lbCheckShares(t, lbShares(NewP2C(stats, nil), ivs, inv, 1000), []float64{0, 1}, 0)
	})
	t.Run("full tie is even", func(t *testing.T) {
		lbCheckShares(t, lbShares(NewP2C(kernel.NewStatusStore(), nil), lbWeighted(100, 100), inv, 20_000), []float64{0.5, 0.5}, 0.02)
	})
	t.Run("idle provider wins every pair it is in", func(t *testing.T) {
		stats := kernel.NewStatusStore()
		ivs := lbWeighted(100, 100, 100)
		lbBusy(stats, ivs[1], "m", 10)
		lbBusy(stats, ivs[2], "m", 10)
		// The idle one is in 2 of the 3 possible pairs.
		lbCheckShares(t, lbShares(NewP2C(stats, nil), ivs, inv, 30_000), []float64{2.0 / 3, 1.0 / 6, 1.0 / 6}, 0.02)
	})
	t.Run("the busiest is never picked", func(t *testing.T) {
		stats := kernel.NewStatusStore()
		ivs := lbWeighted(100, 100, 100, 100, 100)
		for i, iv := range ivs {
			lbBusy(stats, iv, "m", i)
		}
		got := lbShares(NewP2C(stats, nil), ivs, inv, 20_000)
		if got[4] != 0 {
			t.Fatalf("busiest provider got %.3f of picks", got[4])
		}
		// The least busy wins every pair it is in: 2/n.
		lbCheckShares(t, got[:1], []float64{0.4}, 0.02)
	})
}

func lbTenProviders() []kernel.Invoker {
	urls := make([]string, 10)
	for i := range urls {
		urls[i] = fmt.Sprintf("dubbo://127.0.0.1:%d/org.example.S?application=x", 20880+i)
	}
	return lbList(urls...)
}

func TestConsistentHashMatchesDubbo(t *testing.T) {
	// Expected providers from Dubbo's ConsistentHashSelector algorithm run
	// on a JVM (MessageDigest MD5, TreeMap.ceilingEntry, StringBuilder.append).
	ivs := lbTenProviders()
	for _, c := range []struct {
		nodes string
		arg   any
		want  string
	}{
		{"", "key-0", "127.0.0.1:20882"},
		{"", "key-1", "127.0.0.1:20882"},
		{"", "key-2", "127.0.0.1:20884"},
		{"", "alice", "127.0.0.1:20882"},
		{"", "bob", "127.0.0.1:20884"},
		{"", "", "127.0.0.1:20887"},
		{"", int64(0), "127.0.0.1:20887"},
		{"", int32(42), "127.0.0.1:20887"},
		{"", int64(-7), "127.0.0.1:20884"},
		{"", 3.5, "127.0.0.1:20882"},
		{"", true, "127.0.0.1:20888"},
		{"", nil, "127.0.0.1:20889"},
		{"", []any{"a", int64(1)}, "127.0.0.1:20888"},
		{"", "héllo", "127.0.0.1:20883"},
		{"8", "key-0", "127.0.0.1:20881"},
		{"8", "key-1", "127.0.0.1:20882"},
		{"8", "key-2", "127.0.0.1:20886"},
		{"8", "alice", "127.0.0.1:20883"},
		{"8", "", "127.0.0.1:20880"},
		{"8", 3.5, "127.0.0.1:20886"},
		{"8", nil, "127.0.0.1:20889"},
		{"8", "héllo", "127.0.0.1:20885"},
	} {
		list := ivs
		if c.nodes != "" {
			list = make([]kernel.Invoker, len(ivs))
			for i, iv := range ivs {
				list[i] = &lbInvoker{url: iv.URL().WithParam(KeyHashNodes, c.nodes)}
			}
		}
		if got := NewConsistentHash().Select(list, nil, kernel.NewInvocation("m", c.arg)).URL().Address(); got != c.want {
			t.Errorf("nodes %q, key %v: %s, Dubbo picks %s", c.nodes, c.arg, got, c.want)
		}
	}
	// hash.arguments=0,2 concatenates the first and third arguments.
	list := make([]kernel.Invoker, len(ivs))
	for i, iv := range ivs {
		list[i] = &lbInvoker{url: iv.URL().WithParam(KeyHashArguments, "0, 2")}
	}
	lb := NewConsistentHash()
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"a", "x", int64(1)}, "127.0.0.1:20887"},
		{[]any{"b", "x", int64(2)}, "127.0.0.1:20880"},
		{[]any{"a", "y", int64(1)}, "127.0.0.1:20887"},
	} {
		if got := lb.Select(list, nil, kernel.NewInvocation("m", c.args...)).URL().Address(); got != c.want {
			t.Errorf("args %v: %s, Dubbo picks %s", c.args, got, c.want)
		}
	}
}

func TestJavaStringFormatting(t *testing.T) {
	// Expected strings from Java's String.valueOf on the same values (JDK
	// 17; JDK 19 and later print the same for these).
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0, "0.0"}, {1 << 63, "-0.0"}, {4607182418800017408, "1.0"}, {4636737291354636288, "100.0"},
		{4609434218613702656, "1.5"}, {4562254508917369340, "0.001"}, {4547007122018943789, "1.0E-4"},
		{4711630319722168320, "1.0E7"}, {4711630319185297408, "9999999.0"}, {4712889646492470477, "1.23456789E7"},
		{4532020583610935537, "1.0E-5"}, {4638387860618067575, "123.456"}, {4921056587992461136, "1.0E21"},
		{6103021453049119613, "1.0E100"}, {0xC004000000000000, "-2.5"}, {4591870180066957722, "0.1"},
		{4599676419421066581, "0.3333333333333333"}, {9221120237041090560, "NaN"}, {9218868437227405312, "Infinity"},
		{1, "4.9E-324"}, {9218868437227405311, "1.7976931348623157E308"}, {4591888194465467204, "0.10025"},
	} {
		if got := string(appendJavaString(nil, math.Float64frombits(c.bits))); got != c.want {
			t.Errorf("double %v: %q, Java %q", math.Float64frombits(c.bits), got, c.want)
		}
	}
	for _, c := range []struct {
		bits uint32
		want string
	}{
		{1065353216, "1.0"}, {1036831949, "0.1"}, {1051372203, "0.33333334"}, {1259902592, "1.0E7"},
		{953267991, "1.0E-4"}, {1123477881, "123.456"}, {2139095039, "3.4028235E38"}, {981668463, "0.001"},
		{1, "1.4E-45"},
	} {
		if got := string(appendJavaString(nil, math.Float32frombits(c.bits))); got != c.want {
			t.Errorf("float %v: %q, Java %q", math.Float32frombits(c.bits), got, c.want)
		}
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"}, {"s", "s"}, {true, "true"}, {int8(-8), "-8"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{[]any{"a", int64(1), nil, []any{2.5}}, "[a, 1, null, [2.5]]"}, {time.Second, "1s"},
	} {
		if got := string(appendJavaString(nil, c.v)); got != c.want {
			t.Errorf("%#v: %q, want %q", c.v, got, c.want)
		}
	}
}

func TestConsistentHashKeepsKeysOnTheirProvider(t *testing.T) {
	ivs := lbTenProviders()
	lb := NewConsistentHash()
	owner := make([]kernel.Invoker, 1000)
	for round := range 3 {
		for k := range owner {
			got := lb.Select(ivs, nil, kernel.NewInvocation("get", fmt.Sprintf("user-%d", k)))
			if round == 0 {
				owner[k] = got
			} else if got != owner[k] {
				t.Fatalf("round %d: key %d moved from %s to %s", round, k, owner[k].URL().Address(), got.URL().Address())
			}
		}
	}
	// Every provider owns some keys.
	per := map[kernel.Invoker]int{}
	for _, o := range owner {
		per[o]++
	}
	if len(per) != len(ivs) {
		t.Fatalf("only %d of %d providers own keys", len(per), len(ivs))
	}

	// Removing one provider moves its keys only.
	removed := ivs[3]
	rest := slices.Delete(slices.Clone(ivs), 3, 4)
	moved := 0
	for k := range owner {
		got := lb.Select(rest, nil, kernel.NewInvocation("get", fmt.Sprintf("user-%d", k)))
		if got != owner[k] {
			moved++
			if owner[k] != removed {
				t.Fatalf("key %d moved from %s, which is still there", k, owner[k].URL().Address())
			}
		}
	}
	share := float64(moved) / float64(len(owner))
	t.Logf("removing 1 of 10 providers remapped %.1f%% of keys", 100*share)
	if share > 0.15 || moved != per[removed] {
		t.Fatalf("remapped %.3f of keys (%d; the removed provider owned %d)", share, moved, per[removed])
	}
}

func TestConsistentHashArguments(t *testing.T) {
	ivs := lbTenProviders()
	withParams := func(kv ...string) []kernel.Invoker {
		out := make([]kernel.Invoker, len(ivs))
		for i, iv := range ivs {
			u := iv.URL()
			for j := 0; j < len(kv); j += 2 {
				u = u.WithParam(kv[j], kv[j+1])
			}
			out[i] = &lbInvoker{url: u}
		}
		return out
	}
	first := NewConsistentHash()
	secondList := withParams(KeyHashArguments, "1")
	methodList := withParams("get."+KeyHashArguments, "1")
	// One balancer per list: lists alternating under one service and method
	// would rebuild the ring on every call.
	secondLB, methodLB := NewConsistentHash(), NewConsistentHash()
	for k := range 200 {
		key := fmt.Sprintf("k%d", k)
		want := first.Select(ivs, nil, kernel.NewInvocation("get", key)).URL().Address()
		for _, c := range []struct {
			name string
			lb   extension.LoadBalance
			list []kernel.Invoker
			inv  *kernel.Invocation
		}{
			{"hash.arguments=1", secondLB, secondList, kernel.NewInvocation("get", fmt.Sprint("noise", k), key)},
			{"get.hash.arguments=1", methodLB, methodList, kernel.NewInvocation("get", fmt.Sprint("noise", k), key)},
			{"generic call", secondLB, secondList, kernel.NewInvocation("$invoke", "get", []string{"a", "b"}, []any{fmt.Sprint("noise", k), key})},
		} {
			if got := c.lb.Select(c.list, nil, c.inv).URL().Address(); got != want {
				t.Fatalf("%s: key %q went to %s, the same key as first argument to %s", c.name, key, got, want)
			}
		}
	}
	// The method-level setting applies to its method only.
	other := NewConsistentHash()
	for k := range 50 {
		key := fmt.Sprintf("k%d", k)
		a := other.Select(methodList, nil, kernel.NewInvocation("put", key, "x"))
		b := first.Select(ivs, nil, kernel.NewInvocation("put", key))
		if a.URL().Address() != b.URL().Address() {
			t.Fatalf("put hashed by another argument than its first")
		}
	}
}

func TestConsistentHashRebuildsOnlyOnListChange(t *testing.T) {
	ivs := lbTenProviders()
	lb := NewConsistentHash().(*consistentHash)
	sel := func(list []kernel.Invoker, method string) {
		lb.Select(list, nil, kernel.NewInvocation(method, "k"))
	}
	for _, s := range []struct {
		name   string
		list   []kernel.Invoker
		method string
		builds int64
	}{
		{"first call", ivs, "m", 1},
		{"same list", ivs, "m", 1},
		{"same invokers in a new slice", slices.Clone(ivs), "m", 1},
		{"one fewer", ivs[:9], "m", 2},
		{"same again", ivs[:9], "m", 2},
		{"back to ten", ivs, "m", 3},
		{"other order", append(slices.Clone(ivs[1:]), ivs[0]), "m", 4},
		{"other method has its own ring", ivs, "n", 5},
		{"first method's ring is unaffected", append(slices.Clone(ivs[1:]), ivs[0]), "m", 5},
	} {
		for range 3 {
			sel(s.list, s.method)
		}
		if got := lb.builds.Load(); got != s.builds {
			t.Fatalf("%s: %d ring builds, want %d", s.name, got, s.builds)
		}
	}
	// Tiny hash.nodes still builds a usable ring (Dubbo's would be empty).
	tiny := []kernel.Invoker{
		&lbInvoker{url: ivs[0].URL().WithParam(KeyHashNodes, "1")},
		&lbInvoker{url: ivs[1].URL().WithParam(KeyHashNodes, "1")},
	}
	if lb.Select(tiny, nil, kernel.NewInvocation("m", "k")) == nil {
		t.Fatal("no provider from a ring of hash.nodes=1")
	}
}

type lbCase struct {
	name string
	new  func(*kernel.StatusStore) extension.LoadBalance
}

var lbAll = []lbCase{
	{Random, func(*kernel.StatusStore) extension.LoadBalance { return NewRandom() }},
	{RoundRobin, func(*kernel.StatusStore) extension.LoadBalance { return NewRoundRobin() }},
	{LeastActive, NewLeastActive},
	{ShortestResponse, NewShortestResponse},
	{ConsistentHash, func(*kernel.StatusStore) extension.LoadBalance { return NewConsistentHash() }},
	{P2C, func(st *kernel.StatusStore) extension.LoadBalance { return NewP2C(st, nil) }},
	{Adaptive, func(*kernel.StatusStore) extension.LoadBalance { return NewAdaptive(nil) }},
}

// lbRealistic are n providers as a registry would list them: several
// parameters, differing weights, started long ago (warm-up is computed).
func lbRealistic(n int) []kernel.Invoker {
	urls := make([]string, n)
	started := time.Now().Add(-time.Hour).UnixMilli()
	for i := range urls {
		urls[i] = fmt.Sprintf("dubbo://10.0.%d.%d:20880/org.example.Greeter?anyhost=true&application=demo-provider"+
			"&interface=org.example.Greeter&methods=sayHello,sayBye&side=provider&timeout=500&timestamp=%d&weight=%d",
			i/250, i%250, started, 100+10*(i%5))
	}
	return lbList(urls...)
}

func TestLoadBalancersDoNotAllocate(t *testing.T) {
	for _, c := range lbAll {
		t.Run(c.name, func(t *testing.T) {
			stats := kernel.NewStatusStore()
			lb := c.new(stats)
			ivs := lbRealistic(10)
			for i, iv := range ivs {
				lbFinished(stats, iv, "sayHello", 2, time.Duration(i+1)*time.Millisecond)
			}
			inv := kernel.NewInvocation("sayHello", "some-key")
			for range 20 {
				lb.Select(ivs, nil, inv) // warm-up: state and counters created
			}
			if a := testing.AllocsPerRun(1000, func() { lb.Select(ivs, nil, inv) }); a != 0 {
				t.Fatalf("Select allocates %v times", a)
			}
		})
	}
}

func TestLoadBalancersEdgesAndConcurrency(t *testing.T) {
	for _, c := range lbAll {
		t.Run(c.name, func(t *testing.T) {
			stats := kernel.NewStatusStore()
			lb := c.new(stats)
			inv := kernel.NewInvocation("m", "k")
			if got := lb.Select(nil, nil, inv); got != nil {
				t.Fatalf("empty list gave %v", got)
			}
			one := lbWeighted(0)
			if got := lb.Select(one, nil, inv); got != one[0] {
				t.Fatal("a single provider was not picked")
			}
			// Lists change under concurrent callers, as a registry does it.
			lists := [][]kernel.Invoker{lbWeighted(1, 2, 3, 4), lbWeighted(5, 1, 1)}
			lists = append(lists, lists[0][:2], append(slices.Clone(lists[1]), lists[0]...))
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := range 500 {
						list := lists[(i/50+w)%len(lists)]
						st := stats.Get(list[i%len(list)].URL().String(), "m")
						st.TryBegin(0)
						iv := lb.Select(list, nil, kernel.NewInvocation("m", fmt.Sprint(i%20)))
						st.End(time.Duration(i%7)*time.Microsecond, true)
						if !slices.Contains(list, iv) {
							t.Errorf("picked %v, not in the list", iv)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
