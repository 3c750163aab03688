package cluster

import (
	"math"
	"sync"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// rrRecycleMillis is Dubbo's RECYCLE_PERIOD: a provider's round-robin counter
// not used for this long is forgotten, so departed providers do not pile up.
const rrRecycleMillis = 60_000

// NewRoundRobin returns Dubbo's smooth weighted round robin (the nginx
// algorithm): every provider gets exactly its share of each cycle, spread out
// instead of in bursts (weights 5:1:1 give A A B A C A A). State is kept per
// service and method, and per provider by its address and path, so it
// survives the directory re-creating invokers on a registry update. Use it
// when an even, predictable spread matters more than randomness.
func NewRoundRobin() extension.LoadBalance { return &roundRobin{} }

type roundRobin struct {
	states keyed[rrState]
	// nowMillis replaces the wall clock in tests; nil means time.Now.
	nowMillis func() int64
}

// rrState is Dubbo's per "serviceKey.method" map of WeightedRoundRobin. One
// mutex makes each Select a single atomic step of the algorithm, so
// concurrent callers see exactly the sequential sequence.
type rrState struct {
	mu    sync.Mutex
	peers map[rrIdentity]*rrPeer
}

type rrPeer struct {
	weight  int64
	current int64
	last    int64 // unix ms of the last Select that saw the provider
}

// rrIdentity is what Dubbo's URL.toIdentityString keeps (protocol, user,
// password, host, port, path; no parameters), as a struct so a lookup
// builds no string.
type rrIdentity struct {
	protocol, username, password, host, path string
	port                                     int
}

func (lb *roundRobin) now() int64 {
	if lb.nowMillis != nil {
		return lb.nowMillis()
	}
	return time.Now().UnixMilli()
}

func (lb *roundRobin) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	switch len(invokers) {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	st := lb.states.get(lbKey{invokers[0].URL().ServiceKey(), inv.Method})
	c := clock{ms: lb.now(), set: true}
	var (
		total    int64
		maxCur   int64 = math.MinInt64
		selected kernel.Invoker
		selPeer  *rrPeer
	)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.peers == nil {
		st.peers = make(map[rrIdentity]*rrPeer, len(invokers))
	}
	for _, iv := range invokers {
		u := iv.URL()
		w := weightOf(u, inv.Method, &c)
		id := rrIdentity{u.Protocol, u.Username, u.Password, u.Host, u.Path, u.Port}
		p := st.peers[id]
		if p == nil {
			p = &rrPeer{weight: w}
			st.peers[id] = p
		} else if p.weight != w {
			// Weight changed (configuration or warm-up): start over, as Dubbo.
			p.weight, p.current = w, 0
		}
		p.current += w
		p.last = c.ms
		if p.current > maxCur {
			maxCur, selected, selPeer = p.current, iv, p
		}
		total += w
	}
	if len(invokers) != len(st.peers) {
		for id, p := range st.peers {
			if c.ms-p.last > rrRecycleMillis {
				delete(st.peers, id)
			}
		}
	}
	selPeer.current -= total
	return selected
}
