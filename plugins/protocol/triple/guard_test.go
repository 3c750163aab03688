package triple

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
)

// open sends a HEADERS frame of fields on a new stream.
func (c *client) open(end bool, fields ...string) uint32 {
	c.t.Helper()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(fields...), EndHeaders: true, EndStream: end}); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// sendBody sends body on stream id in frames of at most 16 KiB.
func (c *client) sendBody(id uint32, body []byte, end bool) {
	c.t.Helper()
	for {
		n := min(len(body), 16384)
		if err := c.fr.WriteData(id, end && n == len(body), body[:n]); err != nil {
			c.t.Fatal(err)
		}
		body = body[n:]
		if len(body) == 0 {
			return
		}
	}
}

// expectGoAway reads until the server's GOAWAY, which must carry code,
// and then the connection's close.
func (c *client) expectGoAway(code http2.ErrCode, within time.Duration) goAway {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(within))
	_, f := c.read(1 << 30)
	if f == nil || f.ErrCode != code {
		var why []byte
		if f != nil {
			why = f.DebugData()
		}
		c.t.Fatalf("GOAWAY %v (%s), want code %v", f, why, code)
	}
	// Copied before reading on: the Framer's next frame invalidates it.
	ga := goAway{ErrCode: f.ErrCode, debug: string(f.DebugData())}
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("the connection was not closed after GOAWAY %v", code)
			}
			return ga
		}
	}
}

// goAway is what a GOAWAY said, kept past the frame.
type goAway struct {
	ErrCode http2.ErrCode
	debug   string
}

func (g goAway) DebugData() []byte { return []byte(g.debug) }

// expectReset reads stream id until it ends and wants it reset with code.
func (c *client) expectReset(id uint32, code http2.ErrCode) {
	c.t.Helper()
	r, ga := c.read(id)
	if ga != nil {
		c.t.Fatalf("stream %d: GOAWAY %v (%s), want RST_STREAM %v", id, ga.ErrCode, ga.DebugData(), code)
	}
	if !r.wasReset || r.reset != code {
		c.t.Fatalf("stream %d: answered %v %v (reset %v %v), want RST_STREAM %v", id, r.headers, r.trailers, r.wasReset, r.reset, code)
	}
}

// settle reads until the server's SETTINGS and acknowledges them, so that
// no acknowledgement of the client's falls into what a test sends next.
func (c *client) settle() {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatal(err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			c.fr.WriteSettingsAck()
			return
		}
	}
}

// readAll reads until each of ids has ended (answered or reset), in any
// order.
func (c *client) readAll(ids []uint32) (map[uint32]*response, *http2.GoAwayFrame) {
	c.t.Helper()
	rs := map[uint32]*response{}
	for _, id := range ids {
		rs[id] = &response{}
	}
	left := len(ids)
	for left > 0 {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading %d streams (%d left): %v", len(ids), left, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.GoAwayFrame:
			return rs, f
		case *http2.MetaHeadersFrame:
			r := rs[f.StreamID]
			if r == nil {
				continue
			}
			m := map[string]string{}
			for _, hf := range f.Fields {
				m[hf.Name] = hf.Value
			}
			if r.headers == nil && m["grpc-status"] == "" {
				r.headers = m
			} else {
				r.trailers = m
			}
			if f.StreamEnded() {
				left--
			}
		case *http2.DataFrame:
			if len(f.Data()) > 0 {
				c.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
			}
			if r := rs[f.StreamID]; r != nil {
				r.data = append(r.data, f.Data()...)
				if len(f.Data()) > 0 {
					c.fr.WriteWindowUpdate(f.StreamID, uint32(len(f.Data())))
				}
			}
		case *http2.RSTStreamFrame:
			if r := rs[f.StreamID]; r != nil && !r.wasReset {
				r.reset, r.wasReset = f.ErrCode, true
				left--
			}
		}
	}
	return rs, nil
}

