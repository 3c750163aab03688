package triple

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	netty "github.com/weftrpc/weft/transport-netty"
)

// framing is the server's HTTP/2 connection layer, between the transport
// and the exchange server: it runs each connection's HTTP/2 state on its
// read loop and hands the exchange server one Request per complete unary
// call, whose answer the codec writes as the stream's response. The
// exchange server keeps doing what it does for the dubbo protocol: the
// `threads` bound, serving inline, status 100 (here RESOURCE_EXHAUSTED),
// graceful stop.
type framing struct {
	es      *netty.ExchangeServer
	srv     *server
	payload int // the largest request message
}

type connKey struct{}

func (f *framing) state(ch extension.Channel) *serverConn {
	v, _ := ch.(*netty.Conn).Attr(connKey{})
	sc, _ := v.(*serverConn)
	return sc
}

// Connected makes the connection's state; the server's preface waits for
// the client's (serverConn.preface).
func (f *framing) Connected(ch extension.Channel) {
	c := ch.(*netty.Conn)
	c.SetAttr(connKey{}, newServerConn(f, c))
}

func newServerConn(f *framing, w wire) *serverConn {
	sc := &serverConn{f: f, conn: w, streams: map[uint32]*stream{}, inflight: map[uint32]*stream{},
		peerWindow: defaultInitialWindow, peerMaxFrame: defaultMaxFrame, sendWindow: defaultInitialWindow}
	sc.cond = sync.NewCond(&sc.mu)
	sc.dec = newHPACKDecoder(4096, maxHeaderListSize)
	return sc
}

// preface answers the client's preface with the server's (its SETTINGS),
// and opens the connection's receive window beyond HTTP/2's 64 KiB. Not
// before: a client that speaks HTTP/1.1 gets no HTTP/2 bytes.
func (sc *serverConn) preface() {
	b := appendSettings(nil,
		settingMaxConcurrentStreams, maxStreams,
		settingInitialWindowSize, recvWindow,
		settingMaxFrameSize, defaultMaxFrame,
		settingMaxHeaderListSize, maxHeaderListSize)
	b = appendWindowUpdate(b, 0, connRecvWindow-defaultInitialWindow)
	sc.send(b)
}

// Disconnected ends the connection's calls: their answers have nowhere to go.
func (f *framing) Disconnected(ch extension.Channel) {
	if sc := f.state(ch); sc != nil {
		sc.mu.Lock()
		sc.closed = true
		for _, st := range sc.inflight {
			st.cancel()
		}
		sc.cond.Broadcast()
		sc.mu.Unlock()
	}
	f.es.Disconnected(ch)
}

func (f *framing) Caught(ch extension.Channel, err error) { f.es.Caught(ch, err) }

// Received runs a frame through the connection's state and hands a call it
// completes to the exchange server's pool; a call offered inline and
// declined (every thread busy) comes back here too.
func (f *framing) Received(ch extension.Channel, msg any) {
	c := ch.(*netty.Conn)
	if req, ok := msg.(*netty.Request); ok {
		f.es.Dispatch(c, req, false)
		return
	}
	if sc := f.state(ch); sc != nil {
		if req := sc.received(msg); req != nil {
			f.es.Dispatch(c, req, false)
		}
	}
}

// Prepare runs the read loop's last frame through the connection's state
// and returns the call it completes, for the read loop to offer inline
// (netty.Preparer): the state is never touched during a takeover.
func (f *framing) Prepare(c *netty.Conn, msg any) any {
	if sc := f.state(c); sc != nil {
		if req := sc.received(msg); req != nil {
			return req
		}
	}
	return nil
}

// Inline serves a call Prepare returned on the read loop when a thread is
// free (netty.Inliner).
func (f *framing) Inline(c *netty.Conn, msg any) bool {
	return f.es.Dispatch(c, msg.(*netty.Request), true)
}

