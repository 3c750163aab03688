package test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	netty "github.com/weftrpc/weft/transport-netty"
)

// fakeProvider is a raw TCP Dubbo provider: it answers the first call it
// gets with a response header claiming a 2 GiB body (and nothing more), and
// every later call properly, encoded with the repo's codec.
type fakeProvider struct {
	ln       net.Listener
	accepts  atomic.Int64
	poisoned atomic.Bool
	answered atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startFakeProvider(t *testing.T) *fakeProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProvider{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepts.Add(1)
			f.mu.Lock()
			f.conns = append(f.conns, nc)
			f.mu.Unlock()
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.serve(nc) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeProvider) serve(nc net.Conn) {
	defer nc.Close()
	codec := dubbo.NewCodec(0)
	r := bufio.NewReader(nc)
	for {
		hdr := make([]byte, 16)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		frame := make([]byte, 16+int(binary.BigEndian.Uint32(hdr[12:])))
		copy(frame, hdr)
		if _, err := io.ReadFull(r, frame[16:]); err != nil {
			return
		}
		msg, _, err := codec.Decode(frame)
		req, ok := msg.(*netty.Request)
		if err != nil || !ok {
			return
		}
		var out []byte
		switch {
		case req.Event: // heartbeat
			out, err = codec.Encode(nil, &netty.Response{ID: req.ID, Status: kernel.ResponseOK, Event: true})
		case !f.poisoned.Swap(true):
			// A response header claiming 2 GiB, and no body.
			out = make([]byte, 16)
			binary.BigEndian.PutUint16(out, dubbo.Magic)
			out[2] = 0x02 // response, hessian2
			out[3] = kernel.ResponseOK
			binary.BigEndian.PutUint64(out[4:], req.ID)
			binary.BigEndian.PutUint32(out[12:], 2<<30)
		default:
			arg := ""
			if body, ok := req.Data.(*dubbo.RPCRequest); ok && len(body.Args) == 1 {
				arg, _ = body.Args[0].(string)
			}
			out, err = codec.Encode(nil, &netty.Response{ID: req.ID, Status: kernel.ResponseOK,
				Data: &dubbo.RPCResult{Value: "fake:" + arg}})
			f.answered.Add(1)
		}
		if err != nil {
			return
		}
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

type strClient struct {
	Echo func(ctx context.Context, s string) (string, error)
}

// A provider whose answer claims 2 GiB poisons the consumer's connection:
// the consumer must fail that call at once (not at its timeout), drop the
// connection and reconnect, so that later calls succeed. Before issue 10
// the consumer kept skipping towards 2 GiB: the call and every later one
// timed out, on a connection still reported available.
func TestConsumerDropsAConnectionPoisonedByAHugeResponse(t *testing.T) {
	noLeaks(t)
	f := startFakeProvider(t)
	var c strClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    str: {interface: %s, url: "dubbo://%s?reconnect=100", timeout: 1000, retries: 0}
`, strInterface, f.ln.Addr()), weft.WithReference("str", &c))

	start := time.Now()
	_, err := c.Echo(context.Background(), "first")
	took := time.Since(start)
	t.Logf("first call, answered with a 2 GiB header: %v after %v", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("the call answered with a 2 GiB header succeeded")
	}
	if kernel.CodeOf(err) == kernel.CodeTimeout || took > 500*time.Millisecond {
		t.Errorf("the call failed after %v with %v; want an error at once, not at its 1 s timeout", took.Round(time.Millisecond), err)
	}

	deadline := time.Now().Add(5 * time.Second)
	var failures []string
	for {
		got, err := c.Echo(context.Background(), "again")
		if err == nil {
			if got != "fake:again" {
				t.Fatalf("got %q", got)
			}
			break
		}
		failures = append(failures, err.Error())
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded within 5 s of the poisoned answer (%d accepts, %d calls answered by the provider); failures: %d, last %v",
				f.accepts.Load(), f.answered.Load(), len(failures), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a later call succeeded after %d failed ones; the provider accepted %d connections", len(failures), f.accepts.Load())
	if f.accepts.Load() < 2 {
		t.Errorf("the provider accepted %d connections: the consumer did not reconnect", f.accepts.Load())
	}
	for i := range 10 {
		if got, err := c.Echo(context.Background(), fmt.Sprint(i)); err != nil || got != "fake:"+fmt.Sprint(i) {
			t.Fatalf("call %d after reconnecting: %q %v", i, got, err)
		}
	}
	for _, s := range failures {
		if strings.Contains(s, "timeout") {
			t.Logf("note: a call failed by timeout while reconnecting: %s", s)
		}
	}
}

// An error a weft codec raised reaches the caller with one "weft: " prefix,
// as the codes that travel do (kernel.WireText): the frame error of a
// poisoned answer read "weft: serialization: weft: dubbo frame 1: ...".
func TestFrameErrorHasOnePrefix(t *testing.T) {
	noLeaks(t)
	f := startFakeProvider(t)
	var c strClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    str: {interface: %s, url: "dubbo://%s", timeout: 1000, retries: 0}
`, strInterface, f.ln.Addr()), weft.WithReference("str", &c))
	_, err := c.Echo(context.Background(), "first")
	if err == nil {
		t.Fatal("the call answered with a 2 GiB header succeeded")
	}
	if n := strings.Count(err.Error(), "weft: "); n != 1 {
		t.Errorf("%d \"weft: \" prefixes in %q, want 1", n, err)
	}
}
