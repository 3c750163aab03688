package cluster

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// Names of the load balancers besides Random, spelled as Dubbo spells them so
// that a Dubbo user's `loadbalance=` setting picks the same algorithm here.
const (
	RoundRobin       = "roundrobin"
	LeastActive      = "leastactive"
	ShortestResponse = "shortestresponse"
	ConsistentHash   = "consistenthash"
	P2C              = "p2c"
)

// DefaultWeight is a provider's weight when its URL sets none: Dubbo's 100,
// so that mixed Dubbo and weft providers share traffic as their owners expect.
const DefaultWeight = 100

// DefaultWarmupMillis is Dubbo's warm-up period (10 minutes): a provider that
// started less than this long ago (URL `timestamp`) gets a weight
// proportional to its uptime, so a cold JIT, cache or pool is not flooded.
// A provider's `warmup` parameter overrides it.
const DefaultWarmupMillis = 10 * 60 * 1000

// Weight is a provider's effective weight for method as every weighted
// balancer sees it: `m.weight`, else `weight`, else DefaultWeight, reduced
// during warm-up (Dubbo's AbstractLoadBalance.getWeight). It is never
// negative. It reads the clock only when the URL has a `timestamp`.
func Weight(u *kernel.URL, method string) int64 {
	var c clock
	return weightOf(u, method, &c)
}

// WeightAt is Weight at a given time, so that a caller weighing many
// providers uses one instant for all of them, and tests need no sleeping.
func WeightAt(u *kernel.URL, method string, now time.Time) int64 {
	c := clock{ms: now.UnixMilli(), set: true}
	return weightOf(u, method, &c)
}

// clock reads the wall clock at most once per Select, and only if some
// provider needs it, so that all weights of one pick are taken at one instant.
type clock struct {
	ms  int64
	set bool
}

func (c *clock) now() int64 {
	if !c.set {
		c.ms, c.set = time.Now().UnixMilli(), true
	}
	return c.ms
}

func weightOf(u *kernel.URL, method string, c *clock) int64 {
	w := u.MethodParamInt(method, kernel.KeyWeight, DefaultWeight)
	if w <= 0 {
		return 0
	}
	ts := u.ParamInt(kernel.KeyTimestamp, 0)
	if ts <= 0 {
		return w
	}
	uptime := c.now() - ts
	if uptime < 0 {
		// The provider's clock is ahead of ours: Dubbo 3 treats it as just
		// started.
		return 1
	}
	if uptime > 0 {
		if warmup := u.ParamInt(kernel.KeyWarmup, DefaultWarmupMillis); uptime < warmup {
			return warmupWeight(uptime, warmup, w)
		}
	}
	return w
}

// warmupWeight is Dubbo's calculateWarmupWeight, in its float (32-bit)
// arithmetic so that both stacks round the same way:
// (int)(uptime / ((float) warmup / weight)), clamped to [1, weight].
func warmupWeight(uptime, warmup, weight int64) int64 {
	ww := int64(float32(uptime) / (float32(warmup) / float32(weight)))
	if ww < 1 {
		return 1
	}
	return min(ww, weight)
}

// lbKey is the scope of a balancer's per-call state: Dubbo keys it by
// "serviceKey.method"; a struct key avoids building that string per call.
type lbKey struct{ service, method string }

// keyed maps lbKey to *V. The map is copied on write and read through an
// atomic pointer, so a lookup of a known key is a load and a map index: no
// lock, no allocation. Keys (service × method) are few and never removed, as
// in Dubbo.
type keyed[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[lbKey]*V]
}

func (k *keyed[V]) get(key lbKey) *V {
	if m := k.m.Load(); m != nil {
		if v := (*m)[key]; v != nil {
			return v
		}
	}
	return k.add(key)
}

func (k *keyed[V]) add(key lbKey) *V {
	k.mu.Lock()
	defer k.mu.Unlock()
	var old map[lbKey]*V
	if p := k.m.Load(); p != nil {
		old = *p
		if v := old[key]; v != nil {
			return v
		}
	}
	m := make(map[lbKey]*V, len(old)+1)
	for kk, v := range old {
		m[kk] = v
	}
	v := new(V)
	m[key] = v
	k.m.Store(&m)
	return v
}

// tiePick chooses among tied candidates (least active, shortest response) in
// one pass, with Dubbo's odds: proportional to weight when a tied candidate
// has a positive weight, uniform when all have weight 0 (equal positive
// weights make the weighted pick uniform too). It is weighted reservoir
// sampling, so it needs no index or weight arrays and does not allocate.
type tiePick struct {
	total    int64
	zeros    int
	weighted kernel.Invoker
	uniform  kernel.Invoker
}

func (p *tiePick) add(iv kernel.Invoker, w int64) {
	switch {
	case w > 0:
		p.total += w
		if p.total == w || rand.Int64N(p.total) < w {
			p.weighted = iv
		}
	case p.total == 0:
		// Only needed while every candidate so far has weight 0.
		p.zeros++
		if p.zeros == 1 || rand.IntN(p.zeros) == 0 {
			p.uniform = iv
		}
	}
}

func (p *tiePick) result() kernel.Invoker {
	if p.total > 0 {
		return p.weighted
	}
	return p.uniform
}