// GoingAway says GOAWAY on a connection of a server that starts to close
// (netty.GoingAway): the client sends no new call here, the calls it sent
// finish, and a stream it opened meanwhile is refused (REFUSED_STREAM:
// retryable elsewhere, it never started).
func (f *framing) GoingAway(c *netty.Conn) {
	if sc := f.state(c); sc != nil && !sc.stopping.Swap(true) {
		last := sc.maxSeen.Load()
		sc.stopLast.Store(last)
		sc.send(appendGoAway(nil, last, errNo, "server stopping"))
	}
}

// maxStreams is our SETTINGS_MAX_CONCURRENT_STREAMS: the calls one
// connection may have open, well above `threads` (beyond which calls are
// answered RESOURCE_EXHAUSTED at once) and bounding what a client may make
// the server hold.
const maxStreams = 1000

// maxBuffered bounds the request bytes a connection holds in streams not
// yet complete.
const maxBuffered = 64 << 20

// wire is what the state needs of its connection (a *netty.Conn; the fuzz
// target's recorder).
type wire interface {
	Send(msg any) error
	CloseGracefully(wait time.Duration)
}

// serverConn is one connection's HTTP/2 state. The read loop owns the
// fields above mu; the goroutines answering calls share those below it.
type serverConn struct {
	f    *framing
	conn wire
	dec  *hpackDecoder

	gotPreface, gotSettings bool
	goneAway                bool
	streams                 map[uint32]*stream // receiving their request
	maxStream               uint32             // the highest stream a client opened
	maxSeen                 atomic.Uint32      // maxStream, for GoingAway
	stopping                atomic.Bool        // GOAWAY sent by GoingAway
	stopLast                atomic.Uint32      // the last stream it lets finish
	buffered                int                // bytes held by streams
	connUnacked             int                // bytes received, not yet given back by WINDOW_UPDATE

	// The header block being read (HEADERS, then CONTINUATION frames).
	block       []byte
	blockStream uint32
	blockEnd    bool // the HEADERS had END_STREAM
	fields      []hpack.HeaderField
	fieldsSize  int
	fieldsOver  bool
	ready       *netty.Request // the call the frame being run completed
	h1          *http1Conn     // an HTTP/1.1 connection's answers

	mu           sync.Mutex
	cond         *sync.Cond
	closed       bool
	inflight     map[uint32]*stream // requests complete, answers not yet sent
	sendWindow   int64              // the connection's, given by the peer
	peerWindow   int64              // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame int
}

// stream is one call.
type stream struct {
	id      uint32
	sc      *serverConn
	headers []hpack.HeaderField
	data    []byte
	unacked int          // bytes received, not yet given back by WINDOW_UPDATE
	window  atomic.Int64 // what the client may still send on it (a streaming method gives it back as it receives)

	ss   *serverStream // a client- or bidi-streaming call's, served from its HEADERS
	kind kernel.StreamKind
	exp  *exporter // the service it calls, as the read loop found it

	// Shared, under sc.mu.
	sendWindow int64
	reset      bool
	cc         *kernel.CallContext // the call's, once it runs
}

func (st *stream) wasReset() bool {
	st.sc.mu.Lock()
	defer st.sc.mu.Unlock()
	return st.reset
}

func (st *stream) cancel() {
	st.reset = true
	if st.cc != nil {
		st.cc.Cancel()
	}
	if st.ss != nil {
		st.ss.fail(kernel.Errorf(kernel.CodeNetwork, "the client reset the stream"))
	}
}

func (sc *serverConn) field(f hpack.HeaderField) {
	sc.fieldsSize += len(f.Name) + len(f.Value) + 32
	if sc.fieldsSize > maxHeaderListSize {
		sc.fieldsOver = true
		return
	}
	sc.fields = append(sc.fields, f)
}

func (sc *serverConn) send(b []byte) { sc.conn.Send(rawFrames(b)) }

// fail ends the connection with GOAWAY code, saying why.
func (sc *serverConn) fail(code uint32, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !sc.goneAway {
		sc.goneAway = true
		sc.send(appendGoAway(nil, sc.maxStream, code, msg))
	}
	sc.conn.CloseGracefully(100 * time.Millisecond)
}

// resetStream answers a stream error with RST_STREAM and forgets the
// stream.
func (sc *serverConn) resetStream(id, code uint32) {
	if st := sc.streams[id]; st != nil {
		sc.forget(st)
	}
	sc.send(appendRST(nil, id, code))
}