// stillServes checks the connection answers a call.
func (c *client) stillServes() {
	c.t.Helper()
	r, ga := c.read(c.call("Echo", lengthPrefixed(strMsg("still"))))
	if ga != nil || r.status() != 0 {
		c.t.Fatalf("the connection no longer serves: %v %v", r.trailers, ga)
	}
}

// TestFramesAfterClientGoAway: a client's GOAWAY stops nothing: the answer
// in flight goes on as its WINDOW_UPDATEs come, and PING is answered.
func TestFramesAfterClientGoAway(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	big := strings.Repeat("x", 300<<10) // over the client's 64 KiB window
	id := c.next
	c.next += 2
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: true})
	c.sendBody(id, lengthPrefixed(strMsg(big)), true)
	if err := c.fr.WriteGoAway(id, http2.ErrCodeNo, nil); err != nil {
		t.Fatal(err)
	}
	r, ga := c.read(id) // sends WINDOW_UPDATEs as DATA comes
	if ga != nil || r.status() != 0 {
		t.Fatalf("status %v, GOAWAY %v", r.trailers, ga)
	}
	var out wrapperspb.StringValue
	if proto.Unmarshal(r.data[5:], &out) != nil || out.GetValue() != big {
		t.Fatalf("an answer of %d bytes came back as %d", len(big), len(r.data))
	}
	c.fr.WritePing(false, [8]byte{'a', 'f', 't', 'e', 'r'})
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no PING answer after GOAWAY: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == [8]byte{'a', 'f', 't', 'e', 'r'} {
			return
		}
	}
}

// TestMalformedRequestHeaders: each request RFC 9113 8.2 and 8.3 call
// malformed is reset with PROTOCOL_ERROR, on its stream only.
func TestMalformedRequestHeaders(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	path := "/" + iface + "/Echo"
	cases := []struct {
		name   string
		fields []string
	}{
		{"upper-case name", grpcHeaders("Echo", "X-Upper", "1")},
		{"unknown pseudo-header", []string{":method", "POST", ":scheme", "http", ":path", path, ":foo", "x", "content-type", "application/grpc"}},
		{"response pseudo-header", []string{":method", "POST", ":scheme", "http", ":path", path, ":status", "200", "content-type", "application/grpc"}},
		{"pseudo-header after a regular one", []string{":method", "POST", ":scheme", "http", "content-type", "application/grpc", ":path", path}},
		{"no :method", []string{":scheme", "http", ":path", path, "content-type", "application/grpc"}},
		{"no :scheme", []string{":method", "POST", ":path", path, "content-type", "application/grpc"}},
		{"no :path", []string{":method", "POST", ":scheme", "http", "content-type", "application/grpc"}},
		{"two :method", []string{":method", "POST", ":method", "POST", ":scheme", "http", ":path", path}},
		{"two :scheme", []string{":method", "POST", ":scheme", "http", ":scheme", "http", ":path", path}},
		{"two :path", []string{":method", "POST", ":scheme", "http", ":path", path, ":path", path}},
		{"empty :path", []string{":method", "POST", ":scheme", "http", ":path", ""}},
		{"connection", grpcHeaders("Echo", "connection", "keep-alive")},
		{"keep-alive", grpcHeaders("Echo", "keep-alive", "300")},
		{"proxy-connection", grpcHeaders("Echo", "proxy-connection", "keep-alive")},
		{"transfer-encoding", grpcHeaders("Echo", "transfer-encoding", "chunked")},
		{"upgrade", grpcHeaders("Echo", "upgrade", "h2c")},
		{"te other than trailers", []string{":method", "POST", ":scheme", "http", ":path", path, "te", "trailers, deflate"}},
		{"value with a line feed", grpcHeaders("Echo", "x-a", "1\r\nx-b: 2")},
		{"bad content-length", grpcHeaders("Echo", "content-length", "-1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			c.expectReset(c.open(true, tc.fields...), http2.ErrCodeProtocol)
		})
	}
	c.t = t
	body := lengthPrefixed(strMsg("hello"))
	// content-length that the DATA do not match, above and below.
	id := c.open(false, grpcHeaders("Echo", "content-length", "3")...)
	c.fr.WriteData(id, true, body)
	c.expectReset(id, http2.ErrCodeProtocol)
	id = c.open(false, grpcHeaders("Echo", "content-length", fmt.Sprint(len(body)+1))...)
	c.fr.WriteData(id, true, body)
	c.expectReset(id, http2.ErrCodeProtocol)
	id = c.open(true, grpcHeaders("Echo", "content-length", "10")...)
	c.expectReset(id, http2.ErrCodeProtocol)
	// ... and one that does: served.
	id = c.open(false, grpcHeaders("Echo", "content-length", fmt.Sprint(len(body)))...)
	c.fr.WriteData(id, true, body)
	if r, _ := c.read(id); r.status() != 0 {
		t.Fatalf("a request with a right content-length: %v", r.trailers)
	}
	// Trailers with a pseudo-header.
	id = c.open(false, grpcHeaders("Echo")...)
	c.fr.WriteData(id, false, body)
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(":path", "/x"), EndHeaders: true, EndStream: true})
	c.expectReset(id, http2.ErrCodeProtocol)
	// Trailers without one: served.
	id = c.open(false, grpcHeaders("Echo")...)
	c.fr.WriteData(id, false, body)
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock("x-trailer", "1"), EndHeaders: true, EndStream: true})
	if r, _ := c.read(id); r.status() != 0 {
		t.Fatalf("a request with trailers: %v", r.trailers)
	}
	c.stillServes()
}

