package netty

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weftrpc/weft/kernel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCodec frames Requests and Responses as
// magic(2) kind(1) flags(1) status(1) id(8) len(4) data, data a string.
type testCodec struct{ limit int }

const (
	kindReq = 1
	kindRes = 2
	hdr     = 17
)

func (c testCodec) Encode(dst []byte, msg any) ([]byte, error) {
	var kind, flags, status byte
	var id uint64
	var data string
	switch m := msg.(type) {
	case *Request:
		kind, id = kindReq, m.ID
		if m.TwoWay {
			flags |= 1
		}
		if m.Event {
			flags |= 2
		}
		data, _ = m.Data.(string)
	case *Response:
		kind, id, status = kindRes, m.ID, m.Status
		if m.Event {
			flags |= 2
		}
		data, _ = m.Data.(string)
		if m.Status != kernel.ResponseOK {
			data = m.ErrMsg
		}
	default:
		return dst, fmt.Errorf("cannot encode %T", msg)
	}
	if c.limit > 0 && len(data) > c.limit {
		return dst, errors.New("too large")
	}
	dst = append(dst, 0xda, 0xbb, kind, flags, status)
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	return append(dst, data...), nil
}

// PeekRequest is extension.RequestPeeker.
func (testCodec) PeekRequest(b []byte) (uint64, bool) {
	if len(b) < 13 || binary.BigEndian.Uint16(b) != 0xdabb || b[2] != kindReq {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[5:13]), true
}

func (c testCodec) Decode(src []byte) (any, int, error) {
	if len(src) >= 2 && (src[0] != 0xda || src[1] != 0xbb) {
		return nil, 0, errors.New("bad magic")
	}
	if len(src) < hdr {
		return nil, 0, nil
	}
	kind, flags, status := src[2], src[3], src[4]
	id := binary.BigEndian.Uint64(src[5:])
	n := int(binary.BigEndian.Uint32(src[13:]))
	if c.limit > 0 && n > c.limit {
		var msg any = &Response{ID: id, Status: kernel.ResponseBadResponse, ErrMsg: "frame too large"}
		if kind == kindReq {
			msg = &Request{ID: id, TwoWay: flags&1 != 0, Broken: errors.New("frame too large")}
		}
		return nil, 0, &FrameError{Msg: msg, Skip: hdr + n, Err: errors.New("frame too large")}
	}
	if len(src) < hdr+n {
		return nil, 0, nil
	}
	data := string(src[hdr : hdr+n])
	if kind == kindReq {
		return &Request{ID: id, TwoWay: flags&1 != 0, Event: flags&2 != 0, Data: data}, hdr + n, nil
	}
	r := &Response{ID: id, Status: status, Event: flags&2 != 0}
	if status == kernel.ResponseOK {
		r.Data = data
	} else {
		r.ErrMsg = data
	}
	return r, hdr + n, nil
}

// echoHandler answers with the request's data; "sleep:<dur>" sleeps first,
// "block" waits for release.
type echoHandler struct {
	release chan struct{}
	served  atomic.Int64
}

func (h *echoHandler) Reply(_ *Conn, req *Request) *Response {
	h.served.Add(1)
	s, _ := req.Data.(string)
	if d, ok := strings.CutPrefix(s, "sleep:"); ok {
		dur, _ := time.ParseDuration(d)
		time.Sleep(dur)
	}
	if s == "block" {
		<-h.release
	}
	return &Response{Status: kernel.ResponseOK, Data: s}
}

func serve(t *testing.T, codec testCodec, opt ServerOptions) (*ExchangeServer, *echoHandler) {
	t.Helper()
	h := &echoHandler{release: make(chan struct{})}
	es, err := Bind(NewTransporter(quiet), kernel.MustParseURL("dubbo://127.0.0.1:0"), codec, h, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		es.Close(time.Second)
	})
	return es, h
}

func dial(t *testing.T, addr string, codec testCodec, opt ClientOptions) *ExchangeClient {
	t.Helper()
	c := NewExchangeClient(NewTransporter(quiet), kernel.MustParseURL("dubbo://"+addr), codec, opt)
	t.Cleanup(c.Close)
	return c
}

