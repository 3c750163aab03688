package zookeeper

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for a change to be seen: ZooKeeper notifies in
// milliseconds; this is for a loaded machine, and a change that comes
// ends it.
const wait = 20 * time.Second

const startHint = "start ZooKeeper with `test/zookeeper/zk.sh start /tmp/zk` and set ZOOKEEPER_TEST_ADDR=127.0.0.1:2181"

// serverAddr returns ZOOKEEPER_TEST_ADDR; without it the test fails under
// CI and is skipped elsewhere.
func serverAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ZOOKEEPER_TEST_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ZOOKEEPER_TEST_ADDR is not set: " + startHint)
		}
		t.Skip("ZOOKEEPER_TEST_ADDR is not set: " + startHint)
	}
	return addr
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLog is a logger writing to the test's log (warnings and up), so a
// failing test shows what the registry said.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Logf("%s", p); return len(p), nil }

// uniqueGroup is a root of the test's own, so tests never see each other's
// nodes on a long-lived server.
func uniqueGroup() string { return fmt.Sprintf("weft-test-%d", time.Now().UnixNano()) }

func openRegistry(t *testing.T, addr, group, extra string) *Registry {
	t.Helper()
	r, err := Factory{Log: testLog(t)}.GetRegistry(kernel.MustParseURL("zookeeper://" + addr + "?group=" + group + extra))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r.(*Registry)
}

// rawConn is a plain go-zookeeper session for looking at (and planting)
// nodes behind the registry's back.
func rawConn(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.Now().Add(wait)
	for c.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("raw session with %s: state %v", addr, c.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// waitChildren waits until path's children satisfy ok.
func waitChildren(t *testing.T, c *zk.Conn, path, what string, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		children, _, err := c.Children(path)
		if err == nil && ok(children) {
			return children
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: children of %s: %v, %v", what, path, children, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type recorder struct {
	mu    sync.Mutex
	lists [][]*kernel.URL
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1)} }

func (r *recorder) Notify(urls []*kernel.URL) {
	r.mu.Lock()
	r.lists = append(r.lists, urls)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

func addrs(urls []*kernel.URL) []string {
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		out = append(out, u.Address())
	}
	slices.Sort(out)
	return out
}

// waitFor waits until the latest list satisfies ok, and returns it.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]*kernel.URL) bool) []*kernel.URL {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		var last []*kernel.URL
		have := len(r.lists) > 0
		if have {
			last = r.lists[len(r.lists)-1]
		}
		n := len(r.lists)
		r.mu.Unlock()
		if have && ok(last) {
			return last
		}
		select {
		case <-r.ch:
		case <-deadline.C:
			t.Fatalf("no notification with %s within %v; last list %v (of %d)", what, wait, addrs(last), n)
		}
	}
}

func hasAddrs(want ...string) func([]*kernel.URL) bool {
	slices.Sort(want)
	return func(urls []*kernel.URL) bool { return slices.Equal(addrs(urls), want) }
}

func provider(iface string, port int, extra string) *kernel.URL {
	return kernel.MustParseURL("dubbo://127.0.0.1:" + strconv.Itoa(port) + "/" + iface +
		"?interface=" + iface + "&group=g1&version=1.0.0&side=provider&methods=a,b" + extra)
}

func consumer(iface string, extra string) *kernel.URL {
	return kernel.MustParseURL("consumer://127.0.0.1/" + iface + "?interface=" + iface + "&group=g1&version=1.0.0&side=consumer" + extra)
}

// proxy is a TCP relay to ZooKeeper that a test can cut off: Pause drops
// every connection and refuses new ones, so the server sees the client go
// silent and expires its session, while the client keeps retrying; Resume
// listens again on the same port.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Pause(); p.wg.Wait() })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
				}()
			}
		}
	}()
}

func (p *proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) Resume() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

var _ extension.NotifyListener = (*recorder)(nil)
