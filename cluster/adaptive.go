package cluster

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Adaptive is Java Dubbo 3's `loadbalance=adaptive`: power of two choices
// over a load figure that mixes what the provider reports of itself (its
// load average) with what the consumer sees (response times, calls in
// flight, success ratio).
const Adaptive = "adaptive"

// The report keys, as cluster code has long named them.
const (
	KeyAdaptiveLoad      = extension.KeyAdaptiveLoad
	AdaptiveLoadRequest  = extension.AdaptiveLoadRequest
	KeyAdaptiveService   = extension.KeyAdaptiveService
	KeyAdaptiveRemaining = extension.KeyAdaptiveRemaining
	KeyAdaptiveInflight  = extension.KeyAdaptiveInflight
)

// maxAdaptiveEntries bounds what AdaptiveMetrics keeps: providers that
// come and go (each one a key) must not grow it for ever. Past it, entries
// unused for adaptiveIdle are dropped when a new one is added.
const (
	maxAdaptiveEntries = 4096
	adaptiveIdle       = 10 * time.Minute
)

// AdaptiveMetrics is what a consumer knows of each provider's load, per
// App: Java's AdaptiveMetrics (response-time EWMA, the provider's reported
// load, calls sent, answered and failed) and dubbo-go's remaining
// capacity per method. The adaptiveLoadBalance filter fills it from the
// answers; the adaptive and p2c balancers read it. Keys are provider URLs
// (an invoker's URL().String()). It is safe for concurrent use.
type AdaptiveMetrics struct {
	mu      sync.RWMutex
	entries map[string]*adaptiveEntry
	now     func() time.Time // tests
}

var _ extension.LoadReports = (*AdaptiveMetrics)(nil)

// NewAdaptiveMetrics returns an empty store.
func NewAdaptiveMetrics() *AdaptiveMetrics {
	return &AdaptiveMetrics{entries: map[string]*adaptiveEntry{}, now: time.Now}
}

type adaptiveEntry struct {
	mu sync.Mutex
	// Java's fields, in milliseconds as Java keeps them. currentTime holds
	// the provider's clock right after a report and the consumer's after
	// the first look at it: Java's getLoad tells the two apart by
	// comparing it with currentProviderTime, and weft keeps that quirk
	// (a report is penalised once, then decays) so that it balances as
	// Java does.
	providerTime, currentTime, pickTime int64
	providerLoad                        float64
	lastLatency                         int64
	ewma                                float64
	req, ok, failed                     int64
	// dubbo-go's per-method reports.
	remaining map[string]remainingReport
	used      int64 // last touched, consumer ms: pruning
}

type remainingReport struct {
	remaining, inflight int64
	at                  int64 // consumer ms
}

// beta is Java's EWMA weight of the previous value.
const beta = 0.5

