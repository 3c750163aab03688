package wasmfilter

import (
	"context"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
)

// Guest metrics: what a proxy-wasm filter defines with proxy_define_metric
// (a counter, a gauge or a histogram) and updates on its calls. They belong
// to the filter, not to an instance: every instance defines them again when
// it starts and gets the same id for the same name, so the figures add up
// across instances and outlive them. The App exports them on /metrics as
// weft_wasm_guest_<name>{filter="..."}.

// Kinds of guest metric (proxy_metric_type_t).
const (
	MetricCounter   = 0
	MetricGauge     = 1
	MetricHistogram = 2
)

// maxGuestMetrics bounds the metrics one filter may define.
const maxGuestMetrics = 256

// HistogramBounds are the upper bounds of guest histograms' buckets: powers
// of two from 1 to 2^24 (values are what the guest records: microseconds,
// bytes, counts).
var HistogramBounds = func() []float64 {
	b := make([]float64, 25)
	for i := range b {
		b[i] = float64(uint64(1) << i)
	}
	return b
}()

type guestMetric struct {
	name  string
	kind  int
	value atomic.Int64
	// a histogram's: counts per bucket of HistogramBounds (the last one
	// for values above them), their sum
	mu      sync.Mutex
	buckets [26]uint64
	count   uint64
	sum     float64
}

type guestMetrics struct {
	mu     sync.Mutex
	byName map[string]uint32
	list   []*guestMetric // id-1
}

// define returns the id of the metric name of kind, defining it the first
// time; BAD_ARGUMENT for a name defined with another kind.
func (g *guestMetrics) define(kind int, name string) (uint32, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.byName[name]; ok {
		if g.list[id-1].kind != kind {
			return 0, pwBadArgument
		}
		return id, pwOK
	}
	if len(g.list) >= maxGuestMetrics {
		return 0, pwInternalFailure
	}
	if g.byName == nil {
		g.byName = map[string]uint32{}
	}
	g.list = append(g.list, &guestMetric{name: name, kind: kind})
	id := uint32(len(g.list))
	g.byName[name] = id
	return id, pwOK
}

func (g *guestMetrics) get(id uint32) *guestMetric {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id == 0 || int(id) > len(g.list) {
		return nil
	}
	return g.list[id-1]
}

// GuestMetric is one guest-defined metric, as Stats reports it.
type GuestMetric struct {
	Name string
	Kind int // MetricCounter, MetricGauge or MetricHistogram
	// Value of a counter or gauge.
	Value int64
	// A histogram's: Buckets[i] counts values <= HistogramBounds[i]
	// (cumulative, as Prometheus has them), Count and Sum all values.
	Buckets []uint64
	Count   uint64
	Sum     float64
}

func (g *guestMetrics) snapshot() []GuestMetric {
	g.mu.Lock()
	list := append([]*guestMetric(nil), g.list...)
	g.mu.Unlock()
	out := make([]GuestMetric, 0, len(list))
	for _, m := range list {
		gm := GuestMetric{Name: m.name, Kind: m.kind, Value: m.value.Load()}
		if m.kind == MetricHistogram {
			m.mu.Lock()
			gm.Count, gm.Sum = m.count, m.sum
			gm.Buckets = make([]uint64, len(HistogramBounds))
			var run uint64
			for i := range HistogramBounds {
				run += m.buckets[i]
				gm.Buckets[i] = run
			}
			m.mu.Unlock()
		}
		out = append(out, gm)
	}
	return out
}

func (m *guestMetric) record(v uint64) {
	i := 0
	if v > 1 {
		i = bits.Len64(v - 1) // the first power of two >= v
	}
	i = min(i, len(HistogramBounds))
	m.mu.Lock()
	m.buckets[i]++
	m.count++
	m.sum += float64(v)
	m.mu.Unlock()
}

// MetricName is a guest metric's name on /metrics: weft_wasm_guest_ and its
// name with every byte Prometheus does not allow as '_' (Envoy's filters
// name theirs with dots).
func MetricName(name string) string {
	var b strings.Builder
	b.WriteString("weft_wasm_guest_")
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// pwDefineMetric is proxy_define_metric(type, name_p, name_n, *id).
func pwDefineMetric(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = pwNotFound
		return
	}
	kind := int(uint32(s[0]))
	name, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	if kind < MetricCounter || kind > MetricHistogram || len(name) == 0 || len(name) > 256 {
		s[0] = pwBadArgument
		return
	}
	id, st := in.f.host.metrics.define(kind, string(name))
	if st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwWriteU32(in, uint32(s[3]), id)
}

// pwIncrementMetric is proxy_increment_metric(id, i64 delta): a counter
// grows (a negative delta is refused), a gauge moves.
func pwIncrementMetric(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMetric(in, s)
	switch {
	case m == nil:
		s[0] = pwNotFound
	case m.kind == MetricCounter && int64(s[1]) < 0, m.kind == MetricHistogram:
		s[0] = pwBadArgument
	default:
		m.value.Add(int64(s[1]))
		s[0] = pwOK
	}
}

// pwRecordMetric is proxy_record_metric(id, u64 value): a gauge is set, a
// histogram records the value; a counter is set to it if it does not go
// down.
func pwRecordMetric(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMetric(in, s)
	switch {
	case m == nil:
		s[0] = pwNotFound
	case m.kind == MetricHistogram:
		m.record(s[1])
		s[0] = pwOK
	case s[1] > math.MaxInt64 || m.kind == MetricCounter && int64(s[1]) < m.value.Load():
		s[0] = pwBadArgument
	default:
		m.value.Store(int64(s[1]))
		s[0] = pwOK
	}
}

// pwGetMetric is proxy_get_metric(id, *u64).
func pwGetMetric(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMetric(in, s)
	switch {
	case m == nil:
		s[0] = pwNotFound
	case m.kind == MetricHistogram:
		s[0] = pwBadArgument
	case !in.mem.WriteUint64Le(uint32(s[1]), uint64(m.value.Load())):
		s[0] = pwInvalidMemoryAccess
	default:
		s[0] = pwOK
	}
}

func pwMetric(in *instance, s []uint64) *guestMetric {
	if in == nil {
		return nil
	}
	return in.f.host.metrics.get(uint32(s[0]))
}
