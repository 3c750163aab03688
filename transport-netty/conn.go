package netty

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weftrpc/weft/extension"
)

// ErrClosed is returned by Send on a closed channel.
var ErrClosed = errors.New("channel closed")

// The bounds on what a peer can make a connection hold by not reading.
// Every frame a server queues answers something the peer sent; a peer that
// sends and never reads would otherwise grow the queue for as long as it
// sends (before issue 22: 371 MiB of RSS from two connections in 40 s).
const (
	// maxQueued bounds the bytes waiting for a writer. Past it the
	// connection is closed: its peer does not read what it asked for, and
	// failing the one frame would leave a caller waiting for an answer
	// that never comes. A server's senders wait for room well before
	// (maxPending): there only frames that do not wait (SendNoWait:
	// counted control frames, a GOAWAY) could take a full queue past it.
	maxQueued = 16 << 20
	// pauseReadAt: a server connection with more than this pending (queued
	// or taken by its writer and not yet written), or with senders waiting
	// for room (maxPending), stops reading until its writer has written
	// the pending bytes down to half of it (TCP's own backpressure, as
	// Netty's autoRead and grpc-go's control-buffer throttle do): a peer
	// cannot make it serve calls faster than it takes their answers.
	// Counting what the writer took, not only the queue, matters since
	// senders wait for room: a writer stuck on a batch leaves the queue
	// empty, and a reader looking at the queue alone would read on,
	// serving calls whose answers all wait, each holding its frame.
	// Clients never pause: two peers both waiting for the other to read
	// would deadlock.
	pauseReadAt = 1 << 20
	// MaxQueuedControl bounds the frames a protocol answers on its own (a
	// heartbeat reply, an HTTP/2 PING or SETTINGS acknowledgement) queued
	// since the write queue was last empty: x/net/http2's
	// maxQueuedControlFrames. Past it the peer is flooding and not reading;
	// the connection is closed.
	MaxQueuedControl = 10000
	// WriteStall bounds how long a write may make no progress: a
	// connection whose peer takes no byte for that long while frames wait
	// is closed (x/net's WriteByteTimeout; Netty's WriteTimeoutHandler).
	// Dubbo's default call timeout is 1 s, so every call waiting behind
	// such a stall has failed long before.
	WriteStall = 3 * time.Second
	// peerTimeout is the kernel's bound (TCP_USER_TIMEOUT) on bytes a
	// server connection's socket holds unacknowledged or behind a zero
	// window (setUserTimeout): longer than WriteStall, as it also covers
	// a lossy path's retransmissions.
	peerTimeout = 10 * time.Second
	// writeChunk is the most one blocking write hands the socket, so that
	// a large queue written to a slow but live peer shows progress within
	// WriteStall.
	writeChunk = 256 << 10
)

// maxPending bounds a server connection's pending bytes: those queued
// (wbuf) and those its writer has taken and not yet written (inflight). A
// Send whose frame would take them past it waits, without the queue's
// lock, until the writer has made room or the connection closed, as
// grpc-go's handlers wait for write quota; a frame goes alone, whatever
// its size, when nothing is pending. The wait is bounded: a peer that
// takes less than a writeChunk in WriteStall is closed (write), which ends
// it. maxQueued alone bounded the queue but not the batch the writer had
// taken from it, up to maxQueued too: a connection whose peer never read
// could hold twice maxQueued and the garbage of the queue's growth by
// append (+97 MiB of RSS from two in the attack suite's "large answers,
// never read").
//
// Why 4 MiB: a connection's write buffers are at worst about twice its
// pending bytes, as the writer holds its batch whole until the last chunk
// is out while the queue refills behind the chunks already written, and a
// buffer grown by append has up to a quarter more capacity than length:
// some 10 MiB per connection that never reads, 20 MiB for two, which the
// collector's headroom (GOGC) may double. That leaves most of the attack
// suite's 64 MiB to what it cannot bound, the calls in flight (up to
// `threads` requests and answers): with 8 MiB, two such connections reached
// +84 MiB of RSS in one of five runs, with 4 MiB at most +59 in ten. A
// peer that reads never waits on it: 4 MiB queued ahead of the kernel's
// send buffer (itself up to tcp_wmem's 4 MiB) is sixteen writeChunks of
// work for the writer. Clients never wait (see pauseReadAt); control
// frames neither (SendNoWait). A variable for tests.
var maxPending = 4 << 20

// ErrBackedUp is the cause of a connection closed because its peer does
// not read (its write queue over maxQueued, or MaxQueuedControl control
// frames waiting, or a write stalled for WriteStall).
var ErrBackedUp = errors.New("the peer does not read")

// FrameError is what a codec returns for a frame it rejects as a whole
// (oversized) but whose extent it knows: the read loop delivers Msg (a
// Request or Response marked broken) at once, so the one call fails, then
// skips Skip bytes from the start of the frame as they arrive, without
// buffering them; the connection lives on.
//
// With Close set, the frame claims more than skipping can sensibly absorb
// (gigabytes a peer may never send): the read loop delivers Msg, flushes
// what is queued (the answer to Msg) and closes the connection, logging
// why, instead of waiting for bytes that may never come while every later
// frame on the connection goes unanswered.
type FrameError struct {
	Msg   any
	Skip  int
	Close bool
	Err   error
}

func (e *FrameError) Error() string { return e.Err.Error() }
func (e *FrameError) Unwrap() error { return e.Err }