// received runs msg through the state and returns the call it completed,
// if any.
func (sc *serverConn) received(msg any) *netty.Request {
	switch m := msg.(type) {
	case preface:
		if sc.gotPreface || sc.h1 != nil {
			sc.fail(errProtocol, "a second connection preface, or one after HTTP/1.1")
			return nil
		}
		sc.gotPreface = true
		sc.preface()
	case *connError:
		sc.fail(m.code, "%s", m.msg)
	case *http1Request:
		return sc.http1(m)
	case *frame:
		if sc.goneAway {
			framePool.Put(m)
			return nil
		}
		if !sc.gotPreface {
			framePool.Put(m)
			sc.fail(errProtocol, "a frame before the connection preface")
			return nil
		}
		sc.frame(m)
		m.payload = nil
		framePool.Put(m)
		req := sc.ready
		sc.ready = nil
		return req
	}
	return nil
}

func (sc *serverConn) frame(f *frame) {
	if !sc.gotSettings && (f.typ != frameSettings || f.flags&flagAck != 0) {
		sc.fail(errProtocol, "the connection must start with SETTINGS")
		return
	}
	if sc.blockStream != 0 && (f.typ != frameContinuation || f.stream != sc.blockStream) {
		sc.fail(errProtocol, "a header block of stream %d not continued by CONTINUATION", sc.blockStream)
		return
	}
	switch f.typ {
	case frameSettings:
		sc.settings(f)
	case frameHeaders:
		sc.headers(f)
	case frameContinuation:
		if sc.blockStream == 0 {
			sc.fail(errProtocol, "CONTINUATION without HEADERS")
			return
		}
		sc.continuation(f)
	case frameData:
		sc.dataFrame(f)
	case frameWindowUpdate:
		sc.windowUpdate(f)
	case framePing:
		if len(f.payload) != 8 {
			sc.fail(errFrameSize, "PING of %d bytes", len(f.payload))
			return
		}
		if f.stream != 0 {
			sc.fail(errProtocol, "PING on stream %d", f.stream)
			return
		}
		if f.flags&flagAck == 0 {
			b := appendFrameHeader(nil, 8, framePing, flagAck, 0)
			sc.send(append(b, f.payload...))
		}
	case frameRSTStream:
		if len(f.payload) != 4 {
			sc.fail(errFrameSize, "RST_STREAM of %d bytes", len(f.payload))
			return
		}
		if f.stream == 0 || f.stream > sc.maxStream {
			sc.fail(errProtocol, "RST_STREAM of idle stream %d", f.stream)
			return
		}
		if st := sc.streams[f.stream]; st != nil {
			sc.forget(st)
		}
		sc.mu.Lock()
		if st := sc.inflight[f.stream]; st != nil {
			st.cancel()
			sc.cond.Broadcast()
		}
		sc.mu.Unlock()
	case framePriority:
		if len(f.payload) != 5 {
			sc.fail(errFrameSize, "PRIORITY of %d bytes", len(f.payload))
		}
	case frameGoAway:
		sc.goneAway = true // the client closes when its calls are done
	case framePushPromise:
		sc.fail(errProtocol, "PUSH_PROMISE from a client")
	}
	// Unknown frame types are ignored (RFC 9113 5.5).
}

func (sc *serverConn) settings(f *frame) {
	if f.flags&flagAck != 0 {
		if len(f.payload) != 0 || f.stream != 0 {
			sc.fail(errFrameSize, "SETTINGS ACK with a payload")
		}
		return
	}
	ps, e := parseSettings(f)
	if e != nil {
		sc.fail(e.code, "%s", e.msg)
		return
	}
	sc.gotSettings = true
	sc.mu.Lock()
	if ps.hasWindow {
		delta := int64(ps.window) - sc.peerWindow
		sc.peerWindow = int64(ps.window)
		for _, st := range sc.inflight {
			st.sendWindow += delta
		}
		sc.cond.Broadcast()
	}
	if ps.hasMaxFrame {
		sc.peerMaxFrame = int(ps.maxFrame)
	}
	sc.mu.Unlock()
	sc.send(appendFrameHeader(nil, 0, frameSettings, flagAck, 0))
}