// TestStreamStateErrors: frames that a stream's state does not allow are
// answered as RFC 9113 5.1, 6.3, 6.8 and 6.9 say, stream errors on their
// stream only.
func TestStreamStateErrors(t *testing.T) {
	addr, e := serve(t, nil)
	fresh := func() *client {
		c := dial(t, addr)
		c.fr.AllowIllegalWrites = true
		c.handshake()
		return c
	}
	t.Run("WINDOW_UPDATE on an idle stream", func(t *testing.T) {
		c := fresh()
		c.fr.WriteWindowUpdate(101, 1000)
		c.expectGoAway(http2.ErrCodeProtocol, 5*time.Second)
	})
	t.Run("PRIORITY on stream 0", func(t *testing.T) {
		c := fresh()
		c.fr.WritePriority(0, http2.PriorityParam{StreamDep: 1, Weight: 1})
		c.expectGoAway(http2.ErrCodeProtocol, 5*time.Second)
	})
	t.Run("GOAWAY on a stream", func(t *testing.T) {
		c := fresh()
		c.nc.Write([]byte{0, 0, 8, h2.FrameGoAway, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
		c.expectGoAway(http2.ErrCodeProtocol, 5*time.Second)
	})
	c := fresh()
	t.Run("WINDOW_UPDATE of 0 on a stream", func(t *testing.T) {
		c.t = t
		id := c.open(false, grpcHeaders("Echo")...)
		c.fr.WriteWindowUpdate(id, 0)
		c.expectReset(id, http2.ErrCodeProtocol)
	})
	t.Run("a stream's window over 2^31-1", func(t *testing.T) {
		c.t = t
		id := c.open(false, grpcHeaders("Echo")...)
		c.fr.WriteWindowUpdate(id, 1<<31-1)
		c.expectReset(id, http2.ErrCodeFlowControl)
	})
	t.Run("PRIORITY depending on its own stream", func(t *testing.T) {
		c.t = t
		id := c.open(false, grpcHeaders("Echo")...)
		c.fr.WritePriority(id, http2.PriorityParam{StreamDep: id, Weight: 1})
		c.expectReset(id, http2.ErrCodeProtocol)
	})
	t.Run("HEADERS depending on its own stream", func(t *testing.T) {
		c.t = t
		id := c.next
		c.next += 2
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: true, EndStream: true,
			Priority: http2.PriorityParam{StreamDep: id, Weight: 1}})
		c.expectReset(id, http2.ErrCodeProtocol)
	})
	t.Run("PRIORITY of another stream", func(t *testing.T) {
		c.t = t
		c.fr.WritePriority(c.next+10, http2.PriorityParam{StreamDep: 1, Weight: 1}) // idle: allowed
		c.stillServes()
	})
	for _, late := range []string{"DATA", "HEADERS"} {
		t.Run(late+" after END_STREAM, the call running", func(t *testing.T) {
			c.t = t
			id := c.call("Slow", lengthPrefixed(strMsg("x")))
			time.Sleep(50 * time.Millisecond) // its call runs
			if late == "DATA" {
				c.fr.WriteData(id, true, []byte("late"))
			} else {
				c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock("x-late", "1"), EndHeaders: true, EndStream: true})
			}
			c.expectReset(id, http2.ErrCodeStreamClosed)
			// The stream is reset: its call is cancelled.
			select {
			case err := <-e.ended:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("the call ended with %v, want Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the call of a stream reset for STREAM_CLOSED still runs")
			}
		})
	}
	c.t = t
	c.stillServes()
}