// Conn is a Channel over one TCP connection.
type Conn struct {
	// readOnly: the peer said it is stopping (Dubbo's READONLY event):
	// a client sends no new calls on it.
	readOnly atomic.Bool

	nc      net.Conn
	codec   extension.Codec
	handler extension.ChannelHandler
	log     *slog.Logger

	// The write path. Frames are appended to wbuf under wmu; one writer at
	// a time (flushing) takes the whole buffer and writes it. The writer is
	// the sender itself when nothing else is about to be sent (one call at a
	// time: no goroutine hand-off, the frame leaves at once) and the
	// connection can write without blocking, or else the write loop, which
	// first yields once so that the frames about to be queued by the
	// goroutines it would otherwise race go out in the same write: on
	// loopback every write syscall also runs the receiver's TCP input, so
	// writes per call are what a busy connection pays most for.
	wmu      sync.Mutex
	wbuf     []byte
	spare    []byte // the buffer a writer gave back, reused by the next
	flushing bool   // a writer owns the socket's write side
	wsignal  chan struct{}
	raw      syscall.RawConn // nil when writes cannot be tried without blocking (TLS)
	nbWrite  func(fd uintptr) bool
	nbBuf    []byte
	nbDone   int
	nbErr    error
	// inflight is the bytes the flushing writer took (the queue's buffer,
	// or a sender's own frame) and has not written yet: with len(wbuf),
	// the connection's pending bytes, which a server bounds (maxPending).
	// write lowers it chunk by chunk, so that waiting senders go on as
	// the peer reads, not once the whole batch is out.
	inflight int
	// A server's senders waiting for room (waitRoom) go in the order they
	// began to wait: tickets handed out and the one whose turn it is.
	// room is closed when the writer makes progress or the turn passes,
	// and made only when someone waits: nil on the fast path.
	ticketNext, ticketHead uint64
	room                   chan struct{}

	// coming counts frames the connection's owner expects to send soon
	// (calls being served, on a server; calls in flight, on a client).
	// Above comingOver a sender queues its frame and the write loop
	// batches; at most comingOver, a sender writes, taking along what is
	// queued (the last answer of a batch on a server; a call alone on a
	// client, whose own call is one of those in flight).
	coming     atomic.Int32
	comingOver int32
	// serving counts the calls of this connection a server serves now
	// (ExchangeServer.connShare bounds it).
	serving atomic.Int32

	closed    atomic.Bool
	closeErr  atomic.Pointer[error]
	closeOnce sync.Once
	done      chan struct{}
	loops     sync.WaitGroup

	// lastRead is when the read loop last decoded a message (unix nanos):
	// bytes that complete nothing do not keep a connection alive, or one
	// byte a second would defeat every idle rule (slowloris).
	lastRead  atomic.Int64
	lastWrite atomic.Int64
	// lastFrame is the size of a recent frame encoded, of the last one's
	// size class, which the next one's buffer is taken for (getEncodeBuf).
	lastFrame atomic.Int32
	// writes counts write system calls: frames per write is what
	// batching buys (tests read it).
	writes atomic.Int64
	// partialAt is when the read loop started holding an incomplete frame
	// (or skipping a rejected one), 0 when it holds none; partialSize is
	// that frame's length when the codec can tell it. The server's watch
	// closes a connection whose frame does not complete in time
	// (frameReadAllowance).
	partialAt   atomic.Int64
	partialSize atomic.Int64

	// Server connections pause reading while more than pauseReadAt is
	// queued (see pauseReadAt); the writer wakes the read loop when it
	// takes the queue.
	pauseReads bool
	paused     atomic.Bool
	rsignal    chan struct{}
	control    int // control frames queued since the queue was last empty, under wmu
	// big is the server's budget for grown read buffers, nil on clients;
	// bigHeld what this connection's holds of it (the read loop's).
	big     *bigBudget
	bigHeld int64
	longNow bool        // pending > pauseReadAt or senders waiting, under wmu...
	long    atomic.Bool // ...and for the read loop, without the lock

	attrs  sync.Map
	remote string
	tls    bool // a server's TLS connection (TLS)
	mtls   bool // one whose client certificate verified (MTLS)

	// The read loop may serve a call itself (see Inliner and reader).
	inliner  Inliner
	preparer Preparer
	seq      Sequencer // the codec's, if it is one
	rawf     extension.RawFramer
}

// reader is one read loop's state for serving calls inline: while it
// serves one, state is inlineRunning and takeover is armed; if the call
// outlasts inlineBudget, takeover starts a new read loop on the same
// (drained) buffer, and this one ends once its call returns. Each read loop
// has its own: after a takeover the old loop is still inside its call while
// the new one may serve calls of its own.
//
// The timer is not set and stopped around each call: a timer earlier than
// any other wakes the thread that waits in the network poller (a write to
// its eventfd, a context switch), which was one more system call and
// wake-up per call on a quiet connection. It is armed when a call begins
// and finds it idle; when it fires it takes over from a call that has run
// inlineBudget, waits out the rest of the budget of one that began later,
// or goes idle when no call runs: at most one timer operation per budget
// while calls come back to back.
type reader struct {
	c        *Conn
	state    atomic.Int32
	started  atomic.Int64 // when the call served now began (unix nanos)
	armed    atomic.Bool  // takeover is set to fire
	takeover *time.Timer  // made at the loop's first inline call
	buf      []byte       // the read buffer, handed over on takeover
}

