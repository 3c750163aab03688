package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// srSlidePeriodMillis is Dubbo's default slide period of the shortest
// response window (30 s): averages older than this stop counting, so a
// provider that was slow once is not avoided forever.
const srSlidePeriodMillis = 30_000

// NewShortestResponse returns Dubbo's ShortestResponseLoadBalance: estimate
// each provider's response time as its average call time in the current
// window times (calls in flight + 1), pick among the lowest estimates by
// weight (uniform when equal). It follows latency, where leastactive only
// follows queue length.
//
// The counters are the ones the consumer's activelimit filter keeps in stats
// (scope: provider URL, method); without that filter every estimate is 0 and
// this is weighted random. A nil stats behaves so.
//
// Unlike Dubbo, the average includes failed calls: kernel.Status keeps one
// elapsed sum for all calls. A provider failing fast therefore looks fast.
func NewShortestResponse(stats *kernel.StatusStore) extension.LoadBalance {
	if stats == nil {
		stats = kernel.NewStatusStore()
	}
	lb := &shortestResponse{stats: stats, periodMillis: srSlidePeriodMillis}
	lb.lastReset.Store(time.Now().UnixMilli())
	return lb
}

type shortestResponse struct {
	stats *kernel.StatusStore
	// windows maps *kernel.Status to *srWindow: Dubbo's methodMap.
	windows      sync.Map
	periodMillis int64
	lastReset    atomic.Int64
	resetting    atomic.Bool
	// nowMillis replaces the wall clock in tests; nil means time.Now.
	nowMillis func() int64
}

// srWindow is Dubbo's SlideWindowData: the counters of one Status at the
// start of the window, so that the window's average is a difference.
type srWindow struct {
	st       *kernel.Status
	calls0   atomic.Int64
	elapsed0 atomic.Int64 // ns
}

// counters returns the Status's succeeded calls and their summed duration:
// as in Dubbo, a provider that fails fast must not look fast.
func counters(st *kernel.Status) (calls, elapsedNs int64) {
	return st.Succeeded(), int64(st.SucceededElapsed())
}

func (w *srWindow) reset() {
	calls, elapsed := counters(w.st)
	w.calls0.Store(calls)
	w.elapsed0.Store(elapsed)
}

// estimate is getEstimateResponse: window average × (active + 1), in ns.
func (w *srWindow) estimate() int64 {
	calls, elapsed := counters(w.st)
	var avg int64
	if n := calls - w.calls0.Load(); n > 0 {
		avg = max(0, (elapsed-w.elapsed0.Load())/n)
	}
	return avg * (w.st.Active() + 1)
}

func resetWindow(_, v any) bool {
	v.(*srWindow).reset()
	return true
}

func (lb *shortestResponse) now() int64 {
	if lb.nowMillis != nil {
		return lb.nowMillis()
	}
	return time.Now().UnixMilli()
}

func (lb *shortestResponse) window(st *kernel.Status) *srWindow {
	if w, ok := lb.windows.Load(st); ok {
		return w.(*srWindow)
	}
	w, _ := lb.windows.LoadOrStore(st, &srWindow{st: st})
	return w.(*srWindow)
}

func (lb *shortestResponse) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	switch len(invokers) {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	c := clock{ms: lb.now(), set: true}
	var (
		pick     tiePick
		shortest int64
	)
	for i, iv := range invokers {
		u := iv.URL()
		est := lb.window(lb.stats.Get(u.String(), inv.Method)).estimate()
		switch {
		case i == 0 || est < shortest:
			shortest, pick = est, tiePick{}
			pick.add(iv, weightOf(u, inv.Method, &c))
		case est == shortest:
			pick.add(iv, weightOf(u, inv.Method, &c))
		}
	}
	// Dubbo resets the windows on an executor; the reset is a short loop, so
	// the caller that notices the period is over does it.
	if c.ms-lb.lastReset.Load() > lb.periodMillis && lb.resetting.CompareAndSwap(false, true) {
		lb.windows.Range(resetWindow)
		lb.lastReset.Store(c.ms)
		lb.resetting.Store(false)
	}
	return pick.result()
}