// TestContinuationBounds: a header block ends within maxContinuations
// CONTINUATION frames (empty ones too) and within the block deadline; a
// block in several frames within both is served.
func TestContinuationBounds(t *testing.T) {
	defer func(d, tk time.Duration) { blockDeadline, watchTick = d, tk }(blockDeadline, watchTick)
	blockDeadline, watchTick = 300*time.Millisecond, 25*time.Millisecond
	addr, _ := serve(t, nil)

	c := dial(t, addr)
	c.handshake()
	hb := c.headerBlock(grpcHeaders("Echo", "x-big", strings.Repeat("b", 12000))...)
	id := c.next
	c.next += 2
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb[:10], EndHeaders: false})
	for i := 10; i < len(hb); i += 4000 {
		c.fr.WriteContinuation(id, i+4000 >= len(hb), hb[i:min(i+4000, len(hb))])
	}
	c.sendBody(id, lengthPrefixed(strMsg("split")), true)
	if r, _ := c.read(id); r.status() != 0 {
		t.Fatalf("a header block in 4 frames: %v", r.trailers)
	}

	// Empty CONTINUATION frames, without end.
	c = dial(t, addr)
	c.handshake()
	c.settle()
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: false})
	w := http2.NewFramer(c.nc, nil) // c.fr writes too, as it reads
	go func() {
		for range 1000 {
			if w.WriteContinuation(1, false, nil) != nil {
				return
			}
		}
	}()
	ga := c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 5*time.Second)
	if !strings.Contains(string(ga.DebugData()), "CONTINUATION") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}

	// A block left open: closed by the deadline, with nothing more sent.
	c = dial(t, addr)
	c.handshake()
	c.settle()
	start := time.Now()
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: false})
	ga = c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 5*time.Second)
	if d := time.Since(start); d < blockDeadline || d > blockDeadline+2*time.Second {
		t.Fatalf("an open header block closed after %v, want %v", d, blockDeadline)
	}
	if !strings.Contains(string(ga.DebugData()), "not finished") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}
}