// Inliner is a server's ChannelHandler that can serve a message on the read
// loop's goroutine (the Server finds out once per connection). The read
// loop offers it the last message of what it has read
// (nothing else is buffered, so nothing waits behind it but bytes not read
// yet); Inline either serves it there and returns true, or returns false
// and the loop goes on to Received. Serving inline saves the hand-off to
// another goroutine, which on an idle connection is most of a round trip's
// scheduling cost: a wake-up of another thread and of the caller's
// goroutine. A call that runs long does not hold the connection: after
// inlineBudget another goroutine takes over reading.
type Inliner interface {
	Inline(c *Conn, msg any) bool
}

// Sequencer is a codec whose frames take something from their place in
// the connection's byte stream (HTTP/2's stream ids, which must rise in the
// order they are written, and its flow-control windows). Send calls
// Sequence under the connection's write lock, in wire order, with the frame
// Encode made; it returns the bytes to write now (frame, changed in place
// or appended to) and may keep the rest to send later itself.
type Sequencer interface {
	Sequence(c *Conn, msg any, frame []byte) []byte
}

// Preparer is an Inliner whose messages are frames of a protocol with state
// of its own per connection (HTTP/2's streams and header table): the read
// loop gives it the last message first, to run through that state where no
// takeover can happen, and offers inline what Prepare returns (a call it
// completed), or nothing when it returns nil. A takeover may then only
// happen inside the call, when the state is not being touched.
type Preparer interface {
	Prepare(c *Conn, msg any) any
}

// inlineBudget is how long a call served on the read loop may hold it
// before another goroutine takes over reading the connection (a variable
// for the tests that make every inline call a takeover).
var inlineBudget = 200 * time.Microsecond

const (
	inlineIdle = iota
	inlineRunning
	inlineTaken
)

var _ extension.Channel = (*Conn)(nil)

// StatefulChannel is a connection as a protocol's own connection layer
// sees it (a Framing handler of a server or client, HTTP/2's for Triple):
// an extension.Channel that carries that layer's state for the
// connection's life (Netty's channel attributes), counts the control
// frames the layer answers its peer with, closes after flushing the frame
// that says why, and says when it has gone. The handlers get
// extension.Channel; they ask for this contract, which *Conn keeps, rather
// than for *Conn.
type StatefulChannel interface {
	extension.Channel
	// Attr returns the value SetAttr stored under k.
	Attr(k any) (any, bool)
	// SetAttr stores v under k with the channel.
	SetAttr(k, v any)
	// RemoteAddrString is RemoteAddr().String(), computed once.
	RemoteAddrString() string
	// TLS says whether the connection is TLS, MTLS whether its client
	// certificate verified too (mutual TLS), on a server's side.
	TLS() bool
	MTLS() bool
	// CountControl counts a control frame about to be sent: false past
	// MaxQueuedControl of them queued to a peer that does not read them.
	CountControl() bool
	// SendNoWait is Send for a control frame (counted with CountControl)
	// or the frame that says the connection ends: on a server it never
	// waits for room in a queue its peer does not drain, as Send may.
	SendNoWait(msg any) error
	// SendMore is Send for a frame the sender soon follows with more (a
	// stream's messages): queued, so that they are written together.
	SendMore(msg any) error
	// CloseGracefully flushes what is queued (bounded by wait), then closes.
	CloseGracefully(wait time.Duration)
	// Done is closed when the channel closes.
	Done() <-chan struct{}
}

var _ StatefulChannel = (*Conn)(nil)

// readBufSize is a connection's read buffer; a larger frame is read into a
// buffer of its size class (getReadBuf), given back once it is decoded.
const readBufSize = 64 << 10

func newConn(nc net.Conn, codec extension.Codec, h extension.ChannelHandler, log *slog.Logger) *Conn {
	c := &Conn{nc: nc, codec: codec, handler: h, log: log, wsignal: make(chan struct{}, 1), done: make(chan struct{}),
		remote: nc.RemoteAddr().String(), rsignal: make(chan struct{}, 1)}
	if tc, ok := nc.(*tls.Conn); ok { // handshaken already on a server
		c.tls, c.mtls = true, len(tc.ConnectionState().VerifiedChains) > 0
	}
	c.seq, _ = codec.(Sequencer)
	c.rawf, _ = codec.(extension.RawFramer)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		if rc, err := tc.SyscallConn(); err == nil {
			c.raw = rc
			c.nbWrite = c.nonBlockingWrite
		}
	}
	now := time.Now().UnixNano()
	c.lastRead.Store(now)
	c.lastWrite.Store(now)
	// Counted before anyone can see the connection: a Close racing with
	// start then waits for loops that are sure to run (and end at once).
	c.loops.Add(2)
	return c
}

// start runs the loops and reports the connection to the handler.
func (c *Conn) start() {
	c.handler.Connected(c)
	go c.writeLoop()
	go c.readLoop(make([]byte, readBufSize))
}

// takeOver runs when a call served on the read loop outlasts inlineBudget:
// a new read loop continues on the drained buffer.
func (r *reader) takeOver() {
	for {
		if r.state.Load() == inlineRunning {
			if left := inlineBudget - time.Duration(time.Now().UnixNano()-r.started.Load()); left > 0 {
				r.takeover.Reset(left) // a call that began after the timer was set
				return
			}
			if r.state.CompareAndSwap(inlineRunning, inlineTaken) {
				// The old loop still counts in loops (it is inside its
				// call), so this Add cannot race a Wait that already
				// returned.
				r.c.loops.Add(1)
				go r.c.readLoop(r.buf)
				return
			}
			continue // the call just ended: look again
		}
		// No call runs: idle until the next one arms it. A call that
		// began meanwhile either sees armed false and arms it, or is seen
		// here (state is stored before armed is tried, and armed before
		// state is read again).
		r.armed.Store(false)
		if r.state.Load() != inlineRunning || !r.armed.CompareAndSwap(false, true) {
			return
		}
	}
}

