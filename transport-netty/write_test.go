package netty

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// loopback returns both ends of a TCP connection on 127.0.0.1: the
// dialled one and the accepted one.
func loopback(t *testing.T) (nc, peer *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peerc := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		peerc <- nc
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, _ = (<-peerc).(*net.TCPConn)
	if peer == nil {
		t.Fatal("accept failed")
	}
	return d.(*net.TCPConn), peer
}

// pipePair returns a Conn over one end of a loopback TCP connection and the
// raw other end.
func pipePair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	nc, peer := loopback(t)
	c := newConn(nc, testCodec{}, nopHandler{}, quiet)
	c.start()
	t.Cleanup(func() {
		c.Close()
		c.loops.Wait()
		peer.Close()
	})
	return c, peer
}

// readFrames reads n testCodec frames from r and returns their data.
func readFrames(t *testing.T, r io.Reader, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	h := make([]byte, hdr)
	for range n {
		if _, err := io.ReadFull(r, h); err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		if h[0] != 0xda || h[1] != 0xbb {
			t.Fatalf("frame %d: bad magic %x: the byte stream is out of order", len(out), h[:2])
		}
		body := make([]byte, binary.BigEndian.Uint32(h[13:]))
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(body))
	}
	return out
}

// A sender writes its own frame when nothing else is coming, without ever
// blocking: against a peer that does not read, what the socket does not take
// goes to the write loop, and every byte arrives, in order, once the peer
// reads. Senders racing one another (some inline, some batched) keep
// frames whole.
func TestSendNeverBlocksAndKeepsOrder(t *testing.T) {
	c, peer := pipePair(t)
	const frames = 64
	big := bytes.Repeat([]byte("x"), 256<<10) // 64 x 256 KiB = 16 MiB, far over the socket buffers
	// The peer starts reading a second in, well inside WriteStall (3 s,
	// after which a write that moves nothing closes the connection): on a
	// loaded machine the sends themselves take longer than WriteStall, and
	// a peer that only read after them would be closed for not reading.
	var read bytes.Buffer
	readErr := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_, err := io.CopyN(&read, peer, int64(frames*(hdr+5+len(big))))
		readErr <- err
	}()
	start := time.Now()
	for i := range frames {
		data := fmt.Sprintf("%04d:%s", i, big)
		if err := c.Send(&Request{ID: uint64(i), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Send blocked on a peer that does not read: %v for %d frames", took, frames)
	}
	if err := <-readErr; err != nil {
		t.Fatalf("the peer read %d bytes: %v", read.Len(), err)
	}
	got := readFrames(t, &read, frames)
	for i, s := range got {
		if want := fmt.Sprintf("%04d:", i); s[:5] != want || len(s) != 5+len(big) {
			t.Fatalf("frame %d starts %q (%d bytes), want %q", i, s[:5], len(s), want)
		}
	}

	// Concurrent senders, half of them announcing more to come (batched
	// by the write loop), half not (written inline).
	var wg sync.WaitGroup
	const senders, each = 8, 200
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if g%2 == 0 {
					c.coming.Add(1)
				}
				err := c.Send(&Request{ID: uint64(g*each + i), Data: fmt.Sprintf("g%d-%d-%s", g, i, big[:g*97])})
				if g%2 == 0 {
					c.coming.Add(-1)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	got = readFrames(t, peer, senders*each)
	wg.Wait()
	next := make([]int, senders)
	for _, s := range got {
		var g, i int
		if _, err := fmt.Sscanf(s, "g%d-%d-", &g, &i); err != nil {
			t.Fatalf("frame %q: %v", s[:min(len(s), 20)], err)
		}
		if i != next[g] {
			t.Fatalf("sender %d: frame %d arrived when %d was due", g, i, next[g])
		}
		next[g]++
	}
}

// A call alone on its connection is served on the read loop; one that blocks
// there does not hold the connection: after the inline budget another
// goroutine reads on, so calls behind it are answered while it still runs,
// and `threads` still counts it.
func TestInlineCallDoesNotHoldTheConnection(t *testing.T) {
	es, h := serve(t, testCodec{}, ServerOptions{Threads: 3})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	blocked := make(chan *Response, 3)
	for i := range 2 {
		go func() {
			r, _ := c.Request(context.Background(), "block", 10*time.Second)
			blocked <- r
		}()
		// One at a time, so that each arrives alone and is served inline.
		for deadline := time.Now().Add(5 * time.Second); es.Busy() < int64(i+1) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	if es.Busy() != 2 {
		t.Fatalf("busy %d, want the 2 blocked calls", es.Busy())
	}
	start := time.Now()
	for i := range 20 {
		resp, err := c.Request(context.Background(), fmt.Sprint("fast", i), 2*time.Second)
		if err != nil || resp.Status != kernel.ResponseOK || resp.Data != fmt.Sprint("fast", i) {
			t.Fatalf("call %d behind blocked ones: %+v %v", i, resp, err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("20 calls took %v behind calls blocked on the read loop", took)
	}
	// Two blocked (inline or not) and one free thread: a third blocking
	// call fills the pool, and the next gets status 100.
	go func() {
		r, _ := c.Request(context.Background(), "block", 10*time.Second)
		blocked <- r
	}()
	// Wait until the third blocking call is being served (2 + 20 + 1
	// handler runs): Busy alone may still count a fast call whose answer
	// is already out but whose thread is not freed yet.
	for deadline := time.Now().Add(5 * time.Second); (h.served.Load() < 23 || es.Busy() < 3) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	resp, err := c.Request(context.Background(), "x", time.Second)
	if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted {
		t.Fatalf("with every thread busy: %+v %v, want status 100", resp, err)
	}
	close(h.release)
	for range 3 {
		if r := <-blocked; r == nil || r.Status != kernel.ResponseOK {
			t.Fatalf("blocked call: %+v", r)
		}
	}
}

// The last sender of a batch (nothing else coming) writes what is queued
// before it along with its own frame, in order, without the write loop.
func TestLastSenderTakesQueuedFramesAlong(t *testing.T) {
	c, peer := pipePair(t)
	queued, err := testCodec{}.Encode(nil, &Request{ID: 1, Data: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	// A frame queued while more were coming, not yet written: put there
	// without waking the write loop, as if it had not had its turn yet.
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, queued...)
	c.wmu.Unlock()
	if err := c.Send(&Request{ID: 2, Data: "last"}); err != nil {
		t.Fatal(err)
	}
	c.wmu.Lock()
	left := len(c.wbuf)
	c.wmu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes still queued after the last sender's write", left)
	}
	if got := readFrames(t, peer, 2); got[0] != "queued" || got[1] != "last" {
		t.Fatalf("frames %q, want the queued one first", got)
	}
}

// A stream's messages (SendMore) are queued for the write loop, which
// writes those sent while it woke together: far fewer write system calls
// than frames, every frame in order.
func TestSendMoreBatchesWrites(t *testing.T) {
	c, peer := pipePair(t)
	const frames = 2000
	body := strings.Repeat("m", 1024)
	got := make(chan []string, 1)
	go func() { got <- readFrames(t, peer, frames) }()
	before := c.writes.Load()
	for i := range frames {
		if err := c.SendMore(&Request{ID: uint64(i), Data: fmt.Sprintf("%05d%s", i, body)}); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	select {
	case out = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the frames were not all written in 10s")
	}
	for i, s := range out {
		if s[:5] != fmt.Sprintf("%05d", i) {
			t.Fatalf("frame %d is %q", i, s[:5])
		}
	}
	if w := c.writes.Load() - before; w > frames/2 {
		t.Fatalf("%d write system calls for %d frames: SendMore did not batch", w, frames)
	} else {
		t.Logf("%d frames in %d writes", frames, w)
	}
}

// With every inline call outlasting its budget, each one hands reading to a
// new read loop: calls served, calls declined (all threads busy: status 100)
// and the calls behind them are all answered, none lost with the loop that
// read them.
func TestTakeoverLosesNoCall(t *testing.T) {
	defer func(b time.Duration) { inlineBudget = b }(inlineBudget)
	inlineBudget = time.Nanosecond
	es, h := serve(t, testCodec{}, ServerOptions{Threads: 1})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	for i := range 50 {
		resp, err := c.Request(context.Background(), fmt.Sprint("call", i), 2*time.Second)
		if err != nil || resp.Status != kernel.ResponseOK || resp.Data != fmt.Sprint("call", i) {
			t.Fatalf("call %d: %+v %v", i, resp, err)
		}
	}
	blocked := make(chan *Response, 1)
	go func() {
		r, _ := c.Request(context.Background(), "block", 10*time.Second)
		blocked <- r
	}()
	for deadline := time.Now().Add(5 * time.Second); es.Busy() < 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for i := range 20 {
		resp, err := c.Request(context.Background(), "x", 2*time.Second)
		if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted {
			t.Fatalf("declined call %d: %+v %v, want status 100", i, resp, err)
		}
	}
	close(h.release)
	if r := <-blocked; r == nil || r.Status != kernel.ResponseOK {
		t.Fatalf("blocked call: %+v", r)
	}
}
