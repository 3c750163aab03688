package triple

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// The client side: a consumer's calls go out as HTTP/2 streams on the
// exchange client's connection. The codec encodes a call (HEADERS and its
// message as DATA) on the caller's goroutine; Sequence, under the
// connection's write lock, gives it the next stream id (ids must rise in
// the order they reach the wire) and what the flow-control windows allow,
// keeping the rest of a large message for the read loop to send as the
// server's WINDOW_UPDATEs arrive. The read loop runs the server's frames
// through the connection's state (clientConn) and hands the exchange client
// one Response per finished stream.

// clientCall is a call on its way out.
type clientCall struct {
	headers []byte        // the header block
	msg     []byte        // the length-prefixed message; nil for a client or bidi stream
	reqID   uint64        // set by Sequence, on the caller's goroutine
	stream  *clientStream // a streaming call's
}

// clientCodec is one exchange client's codec: its connections' state is in
// their attributes, the calls in flight in calls.
type clientCodec struct {
	codec
	mu    sync.Mutex
	calls map[uint64]*cstream // by request id
}

// cstream is one call's stream, seen from the client.
type cstream struct {
	cc      *clientConn
	id      uint32
	reqID   uint64
	headers []hpack.HeaderField
	trailer []hpack.HeaderField
	data    []byte
	unacked h2.Unacked

	// Under cc.mu: what is left to send and the stream's send window.
	rest       []byte
	sendWindow int64

	stream *clientStream // a streaming call's: its answers go there
}

// Encode appends a call's frames with stream id 0 (Sequence sets it) and
// its message as DATA of at most 16 KiB (any peer takes those).
func (c *clientCodec) Encode(dst []byte, msg any) ([]byte, error) {
	req, ok := msg.(*netty.Request)
	if !ok {
		return c.codec.Encode(dst, msg)
	}
	call, ok := req.Data.(*clientCall)
	if !ok {
		if req.Event {
			// The exchange client's heartbeat: an HTTP/2 PING, whose ACK
			// (any read) keeps the connection alive.
			return h2.AppendPing(dst, req.ID), nil
		}
		return dst, fmt.Errorf("weft: triple: cannot encode a request of %T", req.Data)
	}
	dst = h2.AppendHeaders(dst, 0, call.headers, h2.DefaultMaxFrame, false)
	if call.msg == nil {
		return dst, nil // a stream of requests: they follow (clientStream.SendMsg)
	}
	return h2.AppendData(dst, 0, call.msg, h2.DefaultMaxFrame, true), nil
}

// Decode is codec's, but a GOAWAY with an error code (a server ending the
// connection for an error: a TLS port this client called in plaintext, a
// client it found abusive) ends the connection at once with the server's
// reason as its cause, which the exchange client gives to the calls in
// flight and to those that find the connection closed. Nothing is lost by
// not waiting: after such a GOAWAY the server closes the connection (RFC
// 9113 §5.4.1), and what it sent before was read before it.
func (c *clientCodec) Decode(src []byte) (any, int, error) {
	msg, n, err := c.codec.Decode(src)
	if f, ok := msg.(*h2.Frame); ok && f.Type == h2.FrameGoAway && f.Stream == 0 && h2.Check(f) == nil {
		if g := h2.ParseGoAway(f); g.Code != h2.CodeNo {
			return nil, 0, &netty.FrameError{Close: true, Msg: f, Err: errors.New(goAwayText(g.Code, g.Debug))}
		}
	}
	return msg, n, err
}

// goAwayText says what an error GOAWAY said; the server's text goes into
// errors and logs, so its control characters do not.
func goAwayText(code uint32, debug string) string {
	debug = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(debug, "?"))
	if debug == "" {
		return fmt.Sprintf("the server closed the connection with GOAWAY %s", h2.CodeName(code))
	}
	return fmt.Sprintf("the server closed the connection with GOAWAY %s: %s", h2.CodeName(code), debug)
}

