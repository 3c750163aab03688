package adaptivesvc

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// hillClimbing is dubbo-go's HillClimbing limiter (filter/adaptivesvc/
// limiter), with its constants: the limit starts at 50, stays within
// [1, 500], and moves once per round, a round lasting 1 s while it
// climbs and doubling up to 32 s each time it shrinks. A round that served
// more calls per second than any before is remembered as the best; a worse
// one whose latency grew shrinks the limit back below the best one's.
//
// One difference: dubbo-go measures a call's time in whole milliseconds,
// which makes every sub-millisecond call end a round (its average is 0)
// and divides by it; weft measures in fractional milliseconds.
type hillClimbing struct {
	inflight   atomic.Int64
	limitation atomic.Int64

	mu              sync.Mutex
	updateInterval  time.Duration
	lastUpdatedTime time.Time
	transactionNum  float64
	rttAvg          float64 // ms
	bestTPS         float64
	bestRTTAvg      float64
	bestMaxCapacity float64
	bestLimitation  int64
}

// dubbo-go's constants.
const (
	hcInitialLimitation = 50
	hcMaxLimitation     = 500
	hcRadicalPeriod     = time.Second
	hcStablePeriod      = 32 * time.Second
)

type hcOption int

const (
	hcShrinkPlus hcOption = iota - 2
	hcShrink
	hcDoNothing
	hcExtend
	hcExtendPlus
)

func newHillClimbing(now time.Time) *hillClimbing {
	l := &hillClimbing{updateInterval: hcRadicalPeriod, lastUpdatedTime: now, bestRTTAvg: math.MaxFloat64}
	l.limitation.Store(hcInitialLimitation)
	return l
}

func (l *hillClimbing) Inflight() int64 { return l.inflight.Load() }
func (l *hillClimbing) Limit() int64    { return l.limitation.Load() }

func (l *hillClimbing) Remaining() int64 {
	return max(0, l.limitation.Load()-l.inflight.Load())
}

func (l *hillClimbing) Acquire(time.Time) bool {
	// dubbo-go checks, then adds: a burst may pass the limit by the
	// callers racing; it bounds it by adding first.
	if l.inflight.Add(1) > l.limitation.Load() {
		l.inflight.Add(-1)
		return false
	}
	return true
}

func (l *hillClimbing) Release(start, now time.Time, _ bool) {
	defer l.inflight.Add(-1)
	rtt := float64(now.Sub(start)) / float64(time.Millisecond)
	l.adjust(l.option(rtt, now))
}

func (l *hillClimbing) option(rtt float64, now time.Time) hcOption {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !(now.Sub(l.lastUpdatedTime) > l.updateInterval || l.rttAvg == 0) {
		// Still in the round: ra = (ra·c + r) / (c + 1).
		l.rttAvg = (l.rttAvg*l.transactionNum + rtt) / (l.transactionNum + 1)
		l.transactionNum++
		return hcDoNothing
	}
	opt := hcDoNothing
	intervalMs := float64(l.updateInterval.Milliseconds())
	maxCapacity := 0.0
	if l.rttAvg > 0 {
		maxCapacity = l.transactionNum * intervalMs / l.rttAvg
	}
	if l.bestRTTAvg == math.MaxFloat64 || int64(maxCapacity*1.5) > l.limitation.Load() {
		opt = hcExtend
		if l.updateInterval == hcRadicalPeriod {
			opt = hcExtendPlus
		}
	}
	tps := math.Floor(1000 * l.transactionNum / intervalMs)
	if tps > l.bestTPS {
		l.bestTPS, l.bestRTTAvg, l.bestMaxCapacity = tps, l.rttAvg, maxCapacity
		l.bestLimitation = l.limitation.Load()
	} else if l.shouldShrink(maxCapacity) {
		opt = hcShrink
		if l.updateInterval == hcRadicalPeriod {
			opt = hcShrinkPlus
		}
		l.updateInterval = min(2*l.updateInterval, hcStablePeriod)
	}
	l.transactionNum, l.rttAvg, l.lastUpdatedTime = 0, rtt, now
	return opt
}

// shouldShrink is dubbo-go's test: the round fell well short of the best
// capacity, and its latency grew past a threshold that depends on the
// best latency.
func (l *hillClimbing) shouldShrink(maxCapacity float64) bool {
	diff := l.bestMaxCapacity - maxCapacity
	diffPct := 0.0
	if l.bestMaxCapacity > 0 {
		diffPct = math.Floor(100 * diff / l.bestMaxCapacity)
	}
	if diff <= 300 && diffPct <= 10 {
		return false
	}
	if !(diff > 0 || l.rttAvg > l.bestRTTAvg) {
		return false
	}
	rttDiff := l.rttAvg - l.bestRTTAvg
	rttPct := math.Floor(100 * l.rttAvg / l.bestRTTAvg)
	var t, p float64
	switch b := l.bestRTTAvg; {
	case b < 5:
		t, p = 3, 80
	case b < 10:
		t, p = 2, 30
	case b < 50:
		t, p = 5, 20
	case b < 100:
		t, p = 10, 10
	default:
		t, p = 20, 5
	}
	return diffPct > 10 && diff > 5 && (rttDiff > t || rttPct >= p)
}

// adjust is dubbo-go's adjustLimitation: α = 1.5·ln L and β = 0.8·ln L,
// divided by log2 of the round in seconds (at least 1).
func (l *hillClimbing) adjust(opt hcOption) {
	if opt == hcDoNothing {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	limitation := float64(l.limitation.Load())
	alpha, beta := 1.5*math.Log(limitation), 0.8*math.Log(limitation)
	logInterval := math.Max(1, math.Log2(l.updateInterval.Seconds()))
	switch opt {
	case hcExtendPlus:
		limitation += alpha / logInterval
	case hcExtend:
		limitation += beta / logInterval
	case hcShrinkPlus:
		limitation = float64(l.bestLimitation) - alpha/logInterval
	case hcShrink:
		limitation = float64(l.bestLimitation) - beta/logInterval
	}
	l.limitation.Store(int64(math.Max(1, math.Min(limitation, hcMaxLimitation))))
}
