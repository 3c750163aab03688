package wasmfilter

import (
	"sync"
	"time"
	"unsafe"
)

// Counters is the store behind the host function counter_add: named counters
// in fixed time windows, shared by every instance of every WASM filter of one
// App, so that a rate limit written in a guest holds across concurrent calls
// (each instance has its own memory and cannot count alone).
//
// A window of w milliseconds starts at each multiple of w since the Unix
// epoch; a counter read in a new window starts again from 0. A counter whose
// window is <= 0 never resets. The same key with two window sizes is two
// counters.
//
// Memory is bounded: windows that have ended are swept (lazily, at most once a
// second per shard, on an add), and the store holds at most MaxKeys keys. When
// it is full of live counters, a new key is not stored and counter_add returns
// delta, as for a counter just created: a flood of invented keys cannot grow
// the store or evict the counters already in use.
type Counters struct {
	shards  [counterShards]counterShard
	perShrd int
	now     func() int64 // Unix ms; replaced in tests
}

const (
	counterShards = 16
	// DefaultMaxCounterKeys bounds a store made by NewCounters.
	DefaultMaxCounterKeys = 1 << 16
	sweepEveryMs          = 1000
)

type counterShard struct {
	mu        sync.Mutex
	keys      map[string]*counterKey
	lastSweep int64
	_         [40]byte // keep shards on separate cache lines
}

// counterKey holds the counters of one key, one per window size (almost always
// just one).
type counterKey struct {
	windows []counterWindow
}

type counterWindow struct {
	size  int64 // window length in ms; <= 0: never resets
	start int64 // start of the current window, Unix ms
	value int64
}

// NewCounters returns an empty store holding at most DefaultMaxCounterKeys keys.
func NewCounters() *Counters { return NewCountersLimit(DefaultMaxCounterKeys) }

// NewCountersLimit returns an empty store holding at most maxKeys keys.
func NewCountersLimit(maxKeys int) *Counters {
	c := &Counters{perShrd: (maxKeys + counterShards - 1) / counterShards,
		now: func() int64 { return time.Now().UnixMilli() }}
	for i := range c.shards {
		c.shards[i].keys = map[string]*counterKey{}
	}
	return c
}

// Add adds delta to the counter key of the current window of windowMs
// milliseconds and returns its new value.
func (c *Counters) Add(key string, delta, windowMs int64) int64 {
	return c.add(unsafe.Slice(unsafe.StringData(key), len(key)), delta, windowMs)
}

// add is Add for a key read from guest memory: the bytes are only looked at,
// and copied when a new key is stored.
func (c *Counters) add(key []byte, delta, windowMs int64) int64 {
	now := c.now()
	sh := &c.shards[fnv32(key)%counterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.lastSweep >= sweepEveryMs {
		sh.sweep(now)
	}
	ck := sh.keys[unsafe.String(unsafe.SliceData(key), len(key))]
	if ck == nil {
		if len(sh.keys) >= c.perShrd {
			return delta
		}
		ck = &counterKey{}
		sh.keys[string(key)] = ck
	}
	var w *counterWindow
	for i := range ck.windows {
		if ck.windows[i].size == windowMs || ck.windows[i].size <= 0 && windowMs <= 0 {
			w = &ck.windows[i]
			break
		}
	}
	if w == nil {
		ck.windows = append(ck.windows, counterWindow{size: windowMs})
		w = &ck.windows[len(ck.windows)-1]
	}
	if windowMs > 0 {
		if start := now - now%windowMs; w.start != start {
			w.start, w.value = start, 0
		}
	}
	w.value += delta
	return w.value
}

// sweep drops the windows that have ended, and the keys left without any.
func (sh *counterShard) sweep(now int64) {
	sh.lastSweep = now
	for k, ck := range sh.keys {
		live := ck.windows[:0]
		for _, w := range ck.windows {
			if w.size <= 0 || w.start+w.size > now {
				live = append(live, w)
			}
		}
		ck.windows = live
		if len(live) == 0 {
			delete(sh.keys, k)
		}
	}
}

// Len returns the number of keys stored.
func (c *Counters) Len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

func fnv32(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
