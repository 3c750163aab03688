package window

import (
	"testing"
	"time"
)

func TestCountsSlideATenthAtATime(t *testing.T) {
	c := New(time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		c.Add(t0.Add(time.Duration(i)*100*time.Millisecond), 0, 1) // one per bucket
		c.Add(t0.Add(time.Duration(i)*100*time.Millisecond), 2, 2)
	}
	if got := c.Sum(t0.Add(950 * time.Millisecond)); got != [Counters]int64{10, 0, 20} {
		t.Fatalf("full window: %v", got)
	}
	// 300 ms later the first three buckets have left.
	if got := c.Sum(t0.Add(1250 * time.Millisecond)); got[0] != 7 || got[2] != 14 {
		t.Fatalf("after sliding 300 ms: %v, want 7 and 14", got)
	}
	// A bucket reused for a later span starts empty.
	c.Add(t0.Add(1050*time.Millisecond), 0, 5)
	if got := c.Sum(t0.Add(1050 * time.Millisecond)); got[0] != 9+5 {
		t.Fatalf("reused bucket: %v, want 14", got)
	}
	if got := c.Sum(t0.Add(10 * time.Second)); got != [Counters]int64{} {
		t.Fatalf("long after: %v", got)
	}
	c.Reset()
	if got := c.Sum(t0.Add(1050 * time.Millisecond)); got != [Counters]int64{} {
		t.Fatalf("after Reset: %v", got)
	}
}