func TestRoundTripsConcurrently(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				want := fmt.Sprintf("%d-%d-%s", i, j, strings.Repeat("x", (i*j)%3000))
				resp, err := c.Request(context.Background(), want, time.Second)
				if err != nil || resp.Data != want {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed or got another call's answer", failed.Load())
	}
	if c.Pending() != 0 {
		t.Fatalf("pending table holds %d", c.Pending())
	}
}

func TestFrameLargerThanReadBuffer(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	big := strings.Repeat("y", 1<<20+7)
	resp, err := c.Request(context.Background(), big, 5*time.Second)
	if err != nil || resp.Data != big {
		t.Fatalf("1 MiB round trip: err %v, %d bytes back", err, len(fmt.Sprint(resp.Data)))
	}
}

func TestTimeoutLeavesNothingAndLateResponseIsCounted(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Request(ctx, "sleep:150ms", time.Second)
	took := time.Since(start)
	if kernel.CodeOf(err) != kernel.CodeTimeout || took > 70*time.Millisecond {
		t.Fatalf("err %v after %v, want a timeout at 50ms", err, took)
	}
	if c.Pending() != 0 {
		t.Fatalf("timed-out call left %d entries in the pending table", c.Pending())
	}
	deadline := time.Now().Add(2 * time.Second)
	for c.LateResponses() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c.LateResponses() != 1 {
		t.Fatalf("late responses %d, want 1", c.LateResponses())
	}
	// The connection still works.
	if resp, err := c.Request(context.Background(), "after", time.Second); err != nil || resp.Data != "after" {
		t.Fatalf("after a timeout: %v %v", resp, err)
	}
}

func TestDefaultTimeoutWithoutDeadline(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	start := time.Now()
	_, err := c.Request(context.Background(), "sleep:300ms", 80*time.Millisecond)
	if kernel.CodeOf(err) != kernel.CodeTimeout || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestClosingChannelFailsAllPendingAtOnce(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := c.Request(context.Background(), "block", 10*time.Second)
			errs <- err
		}()
	}
	for c.Pending() != 10 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	c.conn.Load().Close()
	for range 10 {
		err := <-errs
		if err != nil {
			t.Fatalf("call got %v, want a response with a status", err)
		}
	}
	// At once, not at their 10 s timeout (the bound is that far from both
	// so that a loaded machine's scheduling does not decide it).
	if time.Since(start) > 5*time.Second {
		t.Fatalf("pending calls took %v to fail", time.Since(start))
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending after close", c.Pending())
	}
}

func TestClosedChannelStatusIsNetworkError(t *testing.T) {
	if err := kernel.ResponseError(kernel.ResponseChannelInactive, "x"); kernel.CodeOf(err) != kernel.CodeNetwork {
		t.Fatalf("code %v", kernel.CodeOf(err))
	}
	if err := kernel.ResponseError(kernel.ResponseServerTimeout, "x"); kernel.CodeOf(err) != kernel.CodeTimeout || !err.(*kernel.Error).ServerSide {
		t.Fatalf("server timeout: %v", err)
	}
}

func TestThreadsFullAnswers100(t *testing.T) {
	es, h := serve(t, testCodec{}, ServerOptions{Threads: 2})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	done := make(chan *Response, 2)
	for range 2 {
		go func() {
			r, _ := c.Request(context.Background(), "block", 5*time.Second)
			done <- r
		}()
	}
	for es.Busy() != 2 {
		time.Sleep(time.Millisecond)
	}
	resp, err := c.Request(context.Background(), "x", time.Second)
	if err != nil || resp.Status != kernel.ResponseServerThreadpoolExhausted || !strings.Contains(resp.ErrMsg, "threads") {
		t.Fatalf("resp %+v err %v, want status 100", resp, err)
	}
	close(h.release)
	for range 2 {
		if r := <-done; r == nil || r.Status != kernel.ResponseOK {
			t.Fatalf("blocked call: %+v", r)
		}
	}
}