// inline offers msg, the last message the read loop has, to the inliner; it
// reports whether the read loop must end because, while it served the call,
// another goroutine took over reading.
func (r *reader) inline(buf []byte, msg any) (served, lost bool) {
	if r.takeover == nil {
		r.takeover = time.AfterFunc(time.Hour, r.takeOver)
		r.takeover.Stop()
	}
	r.buf = buf
	r.started.Store(time.Now().UnixNano())
	r.state.Store(inlineRunning)
	if r.armed.CompareAndSwap(false, true) {
		r.takeover.Reset(inlineBudget)
	}
	served = r.c.inliner.Inline(r.c, msg)
	if !r.state.CompareAndSwap(inlineRunning, inlineIdle) {
		return served, true
	}
	r.buf = nil
	return served, false
}

// LocalAddr is the local end's address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// RemoteAddrString is RemoteAddr().String(), computed once.
func (c *Conn) RemoteAddrString() string { return c.remote }

// TLS says whether a server's connection is TLS.
func (c *Conn) TLS() bool { return c.tls }

// MTLS says whether a server's connection is TLS with a client certificate
// that verified against the server's CAs (mutual TLS).
func (c *Conn) MTLS() bool { return c.mtls }

// IsClosed reports whether Close ran or the connection broke.
func (c *Conn) IsClosed() bool { return c.closed.Load() }

// Done is closed when the channel closes.
func (c *Conn) Done() <-chan struct{} { return c.done }

// queued is the number of bytes queued for writing and not yet taken by
// a writer: zero when the peer keeps up.
func (c *Conn) queued() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.wbuf)
}

// pending is the connection's pending bytes (queued, or taken by a writer
// and not yet written) and the senders waiting for room.
func (c *Conn) pending() (bytes, waiting int) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.wbuf) + c.inflight, int(c.ticketNext - c.ticketHead)
}

// Attr returns a value stored with SetAttr.
func (c *Conn) Attr(k any) (any, bool) { return c.attrs.Load(k) }

// SetAttr stores a value with the channel (Netty's channel attributes).
func (c *Conn) SetAttr(k, v any) { c.attrs.Store(k, v) }

// Send encodes msg and queues its frame for writing. Encoding happens on the
// caller's goroutine, outside the queue lock; an encoding error fails only
// this message. When nothing else is about to be sent and no write is in
// progress, Send writes the frame itself, without blocking: what the socket
// does not take at once is left to the write loop, so a caller never waits
// on a peer that does not read. On a server, a frame that would take the
// connection's pending bytes past maxPending waits for the writer to make
// room first (or for the connection to close: ErrClosed).
func (c *Conn) Send(msg any) error { return c.send(msg, 0) }

// SendMore is Send for a frame its sender will soon follow with more (the
// messages of a stream, sent in a loop): it is queued for the write loop,
// never written by the sender, so that the frames sent while the write
// loop wakes and writes go out together, one system call for several
// messages, as grpc-go's loopy writer does. A lone call's frame is better
// sent with Send, which writes it at once.
func (c *Conn) SendMore(msg any) error { return c.send(msg, sendMore) }

// Ways of sending (send's mode).
const (
	sendControl = 1 << iota // never waits for room (SendNoWait, SendControl)
	sendMore                // queued for the write loop (SendMore)
)

// SendNoWait is Send for a frame that must never wait for room on a
// server: a control frame a protocol answers its peer with from the read
// loop (counted with CountControl), or the one frame that says the
// connection ends (HTTP/2's GOAWAY, Dubbo's READONLY event), which a
// server closing many connections sends to each in turn. Such frames are
// counted or sent once, so they need no room of their own.
func (c *Conn) SendNoWait(msg any) error { return c.send(msg, sendControl) }

func (c *Conn) send(msg any, mode int) error {
	if c.closed.Load() {
		return ErrClosed
	}
	// The frame: the message's own bytes when the codec has them built
	// (no copy, and no encoding buffer that a large answer would grow and
	// leave as garbage), or encoded into a pooled buffer (bp).
	var bp *[]byte
	frame, ok := []byte(nil), false
	if c.rawf != nil {
		frame, ok = c.rawf.RawFrame(msg)
	}
	if !ok {
		// Sized for the connection's last frame when the pools have such a
		// buffer: messages on a connection tend to be alike, and a large
		// one then encodes without growing its buffer step by step.
		bp = getEncodeBuf(int(c.lastFrame.Load()))
		var err error
		if frame, err = c.codec.Encode((*bp)[:0], msg); err != nil {
			putEncodeBuf(bp)
			return err
		}
		if n := min(len(frame), 1<<maxBufShift); classAtLeast(n) != classAtLeast(int(c.lastFrame.Load())) {
			c.lastFrame.Store(int32(n)) // only when its class changes: no store per frame
		}
	}
	c.wmu.Lock()
	if c.closed.Load() {
		c.wmu.Unlock()
		putScratch(bp, frame)
		return ErrClosed
	}
	if c.pauseReads && mode&sendControl == 0 && c.mustWait(len(frame)) {
		// The slow path: the peer takes less than the server answers. The
		// frame waits before Sequence gives it its place on the wire.
		if !c.waitRoom(len(frame)) {
			c.wmu.Unlock()
			putScratch(bp, frame)
			return ErrClosed
		}
		c.wakeReader() // the read loop may wait for the line to end
	}
	if c.seq != nil {
		if frame = c.seq.Sequence(c, msg, frame); len(frame) == 0 {
			c.wmu.Unlock()
			putScratch(bp, frame)
			return nil
		}
	}
	if len(c.wbuf)+len(frame) > maxQueued && len(c.wbuf) > 0 {
		// One frame alone may be larger (the payload limit bounds it);
		// behind others, it is a queue its peer does not take.
		c.wmu.Unlock()
		putScratch(bp, frame)
		err := fmt.Errorf("write queue to %s over %d bytes: %w", c.remote, maxQueued, ErrBackedUp)
		c.fail(err)
		return err
	}
	var inline []byte
	took := false // inline is the queue's buffer, not the caller's frame
	switch {
	case c.flushing || c.raw == nil || mode&sendMore != 0 || c.coming.Load() > c.comingOver:
		c.wbuf = append(c.wbuf, frame...)
		c.noteLen()
	case len(c.wbuf) == 0:
		// Write the caller's own frame directly from its encoding buffer (or
		// the message's own bytes): no copy into the queue.
		c.flushing = true
		c.inflight = len(frame)
		inline = frame
	default:
		// The last of a batch (nothing else is coming): it takes the frames
		// queued before it along, at once, rather than leaving them to the
		// write loop's turn.
		c.wbuf = append(c.wbuf, frame...)
		c.flushing = true
		inline, c.wbuf, c.spare = c.wbuf, c.spare[:0], nil
		c.inflight = len(inline)
		took = true
	}
	c.wmu.Unlock()
	if inline != nil {
		c.writeNow(inline, took)
	}
	putScratch(bp, frame)
	if inline == nil {
		c.signal()
	}
	return nil
}