// TestRapidReset: a client that resets the streams it opens is sent
// GOAWAY ENHANCE_YOUR_CALM and closed; one that resets a share of many
// calls is not.
func TestRapidReset(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	hb := c.headerBlock(grpcHeaders("Slow")...)
	w := http2.NewFramer(c.nc, nil) // c.fr writes too, as it reads
	go func() {
		for id := uint32(1); id < 4*maxResets; id += 2 {
			if w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb, EndHeaders: true}) != nil ||
				w.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	ga := c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 10*time.Second)
	if !strings.Contains(string(ga.DebugData()), "rapid reset") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}

	// The calls whole, each reset right after: a fast method answers
	// before the reset is read, and the resets count all the same.
	c = dial(t, addr)
	c.handshake()
	eb := c.headerBlock(grpcHeaders("Echo")...)
	msg := lengthPrefixed(strMsg("x"))
	w = http2.NewFramer(c.nc, nil)
	go func() {
		for id := uint32(1); id < 4*maxResets; id += 2 {
			if w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: eb, EndHeaders: true}) != nil ||
				w.WriteData(id, true, msg) != nil || w.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	ga = c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 10*time.Second)
	if !strings.Contains(string(ga.DebugData()), "rapid reset") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}

	// 300 resets among 1,000 calls: a client that cancels some calls.
	c = dial(t, addr)
	c.handshake()
	for range 20 {
		var ids []uint32
		for range 15 {
			id := c.open(false, grpcHeaders("Slow")...)
			c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		for range 50 {
			ids = append(ids, c.call("Echo", lengthPrefixed(strMsg("x"))))
		}
		rs, ga := c.readAll(ids)
		if ga != nil {
			t.Fatalf("a client resetting 3 calls in 13: GOAWAY %v (%s)", ga, ga.DebugData())
		}
		for id, r := range rs {
			if r.status() != 0 {
				t.Fatalf("a client resetting 3 calls in 13: stream %d answered %v", id, r.trailers)
			}
		}
	}
}

// TestWindowUpdateFlood: WINDOW_UPDATE frames beyond what the server's
// DATA calls for close the connection (Envoy's rule); a client giving
// window back for what it reads is never near it.
func TestWindowUpdateFlood(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	for range 20 { // a few calls: the client's updates may follow their DATA
		c.readAll([]uint32{c.call("Echo", lengthPrefixed(strMsg("y")))})
	}
	w := http2.NewFramer(c.nc, nil)
	go func() {
		for range 10000 {
			if w.WriteWindowUpdate(0, 1) != nil {
				return
			}
		}
	}()
	ga := c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 10*time.Second)
	if !strings.Contains(string(ga.DebugData()), "WINDOW_UPDATE") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}
}

// TestMaxConcurrentStreams: SETTINGS_MAX_CONCURRENT_STREAMS is announced
// (max-concurrent-streams, 250 by default) and honoured: a stream beyond
// it is refused; a stream the client resets gives its slot back at once.
func TestMaxConcurrentStreams(t *testing.T) {
	settingOf := func(c *client) uint32 {
		c.t.Helper()
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				c.t.Fatal(err)
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				v, ok := s.Value(http2.SettingMaxConcurrentStreams)
				if !ok {
					c.t.Fatal("no SETTINGS_MAX_CONCURRENT_STREAMS")
				}
				c.fr.WriteSettingsAck()
				return v
			}
		}
	}
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	if v := settingOf(c); v != defaultMaxStreams {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", v, defaultMaxStreams)
	}

	addr, e := serve(t, map[string]string{keyMaxStreams: "2"})
	c = dial(t, addr)
	c.handshake()
	if v := settingOf(c); v != 2 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want 2", v)
	}
	slow := c.call("Slow", lengthPrefixed(strMsg("a")))
	open := c.open(false, grpcHeaders("Echo")...) // receiving its request: it counts too
	c.expectReset(c.call("Echo", lengthPrefixed(strMsg("c"))), http2.ErrCodeRefusedStream)
	c.fr.WriteRSTStream(slow, http2.ErrCodeCancel)
	c.fr.WriteRSTStream(open, http2.ErrCodeCancel)
	// The slots are free as soon as the resets are read, whether or not
	// the Slow call has returned.
	c.stillServes()
	// Slow ends by its reset; but a reset read before the call was handed
	// to Slow cancels it unrun, and then nothing ends.
	select {
	case <-e.ended:
	case <-time.After(5 * time.Second):
	}
	c.stillServes()
}