func (sc *serverConn) windowUpdate(f *frame) {
	if len(f.payload) != 4 {
		sc.fail(errFrameSize, "WINDOW_UPDATE of %d bytes", len(f.payload))
		return
	}
	inc := int64(binary.BigEndian.Uint32(f.payload) & 0x7fffffff)
	if f.stream == 0 {
		if inc == 0 {
			sc.fail(errProtocol, "WINDOW_UPDATE of 0 on the connection")
			return
		}
		sc.mu.Lock()
		sc.sendWindow += inc
		over := sc.sendWindow > maxWindow
		sc.cond.Broadcast()
		sc.mu.Unlock()
		if over {
			sc.fail(errFlowControl, "connection window over 2^31-1")
		}
		return
	}
	sc.mu.Lock()
	st := sc.inflight[f.stream]
	bad := false
	if st != nil {
		st.sendWindow += inc
		if bad = inc == 0 || st.sendWindow > maxWindow; bad {
			st.cancel()
		}
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
	// nil: a stream answered already, or still sending its request (our
	// answer waits for its end).
	if bad {
		sc.send(appendRST(nil, f.stream, errFlowControl))
	}
}

// payloadOf strips a frame's padding (and a HEADERS frame's priority).
func payloadOf(f *frame) ([]byte, bool) {
	p := f.payload
	pad := 0
	if f.flags&flagPadded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		pad = int(p[0])
		p = p[1:]
	}
	if f.typ == frameHeaders && f.flags&flagPriority != 0 {
		if len(p) < 5 {
			return nil, false
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, false
	}
	return p[:len(p)-pad], true
}

func (sc *serverConn) headers(f *frame) {
	if f.stream == 0 || f.stream%2 == 0 {
		sc.fail(errProtocol, "HEADERS on stream %d (a client opens odd streams)", f.stream)
		return
	}
	p, ok := payloadOf(f)
	if !ok {
		sc.fail(errProtocol, "HEADERS with bad padding")
		return
	}
	if st := sc.streams[f.stream]; st == nil {
		if f.stream <= sc.maxStream {
			sc.fail(errStreamClosed, "HEADERS on closed stream %d", f.stream)
			return
		}
		sc.maxStream = f.stream
		sc.maxSeen.Store(f.stream)
	}
	sc.block = append(sc.block[:0], p...)
	sc.blockStream = f.stream
	sc.blockEnd = f.flags&flagEndStream != 0
	if f.flags&flagEndHeaders != 0 {
		sc.endBlock()
	}
}

func (sc *serverConn) continuation(f *frame) {
	if len(sc.block)+len(f.payload) > maxHeaderBlock {
		sc.fail(errEnhanceYourCalm, "a header block over %d bytes", maxHeaderBlock)
		return
	}
	sc.block = append(sc.block, f.payload...)
	if f.flags&flagEndHeaders != 0 {
		sc.endBlock()
	}
}

func (sc *serverConn) endBlock() {
	id := sc.blockStream
	sc.blockStream = 0
	sc.fields, sc.fieldsSize, sc.fieldsOver = sc.fields[:0], 0, false
	if err := sc.dec.decode(sc.block, sc.field); err != nil {
		sc.fail(errProtocol, "HPACK: %v", err)
		return
	}
	if cap(sc.block) > 4096 {
		sc.block = nil
	}
	st := sc.streams[id]
	if st == nil {
		// A new stream.
		if sc.stopping.Load() && id > sc.stopLast.Load() {
			sc.send(appendRST(nil, id, errRefusedStream))
			return
		}
		if len(sc.streams)+sc.inflightCount() >= maxStreams {
			sc.send(appendRST(nil, id, errRefusedStream))
			return
		}
		st = &stream{id: id, sc: sc}
		st.window.Store(recvWindow)
		st.headers = append([]hpack.HeaderField(nil), sc.fields...)
		sc.streams[id] = st
		if sc.fieldsOver {
			sc.answerNow(st, 431, statusResourceExhausted, fmt.Sprintf("request headers over %d bytes", maxHeaderListSize))
			return
		}
		st.kind = sc.kindOf(st)
		if st.kind == kernel.ClientStreaming || st.kind == kernel.BidiStreaming {
			sc.startStream(st)
			if sc.blockEnd && st.ss != nil {
				st.ss.data(nil, true) // no message at all
				sc.forget(st)
			}
			return
		}
		if !sc.blockEnd {
			return
		}
	} else if !sc.blockEnd {
		// Trailers must end the stream.
		sc.resetStream(id, errProtocol)
		return
	} else if st.ss != nil {
		// A streaming call's trailers: its last message was sent.
		st.ss.data(nil, true)
		sc.forget(st)
		return
	}
	sc.complete(st)
}

// kindOf is how the method a request names streams, as its exporter
// published it (kernel.KeyStream); Unary when it is unknown here.
// It keeps the exporter it found for the handler.
func (sc *serverConn) kindOf(st *stream) kernel.StreamKind {
	if sc.f.srv == nil {
		return kernel.Unary
	}
	h := st.headers
	svc, method, ok := splitPath(header(h, ":path"))
	if !ok {
		return kernel.Unary
	}
	if svc == reflectionV1 || svc == reflectionV1alpha {
		return kernel.BidiStreaming // served by the server itself
	}
	e := sc.f.srv.lookup(kernel.ServiceKey(svc, header(h, headerServiceGroup), header(h, headerServiceVersion)))
	if e == nil {
		return kernel.Unary
	}
	st.exp = e
	return kernel.ParseStreamKind(e.invoker.URL().MethodParam(method, kernel.KeyStream))
}

// startStream serves a client- or bidi-streaming call from its HEADERS:
// its messages go to its serverStream as they come.
func (sc *serverConn) startStream(st *stream) {
	all, httpStatus, grpcStatus, msg := newCall(st, true)
	if all == nil {
		sc.answerNow(st, httpStatus, grpcStatus, msg)
		return
	}
	st.ss = newServerStream(st, all.contentType, sc.f.payload)
	all.ss = st.ss
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	st.sendWindow = sc.peerWindow
	sc.inflight[st.id] = st
	sc.mu.Unlock()
	sc.ready = &netty.Request{ID: uint64(st.id), TwoWay: true, Data: all}
}

func (sc *serverConn) inflightCount() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.inflight)
}