// putScratch gives an encoding buffer back to its size class's pool (as
// frame: the encoder may have grown it); bp is nil for a frame that was
// the message's own.
func putScratch(bp *[]byte, frame []byte) {
	if bp != nil {
		*bp = frame
		putEncodeBuf(bp)
	}
}

// SendControl sends a frame the protocol answers on its own, not a call's
// answer: a heartbeat reply, an HTTP/2 PING or SETTINGS acknowledgement. A
// peer can make a connection queue these as fast as it sends them without
// reading any; past MaxQueuedControl of them waiting since the queue was
// last empty the connection is closed with ErrBackedUp.
func (c *Conn) SendControl(msg any) error {
	if !c.CountControl() {
		err := fmt.Errorf("over %d control frames queued to %s: %w", MaxQueuedControl, c.remote, ErrBackedUp)
		c.fail(err)
		return err
	}
	return c.send(msg, sendControl)
}

// CountControl counts a control frame about to be queued and reports
// whether it is within MaxQueuedControl of them since the queue was last
// empty: SendControl's count, for a protocol that says something of its
// own before it closes (HTTP/2's GOAWAY ENHANCE_YOUR_CALM).
func (c *Conn) CountControl() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.wbuf) == 0 {
		c.control = 0
	}
	c.control++
	return c.control <= MaxQueuedControl
}

// mustWait reports whether a server's frame of n bytes waits for room
// (under wmu): others wait already, or it would take the pending bytes past
// maxPending behind others (alone, a frame goes whatever its size).
func (c *Conn) mustWait(n int) bool {
	p := len(c.wbuf) + c.inflight
	return c.ticketNext != c.ticketHead || p > 0 && p+n > maxPending
}

// waitRoom is a server's Send waiting for room for n bytes, under wmu
// (released while it waits, held again when it returns); false when the
// connection closed first. Senders go in the order they began to wait, so
// that a frame larger than what the writer frees at a time is not passed
// over for good by smaller ones. The wait is bounded: pending bytes mean a
// writer at work or signalled, and a writer whose peer takes nothing for
// WriteStall closes the connection.
func (c *Conn) waitRoom(n int) bool {
	t := c.ticketNext
	c.ticketNext++
	c.noteLen() // a sender waits: the read loop pauses
	for {
		if c.closed.Load() {
			return false
		}
		if p := len(c.wbuf) + c.inflight; t == c.ticketHead && (p == 0 || p+n <= maxPending) {
			c.ticketHead++
			c.noteLen()
			c.madeRoom() // the next in line may fit too
			return true
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.wmu.Unlock()
		select {
		case <-room:
		case <-c.done:
		}
		c.wmu.Lock()
	}
}

// madeRoom wakes the senders waiting for room, if any (under wmu).
func (c *Conn) madeRoom() {
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// wrote accounts for n bytes the writer has written of those it took
// (under wmu); the caller wakes the read loop once it has let go of the
// lock.
func (c *Conn) wrote(n int) {
	c.inflight -= n
	c.noteLen()
	c.madeRoom()
}

// noteLen keeps long, the read loop's lock-free hint that the pending
// bytes are over pauseReadAt or senders wait for room, after either
// changed (under wmu); it writes the shared flag only when the answer
// changes.
func (c *Conn) noteLen() {
	if l := len(c.wbuf)+c.inflight > pauseReadAt || c.ticketNext != c.ticketHead; l != c.longNow {
		c.longNow = l
		c.long.Store(l)
	}
}

// backedUp is what keeps a paused read loop waiting: pending bytes over
// half of pauseReadAt, or senders waiting for room.
func (c *Conn) backedUp() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.wbuf)+c.inflight > pauseReadAt/2 || c.ticketNext != c.ticketHead
}

// wakeReader tells a read loop paused for a long queue that a writer made
// progress.
func (c *Conn) wakeReader() {
	if c.paused.Load() {
		select {
		case c.rsignal <- struct{}{}:
		default:
		}
	}
}