// TestConnectionWindowOnConsumption: the connection's window comes back
// only when a request is handed to its call, not as its bytes arrive.
func TestConnectionWindowOnConsumption(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	body := lengthPrefixed(strMsg(strings.Repeat("w", 200<<10)))
	id := c.open(false, grpcHeaders("Echo")...)
	c.sendBody(id, body[:len(body)-100], false)
	c.fr.WritePing(false, [8]byte{1})
	connUpdates := func(until func(http2.Frame) bool) int {
		n := 0
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if w, ok := f.(*http2.WindowUpdateFrame); ok && w.StreamID == 0 {
				n += int(w.Increment)
			}
			if d, ok := f.(*http2.DataFrame); ok && len(d.Data()) > 0 {
				c.fr.WriteWindowUpdate(0, uint32(len(d.Data())))
				c.fr.WriteWindowUpdate(d.StreamID, uint32(len(d.Data())))
			}
			if until(f) {
				return n
			}
		}
	}
	// The PING is answered after the DATA were read.
	if n := connUpdates(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() }); n != h2.ConnRecvWindow-h2.DefaultInitialWindow {
		t.Fatalf("%d bytes of connection window given back for a request not complete (want only the preface's %d)", n-(h2.ConnRecvWindow-h2.DefaultInitialWindow), 0)
	}
	c.fr.WriteData(id, true, body[len(body)-100:])
	n := connUpdates(func(f http2.Frame) bool { h, ok := f.(*http2.MetaHeadersFrame); return ok && h.StreamID == id })
	if n < len(body)-h2.WindowUpdateThreshold {
		t.Fatalf("%d bytes of connection window given back once the %d-byte request went to its call", n, len(body))
	}
}

// TestRequestBodyDeadline: a unary request whose body does not end within
// the body deadline (or its grpc-timeout) is answered DEADLINE_EXCEEDED
// and reset while the connection goes on; a connection that sends nothing
// more is closed.
func TestRequestBodyDeadline(t *testing.T) {
	defer func(d, tk time.Duration) { bodyDeadline, watchTick = d, tk }(bodyDeadline, watchTick)
	bodyDeadline, watchTick = 400*time.Millisecond, 25*time.Millisecond
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	body := lengthPrefixed(strMsg("never finished"))
	for _, extra := range [][]string{nil, {"grpc-timeout", "100m"}} {
		id := c.open(false, grpcHeaders("Echo", extra...)...)
		c.fr.WriteData(id, false, body[:5])
		start := time.Now()
		stop := make(chan struct{})
		pinger := http2.NewFramer(c.nc, nil) // c.fr writes too, as it reads
		// Frames keep coming: the read loop checks on them.
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					pinger.WritePing(false, [8]byte{})
				}
			}
		}()
		r, ga := c.read(id)
		close(stop)
		want := bodyDeadline
		if extra != nil {
			want = 100 * time.Millisecond
		}
		if d := time.Since(start); ga != nil || r.status() != statusDeadlineExceeded || d < want || d > want+2*time.Second {
			t.Fatalf("%v: status %v after %v, GOAWAY %v; want DEADLINE_EXCEEDED after %v", extra, r.trailers, d, ga, want)
		}
	}
	c.stillServes()
	// Silence after a started body: the connection is closed.
	c.open(false, grpcHeaders("Echo")...)
	start := time.Now()
	ga := c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 5*time.Second)
	if d := time.Since(start); d < bodyDeadline || !strings.Contains(string(ga.DebugData()), "request body") {
		t.Fatalf("closed after %v saying %q", d, ga.DebugData())
	}
}