func (sc *serverConn) dataFrame(f *frame) {
	n := len(f.payload)
	if sc.connUnacked += n; sc.connUnacked > connRecvWindow {
		sc.fail(errFlowControl, "DATA beyond the connection's window")
		return
	}
	if sc.connUnacked >= windowUpdateThreshold {
		sc.send(appendWindowUpdate(nil, 0, uint32(sc.connUnacked)))
		sc.connUnacked = 0
	}
	st := sc.streams[f.stream]
	if st == nil {
		if f.stream == 0 || f.stream > sc.maxStream {
			sc.fail(errProtocol, "DATA on idle stream %d", f.stream)
			return
		}
		sc.send(appendRST(nil, f.stream, errStreamClosed))
		return
	}
	if st.window.Add(int64(-n)) < 0 {
		sc.resetStream(f.stream, errFlowControl)
		return
	}
	p, ok := payloadOf(f)
	if !ok {
		sc.fail(errProtocol, "DATA with bad padding")
		return
	}
	if st.ss != nil {
		// A streaming call's messages: its window comes back as the
		// method receives them (serverStream.RecvMsg).
		end := f.flags&flagEndStream != 0
		if !st.ss.data(p, end) {
			st.ss.fail(kernel.Errorf(kernel.CodeSerialization, "a stream message over the payload limit of %d bytes", sc.f.payload))
			sc.resetStream(st.id, errCancel)
			return
		}
		if end {
			sc.forget(st)
		}
		return
	}
	if len(st.data)+len(p) > sc.f.payload+5 {
		sc.answerNow(st, 200, statusResourceExhausted,
			fmt.Sprintf("request message over the payload limit of %d bytes; raise payload on the provider or send less", sc.f.payload))
		return
	}
	if sc.buffered+len(p) > maxBuffered {
		sc.answerNow(st, 200, statusResourceExhausted, fmt.Sprintf("the connection holds over %d bytes of requests not yet complete", maxBuffered))
		return
	}
	if st.data == nil && f.flags&flagEndStream != 0 {
		st.data = make([]byte, 0, len(p))
	}
	st.data = append(st.data, p...)
	sc.buffered += len(p)
	if f.flags&flagEndStream != 0 {
		sc.complete(st)
		return
	}
	if st.unacked += n; st.unacked >= windowUpdateThreshold {
		sc.send(appendWindowUpdate(nil, st.id, uint32(st.unacked)))
		st.window.Add(int64(st.unacked))
		st.unacked = 0
	}
}