// waitQueue is a paused server read loop's wait: until its writer has
// written the pending bytes down to half of pauseReadAt and no sender
// waits for room, or the connection closes (false).
// A peer that never reads is closed by the write side (WriteStall), which
// ends this wait too.
func (c *Conn) waitQueue() bool {
	c.paused.Store(true)
	defer c.paused.Store(false)
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	for c.backedUp() {
		select {
		case <-c.rsignal:
		case <-t.C:
			// A wake-up lost between the check and the store above is
			// found again here.
			t.Reset(50 * time.Millisecond)
		case <-c.done:
			return false
		}
	}
	return !c.closed.Load()
}

func (c *Conn) signal() {
	select {
	case c.wsignal <- struct{}{}:
	default:
	}
}

// writeNow writes buf, which the caller took while setting flushing, as far
// as the socket takes it without blocking; the rest goes before whatever was
// queued meanwhile, for the write loop. A buf that was the queue's buffer
// (took) becomes the spare one once written.
func (c *Conn) writeNow(buf []byte, took bool) {
	// The flushing writer owns these fields; the callback is a method value
	// made once, so a write allocates nothing.
	c.nbBuf, c.nbDone, c.nbErr = buf, 0, nil
	err := c.raw.Write(c.nbWrite)
	n := c.nbDone
	if err == nil {
		err = c.nbErr
	}
	c.nbBuf, c.nbErr = nil, nil
	if err != nil {
		c.wmu.Lock()
		c.flushing = false
		c.inflight = 0
		c.wmu.Unlock()
		c.fail(fmt.Errorf("write to %s: %w", c.RemoteAddr(), err))
		return
	}
	c.lastWrite.Store(time.Now().UnixNano())
	c.wmu.Lock()
	c.flushing = false
	more := len(c.wbuf) > 0 || n < len(buf)
	if n < len(buf) {
		rest := append(c.spare[:0], buf[n:]...)
		c.spare = nil
		c.wbuf = append(rest, c.wbuf...)
	}
	// What the socket did not take is pending in the queue now.
	c.wrote(c.inflight)
	if took && c.spare == nil && cap(buf) <= 4<<20 {
		c.spare = buf[:0]
	}
	c.wmu.Unlock()
	c.wakeReader()
	if more {
		c.signal()
	}
}

// nonBlockingWrite is the syscall.RawConn callback of writeNow: it writes
// what the socket takes and never asks to wait for writability.
func (c *Conn) nonBlockingWrite(fd uintptr) bool {
	for c.nbDone < len(c.nbBuf) {
		k, e := syscall.Write(int(fd), c.nbBuf[c.nbDone:])
		c.writes.Add(1)
		if k > 0 {
			c.nbDone += k
		}
		if e == syscall.EINTR {
			continue
		}
		if e != nil {
			if e != syscall.EAGAIN {
				c.nbErr = e
			}
			break
		}
		if k <= 0 {
			break
		}
	}
	return true
}

// minBatch is the queued size under which the write loop yields once before
// writing, to gather the frames of goroutines that are about to send.
const minBatch = 16 << 10

func (c *Conn) writeLoop() {
	defer c.loops.Done()
	for {
		select {
		case <-c.wsignal:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		if c.flushing || len(c.wbuf) == 0 {
			// A sender is writing; it signals again if it leaves anything.
			c.wmu.Unlock()
			continue
		}
		c.flushing = true
		if len(c.wbuf) < minBatch && c.coming.Load() > c.comingOver {
			c.wmu.Unlock()
			runtime.Gosched()
			c.wmu.Lock()
		}
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		c.spare = nil
		c.inflight = len(buf) // pending still, until written
		c.wmu.Unlock()
		if err := c.write(buf); err != nil {
			c.fail(err)
			return
		}
		// Keep a big buffer only while it is being used.
		if cap(buf) > 4<<20 {
			buf = nil
		}
		c.wmu.Lock()
		c.flushing = false
		c.spare = buf[:0]
		c.wrote(c.inflight) // the last chunk (write accounted for the others)
		more := len(c.wbuf) > 0
		c.wmu.Unlock()
		c.wakeReader()
		if more {
			c.signal()
		}
	}
}

// write writes buf in chunks of writeChunk, each allowed WriteStall to go
// out: a peer that takes less than that in that time while frames wait is
// not reading (or reads a byte now and then to look alive: counting any
// progress would let it), and the connection is closed rather than holding
// the frames, and the calls waiting behind them, for good. Each chunk but
// the last is accounted for as it goes out (the write loop accounts for the
// last, under the lock it takes anyway), so that a batch larger than a
// chunk makes room for waiting senders as the peer reads it: a single
// chunk costs no lock.
func (c *Conn) write(buf []byte) error {
	// The deadline is cleared after: a sender's non-blocking write
	// (writeNow) meets the socket's deadline too, and fails once it passed.
	defer c.nc.SetWriteDeadline(time.Time{})
	for len(buf) > 0 {
		n := min(len(buf), writeChunk)
		c.nc.SetWriteDeadline(time.Now().Add(writeStall))
		k, err := c.nc.Write(buf[:n])
		c.writes.Add(1)
		buf = buf[k:]
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("write to %s: %d bytes taken in %v with %d waiting: %w", c.remote, k, writeStall, len(buf), ErrBackedUp)
			}
			return fmt.Errorf("write to %s: %w", c.remote, err)
		}
		c.lastWrite.Store(time.Now().UnixNano())
		if len(buf) > 0 {
			c.wmu.Lock()
			c.wrote(k)
			c.wmu.Unlock()
			c.wakeReader()
		}
	}
	return nil
}

