package zookeeper

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/kernel"
)

// opSetWatches is ZooKeeper's SetWatches request: after a reconnect the
// client hands the server the watches it holds.
const opSetWatches = 101

// watchLoser is a TCP relay to ZooKeeper that can drop the SetWatches
// requests clients send, as a server does that never gets them back (the
// request failed, or the connection broke again before it was answered:
// go-zookeeper v1.0.4 only logs that). The server forgets a connection's
// watches when it closes, so after Cut the client believes its watches
// armed and the server holds none.
type watchLoser struct {
	t       *testing.T
	target  string
	addr    string
	ln      net.Listener
	drop    atomic.Bool
	dropped atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newWatchLoser(t *testing.T, target string) *watchLoser {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &watchLoser{t: t, target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	w.wg.Add(1)
	go w.serve()
	t.Cleanup(func() { ln.Close(); w.Cut(); w.wg.Wait() })
	return w
}

func (w *watchLoser) serve() {
	defer w.wg.Done()
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", w.target)
		if err != nil {
			c.Close()
			continue
		}
		w.mu.Lock()
		w.conns[c], w.conns[up] = true, true
		w.mu.Unlock()
		w.wg.Add(2)
		go func() {
			defer w.wg.Done()
			io.Copy(c, up)
			c.Close()
			up.Close()
		}()
		go func() {
			defer w.wg.Done()
			w.requests(up, c)
			c.Close()
			up.Close()
		}()
	}
}

// requests relays the client's frames (a 4-byte length, then the body),
// leaving out SetWatches while drop is set. The first frame is the connect
// request; the others begin with an xid and the opcode.
func (w *watchLoser) requests(dst io.Writer, src io.Reader) {
	var head [4]byte
	for first := true; ; first = false {
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n > 1<<20 {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(src, body); err != nil {
			return
		}
		if !first && n >= 8 && binary.BigEndian.Uint32(body[4:]) == opSetWatches && w.drop.Load() {
			w.dropped.Add(1)
			continue
		}
		if _, err := dst.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// Cut closes every relayed connection: the client reconnects through the
// relay at once.
func (w *watchLoser) Cut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		c.Close()
	}
	w.conns = map[net.Conn]bool{}
}

// A subscription's watch is armed afresh after every reconnect: the server
// may have lost it whatever the client believes (here its SetWatches never
// reaches the server), and a provider registered after the reconnect must
// still be heard. Before, the consumer heard nothing more: its only watch
// was the one go-zookeeper thought it had restored (seen in
// TestZookeeperRestartUnderLoad, with ZooKeeper restarted twice under load).
func TestWatchArmedAgainAfterReconnect(t *testing.T) {
	if raceEnabled {
		// go-zookeeper/zk v1.0.4 races inside itself when it reconnects
		// (recvLoop writes the last zxid that sendSetWatches reads;
		// go-zookeeper/zk#35, samuel/go-zookeeper#260): this test makes it
		// reconnect three times, so it runs in test.sh's step without -race.
		t.Skip("go-zookeeper races inside itself on reconnect: runs in test.sh's non-race step")
	}
	addr, group := serverAddr(t), uniqueGroup()
	ctx := context.Background()
	relay := newWatchLoser(t, addr)
	c := openRegistry(t, relay.addr, group, "&session=20000")
	p := openRegistry(t, addr, group, "")
	rec := newRecorder()
	if err := c.Subscribe(ctx, consumer(iface, ""), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the empty initial list", func(urls []*kernel.URL) bool { return len(urls) == 0 })
	relay.drop.Store(true)
	var want []string
	for i := range 3 {
		dropped := relay.dropped.Load()
		relay.Cut()
		// Back when go-zookeeper has sent its SetWatches (dropped) on
		// the new connection.
		deadline := time.Now().Add(wait)
		for relay.dropped.Load() == dropped || c.c.conn.State() != zk.StateHasSession {
			if time.Now().After(deadline) {
				t.Fatalf("reconnect %d: no SetWatches through the relay within %v (state %v)", i+1, wait, c.c.conn.State())
			}
			time.Sleep(5 * time.Millisecond)
		}
		port := 20061 + i
		if err := p.Register(ctx, provider(iface, port, "")); err != nil {
			t.Fatal(err)
		}
		want = append(want, "127.0.0.1:"+strconv.Itoa(port))
		rec.waitFor(t, "the provider registered after reconnect "+strconv.Itoa(i+1), hasAddrs(want...))
	}
}
