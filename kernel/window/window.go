// Package window counts events over a sliding window of time, in ten
// buckets of a tenth of the window each, as Sentinel, Hystrix and Envoy's
// budgets do: a count leaves the window a tenth at a time, never all at
// once. The circuit breaker's error and slow-call counts and the retry
// budget's calls and retries are ones.
//
// A Counts is not safe for concurrent use: its owner guards it (a breaker
// or budget takes one lock for its counts and its state together).
package window

import "time"

// Buckets is how many parts a window is cut into.
const Buckets = 10

// Counters is how many counters a Counts keeps.
const Counters = 3

// Counts keeps Counters counters over a window.
type Counts struct {
	span int64 // ns a bucket covers
	ring [Buckets]bucket
}

type bucket struct {
	start int64 // unix ns the bucket's span began; 0: empty
	n     [Counters]int64
}

// New returns counts over a window of d.
func New(d time.Duration) *Counts {
	return &Counts{span: max(int64(d)/Buckets, 1)}
}

// Add adds delta to counter i at now.
func (c *Counts) Add(now time.Time, i int, delta int64) {
	ns := now.UnixNano()
	start := ns / c.span * c.span
	b := &c.ring[(ns/c.span)%Buckets]
	if b.start != start {
		*b = bucket{start: start}
	}
	b.n[i] += delta
}

// Sum returns the counters over the window that ends at now.
func (c *Counts) Sum(now time.Time) [Counters]int64 {
	var sum [Counters]int64
	oldest := now.UnixNano() - c.span*Buckets
	for i := range c.ring {
		if b := &c.ring[i]; b.start > oldest {
			for j := range sum {
				sum[j] += b.n[j]
			}
		}
	}
	return sum
}

// Reset empties the counts.
func (c *Counts) Reset() { c.ring = [Buckets]bucket{} }
