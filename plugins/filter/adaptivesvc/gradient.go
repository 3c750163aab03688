package adaptivesvc

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// gradient is Envoy's adaptive concurrency filter's gradient controller
// (envoy.extensions.filters.http.adaptive_concurrency.v3), with its
// defaults. It measures the latency the service has when nearly idle
// (minRTT: the limit pinned to min.concurrency until min.rtt.requests
// calls are done, again every min.rtt.interval with jitter) and, every
// update.interval, the latency it has now (sampleRTT, a percentile of the
// calls done since). The limit follows their ratio:
//
//	gradient = clamp(minRTT·(1 + buffer) / sampleRTT, 0.5, 2)
//	limit    = clamp(limit·gradient + √(limit·gradient), min, max)
//
// so it grows while latency stays near the idle one and shrinks as soon as
// calls queue: the provider sheds before its latency collapses. Five
// updates in a row at the minimum measure minRTT again at once, as Envoy
// does (the idle latency itself may have moved).
//
// Envoy drives the windows with timers; weft moves them on the calls
// themselves (no goroutine per limiter): a window with no calls changes
// nothing, as Envoy's skips a window without samples.
type gradient struct {
	s        gradientSettings
	inflight atomic.Int64
	limit    atomic.Int64

	mu            sync.Mutex
	samples       []float64 // ms, this window's (bounded: a reservoir)
	seen          int       // calls done in this window
	windowStart   time.Time
	sampling      bool // measuring minRTT
	deferredLimit int64
	minRTT        float64 // ms
	nextMinRTT    time.Time
	atMinimum     int
}

// gradientSettings are Envoy's fields, as weft's keys set them.
type gradientSettings struct {
	update      time.Duration // concurrency_update_interval
	percentile  float64       // sample_aggregate_percentile, 0..1
	maxLimit    int64         // max_concurrency_limit
	minRTTEvery time.Duration // min_rtt_calc_params.interval
	minRTTCalls int           // request_count
	jitter      float64       // 0..1
	minLimit    int64         // min_concurrency
	buffer      float64       // 0..1
	fixedMinRTT time.Duration // fixed_value: never measured
}

// maxSamples bounds a window's latencies: past it a reservoir keeps a
// uniform sample, enough for a percentile.
const maxSamples = 1024

func newGradient(s gradientSettings, now time.Time) *gradient {
	g := &gradient{s: s, windowStart: now, samples: make([]float64, 0, 64)}
	if s.fixedMinRTT > 0 {
		g.minRTT = float64(s.fixedMinRTT) / float64(time.Millisecond)
		g.limit.Store(s.minLimit)
		return g
	}
	g.enterSampling(now)
	return g
}

func (g *gradient) Inflight() int64 { return g.inflight.Load() }
func (g *gradient) Limit() int64    { return g.limit.Load() }

func (g *gradient) Remaining() int64 { return max(0, g.limit.Load()-g.inflight.Load()) }

// Acquire is Envoy's forwardingDecision: forward while fewer calls run
// than the limit.
func (g *gradient) Acquire(now time.Time) bool {
	if g.inflight.Add(1) > g.limit.Load() {
		g.inflight.Add(-1)
		return false
	}
	return true
}

// Release records a call's latency (Envoy's recordLatencySample). A call
// that failed without an answer from the service (canceled) gives no
// sample.
func (g *gradient) Release(start, now time.Time, sample bool) {
	defer g.inflight.Add(-1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if sample {
		g.add(float64(now.Sub(start)) / float64(time.Millisecond))
	}
	if g.sampling {
		if g.seen >= g.s.minRTTCalls {
			g.minRTT = g.aggregate()
			g.sampling = false
			g.setLimit(g.deferredLimit)
			g.nextMinRTT = now.Add(g.jittered())
			g.windowStart = now
		}
		return
	}
	if now.Sub(g.windowStart) < g.s.update {
		return
	}
	if len(g.samples) > 0 {
		g.setLimit(g.newLimit(g.aggregate()))
	}
	g.windowStart = now
	if g.s.fixedMinRTT == 0 && (g.atMinimum >= 5 || !now.Before(g.nextMinRTT)) {
		g.enterSampling(now)
	}
}

func (g *gradient) add(ms float64) {
	g.seen++
	if len(g.samples) < maxSamples {
		g.samples = append(g.samples, ms)
		return
	}
	if i := rand.IntN(g.seen); i < maxSamples {
		g.samples[i] = ms
	}
}

// aggregate is the window's percentile latency; it empties the window.
func (g *gradient) aggregate() float64 {
	slices.Sort(g.samples)
	i := int(math.Ceil(g.s.percentile*float64(len(g.samples)))) - 1
	v := g.samples[max(0, min(i, len(g.samples)-1))]
	g.samples, g.seen = g.samples[:0], 0
	return v
}

// enterSampling pins the limit to the minimum until minRTT is measured;
// samples from before say nothing of the idle latency.
func (g *gradient) enterSampling(now time.Time) {
	g.sampling = true
	g.deferredLimit = max(g.limit.Load(), g.s.minLimit)
	g.setLimit(g.s.minLimit)
	g.samples, g.seen = g.samples[:0], 0
	g.atMinimum = 0
}

// newLimit is Envoy's calculateNewLimit.
func (g *gradient) newLimit(sampleRTT float64) int64 {
	if sampleRTT <= 0 {
		sampleRTT = math.SmallestNonzeroFloat64
	}
	grad := math.Max(0.5, math.Min(2, g.minRTT*(1+g.s.buffer)/sampleRTT))
	limit := float64(g.limit.Load()) * grad
	n := max(g.s.minLimit, min(g.s.maxLimit, int64(limit+math.Sqrt(limit))))
	if n == g.s.minLimit {
		g.atMinimum++
	} else {
		g.atMinimum = 0
	}
	return n
}

func (g *gradient) setLimit(n int64) { g.limit.Store(n) }

// jittered is min.rtt.interval plus up to jitter of it, so that providers
// started together do not all measure at once.
func (g *gradient) jittered() time.Duration {
	d := g.s.minRTTEvery
	if j := int64(float64(d) * g.s.jitter); j > 0 {
		d += time.Duration(rand.Int64N(j))
	}
	return d
}