func TestOversizedFramesFailOneCallKeepConnection(t *testing.T) {
	// The server accepts at most 100 bytes; the client encodes anything.
	es, h := serve(t, testCodec{limit: 100}, ServerOptions{})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	resp, err := c.Request(context.Background(), strings.Repeat("z", 5000), time.Second)
	if err != nil || resp.Status != kernel.ResponseBadRequest {
		t.Fatalf("oversized request: %+v %v, want BadRequest", resp, err)
	}
	if resp, err := c.Request(context.Background(), "small", time.Second); err != nil || resp.Data != "small" {
		t.Fatalf("next call on the same connection: %+v %v", resp, err)
	}
	if c.Connects() != 1 || h.served.Load() != 1 {
		t.Fatalf("connects %d served %d", c.Connects(), h.served.Load())
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{})
	good := dial(t, es.Addr(), testCodec{}, ClientOptions{})
	bad, err := net.Dial("tcp", es.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	bad.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); err == nil {
		t.Fatal("server kept a connection that sent garbage")
	}
	if resp, err := good.Request(context.Background(), "still", time.Second); err != nil || resp.Data != "still" {
		t.Fatalf("other connection: %+v %v", resp, err)
	}
}

func TestReconnectsAfterServerRestart(t *testing.T) {
	h := &echoHandler{release: make(chan struct{})}
	close(h.release)
	tr := NewTransporter(quiet)
	es, err := Bind(tr, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, h, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := es.Addr()
	c := dial(t, addr, testCodec{}, ClientOptions{Reconnect: 50 * time.Millisecond})
	es.Close(time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for c.IsAvailable() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c.IsAvailable() {
		t.Fatal("client still available after the server closed")
	}
	// Unavailable from the server's READONLY event on; down once the
	// connection is closed (the server closes it gracefully, shortly after
	// Close returns).
	for ; time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err = c.Request(context.Background(), "x", time.Second); kernel.CodeOf(err) == kernel.CodeNetwork {
			break
		}
	}
	if kernel.CodeOf(err) != kernel.CodeNetwork {
		t.Fatalf("call while down: %v, want a network error", err)
	}
	es2, err := Bind(tr, kernel.MustParseURL("dubbo://"+addr), testCodec{}, h, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer es2.Close(time.Second)
	for !c.IsAvailable() && time.Now().Before(deadline.Add(2*time.Second)) {
		time.Sleep(5 * time.Millisecond)
	}
	if resp, err := c.Request(context.Background(), "back", time.Second); err != nil || resp.Data != "back" {
		t.Fatalf("after restart: %+v %v", resp, err)
	}
}

func TestHeartbeatsKeepIdleConnectionOpen(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{Heartbeat: 60 * time.Millisecond})
	c := dial(t, es.Addr(), testCodec{}, ClientOptions{Heartbeat: 60 * time.Millisecond})
	time.Sleep(400 * time.Millisecond) // > 3 heartbeats of silence without them
	if c.Connects() != 1 || !c.IsAvailable() {
		t.Fatalf("connects %d available %t: heartbeats did not keep the connection", c.Connects(), c.IsAvailable())
	}
}

func TestServerClosesSilentConnection(t *testing.T) {
	es, _ := serve(t, testCodec{}, ServerOptions{Heartbeat: 40 * time.Millisecond})
	nc, err := net.Dial("tcp", es.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	start := time.Now()
	if _, err := nc.Read(make([]byte, 1)); err == nil || time.Since(start) > time.Second {
		t.Fatalf("silent connection not closed by the server (err %v after %v)", err, time.Since(start))
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	h := &echoHandler{}
	es, err := Bind(NewTransporter(quiet), kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, h, ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer es.Close(time.Second)
	c := NewExchangeClient(NewTransporter(quiet), kernel.MustParseURL("dubbo://"+es.Addr()), testCodec{}, ClientOptions{})
	defer c.Close()
	payload := strings.Repeat("x", 1024)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Request(context.Background(), payload, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}
