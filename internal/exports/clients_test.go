package exports

import (
	"sync/atomic"
	"testing"
	"time"
)

type fakeClient struct {
	graceful, closed atomic.Int32
	slow             chan struct{}
}

func (c *fakeClient) CloseGracefully(time.Duration) {
	if c.slow != nil {
		<-c.slow
	}
	c.graceful.Add(1)
}
func (c *fakeClient) Close() { c.closed.Add(1) }

// One client per address while references hold it; the last release
// closes it gracefully without waiting; Close closes the rest now and waits
// for the graceful ones.
func TestClientsShareAndRelease(t *testing.T) {
	var cs Clients[*fakeClient]
	dials := 0
	dial := func() *fakeClient { dials++; return &fakeClient{slow: make(chan struct{})} }
	a1 := cs.Hold("a:1", dial)
	a2 := cs.Hold("a:1", dial)
	b := cs.Hold("b:1", dial)
	if a1 != a2 || dials != 2 {
		t.Fatalf("a held twice gave %p and %p after %d dials, want one client and 2 dials", a1, a2, dials)
	}
	cs.Release("a:1", a1)
	if a1.graceful.Load() != 0 {
		t.Fatal("closed while a reference still holds it")
	}
	released := make(chan struct{})
	go func() { cs.Release("a:1", a2); close(released) }()
	select {
	case <-released: // the release did not wait for the graceful close
	case <-time.After(5 * time.Second):
		t.Fatal("the last release waited for the calls in flight")
	}
	if again := cs.Hold("a:1", dial); again == a1 || dials != 3 {
		t.Fatal("a released address kept its client")
	}
	closed := make(chan struct{})
	go func() { cs.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close did not wait for the client closing gracefully")
	case <-time.After(50 * time.Millisecond):
	}
	close(a1.slow)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close never returned")
	}
	if a1.graceful.Load() != 1 || b.closed.Load() != 1 {
		t.Fatalf("a closed gracefully %d times, b closed %d times: want 1 and 1", a1.graceful.Load(), b.closed.Load())
	}
	cs.Release("b:1", b) // after Close: left alone
	if b.graceful.Load() != 0 {
		t.Fatal("a release after Close closed the client again")
	}
}
