package netty

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serverPipe is pipePair for a server's connection (it waits for room and
// pauses reading), with the kernel's buffers on both sides made small, so
// that a peer that does not read stops taking bytes after some hundreds of
// KiB rather than the megabytes loopback's autotuning would take first.
// Not smaller than loopback's MSS (64 KiB): a receive buffer under it
// never opens a window the sender may fill, and the connection crawls on
// the persist timer's probes.
func serverPipe(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	nc, peer := loopback(t)
	nc.SetWriteBuffer(128 << 10)
	peer.SetReadBuffer(128 << 10)
	c := newConn(nc, testCodec{}, nopHandler{}, quiet)
	c.pauseReads = true
	c.start()
	t.Cleanup(func() {
		c.Close()
		c.loops.Wait()
		peer.Close()
	})
	return c, peer
}

// sampler records, every 100 µs until stopped, the most bytes c had
// pending and whether a sender waited for room.
type sampler struct {
	most   atomic.Int64
	waited atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

func sample(c *Conn) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			p, w := c.pending()
			if int64(p) > s.most.Load() {
				s.most.Store(int64(p))
			}
			if w > 0 {
				s.waited.Store(true)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	return s
}

func (s *sampler) end() { close(s.stop); <-s.done }

// goroutinesBack waits for the goroutines to number at most n again.
func goroutinesBack(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server connection whose peer never reads: concurrent senders of large
// frames wait for room instead of growing the queue, so that its pending
// bytes (queued, and taken by the writer but not written) stay within
// maxPending plus a frame; control frames go at once meanwhile. The write
// stall closes the connection, the waiting sends return ErrClosed then, and
// every goroutine is gone.
func TestServerSendsWaitForRoomWhilePeerDoesNotRead(t *testing.T) {
	mp, ws := maxPending, writeStall
	t.Cleanup(func() { maxPending, writeStall = mp, ws })
	maxPending, writeStall = 1<<20, 500*time.Millisecond
	before := runtime.NumGoroutine()
	c, _ := serverPipe(t)
	smp := sample(c)
	const senders, size = 8, 64 << 10
	data := strings.Repeat("x", size)
	frameLen := hdr + size
	var sent atomic.Int64
	errs := make(chan error, senders)
	ended := make(chan time.Time, senders)
	for g := range senders {
		go func() {
			for {
				err := c.Send(&Request{ID: uint64(g), Data: data})
				if err != nil {
					ended <- time.Now()
					errs <- err
					return
				}
				sent.Add(1)
				// The sender's own look, right after its frame went in.
				if p, _ := c.pending(); int64(p) > smp.most.Load() {
					smp.most.Store(int64(p))
				}
			}
		}()
	}
	// Every sender waits soon: the kernel takes some hundreds of KiB, the
	// queue a MiB.
	deadline := time.Now().Add(5 * time.Second)
	for _, w := c.pending(); w < senders && !c.IsClosed(); _, w = c.pending() {
		if time.Now().After(deadline) {
			t.Fatalf("%d senders waiting, want all %d (%d frames sent)", w, senders, sent.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if !c.IsClosed() {
		// Control frames never wait: they may come from the read loop.
		start := time.Now()
		if err := c.SendControl(&Response{ID: 1, Event: true}); err != nil {
			t.Fatal(err)
		}
		if err := c.SendNoWait(&Request{ID: 2, Event: true, Data: ReadOnlyEvent}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("control frames took %v behind waiting senders", took)
		}
	}
	took := closedBy(t, c, writeStall+5*time.Second, ErrBackedUp)
	closedAt := time.Now()
	for range senders {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("a waiting Send returned %v, want ErrClosed", err)
			}
			if at := <-ended; at.Sub(closedAt) > time.Second {
				t.Errorf("a waiting Send returned %v after the close", at.Sub(closedAt))
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a Send still waits 2 s after its connection closed")
		}
	}
	smp.end()
	most, control := smp.most.Load(), int64(2*hdr+len(ReadOnlyEvent))
	t.Logf("closed after %v: %v; %d frames of %d bytes sent, at most %d bytes pending (bound %d)",
		took, c.Err(), sent.Load(), frameLen, most, maxPending)
	if !smp.waited.Load() {
		t.Fatal("no sender waited for room")
	}
	if most > int64(maxPending+frameLen)+control {
		t.Fatalf("%d bytes pending, over the bound %d plus a frame of %d", most, maxPending, frameLen)
	}
	c.loops.Wait()
	goroutinesBack(t, before)
}

// A peer that reads, slowly: senders wait for room while it catches up,
// and it gets every frame, each sender's in order, on a connection that
// stays open; a frame larger than the bound goes alone once nothing is
// pending.
func TestSlowReaderGetsEveryFrameWhileSendersWait(t *testing.T) {
	mp := maxPending
	t.Cleanup(func() { maxPending = mp })
	maxPending = 256 << 10
	before := runtime.NumGoroutine()
	c, peer := serverPipe(t)
	smp := sample(c)
	const senders, each, size = 8, 40, 16 << 10
	big := strings.Repeat("B", 2*maxPending) // over the bound: alone
	var total int64
	for g := range senders {
		for i := range each {
			total += int64(hdr + len(fmt.Sprintf("g%d-%d-", g, i)) + size)
		}
	}
	total += 2 * int64(hdr+len("big0-")+len(big))
	// The reader takes 32 KiB every 2 ms (16 MiB/s at most): far slower
	// than the senders, well inside WriteStall for each chunk.
	var got bytes.Buffer
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 32<<10)
		for int64(got.Len()) < total {
			peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := peer.Read(buf[:min(len(buf), int(total)-got.Len())])
			got.Write(buf[:n])
			if err != nil {
				readErr <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		readErr <- nil
	}()
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := c.Send(&Request{ID: uint64(g), Data: fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("y", size))}); err != nil {
					t.Error(err)
					return
				}
				if g == 0 && (i == each/4 || i == each/2) {
					if err := c.Send(&Request{ID: 99, Data: fmt.Sprintf("big%d-%s", i/(each/2), big)}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := <-readErr; err != nil {
		t.Fatalf("the reader, after %d of %d bytes: %v", got.Len(), total, err)
	}
	smp.end()
	if c.IsClosed() {
		t.Fatalf("a peer that reads was closed: %v", c.Err())
	}
	if !smp.waited.Load() {
		t.Fatal("no sender waited for a peer slower than they")
	}
	if most := smp.most.Load(); most > int64(hdr+len("big0-")+len(big)) {
		t.Fatalf("%d bytes pending, over the largest frame alone", most)
	}
	frames := readFrames(t, &got, senders*each+2)
	next := make([]int, senders)
	bigs := 0
	for _, s := range frames {
		if strings.HasPrefix(s, "big") {
			if s[:5] != fmt.Sprintf("big%d-", bigs) || len(s) != 5+len(big) {
				t.Fatalf("large frame %d: %q... (%d bytes)", bigs, s[:5], len(s))
			}
			bigs++
			continue
		}
		var g, i int
		if _, err := fmt.Sscanf(s, "g%d-%d-", &g, &i); err != nil {
			t.Fatalf("frame %q: %v", s[:min(len(s), 20)], err)
		}
		if i != next[g] {
			t.Fatalf("sender %d: frame %d arrived when %d was due", g, i, next[g])
		}
		next[g]++
	}
	if bigs != 2 {
		t.Fatalf("%d large frames, want 2", bigs)
	}
	if _, err := io.ReadFull(&got, make([]byte, 1)); err != io.EOF {
		t.Fatalf("bytes after the last frame: %v", err)
	}
	t.Logf("%d bytes read, at most %d pending (bound %d)", total, smp.most.Load(), maxPending)
	c.Close()
	c.loops.Wait()
	goroutinesBack(t, before)
}

// Clients never wait for room (a client and a server both waiting for the
// other to read would deadlock): against a peer that does not read, Send
// queues past maxPending at once, as before.
func TestClientSendsNeverWaitForRoom(t *testing.T) {
	mp := maxPending
	t.Cleanup(func() { maxPending = mp })
	maxPending = 64 << 10
	c, peer := pipePair(t)
	c.nc.(*net.TCPConn).SetWriteBuffer(128 << 10)
	peer.(*net.TCPConn).SetReadBuffer(128 << 10)
	data := strings.Repeat("z", 64<<10)
	start := time.Now()
	for i := range 64 {
		if err := c.Send(&Request{ID: uint64(i), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a client's sends took %v", took)
	}
	if p, w := c.pending(); w != 0 || p <= maxPending {
		t.Fatalf("%d bytes pending, %d senders waiting: want the queue past %d, nobody waiting", p, w, maxPending)
	}
}