// TestServerBudget: the request bytes a server holds unfinished are
// bounded across its connections; a request past the bound is answered
// RESOURCE_EXHAUSTED, and a closed connection gives its bytes back.
func TestServerBudget(t *testing.T) {
	defer func(b int64) { maxBuffered = b }(maxBuffered)
	maxBuffered = 1 << 20
	addr, _ := serve(t, map[string]string{kernel.KeyPayload: "262144"})
	hog := dial(t, addr)
	hog.handshake()
	chunk := make([]byte, 200<<10)
	chunk[4] = 1 // a message header saying more is coming
	for range 5 {
		hog.sendBody(hog.open(false, grpcHeaders("Echo")...), chunk, false)
	}
	hog.fr.WritePing(false, [8]byte{})
	for { // the hog's DATA were read once its PING is answered
		f, err := hog.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			break
		}
	}
	c := dial(t, addr)
	c.handshake()
	id := c.open(false, grpcHeaders("Echo")...)
	c.sendBody(id, chunk, false)
	r, _ := c.read(id)
	if r.status() != statusResourceExhausted || !strings.Contains(decodeMessage(r.trailers["grpc-message"]), "not yet complete") {
		t.Fatalf("a request past the server's budget: %v", r.trailers)
	}
	hog.nc.Close()
	time.Sleep(200 * time.Millisecond) // the server sees the close
	id = c.open(false, grpcHeaders("Echo")...)
	msg := lengthPrefixed(strMsg(strings.Repeat("z", 200<<10)))
	c.sendBody(id, msg, true)
	if r, _ := c.read(id); r.status() != 0 {
		t.Fatalf("after the hog left: %v", r.trailers)
	}
}

// wireRecorder is a connection that keeps the frames the state sends and
// can say its queue is full or fail its writes.
type wireRecorder struct {
	out     bytes.Buffer
	queued  int // bytes the peer leaves unread: 0, it reads everything
	control int
	sendErr error
	closed  bool
}

func (w *wireRecorder) Send(msg any) error {
	if w.sendErr != nil {
		return w.sendErr
	}
	b, err := (&codec{maxFrame: h2.DefaultMaxFrame}).Encode(nil, msg)
	w.out.Write(b)
	return err
}
func (w *wireRecorder) SendNoWait(msg any) error      { return w.Send(msg) }
func (w *wireRecorder) SendMore(msg any) error        { return w.Send(msg) }
func (w *wireRecorder) CloseGracefully(time.Duration) { w.closed = true }
func (w *wireRecorder) Close() error                  { w.closed = true; return nil }

// CountControl counts as netty.Conn does, with a queue that never drains
// unless queued is 0.
func (w *wireRecorder) CountControl() bool {
	if w.queued == 0 {
		w.control = 0
	}
	w.control++
	return w.control <= maxQueuedControlFrames
}
func (w *wireRecorder) Done() <-chan struct{} { return nil }

// feed runs frames through sc as the read loop does.
func feed(t *testing.T, sc *serverConn, data []byte) {
	t.Helper()
	cd := &codec{maxFrame: h2.DefaultMaxFrame, maxBody: 1 << 16}
	for len(data) > 0 {
		msg, n, err := cd.Decode(data)
		if err != nil || n == 0 {
			t.Fatalf("decode: %v (%d bytes left)", err, len(data))
		}
		frameBytes := append([]byte(nil), data[:n]...)
		if fr, ok := msg.(*h2.Frame); ok {
			fr.Payload = frameBytes[h2.FrameHeaderLen:]
		}
		data = data[n:]
		if req := sc.received(msg); req != nil {
			sc.done(req.Data.(*serverCall).st)
		}
	}
}