// Sequence numbers a call's stream and sends what the windows allow.
func (c *clientCodec) Sequence(conn *netty.Conn, msg any, frame []byte) []byte {
	req, ok := msg.(*netty.Request)
	if !ok || req.Event {
		return frame
	}
	cc := clientStateOf(conn)
	if cc == nil {
		return frame
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.draining || cc.nextStream >= 1<<31-1 {
		// The server said GOAWAY (or the ids ran out): nothing new goes
		// on this connection; the call fails, retryable, at once, with
		// the server's reason when it gave one.
		err := kernel.Errorf(kernel.CodeNetwork, "connection to %s is closing (the provider sent GOAWAY); retry on another provider", conn.RemoteAddrString())
		if cc.goAwayWhy != "" {
			err = kernel.Errorf(kernel.CodeNetwork, "provider %s did not take the call: %s", conn.RemoteAddrString(), cc.goAwayWhy)
		}
		go c.refuse(conn, req.ID, err)
		return frame[:0]
	}
	id := cc.nextStream
	cc.nextStream += 2
	req.Data.(*clientCall).reqID = req.ID
	st := &cstream{cc: cc, id: id, reqID: req.ID, sendWindow: cc.win.Initial}
	cc.streams[id] = st
	if cs := req.Data.(*clientCall).stream; cs != nil {
		st.stream, cs.st, cs.cc = cs, st, cc
		close(cs.ready)
	}
	c.mu.Lock()
	c.calls[req.ID] = st
	c.mu.Unlock()
	// Set the stream id in every frame, and stop at the first DATA the
	// windows do not hold.
	for p := 0; p < len(frame); {
		n := int(frame[p])<<16 | int(frame[p+1])<<8 | int(frame[p+2])
		binary.BigEndian.PutUint32(frame[p+5:], id)
		if frame[p+3] == h2.FrameData {
			allowed := int(cc.win.Take(&st.sendWindow, int64(n)))
			if allowed < n {
				// Keep the rest of the message, this frame's remainder
				// first, for windowUpdate to send.
				st.rest = append([]byte(nil), frame[p+h2.FrameHeaderLen+allowed:p+h2.FrameHeaderLen+n]...)
				for q := p + h2.FrameHeaderLen + n; q < len(frame); {
					m := int(frame[q])<<16 | int(frame[q+1])<<8 | int(frame[q+2])
					st.rest = append(st.rest, frame[q+h2.FrameHeaderLen:q+h2.FrameHeaderLen+m]...)
					q += h2.FrameHeaderLen + m
				}
				if allowed == 0 {
					return frame[:p]
				}
				frame[p], frame[p+1], frame[p+2] = byte(allowed>>16), byte(allowed>>8), byte(allowed)
				frame[p+4] &^= h2.FlagEndStream
				return frame[:p+h2.FrameHeaderLen+allowed]
			}
		}
		p += h2.FrameHeaderLen + n
	}
	return frame
}

// refuse fails a call that was not sent.
func (c *clientCodec) refuse(conn *netty.Conn, reqID uint64, err error) {
	if cc := clientStateOf(conn); cc != nil {
		cc.f.ec.Received(conn, &netty.Response{ID: reqID, Status: kernel.ResponseOK, Data: &clientReply{err: err}})
	}
}

// forget drops a finished call.
func (c *clientCodec) forget(st *cstream) {
	c.mu.Lock()
	if c.calls[st.reqID] == st {
		delete(c.calls, st.reqID)
	}
	c.mu.Unlock()
}

// cancel resets the stream of a call the consumer gave up on, so that the
// provider stops working on it.
func (c *clientCodec) cancel(reqID uint64) {
	c.mu.Lock()
	st := c.calls[reqID]
	delete(c.calls, reqID)
	c.mu.Unlock()
	if st == nil {
		return
	}
	cc := st.cc
	cc.mu.Lock()
	_, open := cc.streams[st.id]
	delete(cc.streams, st.id)
	cc.mu.Unlock()
	if open {
		cc.conn.Send(rawFrames(h2.AppendRST(nil, st.id, h2.CodeCancel)))
	}
}

type clientKey struct{}

func clientStateOf(conn netty.StatefulChannel) *clientConn {
	v, _ := conn.Attr(clientKey{})
	cc, _ := v.(*clientConn)
	return cc
}

// clientFraming is the client's HTTP/2 connection layer.
type clientFraming struct {
	ec      *netty.ExchangeClient
	codec   *clientCodec
	payload int
}

// Connected sends the client preface and SETTINGS, the first bytes on the
// connection.
func (f *clientFraming) Connected(ch extension.Channel) {
	conn := ch.(netty.StatefulChannel)
	cc := &clientConn{f: f, conn: conn, nextStream: 1, streams: map[uint32]*cstream{}, win: h2.NewSendWindows()}
	cc.cond.L = &cc.mu
	cc.dec = h2.NewDecoder(4096, h2.MaxHeaderListSize)
	conn.SetAttr(clientKey{}, cc)
	b := append([]byte(nil), h2.ClientPreface...)
	b = h2.AppendSettings(b,
		h2.SettingEnablePush, 0,
		h2.SettingInitialWindowSize, h2.RecvWindow,
		h2.SettingMaxHeaderListSize, h2.MaxHeaderListSize)
	b = h2.AppendWindowUpdate(b, 0, h2.ConnRecvWindow-h2.DefaultInitialWindow)
	conn.Send(rawFrames(b))
	f.ec.Connected(ch)
}

// Disconnected fails the connection's calls (the exchange client does).
func (f *clientFraming) Disconnected(ch extension.Channel) {
	if cc := clientStateOf(ch.(netty.StatefulChannel)); cc != nil {
		cc.mu.Lock()
		streams := cc.streams
		cc.streams = map[uint32]*cstream{}
		cc.closed = true
		cc.cond.Broadcast()
		cc.mu.Unlock()
		for _, st := range streams {
			f.codec.forget(st)
		}
	}
	f.ec.Disconnected(ch)
}

func (f *clientFraming) Caught(ch extension.Channel, err error) { f.ec.Caught(ch, err) }

func (f *clientFraming) Received(ch extension.Channel, msg any) {
	cc := clientStateOf(ch.(netty.StatefulChannel))
	if cc == nil {
		return
	}
	switch m := msg.(type) {
	case *h2.ConnError:
		cc.failOn(m)
	case *h2.Frame:
		cc.frame(m)
		h2.Release(m)
	}
}

// clientConn is one client connection's HTTP/2 state: the read loop owns
// the fields above mu.
type clientConn struct {
	f    *clientFraming
	conn netty.StatefulChannel
	dec  *h2.Decoder

	goneAway    bool
	connUnacked h2.Unacked
	block       h2.HeaderBlock

	mu         sync.Mutex
	cond       sync.Cond // on mu: the windows opened, or a stream or the connection ended
	closed     bool
	draining   bool   // GOAWAY came: no new stream
	goAwayWhy  string // an error GOAWAY's goAwayText
	nextStream uint32
	streams    map[uint32]*cstream
	win        h2.SendWindows
}

func (cc *clientConn) send(b []byte) { cc.conn.Send(rawFrames(b)) }

// fail closes a connection that broke HTTP/2, saying why with GOAWAY; its
// calls fail with the reason, and the exchange client reconnects.
func (cc *clientConn) fail(code uint32, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !cc.goneAway {
		cc.goneAway = true
		cc.send(h2.AppendGoAway(nil, 0, code, msg))
	}
	cc.conn.CloseGracefully(100 * time.Millisecond)
}

func (cc *clientConn) failOn(e *h2.ConnError) { cc.fail(e.Code, "%s", e.Msg) }

func (cc *clientConn) stream(id uint32) *cstream {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.streams[id]
}

func (cc *clientConn) frame(f *h2.Frame) {
	if e := cc.block.Admit(f); e != nil {
		cc.failOn(e)
		return
	}
	switch f.Type {
	case h2.FrameSettings:
		cc.settings(f)
	case h2.FrameHeaders:
		p, ok := h2.Payload(f)
		if !ok || f.Stream == 0 {
			cc.fail(h2.CodeProtocol, "malformed HEADERS")
			return
		}
		if cc.block.Start(f, p) {
			cc.endBlock()
		}
	case h2.FrameContinuation:
		if e := cc.block.CheckContinuation(f); e != nil {
			cc.failOn(e)
			return
		}
		if cc.block.Continue(f) {
			cc.endBlock()
		}
	case h2.FrameData:
		cc.data(f)
	case h2.FrameWindowUpdate:
		cc.windowUpdate(f)
	case h2.FramePing:
		if ack := h2.PingAck(f); ack != nil {
			cc.send(ack)
		}
	case h2.FrameRSTStream:
		if st := cc.stream(f.Stream); st != nil {
			cc.finish(st, resetError(h2.ResetCode(f), cc.conn.RemoteAddrString()))
		}
	case h2.FrameGoAway:
		cc.goAway(f)
	case h2.FramePushPromise:
		cc.fail(h2.CodeProtocol, "PUSH_PROMISE, which this client disabled")
	}
}

func (cc *clientConn) settings(f *h2.Frame) {
	if f.Flags&h2.FlagAck != 0 {
		return
	}
	ps := h2.ParseSettings(f)
	cc.mu.Lock()
	if delta := cc.win.Apply(ps); ps.HasWindow {
		for _, st := range cc.streams {
			st.sendWindow += delta
		}
		cc.cond.Broadcast()
	}
	cc.mu.Unlock()
	if ps.HasWindow {
		cc.pump()
	}
	cc.send(h2.AppendSettingsAck(nil))
}

func (cc *clientConn) windowUpdate(f *h2.Frame) {
	inc := h2.WindowIncrement(f)
	ok := true
	cc.mu.Lock()
	if f.Stream == 0 {
		ok = cc.win.Open(inc)
	} else if st := cc.streams[f.Stream]; st != nil {
		st.sendWindow += inc
	}
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if !ok {
		cc.fail(h2.CodeFlowControl, "connection window over 2^31-1")
		return
	}
	cc.pump()
}

// pump sends what the windows now allow of the messages waiting for them.
func (cc *clientConn) pump() {
	var out []byte
	cc.mu.Lock()
	for _, st := range cc.streams {
		n := int(cc.win.Take(&st.sendWindow, int64(len(st.rest))))
		if n == 0 {
			continue
		}
		out = h2.AppendData(out, st.id, st.rest[:n], cc.win.MaxFrame, n == len(st.rest))
		st.rest = st.rest[n:]
	}
	cc.mu.Unlock()
	if len(out) > 0 {
		cc.send(out)
	}
}

func (cc *clientConn) goAway(f *h2.Frame) {
	g := h2.ParseGoAway(f)
	cc.goneAway = true
	// Streams the server did not take are failed now, retryable on
	// another provider; the others finish; the connection then closes and
	// the exchange client reconnects.
	cc.mu.Lock()
	var refused []*cstream
	for id, st := range cc.streams {
		if id > g.Last {
			refused = append(refused, st)
		}
	}
	cc.draining = true
	if g.Code != h2.CodeNo {
		// An error GOAWAY: the server's debug data says why (a TLS port
		// this plaintext client called, say).
		cc.goAwayWhy = goAwayText(g.Code, g.Debug)
	}
	why := cc.goAwayWhy
	cc.mu.Unlock()
	for _, st := range refused {
		if why != "" {
			cc.finish(st, kernel.Errorf(kernel.CodeNetwork, "provider %s did not take the call: %s", cc.conn.RemoteAddrString(), why))
			continue
		}
		cc.finish(st, kernel.Errorf(kernel.CodeNetwork, "provider %s is going away (GOAWAY code %d %q) and did not take the call; retry on another provider",
			cc.conn.RemoteAddrString(), g.Code, g.Debug))
	}
	if why != "" {
		return // the read loop closes the connection, with why (Decode)
	}
	cc.closeIfDrained()
	// A server that never finishes its streams does not keep the
	// connection: each call ends by its own deadline anyway.
	time.AfterFunc(drainMax, func() { cc.conn.Close() })
}

// drainMax bounds how long a connection the server said GOAWAY on stays
// open for the calls it took.
const drainMax = time.Minute

// closeIfDrained closes a connection the server said GOAWAY on once its
// last stream ended; the exchange client then reconnects.
func (cc *clientConn) closeIfDrained() {
	cc.mu.Lock()
	// After an error GOAWAY the read loop closes the connection itself,
	// with the server's reason as its cause, which a plain Close here
	// would race and lose.
	done := cc.draining && cc.goAwayWhy == "" && len(cc.streams) == 0
	cc.mu.Unlock()
	if done {
		go cc.conn.Close()
	}
}

func (cc *clientConn) endBlock() {
	end := cc.block.End
	id, err := cc.block.Decode(cc.dec, nil)
	if err != nil {
		cc.fail(h2.CodeProtocol, "HPACK: %v", err)
		return
	}
	st := cc.stream(id)
	if st == nil {
		return // a call given up on
	}
	if cc.block.Over {
		cc.finish(st, kernel.Errorf(kernel.CodeSerialization, "response headers over %d bytes", h2.MaxHeaderListSize))
		return
	}
	fields := append([]hpack.HeaderField(nil), cc.block.Fields...)
	if st.headers == nil && !end {
		st.headers = fields
		return
	}
	if st.headers == nil {
		st.headers = fields // trailers only
	}
	st.trailer = fields
	if !end {
		cc.finish(st, kernel.Errorf(kernel.CodeSerialization, "trailers without END_STREAM"))
		return
	}
	cc.finish(st, nil)
}

func (cc *clientConn) data(f *h2.Frame) {
	n := len(f.Payload)
	if k := cc.connUnacked.Consume(n); k > 0 {
		cc.send(h2.AppendWindowUpdate(nil, 0, k))
	}
	st := cc.stream(f.Stream)
	if st == nil {
		return
	}
	p, ok := h2.Payload(f)
	if !ok {
		cc.fail(h2.CodeProtocol, "DATA with bad padding")
		return
	}
	if st.stream != nil {
		// A streaming call's answers: the window comes back as the
		// consumer receives them (clientStream.RecvMsg).
		if !st.stream.data(p) {
			cc.send(h2.AppendRST(nil, st.id, h2.CodeCancel))
			cc.finish(st, kernel.Errorf(kernel.CodeLimitExceeded, "the provider sent more than the consumer received (over twice the payload limit of %d bytes waiting, or a message over it)", cc.f.payload))
			return
		}
		if f.Flags&h2.FlagEndStream != 0 {
			cc.finish(st, kernel.Errorf(kernel.CodeSerialization, "stream ended without trailers (no grpc-status)"))
		}
		return
	}
	if len(st.data)+len(p) > cc.f.payload+5 {
		cc.send(h2.AppendRST(nil, st.id, h2.CodeCancel))
		cc.finish(st, kernel.Errorf(kernel.CodeSerialization, "response message over the payload limit of %d bytes; raise payload on the consumer", cc.f.payload))
		return
	}
	st.data = append(st.data, p...)
	if f.Flags&h2.FlagEndStream != 0 {
		if s := header(st.headers, ":status"); s != "" && s != "200" {
			// Not a gRPC answer (a server's 404 page for an unknown
			// path, a proxy's error): the status comes from the HTTP
			// one, as gRPC's http-grpc-status-mapping says. dubbo-go's
			// Triple server answers an unknown method so.
			cc.finish(st, httpStatusError(s, cc.conn.RemoteAddrString()))
			return
		}
		cc.finish(st, kernel.Errorf(kernel.CodeSerialization, "response ended without trailers (no grpc-status)"))
		return
	}
	if k := st.unacked.Consume(n); k > 0 {
		cc.send(h2.AppendWindowUpdate(nil, st.id, k))
	}
}

// finish ends a stream and hands its response to the exchange client.
func (cc *clientConn) finish(st *cstream, err error) {
	cc.mu.Lock()
	delete(cc.streams, st.id)
	cc.cond.Broadcast()
	cc.mu.Unlock()
	cc.f.codec.forget(st)
	cc.f.ec.Received(cc.conn, &netty.Response{ID: st.reqID, Status: kernel.ResponseOK,
		Data: &clientReply{headers: st.headers, trailers: st.trailer, data: st.data, err: err}})
	cc.closeIfDrained()
}

// clientReply is a finished stream.
type clientReply struct {
	headers, trailers []hpack.HeaderField
	data              []byte
	err               error
}

// resetError is the error of a stream the server reset.
func resetError(code uint32, addr string) error {
	switch code {
	case h2.CodeRefusedStream:
		return kernel.Errorf(kernel.CodeNetwork, "provider %s refused the stream (REFUSED_STREAM): it did not start the call; retry on another provider", addr)
	case h2.CodeCancel:
		return kernel.Errorf(kernel.CodeNetwork, "provider %s canceled the call (RST_STREAM CANCEL)", addr)
	case h2.CodeEnhanceYourCalm:
		return kernel.Errorf(kernel.CodeLimitExceeded, "provider %s reset the stream: ENHANCE_YOUR_CALM", addr)
	}
	return kernel.Errorf(kernel.CodeNetwork, "provider %s reset the stream (HTTP/2 error %d)", addr, code)
}

// httpStatusError maps a response that is not :status 200 (a proxy, a
// server that is no gRPC one), as gRPC does.
func httpStatusError(status, addr string) error {
	n, _ := strconv.Atoi(status)
	switch n {
	case 400:
		return kernel.Errorf(kernel.CodeSerialization, "%s answered HTTP %s: not a gRPC response", addr, status)
	case 401, 403:
		return kernel.Errorf(kernel.CodeForbidden, "%s answered HTTP %s", addr, status)
	case 404:
		return kernel.Errorf(kernel.CodeMethodNotFound, "%s answered HTTP 404: no such gRPC method there", addr)
	case 429, 502, 503, 504:
		return kernel.Errorf(kernel.CodeNetwork, "%s answered HTTP %s; retry", addr, status)
	}
	return kernel.Errorf(kernel.CodeUnknown, "%s answered HTTP %q: not a gRPC response", addr, status)
}
