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
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
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
	es         *netty.ExchangeServer
	srv        *server
	payload    int // the largest request message
	maxStreams int // our SETTINGS_MAX_CONCURRENT_STREAMS (max-concurrent-streams); 0: defaultMaxStreams

	// buffered counts the request bytes this server's connections hold in
	// streams whose request is not complete yet (and, for a client- or
	// bidi-streaming call, messages its method has not received): a
	// connection's window bounds its own, this the sum over all of them.
	buffered atomic.Int64

	// The bounds, from the package's defaults when the server starts
	// (tests shorten them); zero means the default.
	maxBuffered                            int64
	watchTick, blockDeadline, bodyDeadline time.Duration
}

// keyMaxStreams is the URL parameter of SETTINGS_MAX_CONCURRENT_STREAMS,
// as Dubbo names it (triple max-concurrent-streams).
const keyMaxStreams = "max-concurrent-streams"

// newFraming is the framing of a server exporting on u.
func newFraming(es *netty.ExchangeServer, s *server, u *kernel.URL, payload int) *framing {
	return &framing{es: es, srv: s, payload: payload, maxStreams: int(u.ParamInt(keyMaxStreams, defaultMaxStreams)),
		maxBuffered: maxBuffered, watchTick: watchTick, blockDeadline: blockDeadline, bodyDeadline: bodyDeadline}
}

func (f *framing) streamLimit() int {
	if f.maxStreams <= 0 {
		return defaultMaxStreams
	}
	return f.maxStreams
}

// budget is the most request bytes the server holds unfinished: at least
// two messages at the payload limit, so that one large call always fits.
func (f *framing) budget() int64 {
	least := f.maxBuffered
	if least <= 0 {
		least = maxBuffered
	}
	return max(least, 2*int64(f.payload)+10)
}

type connKey struct{}

func (f *framing) state(c netty.StatefulChannel) *serverConn {
	v, _ := c.Attr(connKey{})
	sc, _ := v.(*serverConn)
	return sc
}

// Connected makes the connection's state; the server's preface waits for
// the client's (serverConn.preface).
func (f *framing) Connected(ch extension.Channel) {
	c := ch.(netty.StatefulChannel)
	c.SetAttr(connKey{}, newServerConn(f, c))
}

func newServerConn(f *framing, w wire) *serverConn {
	sc := &serverConn{f: f, conn: w, streams: map[uint32]*stream{}, inflight: map[uint32]*stream{}, win: h2.NewSendWindows()}
	sc.cond = sync.NewCond(&sc.mu)
	sc.dec = h2.NewDecoder(4096, h2.MaxHeaderListSize)
	sc.hv.reset()
	// The clock of the connection's deadlines, stopped until a header
	// block or a request body is left open (see watchdog).
	sc.timer = time.AfterFunc(time.Hour, sc.watchdog)
	sc.timer.Stop()
	return sc
}

// preface answers the client's preface with the server's (its SETTINGS),
// and opens the connection's receive window beyond HTTP/2's 64 KiB. Not
// before: a client that speaks HTTP/1.1 gets no HTTP/2 bytes.
func (sc *serverConn) preface() {
	b := h2.AppendSettings(nil,
		h2.SettingMaxConcurrentStreams, uint32(sc.f.streamLimit()),
		h2.SettingInitialWindowSize, h2.RecvWindow,
		h2.SettingMaxFrameSize, h2.DefaultMaxFrame,
		h2.SettingMaxHeaderListSize, h2.MaxHeaderListSize)
	b = h2.AppendWindowUpdate(b, 0, h2.ConnRecvWindow-h2.DefaultInitialWindow)
	sc.sendNoWait(b)
}

// Disconnected ends the connection's calls: their answers have nowhere to go.
func (f *framing) Disconnected(ch extension.Channel) {
	if sc := f.state(ch.(netty.StatefulChannel)); sc != nil {
		sc.disconnected()
	}
	f.es.Disconnected(ch)
}

// disconnected ends the connection's calls and gives back what its
// streams held of the server's budget.
func (sc *serverConn) disconnected() {
	sc.timer.Stop()
	sc.mu.Lock()
	sc.closed = true
	for _, st := range sc.inflight {
		st.cancel()
	}
	sc.cond.Broadcast()
	sc.mu.Unlock()
	// The read loop has stopped (the transport says Disconnected after
	// both loops end): its streams are this goroutine's now.
	for _, st := range sc.streams {
		sc.f.buffered.Add(-st.held)
		st.held = 0
	}
}

func (f *framing) Caught(ch extension.Channel, err error) { f.es.Caught(ch, err) }