// TestControlFrameFlood: a peer that makes the server answer frames it
// never reads (PINGs here) is closed once 10,000 answers are queued; one
// that reads them is not.
func TestControlFrameFlood(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&in, nil)
	fr.WriteSettings()
	for range maxQueuedControlFrames + 10 {
		fr.WritePing(false, [8]byte{})
	}
	for _, queued := range []int{0, 100} {
		w := &wireRecorder{queued: queued}
		sc := newServerConn(&framing{payload: 1 << 16}, w)
		feed(t, sc, in.Bytes())
		ga := lastGoAway(t, w.out.Bytes())
		if queued == 0 && (w.closed || ga != nil) {
			t.Fatalf("a peer reading its PING answers was closed (GOAWAY %v)", ga)
		}
		if queued > 0 && (!w.closed || ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm) {
			t.Fatalf("a peer not reading 10,000 PING answers: closed %v, GOAWAY %v", w.closed, ga)
		}
		sc.disconnected()
	}
}

// lastGoAway is the GOAWAY among frames, if any.
func lastGoAway(t *testing.T, b []byte) *http2.GoAwayFrame {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	var ga *http2.GoAwayFrame
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return ga
		}
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			ga = g
		}
	}
}

// TestFailedSendCloses: a connection that cannot take the server's frames
// (its write queue over the transport's bound) is closed.
func TestFailedSendCloses(t *testing.T) {
	w := &wireRecorder{sendErr: errors.New("write queue over 16 MiB: the peer does not read")}
	sc := newServerConn(&framing{payload: 1 << 16}, w)
	feed(t, sc, []byte(http2.ClientPreface))
	if !w.closed {
		t.Fatal("a failed send left the connection open")
	}
	sc.disconnected()
}

// BenchmarkServerUnary is the server's HTTP/2 work for one unary call as
// grpc-go sends it (HEADERS, then DATA with END_STREAM), without the
// network or the call: go test -bench ServerUnary -benchmem.
func BenchmarkServerUnary(b *testing.B) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/" + iface + "/Echo"},
		{":authority", "127.0.0.1:50051"}, {"content-type", "application/grpc"}, {"user-agent", "grpc-go/1.70.0"},
		{"te", "trailers"}, {"grpc-timeout", "4999m"}, {"x-trace-id", "0af7651916cd43dd8448eb211c80319c"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	block := hb.Bytes()
	body := lengthPrefixed(strMsg(strings.Repeat("x", 1024)))
	w := &wireRecorder{}
	sc := newServerConn(&framing{payload: 1 << 20}, w)
	feed(&testing.T{}, sc, append([]byte(http2.ClientPreface), 0, 0, 0, h2.FrameSettings, 0, 0, 0, 0, 0))
	cd := &codec{maxFrame: h2.DefaultMaxFrame}
	var frames []byte
	id := uint32(1)
	b.ReportAllocs()
	for b.Loop() {
		frames = h2.AppendFrameHeader(frames[:0], len(block), h2.FrameHeaders, h2.FlagEndHeaders, id)
		frames = append(frames, block...)
		frames = h2.AppendFrameHeader(frames, len(body), h2.FrameData, h2.FlagEndStream, id)
		frames = append(frames, body...)
		id += 2
		for data := frames; len(data) > 0; {
			msg, n, _ := cd.Decode(data)
			data = data[n:]
			if req := sc.received(msg); req != nil {
				sc.done(req.Data.(*serverCall).st)
			}
		}
		w.out.Reset()
	}
}

// TestSettingsFlood: a peer sending SETTINGS frames without end (each
// answered with an ACK, CVE-2019-9515) gets GOAWAY ENHANCE_YOUR_CALM past
// maxSettingsPerSecond in a second, whether it reads the ACKs or not.
func TestSettingsFlood(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	// The handshake sent one: this many more is one over, and nothing
	// follows the last (a frame after the close would reset the GOAWAY).
	for range maxSettingsPerSecond {
		c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
	}
	ga := c.expectGoAway(http2.ErrCodeEnhanceYourCalm, 10*time.Second)
	if !strings.Contains(string(ga.DebugData()), "SETTINGS") {
		t.Fatalf("GOAWAY says %q", ga.DebugData())
	}
}