// http1Base marks the request ids of HTTP/1.1 calls: above any HTTP/2
// stream id.
const http1Base = 1 << 40

// http1 takes an HTTP/1.1 request: the connection is an HTTP/1.1 one from
// its first request on.
func (sc *serverConn) http1(r *http1Request) *netty.Request {
	if sc.gotPreface {
		sc.fail(errProtocol, "an HTTP/1.1 request inside HTTP/2")
		return nil
	}
	if sc.h1 == nil {
		sc.h1 = &http1Conn{}
	}
	seq := sc.h1.next
	sc.h1.next++
	if r.bad != "" {
		sc.h1.deliver(sc.conn, seq, http1Answer(r.badStatus, []byte(fmt.Sprintf(`{"code":%d,"message":%q}`, statusInternal, r.bad)), true), true)
		return nil
	}
	return &netty.Request{ID: http1Base + seq, TwoWay: true, Data: &http1Call{sc: sc, r: r, seq: seq}}
}

// http1Call is an HTTP/1.1 request on its way to be served.
type http1Call struct {
	sc  *serverConn
	r   *http1Request
	seq uint64
}

func (c *http1Call) answer(b []byte) {
	c.sc.h1.deliver(c.sc.conn, c.seq, b, c.r.close)
	if c.r.close {
		c.sc.conn.CloseGracefully(time.Second)
	}
}

// forget drops a stream that was receiving its request, and the bytes it
// held from the connection's count.
func (sc *serverConn) forget(st *stream) {
	if sc.streams[st.id] == st {
		delete(sc.streams, st.id)
		sc.buffered -= len(st.data)
	}
}

// answerNow answers a stream the server will not serve with a
// trailers-only response and resets what is left of it.
func (sc *serverConn) answerNow(st *stream, httpStatus, grpcStatus int, msg string) {
	sc.forget(st)
	b := appendTrailersOnly(nil, st.id, httpStatus, grpcStatus, msg, 0)
	sc.send(appendRST(b, st.id, errNo))
}

// complete makes the call of a stream whose request has ended, for
// received to return.
func (sc *serverConn) complete(st *stream) {
	sc.forget(st)
	c, httpStatus, grpcStatus, msg := newCall(st, false)
	if c == nil {
		sc.answerNow(st, httpStatus, grpcStatus, msg)
		return
	}
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	st.sendWindow = sc.peerWindow
	sc.inflight[st.id] = st
	sc.mu.Unlock()
	sc.ready = &netty.Request{ID: uint64(st.id), TwoWay: true, Data: c}
}

// done forgets an answered stream.
func (sc *serverConn) done(st *stream) {
	sc.mu.Lock()
	delete(sc.inflight, st.id)
	sc.mu.Unlock()
}

// reserve waits until n bytes of DATA may be sent on st, or less when the
// windows hold less than n but more than zero; it returns 0 when the
// stream was reset, the connection closed or ctx ended.
func (sc *serverConn) reserve(ctx context.Context, st *stream, n int) (int, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var stop func() bool
	for !st.reset && !sc.closed && (sc.sendWindow <= 0 || st.sendWindow <= 0) {
		if ctx.Err() != nil {
			return 0, 0
		}
		if stop == nil {
			stop = context.AfterFunc(ctx, func() {
				sc.mu.Lock()
				sc.cond.Broadcast()
				sc.mu.Unlock()
			})
			defer stop()
		}
		sc.cond.Wait()
	}
	if st.reset || sc.closed {
		return 0, 0
	}
	k := int64(n)
	k = min(k, sc.sendWindow, st.sendWindow)
	sc.sendWindow -= k
	st.sendWindow -= k
	return int(k), sc.peerMaxFrame
}