func (m *AdaptiveMetrics) entry(key string, nowMs int64) *adaptiveEntry {
	m.mu.RLock()
	e := m.entries[key]
	m.mu.RUnlock()
	if e != nil {
		return e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e = m.entries[key]; e != nil {
		return e
	}
	if len(m.entries) >= maxAdaptiveEntries {
		for k, old := range m.entries {
			old.mu.Lock()
			idle := nowMs-old.used > adaptiveIdle.Milliseconds()
			old.mu.Unlock()
			if idle {
				delete(m.entries, k)
			}
		}
	}
	// Java starts pickTime at creation: "allow some time disorder".
	e = &adaptiveEntry{pickTime: nowMs, used: nowMs}
	m.entries[key] = e
	return e
}

func (m *AdaptiveMetrics) ms() int64 { return m.now().UnixMilli() }

// Picked counts a call sent to key (Java's addConsumerReq and setPickTime).
func (m *AdaptiveMetrics) Picked(key string) {
	now := m.ms()
	e := m.entry(key, now)
	e.mu.Lock()
	e.req++
	e.pickTime, e.used = now, now
	e.mu.Unlock()
}

// Failed counts a call to key that got no answer (Java's addErrorReq).
func (m *AdaptiveMetrics) Failed(key string) {
	e := m.entry(key, m.ms())
	e.mu.Lock()
	e.failed++
	e.mu.Unlock()
}

// Answered counts an answer from key that took rt, and takes in report,
// the provider's lb_adaptive attachment ("" when it sent none). Java's
// setProviderMetrics: numbers that are not plain decimals (a negative
// load, Java's "1.0E-4") count as 0; a report older than the last is
// dropped.
func (m *AdaptiveMetrics) Answered(key, report string, rt time.Duration) {
	e := m.entry(key, m.ms())
	e.mu.Lock()
	e.ok++
	e.mu.Unlock()
	m.takeReport(key, report, rt)
}

// takeReport is Java's setProviderMetrics.
func (m *AdaptiveMetrics) takeReport(key, report string, rt time.Duration) {
	if report == "" {
		return
	}
	e := m.entry(key, m.ms())
	e.mu.Lock()
	defer e.mu.Unlock()
	var curTime int64
	var load float64
	// Java splits on commas (with spaces around them) then on ':', and
	// skips parts that are not exactly key:value.
	for part := range strings.SplitSeq(report, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(part), ":")
		if !found || strings.Contains(v, ":") {
			continue
		}
		switch k {
		case "curTime":
			if isNumeric(v, false) {
				curTime, _ = strconv.ParseInt(v, 10, 64)
			}
		case "load":
			if isNumeric(v, true) {
				load, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if e.providerTime > curTime {
		return // out of order
	}
	e.providerTime, e.currentTime = curTime, curTime
	e.providerLoad = load
	e.lastLatency = rt.Milliseconds()
	e.ewma = beta*e.ewma + (1-beta)*float64(e.lastLatency)
}

// isNumeric is Java Dubbo's StringUtils.isNumeric: digits, and with
// allowDot at most one dot; nothing else (no sign, no exponent).
func isNumeric(s string, allowDot bool) bool {
	if s == "" {
		return false
	}
	dots := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && allowDot:
			if dots++; dots > 1 {
				return false
			}
		case c < '0' || c > '9':
			return false
		}
	}
	return true
}

// Load is Java's AdaptiveMetrics.getLoad for key, a provider of the given
// weight, with the call's timeout in ms: 0 for one not picked for twice
// the timeout (so it is tried again) or that never reported a load;
// otherwise load × (√ewma + 1) × (in flight + 1) / (success ratio ×
// weight + 1). Like Java's it moves the EWMA: once by a penalty of twice
// the timeout the first time a report is looked at, then halving the last
// latency per timeout elapsed.
func (m *AdaptiveMetrics) Load(key string, weight, timeoutMs int64) float64 {
	if timeoutMs <= 0 {
		timeoutMs = kernel.DefaultTimeoutMillis
	}
	now := m.ms()
	e := m.entry(key, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	if now-e.pickTime > timeoutMs*2 {
		return 0
	}
	if e.currentTime > 0 {
		if multiple := (now-e.currentTime)/timeoutMs + 1; multiple > 0 {
			if e.providerTime == e.currentTime {
				e.lastLatency = timeoutMs * 2
			} else {
				e.lastLatency >>= min(multiple, 63)
			}
			e.ewma = beta*e.ewma + (1-beta)*float64(e.lastLatency)
			e.currentTime = now
		}
	}
	inflight := e.req - e.ok - e.failed
	return e.providerLoad * (math.Sqrt(e.ewma) + 1) * float64(inflight+1) /
		(float64(e.ok)/float64(e.req+1)*float64(weight) + 1)
}

// SetRemaining takes in a dubbo-go adaptive-service report for key's
// method: the calls it would still take, and those it runs.
func (m *AdaptiveMetrics) SetRemaining(key, method string, remaining, inflight int64) {
	now := m.ms()
	e := m.entry(key, now)
	e.mu.Lock()
	if e.remaining == nil {
		e.remaining = map[string]remainingReport{}
	}
	if _, known := e.remaining[method]; known || len(e.remaining) < maxAdaptiveEntries {
		e.remaining[method] = remainingReport{remaining: remaining, inflight: inflight, at: now}
	}
	e.used = now
	e.mu.Unlock()
}

// remainingFresh is how long a remaining-capacity report counts: a
// provider not called for longer may have changed entirely, and p2c then
// goes by what the consumer sees.
const remainingFresh = time.Second

// Remaining returns key's last remaining-capacity report for method, if
// one came in the last second.
func (m *AdaptiveMetrics) Remaining(key, method string) (int64, bool) {
	now := m.ms()
	m.mu.RLock()
	e := m.entries[key]
	m.mu.RUnlock()
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	r, ok := e.remaining[method]
	e.mu.Unlock()
	if !ok || now-r.at > remainingFresh.Milliseconds() {
		return 0, false
	}
	return r.remaining, true
}

// NewAdaptive returns Java Dubbo's AdaptiveLoadBalance over m: two
// distinct providers at random, the one with the lower Load wins, weighted
// random between them on an exact tie. Without the adaptiveLoadBalance
// filter (which fills m) every load is 0 and it is weighted random over
// pairs. A nil m is an empty store.
func NewAdaptive(m *AdaptiveMetrics) extension.LoadBalance {
	if m == nil {
		m = NewAdaptiveMetrics()
	}
	return &adaptive{m: m}
}

type adaptive struct{ m *AdaptiveMetrics }

func (lb *adaptive) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	n := len(invokers)
	switch n {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	i, j := twoOf(n)
	var c clock
	a, b := invokers[i], invokers[j]
	wa, wb := weightOf(a.URL(), inv.Method, &c), weightOf(b.URL(), inv.Method, &c)
	la := lb.m.Load(a.URL().String(), wa, a.URL().MethodParamInt(inv.Method, kernel.KeyTimeout, kernel.DefaultTimeoutMillis))
	lbb := lb.m.Load(b.URL().String(), wb, b.URL().MethodParamInt(inv.Method, kernel.KeyTimeout, kernel.DefaultTimeoutMillis))
	switch {
	case la < lbb:
		return a
	case lbb < la:
		return b
	}
	var tie tiePick
	tie.add(a, wa)
	tie.add(b, wb)
	return tie.result()
}

// twoOf draws two distinct indices below n (n ≥ 2), in random order.
func twoOf(n int) (int, int) {
	if n == 2 {
		i := rand.IntN(2)
		return i, 1 - i
	}
	i := rand.IntN(n)
	j := rand.IntN(n - 1)
	if j >= i {
		j++
	}
	return i, j
}