// Received runs a frame through the connection's state and hands a call it
// completes to the exchange server's pool; a call offered inline and
// declined (every thread busy) comes back here too.
func (f *framing) Received(ch extension.Channel, msg any) {
	if req, ok := msg.(*netty.Request); ok {
		f.es.Received(ch, req)
		return
	}
	if sc := f.state(ch.(netty.StatefulChannel)); sc != nil {
		if req := sc.received(msg); req != nil {
			f.es.Received(ch, req)
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
		sc.sendNoWait(h2.AppendGoAway(nil, last, h2.CodeNo, "server stopping"))
	}
}

// defaultMaxStreams is our SETTINGS_MAX_CONCURRENT_STREAMS unless
// max-concurrent-streams says otherwise: the streams one connection may
// have open, counted until each call is answered or reset. x/net's HTTP/2
// server (and so grpc-go behind net/http) announce 250 too; Dubbo's
// Netty-based Triple announces no limit, which is how one connection takes
// every thread in a rapid-reset attack. A client that opens more is
// refused (REFUSED_STREAM), and refusals count as resets (see resetRate).
// 1000, as weft announced before: weft's own client does not yet wait
// for a free stream (grpc-go's does), and with 250 a consumer with more
// calls in flight on one connection would have them refused; one
// connection's calls hold at most 7/8 of `threads` anyway (netty's
// ExchangeServer), and resets are bounded by rate.
const defaultMaxStreams = 1000

// maxBuffered is the least request bytes a server holds in streams not yet
// complete, across its connections (framing.budget): past it a request
// is answered RESOURCE_EXHAUSTED rather than buffered. Each connection's
// own bytes are bounded by its window (h2.ConnRecvWindow), given back only as
// requests are handed to their calls; this bounds the sum, so that many
// connections sending bodies they never finish cannot pin the heap.
var maxBuffered int64 = 32 << 20

// wire is what the state needs of its connection (a netty.StatefulChannel;
// the fuzz target's recorder).
type wire interface {
	Send(msg any) error
	// SendNoWait is Send for the frames the read loop answers with and
	// GOAWAY: never waiting for room in a queue the peer does not drain.
	SendNoWait(msg any) error
	// SendMore is Send for a stream's messages: queued, written together.
	SendMore(msg any) error
	CloseGracefully(wait time.Duration)
	Close() error
	// CountControl counts a control frame about to be sent: false past
	// the transport's bound on those queued to a peer that does not read
	// them (netty.MaxQueuedControl).
	CountControl() bool
	// Done is closed when the connection closes (nil: never).
	Done() <-chan struct{}
}

// serverConn is one connection's HTTP/2 state. The read loop owns the
// fields above mu (the atomics excepted); the goroutines answering calls
// share those below it.
type serverConn struct {
	f    *framing
	conn wire
	dec  *h2.Decoder

	gotPreface, gotSettings bool
	// settingsSeen counts the peer's SETTINGS frames since settingsSince,
	// a window of a second (serverConn.settings).
	settingsSeen  int
	settingsSince time.Time
	streams       map[uint32]*stream // receiving their request
	maxStream     uint32             // the highest stream a client opened
	maxSeen       atomic.Uint32      // maxStream, for GoingAway and abort
	stopping      atomic.Bool        // GOAWAY sent by GoingAway
	stopLast      atomic.Uint32      // the last stream it lets finish
	failed        atomic.Bool        // GOAWAY sent for an error: frames after it are dropped
	open          atomic.Int32       // streams holding one of the streamLimit slots
	opened        int                // streams the client opened (refused ones too)

	// The connection's receive window: bytes of DATA received count until
	// they are consumed (a request handed to its call, a stream message
	// its method received, bytes of a stream that ended otherwise) and
	// given back by WINDOW_UPDATE; connHeld is shared with the streaming
	// methods that consume their messages.
	connHeld atomic.Int64
	connFree h2.Unacked // consumed on the read loop, not yet given back
	partial  int        // held by unary requests not yet complete

	rates resetRate // client resets and refused streams, for rapid reset
	// windowUpdates counts the client's WINDOW_UPDATE frames, dataOut the
	// DATA frames the server sent (by the calls' goroutines), for
	// windowUpdateFlood.
	windowUpdates int64
	dataOut       atomic.Int64

	// The header block being read (HEADERS, then CONTINUATION frames).
	block       h2.HeaderBlock
	blockNew    bool // the HEADERS opened a new stream
	blockBad    bool // the HEADERS depended on its own stream (a stream error once decoded)
	blockFrames int  // CONTINUATION frames so far
	hv          headerCheck
	ready       *netty.Request // the call the frame being run completed
	h1          *http1Conn     // an HTTP/1.1 connection's answers

	// Deadlines (watchdog).
	timer   *time.Timer
	armed   atomic.Bool   // the timer runs
	tick    atomic.Uint32 // counts watchTick while the timer runs
	swept   uint32        // the tick of the read loop's last sweep of the streams
	seen    atomic.Uint32 // the tick of the last frame the read loop took
	blockAt atomic.Uint32 // 1 + the tick a header block spanning frames started; 0: none
	pending atomic.Int32  // unary requests started and not complete (streams with no ss)

	mu       sync.Mutex
	cond     *sync.Cond
	closed   bool
	inflight map[uint32]*stream // requests complete, answers not yet sent
	win      h2.SendWindows
}

// stream is one call.
type stream struct {
	id      uint32
	sc      *serverConn
	headers []hpack.HeaderField
	data    []byte
	unacked h2.Unacked   // bytes received, not yet given back by WINDOW_UPDATE
	window  atomic.Int64 // what the client may still send on it (a streaming method gives it back as it receives)
	length  int64        // its content-length, -1 without one
	recvd   int64        // DATA bytes received (padding aside), to check content-length
	born    uint32       // the connection's tick when it opened, for its body's deadline
	pending bool         // counted in sc.pending
	held    int64        // bytes of data counted in the server's budget (framing.buffered)
	ended   bool         // the client sent END_STREAM

	ss   *serverStream // a client- or bidi-streaming call's, served from its HEADERS
	kind kernel.StreamKind
	exp  *exporter // the service it calls, as the read loop found it

	// Shared, under sc.mu.
	sendWindow int64
	reset      bool
	released   bool                // its slot of the streamLimit is given back
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

// release gives back st's slot, once; under sc.mu once st may be inflight.
func (sc *serverConn) release(st *stream) {
	if !st.released {
		st.released = true
		sc.open.Add(-1)
	}
}

// send queues frames; a connection that cannot take them (its write queue
// over the transport's bound: the peer does not read) is closed, since
// every later frame would be lost too. A call's frames may wait there for
// room while the peer is slow to read (netty's Send on a server).
func (sc *serverConn) send(b []byte) {
	if err := sc.conn.Send(rawFrames(b)); err != nil && err != netty.ErrClosed {
		sc.conn.Close()
	}
}

// sendMore is send for a stream's messages, which come one after another:
// queued, so that the transport writes them together.
func (sc *serverConn) sendMore(b []byte) {
	if err := sc.conn.SendMore(rawFrames(b)); err != nil && err != netty.ErrClosed {
		sc.conn.Close()
	}
}

// sendNoWait is send for frames that must not wait for room: those the
// read loop sends (which would stop reading the peer's frames, its
// WINDOW_UPDATEs and RST_STREAMs among them, for as long as its peer does
// not read), and GOAWAY, sent once per connection, in turn to each of a
// stopping server's. They are counted (control) or one per connection.
func (sc *serverConn) sendNoWait(b []byte) {
	if err := sc.conn.SendNoWait(rawFrames(b)); err != nil && err != netty.ErrClosed {
		sc.conn.Close()
	}
}

// control queues a frame the read loop sends in answer to the peer's
// (SETTINGS and PING acknowledgements, RST_STREAM, WINDOW_UPDATE), counted
// by the transport as the Dubbo heartbeat replies are: a peer that sends
// frames to be answered and never reads what they cost is closed, as x/net
// closes past maxQueuedControlFrames, here with GOAWAY saying why.
func (sc *serverConn) control(b []byte) {
	if !sc.conn.CountControl() {
		sc.fail(h2.CodeEnhanceYourCalm, "over %d control frames queued to a peer that does not read them", maxQueuedControlFrames)
		return
	}
	sc.sendNoWait(b)
}

// maxSettingsPerSecond bounds the SETTINGS frames a peer sends in a
// second: a client sends one at the start and a few more as its windows
// grow (grpc-go's BDP estimator), never hundreds.
const maxSettingsPerSecond = 100

// maxQueuedControlFrames is x/net's bound (http2/server.go) on the control
// frames queued to one peer, the transport's.
const maxQueuedControlFrames = netty.MaxQueuedControl

// fail ends the connection with GOAWAY code, saying why.
func (sc *serverConn) fail(code uint32, format string, args ...any) {
	sc.abort(code, fmt.Sprintf(format, args...))
}

// failOn ends the connection for e.
func (sc *serverConn) failOn(e *h2.ConnError) { sc.fail(e.Code, "%s", e.Msg) }

// abort sends GOAWAY code (once) and closes the connection; any goroutine.
func (sc *serverConn) abort(code uint32, msg string) {
	if sc.failed.CompareAndSwap(false, true) {
		sc.sendNoWait(h2.AppendGoAway(nil, sc.maxSeen.Load(), code, msg))
	}
	sc.conn.CloseGracefully(100 * time.Millisecond)
}

// idle reports whether stream id was never opened: client streams are odd,
// and ids only grow.
func (sc *serverConn) idle(id uint32) bool {
	return id%2 == 0 || id > sc.maxStream
}

// received runs msg through the state and returns the call it completed,
// if any.
func (sc *serverConn) received(msg any) *netty.Request {
	switch m := msg.(type) {
	case preface:
		if sc.gotPreface || sc.h1 != nil {
			sc.fail(h2.CodeProtocol, "a second connection preface, or one after HTTP/1.1")
			return nil
		}
		sc.gotPreface = true
		sc.preface()
	case *h2.ConnError:
		sc.failOn(m)
	case *http1Request:
		return sc.http1(m)
	case *h2.Frame:
		// Only our own GOAWAY for an error stops the frames: after the
		// client's, its streams go on (WINDOW_UPDATE, PING, DATA).
		if sc.failed.Load() {
			h2.Release(m)
			return nil
		}
		if !sc.gotPreface {
			h2.Release(m)
			sc.fail(h2.CodeProtocol, "a frame before the connection preface")
			return nil
		}
		if t := sc.tick.Load(); t != sc.swept {
			sc.sweep(t)
		}
		sc.frame(m)
		h2.Release(m)
		req := sc.ready
		sc.ready = nil
		return req
	}
	return nil
}

func (sc *serverConn) frame(f *h2.Frame) {
	if !sc.gotSettings && (f.Type != h2.FrameSettings || f.Flags&h2.FlagAck != 0) {
		sc.fail(h2.CodeProtocol, "the connection must start with SETTINGS")
		return
	}
	if f.Type == h2.FrameGoAway && f.Stream != 0 { // whatever its length
		sc.fail(h2.CodeProtocol, "GOAWAY on stream %d", f.Stream)
		return
	}
	if e := sc.block.Admit(f); e != nil {
		sc.failOn(e)
		return
	}
	switch f.Type {
	case h2.FrameSettings:
		sc.settings(f)
	case h2.FrameHeaders:
		sc.headers(f)
	case h2.FrameContinuation:
		sc.continuation(f)
	case h2.FrameData:
		sc.dataFrame(f)
	case h2.FrameWindowUpdate:
		sc.windowUpdate(f)
	case h2.FramePing:
		if f.Stream != 0 {
			sc.fail(h2.CodeProtocol, "PING on stream %d", f.Stream)
			return
		}
		if ack := h2.PingAck(f); ack != nil {
			sc.control(ack)
		}
	case h2.FrameRSTStream:
		sc.rstStream(f)
	case h2.FramePriority:
		if f.Stream == 0 {
			sc.fail(h2.CodeProtocol, "PRIORITY on stream 0")
			return
		}
		if len(f.Payload) != 5 {
			sc.streamError(f.Stream, h2.CodeFrameSize)
			return
		}
		if binary.BigEndian.Uint32(f.Payload)&0x7fffffff == f.Stream {
			sc.streamError(f.Stream, h2.CodeProtocol) // RFC 9113 5.3.1: a stream cannot depend on itself
		}
	case h2.FrameGoAway:
		// The client opens no stream after the last it names; those
		// before go on, answered as usual. It closes the connection.
	case h2.FramePushPromise:
		sc.fail(h2.CodeProtocol, "PUSH_PROMISE from a client")
	}
	// Unknown frame types are ignored (RFC 9113 5.5).
}

func (sc *serverConn) settings(f *h2.Frame) {
	if f.Flags&h2.FlagAck != 0 {
		if len(f.Payload) != 0 || f.Stream != 0 {
			sc.fail(h2.CodeFrameSize, "SETTINGS ACK with a payload")
		}
		return
	}
	// Each SETTINGS is answered with an ACK. A peer that sends more than
	// maxSettingsPerSecond in a second floods (CVE-2019-9515): it gets
	// GOAWAY at once, rather than once the control-frame count sees the
	// ACKs pile up, which waits until the kernel's socket buffers (a few
	// MiB of 9-byte ACKs on loopback) are full, some 5 s of flooding.
	if now := time.Now(); now.Sub(sc.settingsSince) > time.Second {
		sc.settingsSince, sc.settingsSeen = now, 0
	}
	if sc.settingsSeen++; sc.settingsSeen > maxSettingsPerSecond {
		sc.fail(h2.CodeEnhanceYourCalm, "over %d SETTINGS frames in a second", maxSettingsPerSecond)
		return
	}
	ps := h2.ParseSettings(f)
	sc.gotSettings = true
	sc.mu.Lock()
	if delta := sc.win.Apply(ps); ps.HasWindow {
		for _, st := range sc.inflight {
			st.sendWindow += delta
		}
		for _, st := range sc.streams {
			if st.ss == nil { // not inflight yet (a streaming call's is in both)
				st.sendWindow += delta
			}
		}
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
	sc.control(h2.AppendSettingsAck(nil))
}

// rstStream is the client's RST_STREAM: the stream's call, if it runs,
// is cancelled and its slot given back at once; a reset of a stream not
// yet answered counts toward rapid reset.
func (sc *serverConn) rstStream(f *h2.Frame) {
	if f.Stream == 0 || sc.idle(f.Stream) {
		sc.fail(h2.CodeProtocol, "RST_STREAM of idle stream %d", f.Stream)
		return
	}
	// Every reset counts, not only those of streams still open: the
	// attack sends HEADERS, DATA and RST_STREAM together, and a fast
	// method has answered before the reset is read, so the call was made
	// for nobody all the same. Netty's Http2MaxRstFrameDecoder counts every
	// RST_STREAM too; the share of streams opened (resetRate) spares a
	// client that cancels some of its calls.
	sc.drop(f.Stream)
	sc.abused("streams reset by the client")
}

// drop ends stream id, wherever it is: receiving its request, or its call
// running; it reports whether the stream was open.
func (sc *serverConn) drop(id uint32) bool {
	open := false
	st := sc.streams[id]
	if st != nil {
		sc.forget(st)
		open = true
	}
	sc.mu.Lock()
	if in := sc.inflight[id]; in != nil {
		st = in
		delete(sc.inflight, id)
		open = open || !st.released
	}
	if st != nil {
		st.cancel()
		sc.release(st)
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
	return open
}

// streamError answers a stream error: RST_STREAM code, and the stream's
// call, if any, ended.
func (sc *serverConn) streamError(id, code uint32) {
	sc.drop(id)
	sc.control(h2.AppendRST(nil, id, code))
}

func (sc *serverConn) windowUpdate(f *h2.Frame) {
	inc := h2.WindowIncrement(f)
	if sc.windowUpdates++; sc.windowUpdateFlood() {
		return
	}
	if f.Stream == 0 {
		if inc == 0 {
			sc.fail(h2.CodeProtocol, "WINDOW_UPDATE of 0 on the connection")
			return
		}
		sc.mu.Lock()
		ok := sc.win.Open(inc)
		sc.cond.Broadcast()
		sc.mu.Unlock()
		if !ok {
			sc.fail(h2.CodeFlowControl, "connection window over 2^31-1")
		}
		return
	}
	if sc.idle(f.Stream) {
		sc.fail(h2.CodeProtocol, "WINDOW_UPDATE on idle stream %d", f.Stream)
		return
	}
	if inc == 0 {
		sc.streamError(f.Stream, h2.CodeProtocol)
		return
	}
	st := sc.streams[f.Stream]
	sc.mu.Lock()
	if st == nil {
		st = sc.inflight[f.Stream]
	}
	over := false
	if st != nil {
		st.sendWindow += inc
		over = st.sendWindow > h2.MaxWindow
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
	// st nil: a stream closed already.
	if over {
		sc.streamError(f.Stream, h2.CodeFlowControl)
	}
}

func (sc *serverConn) headers(f *h2.Frame) {
	if f.Stream == 0 || f.Stream%2 == 0 {
		sc.fail(h2.CodeProtocol, "HEADERS on stream %d (a client opens odd streams)", f.Stream)
		return
	}
	p, ok := h2.Payload(f)
	if !ok {
		sc.fail(h2.CodeProtocol, "HEADERS with bad padding")
		return
	}
	sc.blockBad = false
	if f.Flags&h2.FlagPriority != 0 {
		dep := f.Payload
		if f.Flags&h2.FlagPadded != 0 {
			dep = dep[1:]
		}
		sc.blockBad = binary.BigEndian.Uint32(dep)&0x7fffffff == f.Stream
	}
	sc.blockNew = false
	if st := sc.streams[f.Stream]; st == nil && f.Stream > sc.maxStream {
		sc.maxStream = f.Stream
		sc.maxSeen.Store(f.Stream)
		sc.opened++
		sc.blockNew = true
	}
	if sc.block.Start(f, p) {
		sc.endBlock()
		return
	}
	// A block spanning frames: it must end within a count of frames and
	// a deadline, checked on each CONTINUATION and by the clock.
	sc.blockFrames = 0
	sc.blockAt.Store(sc.tick.Load() + 1)
	sc.watch()
}

// maxContinuations bounds the CONTINUATION frames of a header block: the
// frames a block of h2.MaxHeaderBlock takes at our frame size, and 8 more. A
// client sending empty ones (CVE-2024-27316) is closed.
const maxContinuations = h2.MaxHeaderBlock/h2.DefaultMaxFrame + 8

func (sc *serverConn) continuation(f *h2.Frame) {
	if e := sc.block.CheckContinuation(f); e != nil {
		sc.failOn(e)
		return
	}
	if sc.blockFrames++; sc.blockFrames > maxContinuations {
		sc.fail(h2.CodeEnhanceYourCalm, "a header block of over %d CONTINUATION frames", maxContinuations)
		return
	}
	if sc.tick.Load()+1-sc.blockAt.Load() > sc.f.ticks(sc.f.blockLimit()) {
		sc.fail(h2.CodeEnhanceYourCalm, "a header block not finished within %v", sc.f.blockLimit())
		return
	}
	if sc.block.Continue(f) {
		sc.blockAt.Store(0)
		sc.endBlock()
	}
}

func (sc *serverConn) endBlock() {
	sc.hv.reset()
	id, err := sc.block.Decode(sc.dec, sc.hv.check)
	if err != nil {
		sc.fail(h2.CodeCompression, "HPACK: %v", err)
		return
	}
	st := sc.streams[id]
	if st == nil && sc.blockNew {
		sc.newStream(id)
		return
	}
	if st == nil {
		sc.closedHeaders(id)
		return
	}
	// Trailers: they end the stream, and carry no pseudo-header.
	if !sc.block.End || sc.hv.pseudo != 0 || sc.hv.bad != "" || sc.blockBad {
		sc.streamError(id, h2.CodeProtocol)
		return
	}
	st.ended = true
	if st.length >= 0 && st.recvd != st.length {
		sc.streamError(id, h2.CodeProtocol)
		return
	}
	if st.ss != nil {
		// A streaming call's trailers: its last message was sent.
		st.ss.data(nil, true)
		sc.forget(st)
		return
	}
	sc.complete(st)
}

// closedHeaders answers a header block on a stream that is no longer
// receiving: a stream error when its call still runs (half-closed), the
// connection's when it is closed (RFC 9113 5.1).
func (sc *serverConn) closedHeaders(id uint32) {
	sc.mu.Lock()
	st := sc.inflight[id]
	sc.mu.Unlock()
	if st != nil {
		sc.streamError(id, h2.CodeStreamClosed)
		return
	}
	sc.fail(h2.CodeStreamClosed, "HEADERS on closed stream %d", id)
}

// newStream opens stream id with the header block just decoded.
func (sc *serverConn) newStream(id uint32) {
	if sc.stopping.Load() && id > sc.stopLast.Load() {
		sc.control(h2.AppendRST(nil, id, h2.CodeRefusedStream))
		return
	}
	if int(sc.open.Load()) >= sc.f.streamLimit() {
		sc.control(h2.AppendRST(nil, id, h2.CodeRefusedStream))
		sc.abused("streams refused over SETTINGS_MAX_CONCURRENT_STREAMS")
		return
	}
	if sc.blockBad || sc.hv.bad != "" || !sc.hv.request() {
		// A malformed request (RFC 9113 8.1.1): a stream error.
		sc.control(h2.AppendRST(nil, id, h2.CodeProtocol))
		return
	}
	st := &stream{id: id, sc: sc, length: sc.hv.length, ended: sc.block.End, sendWindow: sc.win.Initial, born: sc.tick.Load()}
	st.window.Store(h2.RecvWindow)
	st.headers = append([]hpack.HeaderField(nil), sc.block.Fields...)
	sc.streams[id] = st
	sc.open.Add(1)
	if sc.block.Over {
		sc.answerNow(st, 431, statusResourceExhausted, fmt.Sprintf("request headers over %d bytes", h2.MaxHeaderListSize))
		return
	}
	st.kind = sc.kindOf(st)
	if st.kind == kernel.ClientStreaming || st.kind == kernel.BidiStreaming {
		sc.startStream(st)
		if sc.block.End && st.ss != nil {
			if st.length > 0 {
				sc.streamError(id, h2.CodeProtocol) // content-length with no DATA
				return
			}
			st.ss.data(nil, true) // no message at all
			sc.forget(st)
		}
		return
	}
	if !sc.block.End {
		// Its body comes in DATA frames, within bodyDeadline.
		st.pending = true
		sc.pending.Add(1)
		sc.watch()
		return
	}
	if st.length > 0 {
		sc.streamError(id, h2.CodeProtocol)
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
	sc.inflight[st.id] = st
	sc.mu.Unlock()
	sc.ready = &netty.Request{ID: uint64(st.id), TwoWay: true, Data: all}
}

// consumed gives back n bytes of the connection's window, consumed on the
// read loop, once they make a WINDOW_UPDATE worth its frame.
func (sc *serverConn) consumed(n int) {
	if k := sc.connFree.Consume(n); k > 0 {
		sc.connHeld.Add(-int64(k))
		sc.control(h2.AppendWindowUpdate(nil, 0, k))
	}
}

func (sc *serverConn) dataFrame(f *h2.Frame) {
	n := len(f.Payload)
	if sc.connHeld.Add(int64(n)) > h2.ConnRecvWindow {
		sc.fail(h2.CodeFlowControl, "DATA beyond the connection's window of %d bytes", h2.ConnRecvWindow)
		return
	}
	if f.Stream == 0 || sc.idle(f.Stream) {
		sc.fail(h2.CodeProtocol, "DATA on idle stream %d", f.Stream)
		return
	}
	st := sc.streams[f.Stream]
	if st == nil {
		// Half-closed (its call runs) or closed: STREAM_CLOSED either way,
		// and the bytes are free at once.
		sc.consumed(n)
		sc.streamError(f.Stream, h2.CodeStreamClosed)
		return
	}
	p, ok := h2.Payload(f)
	if !ok {
		sc.fail(h2.CodeProtocol, "DATA with bad padding")
		return
	}
	sc.consumed(n - len(p)) // the padding
	if st.window.Add(int64(-n)) < 0 {
		sc.consumed(len(p))
		sc.streamError(f.Stream, h2.CodeFlowControl)
		return
	}
	end := f.Flags&h2.FlagEndStream != 0
	st.recvd += int64(len(p))
	if st.length >= 0 && (st.recvd > st.length || end && st.recvd != st.length) {
		// content-length and the DATA disagree (RFC 9113 8.1.1).
		sc.consumed(len(p))
		sc.streamError(f.Stream, h2.CodeProtocol)
		return
	}
	if end {
		st.ended = true
	}
	if st.ss != nil {
		sc.streamData(st, p, end)
		return
	}
	if len(st.data)+len(p) > sc.f.payload+5 {
		sc.consumed(len(p))
		sc.answerNow(st, 200, statusResourceExhausted,
			fmt.Sprintf("request message over the payload limit of %d bytes; raise payload on the provider or send less", sc.f.payload))
		return
	}
	if st.data == nil && end {
		// The whole request in one frame, the usual case: it goes to its
		// call at once, never counted as held.
		st.data = append(make([]byte, 0, len(p)), p...)
		sc.complete(st)
		return
	}
	// The server's budget is charged what the request's buffer takes: its
	// capacity, sized once to the message its first bytes announce (at
	// most the payload limit), rather than doubled as it grows, which cost
	// twice the bytes held and as much again in garbage (before: four
	// connections of unfinished 4 MiB requests grew the provider by 98 MiB
	// against a 32 MiB budget).
	grow := 0
	if need := len(st.data) + len(p); need > cap(st.data) {
		size := need
		if len(st.data) == 0 && len(p) >= 5 {
			size = max(need, min(int(binary.BigEndian.Uint32(p[1:5]))+5, sc.f.payload+5))
		} else {
			size = max(need, min(2*cap(st.data), sc.f.payload+5))
		}
		grow = size - cap(st.data)
		if b := sc.f.buffered.Add(int64(grow)); b > sc.f.budget() {
			sc.f.buffered.Add(-int64(grow))
			sc.consumed(len(p))
			sc.answerNow(st, 200, statusResourceExhausted,
				fmt.Sprintf("the server holds over %d bytes of requests not yet complete; retry later or on another provider", sc.f.budget()))
			// A client that keeps sending what the server cannot hold is
			// refused stream after stream: that counts as abuse too.
			sc.abused("streams refused for the server's request budget")
			return
		}
		nd := make([]byte, len(st.data), size)
		copy(nd, st.data)
		st.data = nd
	}
	st.held += int64(grow)
	sc.partial += len(p)
	st.data = append(st.data, p...)
	if end {
		sc.complete(st)
		return
	}
	if k := st.unacked.Consume(n); k > 0 {
		st.window.Add(int64(k))
		sc.control(h2.AppendWindowUpdate(nil, st.id, k))
	}
	if h2.ConnRecvWindow-sc.connHeld.Load() < 1024 && sc.partial >= h2.ConnRecvWindow/2 {
		sc.unstall()
	}
}

// streamData hands a client- or bidi-streaming call its DATA: its messages
// go to its method, which gives the window back as it receives them
// (serverStream.RecvMsg).
func (sc *serverConn) streamData(st *stream, p []byte, end bool) {
	if b := sc.f.buffered.Add(int64(len(p))); b > sc.f.budget() {
		sc.f.buffered.Add(-int64(len(p)))
		sc.consumed(len(p))
		st.ss.fail(kernel.Errorf(kernel.CodeLimitExceeded, "the server holds over %d bytes of stream messages not yet received", sc.f.budget()))
		sc.streamError(st.id, h2.CodeEnhanceYourCalm)
		return
	}
	kept, ok := st.ss.data(p, end)
	if !kept {
		// Its method has returned: nobody will read them.
		sc.f.buffered.Add(-int64(len(p)))
		sc.consumed(len(p))
	}
	if !ok {
		st.ss.fail(kernel.Errorf(kernel.CodeSerialization, "a stream message over the payload limit of %d bytes", sc.f.payload))
		sc.streamError(st.id, h2.CodeCancel)
		return
	}
	if end {
		sc.forget(st)
	}
}

// http1Base marks the request ids of HTTP/1.1 calls: above any HTTP/2
// stream id.
const http1Base = 1 << 40

// http1 takes an HTTP/1.1 request: the connection is an HTTP/1.1 one from
// its first request on.
func (sc *serverConn) http1(r *http1Request) *netty.Request {
	if sc.gotPreface {
		sc.fail(h2.CodeProtocol, "an HTTP/1.1 request inside HTTP/2")
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

// forget drops a stream that was receiving its request: its bytes are
// consumed (handed to its call, or dropped) and given back to the
// connection's window and the server's budget.
func (sc *serverConn) forget(st *stream) {
	if sc.streams[st.id] != st {
		return
	}
	delete(sc.streams, st.id)
	if st.pending {
		st.pending = false
		sc.pending.Add(-1)
	}
	if st.ss == nil {
		if st.held > 0 { // its bytes were buffered, and counted in partial
			sc.partial -= len(st.data)
		}
		sc.f.buffered.Add(-st.held)
		st.held = 0
		sc.consumed(len(st.data))
	}
}

// answerNow answers a stream the server will not serve with a
// trailers-only response, and resets what is left of its request.
func (sc *serverConn) answerNow(st *stream, httpStatus, grpcStatus int, msg string) {
	sc.forget(st)
	sc.mu.Lock()
	sc.release(st)
	sc.mu.Unlock()
	b := appendTrailersOnly(nil, st.id, httpStatus, grpcStatus, msg, 0)
	if !st.ended {
		b = h2.AppendRST(b, st.id, h2.CodeNo) // the client may stop sending it (RFC 9113 8.1)
	}
	sc.send(b)
}

// unstall answers the stream holding most of a connection whose window
// is full of unary requests none of which is complete: they wait for
// window only their own completion would give back. A client sending
// several large messages at once on one connection meets it; the others
// then complete.
func (sc *serverConn) unstall() {
	var big *stream
	for _, st := range sc.streams {
		if st.ss == nil && (big == nil || st.held > big.held) {
			big = st
		}
	}
	if big != nil {
		sc.answerNow(big, 200, statusResourceExhausted, fmt.Sprintf(
			"the connection's flow-control window of %d bytes is full of requests not yet complete; send fewer large messages at once on one connection",
			h2.ConnRecvWindow))
	}
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
	sc.inflight[st.id] = st
	sc.mu.Unlock()
	sc.ready = &netty.Request{ID: uint64(st.id), TwoWay: true, Data: c}
}

// done forgets an answered stream, and gives back its slot and what its
// stream messages still held.
func (sc *serverConn) done(st *stream) {
	sc.mu.Lock()
	delete(sc.inflight, st.id)
	sc.release(st)
	sc.mu.Unlock()
	if st.ss != nil {
		st.ss.finish()
	}
}

// reserve waits until n bytes of DATA may be sent on st, or less when the
// windows hold less than n but more than zero; it returns 0 when the
// stream was reset, the connection closed or ctx ended.
func (sc *serverConn) reserve(ctx context.Context, st *stream, n int) (int, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var stop func() bool
	for !st.reset && !sc.closed && (sc.win.Conn <= 0 || st.sendWindow <= 0) {
		if ctx.Err() != nil || isDone(sc.conn.Done()) {
			return 0, 0
		}
		if stop == nil {
			wake := func() {
				sc.mu.Lock()
				sc.cond.Broadcast()
				sc.mu.Unlock()
			}
			stop = context.AfterFunc(ctx, wake)
			defer stop()
			// The connection's close wakes it too: a call served on the
			// read loop, waiting here, holds up the Disconnected that
			// would set closed.
			if done := sc.conn.Done(); done != nil {
				quit := make(chan struct{})
				defer close(quit)
				go func() {
					select {
					case <-done:
						wake()
					case <-quit:
					}
				}()
			}
		}
		sc.cond.Wait()
	}
	if st.reset || sc.closed || isDone(sc.conn.Done()) {
		return 0, 0
	}
	return int(sc.win.Take(&st.sendWindow, int64(n))), sc.win.MaxFrame
}

func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// tryReserve takes n bytes of st's and the connection's send windows if
// both hold them, at once; 0 when they do not (or the stream is gone).
func (sc *serverConn) tryReserve(st *stream, n int) (int, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if st.reset || sc.closed || sc.win.Conn < int64(n) || st.sendWindow < int64(n) {
		return 0, 0
	}
	sc.win.Conn -= int64(n)
	st.sendWindow -= int64(n)
	return n, sc.win.MaxFrame
}

// refund gives back window taken for bytes that were not sent.
func (sc *serverConn) refund(st *stream, n int) {
	sc.mu.Lock()
	sc.win.Conn += int64(n)
	st.sendWindow += int64(n)
	sc.cond.Broadcast()
	sc.mu.Unlock()
}

// maxFrameNow is the peer's SETTINGS_MAX_FRAME_SIZE.
func (sc *serverConn) maxFrameNow() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.win.MaxFrame
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