// bigBudget bounds the memory a server's connections hold in read buffers
// grown past readBufSize for frames larger than it, all connections
// together: a frame of the payload limit (8 MiB by default) is sent by
// whoever wants, slowly, on as many connections as it likes, and each
// would hold its whole size until the frame-read allowance ends it (before
// issue 22, eight connections pinned 64 MiB and a thousand would pin
// gigabytes). A connection whose frame does not fit waits (not reading:
// its peer is held back by TCP) until others finish theirs, within its
// frame-read allowance: a peer sending at 1 MiB/s or more finishes its frame
// in a fraction of it, so legitimate large frames wait for each other
// briefly, while a hostile holder is closed when its allowance ends. A
// frame alone always fits, whatever its size.
type bigBudget struct {
	mu    sync.Mutex
	cond  chan struct{} // closed and replaced when memory is released
	used  int64
	limit int64
}

// maxBigRead is a server's bigBudget (a variable for tests).
var maxBigRead int64 = 32 << 20

func newBigBudget(limit int64) *bigBudget {
	return &bigBudget{limit: limit, cond: make(chan struct{})}
}

// acquire takes n more bytes for a connection holding own already,
// waiting while others hold too much; false when done closes first.
func (b *bigBudget) acquire(n, own int64, done <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if b.used == own || b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return true
		}
		wait := b.cond
		b.mu.Unlock()
		select {
		case <-wait:
		case <-done:
			return false
		}
	}
}

// held is what the connections hold now.
func (b *bigBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *bigBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.cond)
	b.cond = make(chan struct{})
	b.mu.Unlock()
}

// releaseBig gives back what the read buffer held of the server's
// bigBudget (the read loop's; or after both loops ended).
func (c *Conn) releaseBig() {
	if c.big != nil && c.bigHeld > 0 {
		c.big.release(c.bigHeld)
		c.bigHeld = 0
	}
}

// frameReadAllowance is how long a frame of n bytes (0: not known) may take
// to arrive once its first byte has: 10 s, plus a second per MiB (a peer
// sending at 1 MiB/s or faster always completes). A peer trickling bytes
// (slowloris) holds the connection no longer.
func frameReadAllowance(n int64) time.Duration {
	return frameReadBase + time.Duration(n)*time.Second/(1<<20)
}

// writeStall is WriteStall, a variable for tests.
var writeStall = WriteStall

// frameReadBase is frameReadAllowance's fixed part (a variable for tests).
var frameReadBase = 10 * time.Second

// stale is why a server's watch closes c at now, "" when it does not:
// a frame started and not finished within its allowance.
func (c *Conn) stale(now int64) string {
	if at := c.partialAt.Load(); at != 0 {
		allow := frameReadAllowance(c.partialSize.Load())
		if time.Duration(now-at) > allow {
			if n := c.partialSize.Load(); n > 0 {
				return fmt.Sprintf("a frame of %d bytes not completed within %v", n, allow)
			}
			return fmt.Sprintf("a frame not completed within %v", allow)
		}
	}
	return ""
}

func (c *Conn) readLoop(buf []byte) {
	defer c.loops.Done()
	rd := &reader{c: c}
	start, end := 0, 0
	discard := 0 // bytes of a rejected frame still to skip
	sizer, _ := c.codec.(extension.FrameSizer)
	// small is the connection's own read buffer while a frame larger than
	// it is read into a pooled one (big), which goes back once the frame
	// is decoded: decoded values never alias the buffer.
	var small []byte
	var big *[]byte
	for {
		if start == end {
			start, end = 0, 0
			if len(buf) > readBufSize {
				// A big frame is done: do not keep its buffer for the
				// life of the connection.
				if big != nil {
					putReadBuf(big)
					big = nil
				}
				if small == nil {
					small = make([]byte, readBufSize) // a buffer handed over on takeover
				}
				buf, small = small, nil
				c.releaseBig()
			}
		}
		if end == len(buf) {
			if start > 0 {
				end = copy(buf, buf[start:end])
				start = 0
			} else {
				// One frame larger than the buffer: the codec has checked
				// its length against the payload limit already. Grow to
				// exactly its size when the codec can tell it.
				size := 2 * len(buf)
				if sizer != nil {
					if n := sizer.FrameSize(buf[:end]); n > len(buf) {
						size = n
					}
				}
				// The budget is charged what the buffer takes, its class's
				// capacity, beyond what this loop holds already.
				held := int64(cap(buf))
				if big == nil {
					held = readBufSize
				}
				if more := int64(readBufCap(size)) - held; more > 0 {
					if c.big != nil && !c.big.acquire(more, c.bigHeld, c.done) {
						c.fail(nil) // closed while it waited
						return
					}
					c.bigHeld += more
				}
				nbp := getReadBuf(size)
				nb := *nbp
				copy(nb, buf[:end])
				if big != nil {
					putReadBuf(big)
				} else if len(buf) == readBufSize {
					small = buf
				}
				big, buf = nbp, nb
			}
		}
		if c.pauseReads && c.long.Load() && !c.waitQueue() {
			c.fail(nil)
			return
		}
		n, err := c.nc.Read(buf[end:])
		var now int64
		decoded := false
		if n > 0 {
			end += n
			now = time.Now().UnixNano()
		}
		for {
			if discard > 0 {
				k := min(discard, end-start)
				discard -= k
				start += k
				if discard > 0 {
					break
				}
			}
			if start == end {
				break
			}
			msg, used, derr := c.codec.Decode(buf[start:end])
			if derr != nil {
				var fe *FrameError
				if errors.As(derr, &fe) && fe.Close {
					c.log.Warn("weft: closing connection after a frame it cannot honour", "remote", c.RemoteAddr().String(), "err", fe.Err)
					if fe.Msg != nil {
						c.handler.Received(c, fe.Msg)
					}
					c.flushThenFail(fmt.Errorf("frame from %s: %w", c.RemoteAddr(), fe.Err))
					return
				}
				if errors.As(derr, &fe) && fe.Skip > 0 {
					c.log.Warn("weft: rejected frame", "remote", c.RemoteAddr().String(), "err", fe.Err)
					// Answer now; the frame's bytes are skipped as they come,
					// never buffered.
					discard = fe.Skip
					c.handler.Received(c, fe.Msg)
					continue
				}
				c.handler.Caught(c, derr)
				c.fail(fmt.Errorf("decode from %s: %w", c.RemoteAddr(), derr))
				return
			}
			if used == 0 {
				break
			}
			decoded = true
			start += used
			if start == end && discard == 0 && c.inliner != nil && err == nil {
				// Nothing buffered behind it: the call may run here.
				if c.preparer != nil {
					if msg = c.preparer.Prepare(c, msg); msg == nil {
						continue
					}
				}
				served, lost := rd.inline(buf, msg)
				if lost {
					// The new read loop owns buf and the connection; a
					// message the offer declined is still this loop's.
					if !served {
						c.handler.Received(c, msg)
					}
					return
				}
				if served {
					continue
				}
			}
			c.handler.Received(c, msg)
		}
		if n > 0 {
			c.notePartial(now, decoded, buf[start:end], discard, sizer)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || c.closed.Load() {
				c.fail(nil)
			} else {
				c.fail(fmt.Errorf("read from %s: %w%s", c.RemoteAddr(), err, refusedTLS(err)))
			}
			return
		}
	}
}