// tryReserve takes n bytes of st's and the connection's send windows if
// both hold them, at once; 0 when they do not (or the stream is gone).
func (sc *serverConn) tryReserve(st *stream, n int) (int, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if st.reset || sc.closed || sc.sendWindow < int64(n) || st.sendWindow < int64(n) {
		return 0, 0
	}
	sc.sendWindow -= int64(n)
	st.sendWindow -= int64(n)
	return n, sc.peerMaxFrame
}

// refund gives back window taken for bytes that were not sent.
func (sc *serverConn) refund(st *stream, n int) {
	sc.mu.Lock()
	sc.sendWindow += int64(n)
	st.sendWindow += int64(n)
	sc.cond.Broadcast()
	sc.mu.Unlock()
}

// maxFrameNow is the peer's SETTINGS_MAX_FRAME_SIZE.
func (sc *serverConn) maxFrameNow() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.peerMaxFrame
}

// header returns the first value of a header field.
func header(fs []hpack.HeaderField, name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// newCall checks a request's headers and message: the call to serve, or the
// HTTP and gRPC status to answer at once.
func newCall(st *stream, streaming bool) (*serverCall, int, int, string) {
	h := st.headers
	if m := header(h, ":method"); m != "POST" {
		return nil, 405, statusInternal, fmt.Sprintf("method %q: gRPC calls are POST", cut(m))
	}
	ct := header(h, "content-type")
	if ct != "application/grpc" && !strings.HasPrefix(ct, "application/grpc+") && !strings.HasPrefix(ct, "application/grpc;") {
		return nil, 415, statusInternal, fmt.Sprintf("content-type %q: Triple over HTTP/2 takes application/grpc[+proto]", cut(ct))
	}
	path := header(h, ":path")
	svc, method, ok := splitPath(path)
	if !ok {
		return nil, 200, statusUnimplemented, fmt.Sprintf("malformed method name %q: want /service/method", cut(path))
	}
	all := &serverCall{call: call{st: st, service: svc, method: method, contentType: ct}}
	c := &all.call
	if v := header(h, "grpc-timeout"); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			return nil, 200, statusInternal, err.Error()
		}
		c.timeout = d
	}
	enc := header(h, "grpc-encoding")
	if streaming {
		return all, 0, 0, ""
	}
	data := st.data
	if len(data) < 5 {
		return nil, 200, statusInternal, fmt.Sprintf("request of %d bytes: a unary call sends one length-prefixed message", len(data))
	}
	n := int(binary.BigEndian.Uint32(data[1:]))
	if n != len(data)-5 {
		return nil, 200, statusInternal, fmt.Sprintf("request message says %d bytes, the stream carried %d: a unary call sends one message", n, len(data)-5)
	}
	switch data[0] {
	case 0:
	case 1:
		if enc == "" || enc == "identity" {
			return nil, 200, statusInternal, "a compressed message without grpc-encoding"
		}
		if enc != "gzip" {
			return nil, 200, statusUnimplemented, fmt.Sprintf("grpc-encoding %q not supported (gzip, identity)", cut(enc))
		}
		c.gzip = true
	default:
		return nil, 200, statusInternal, fmt.Sprintf("message flag %d: 0 or 1", data[0])
	}
	c.msg = data[5:]
	return all, 0, 0, ""
}

// splitPath splits "/package.Service/Method".
func splitPath(p string) (svc, method string, ok bool) {
	if len(p) < 4 || p[0] != '/' {
		return "", "", false
	}
	i := strings.LastIndexByte(p, '/')
	if i <= 1 || i == len(p)-1 {
		return "", "", false
	}
	return p[1:i], p[i+1:], true
}
