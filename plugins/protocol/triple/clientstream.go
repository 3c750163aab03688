package triple

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// A consumer's streaming call. The invoker sends its HEADERS (and a
// server-streaming call's one request) as a call of the exchange client,
// on a goroutine of its own that waits for the end of the stream, as a
// unary call waits for its answer: the deadline, the consumer's cancel
// (RST_STREAM) and the connection's end work as for unary calls. The read
// loop queues the answers as DATA brings them; RecvMsg takes them and gives
// the window back; SendMsg sends requests as the provider's windows allow.

// clientStream is kernel.ClientStream over one HTTP/2 stream.
type clientStream struct {
	ctx    context.Context
	kind   kernel.StreamKind
	maxMsg int
	ready  chan struct{} // closed by Sequence once the stream has its id
	st     *cstream      // set by Sequence, before ready closes
	cc     *clientConn

	mu      sync.Mutex
	cond    sync.Cond
	msgs    [][]byte
	partial []byte
	queued  int        // bytes in msgs and partial
	unacked h2.Unacked // bytes received, not yet given back
	ended   bool       // the call is over: err says how (nil: io.EOF)
	err     error      // the call's end: its status, or why it broke
	endCh   chan struct{}
	waiting bool
	closed  bool // CloseSend done
}

var _ kernel.ClientStream = (*clientStream)(nil)

func newClientStream(ctx context.Context, kind kernel.StreamKind, maxMsg int) *clientStream {
	cs := &clientStream{ctx: ctx, kind: kind, maxMsg: maxMsg, ready: make(chan struct{}), endCh: make(chan struct{})}
	cs.cond.L = &cs.mu
	return cs
}

func (cs *clientStream) Context() context.Context { return cs.ctx }

// data takes a DATA frame's payload on the read loop; false when the
// answers waiting exceed what the stream may hold (two messages at the
// payload limit): a provider that sends faster than the consumer reads is
// stopped, not buffered without end.
func (cs *clientStream) data(p []byte) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.queued += len(p)
	var ok bool
	if cs.msgs, cs.partial, ok = splitMessages(cs.msgs, cs.partial, p, cs.maxMsg); !ok {
		return false
	}
	cs.cond.Broadcast()
	return cs.queued <= 2*(cs.maxMsg+5)
}

// end records how the call ended (nil: well).
func (cs *clientStream) end(err error) {
	cs.mu.Lock()
	if !cs.ended {
		cs.ended, cs.err = true, err
		close(cs.endCh)
	}
	cs.cond.Broadcast()
	cs.mu.Unlock()
}

// RecvMsg decodes the next answer into m; io.EOF after the last when the
// call ended well, else its error.
func (cs *clientStream) RecvMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return kernel.Errorf(kernel.CodeSerialization, "RecvMsg into %T: Triple streams carry protobuf messages", m)
	}
	cs.mu.Lock()
	for len(cs.msgs) == 0 && !cs.ended && cs.ctx.Err() == nil {
		if !cs.waiting {
			cs.waiting = true
			context.AfterFunc(cs.ctx, func() {
				cs.mu.Lock()
				cs.cond.Broadcast()
				cs.mu.Unlock()
			})
		}
		cs.cond.Wait()
	}
	if len(cs.msgs) == 0 {
		err := cs.err
		if !cs.ended {
			err = cs.ctx.Err()
		}
		cs.mu.Unlock()
		if err == nil {
			return io.EOF
		}
		return err
	}
	msg := cs.msgs[0]
	cs.msgs[0] = nil
	cs.msgs = cs.msgs[1:]
	cs.queued -= len(msg)
	cs.mu.Unlock()
	if cs.st != nil {
		// Once per 32 KiB received, not per message.
		cs.mu.Lock()
		n := cs.unacked.Consume(len(msg))
		cs.mu.Unlock()
		if n > 0 {
			cs.cc.send(h2.AppendWindowUpdate(nil, cs.st.id, n))
		}
	}
	body := msg[5:]
	if msg[0] != 0 {
		var err error
		if body, err = gunzip(body, cs.maxMsg); err != nil {
			return kernel.Wrap(kernel.CodeSerialization, err, "a compressed stream message (this consumer reads gzip)")
		}
	}
	if err := proto.Unmarshal(body, pm); err != nil {
		return kernel.Wrap(kernel.CodeSerialization, err, "stream message as %T", m)
	}
	return nil
}

// errStreamEnded is what SendMsg says after the call ended.
var errStreamEnded = errors.New("the stream has ended")

// SendMsg sends one request.
func (cs *clientStream) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return kernel.Errorf(kernel.CodeSerialization, "SendMsg of %T: Triple streams carry protobuf messages", m)
	}
	if cs.kind == kernel.ServerStreaming {
		return kernel.Errorf(kernel.CodeSerialization, "a server-streaming call sent its one request when it opened")
	}
	bp, err := marshalFramed(pm)
	if err != nil {
		return err
	}
	defer netty.ReleaseBuffer(bp)
	buf := *bp
	out := prefixed(buf)
	cs.mu.Lock()
	closed, ended := cs.closed, cs.ended
	cs.mu.Unlock()
	if closed {
		return kernel.Errorf(kernel.CodeSerialization, "SendMsg after CloseSend")
	}
	if ended {
		return kernel.Wrap(kernel.CodeNetwork, errStreamEnded, "SendMsg")
	}
	for len(out) > 0 {
		n, maxFrame := cs.cc.reserve(cs, len(out))
		if n == 0 {
			cs.mu.Lock()
			err := cs.err
			cs.mu.Unlock()
			if err == nil {
				err = cs.ctx.Err()
			}
			if err == nil {
				err = errStreamEnded
			}
			return kernel.Wrap(kernel.CodeNetwork, err, "SendMsg")
		}
		cs.cc.conn.SendMore(rawFrames(dataFrames(buf, out, n, maxFrame, cs.st.id)))
		out = out[n:]
	}
	return nil
}

// CloseSend ends the requests: an empty DATA frame with END_STREAM.
func (cs *clientStream) CloseSend() error {
	cs.mu.Lock()
	if cs.closed || cs.kind == kernel.ServerStreaming {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	cs.mu.Unlock()
	cs.cc.send(h2.AppendData(nil, cs.st.id, nil, h2.DefaultMaxFrame, true))
	return nil
}

// reserve waits until the windows let n bytes of cs's stream go (or less,
// but more than none); 0 when the call ended or its context did.
func (cc *clientConn) reserve(cs *clientStream, n int) (int, int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	st := cs.st
	var stop func() bool
	for cc.win.Conn <= 0 || st.sendWindow <= 0 {
		if cs.ctx.Err() != nil || cc.closed || cc.streams[st.id] != st {
			return 0, 0
		}
		if stop == nil {
			stop = context.AfterFunc(cs.ctx, func() {
				cc.mu.Lock()
				cc.cond.Broadcast()
				cc.mu.Unlock()
			})
			defer stop()
		}
		cc.cond.Wait()
	}
	if cc.closed || cc.streams[st.id] != st {
		return 0, 0
	}
	return int(cc.win.Take(&st.sendWindow, int64(n))), cc.win.MaxFrame
}