// notePartial records, after a read at now, whether the read loop holds an
// incomplete frame (rest) or is skipping one (discard), and since when: a
// frame that completed in this read resets the clock, as does the first
// byte of the next.
func (c *Conn) notePartial(now int64, decoded bool, rest []byte, discard int, sizer extension.FrameSizer) {
	if decoded {
		c.lastRead.Store(now)
	}
	if len(rest) == 0 && discard == 0 {
		if c.partialAt.Load() != 0 {
			c.partialAt.Store(0)
		}
		return
	}
	if decoded || c.partialAt.Load() == 0 {
		size := int64(discard)
		if sizer != nil && len(rest) > 0 {
			size = int64(sizer.FrameSize(rest))
		}
		// The codec has checked a complete header against the payload
		// limit already; the clamp only keeps the allowance sane.
		c.partialSize.Store(min(size, 64<<20))
		c.partialAt.Store(now)
	}
}

// Close closes the connection; queued frames not yet written are dropped.
func (c *Conn) Close() error {
	c.fail(nil)
	return nil
}

// CloseGracefully flushes what is queued (bounded by wait), then closes
// the write side and, lingerClose later, the connection: in between, the
// read loop goes on reading (and the protocol dropping) what the peer still
// sends. Closing with the peer's bytes unread makes the kernel send RST, and
// the peer's kernel then drops what it had not yet handed to its reader:
// the GOAWAY saying why the connection ends among them (seen under load:
// a third of SETTINGS floods got "connection reset" instead). x/net's
// HTTP/2 server waits a second after GOAWAY too; nginx calls it lingering
// close (lingerClose does it for a plain client on a TLS port). A peer that closes its side first (EOF) ends the wait.
func (c *Conn) CloseGracefully(wait time.Duration) {
	c.flush(wait)
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok && !c.closed.Load() && hc.CloseWrite() == nil {
		time.AfterFunc(lingerFor, func() { c.Close() })
		return
	}
	c.Close()
}

// lingerFor is how long CloseGracefully keeps reading after it closed the
// write side (lingerClose, for a connection refused before it began, reads
// as long).
const lingerFor = time.Second

// flush waits up to wait for what is queued to be written: the queue empty
// and no write under way (a frame written inline, or a batch the write loop
// took, is out of the queue while it is written; closing under it would cut
// it, the GOAWAY saying why the connection ends among the bytes lost).
func (c *Conn) flush(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		c.wmu.Lock()
		n, writing := len(c.wbuf), c.flushing
		c.wmu.Unlock()
		if n == 0 && !writing {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// flushThenFail sends what is queued (an answer to the frame that ends the
// connection), then closes with err.
func (c *Conn) flushThenFail(err error) {
	c.flush(100 * time.Millisecond)
	c.fail(err)
}

// Err is why the connection closed (a read or write error, a frame it could
// not honour), nil while open or after a clean close.
func (c *Conn) Err() error {
	if p := c.closeErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Conn) fail(err error) {
	c.closeOnce.Do(func() {
		if err != nil {
			c.closeErr.Store(&err)
		}
		c.closed.Store(true)
		close(c.done)
		c.nc.Close()
		switch {
		case errors.Is(err, ErrBackedUp):
			// A defense acting: say so where operators look.
			c.log.Warn("weft: closing a connection whose peer does not read", "remote", c.remote, "err", err)
		case err != nil:
			c.log.Debug("weft: connection closed", "remote", c.remote, "err", err)
		}
		go func() {
			// The handler hears of the close once both loops have stopped, so
			// it never sees a message after Disconnected.
			c.loops.Wait()
			c.releaseBig()
			c.handler.Disconnected(c)
		}()
	})
}
