package triple

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// A provider's streaming call. Client- and bidirectional-streaming calls
// are served from their HEADERS on (their requests are messages to come);
// a server-streaming call, whose request is one message, from its end, as
// a unary one. The read loop queues the request messages as DATA brings
// them; the method takes them with RecvMsg, which gives the client its
// window back as it consumes (so a client cannot make the server hold more
// than the stream's window); SendMsg sends HEADERS before the first answer
// and each answer as DATA, as the client's windows allow; the method's
// return sends the trailers.

// serverStream is kernel.Stream on a provider's HTTP/2 stream.
type serverStream struct {
	st          *stream
	ctx         context.Context
	inv         *kernel.Invocation // the call's, for SetHeader
	contentType string
	maxMsg      int
	gzip        bool // the client's grpc-encoding is gzip

	mu      sync.Mutex
	cond    sync.Cond
	msgs    [][]byte   // complete request messages not yet received
	partial []byte     // the start of the next one
	ended   bool       // the client sent its last message
	err     error      // the stream broke (reset, connection closed)
	waiting bool       // a RecvMsg watches ctx (context.AfterFunc set)
	held    int        // bytes in msgs and partial: of the connection's window and the server's budget
	unacked h2.Unacked // bytes received by the method, not yet given back
	done    bool       // the call has returned: nothing more is kept

	sentHeaders bool // only the method's goroutine touches it
}

var _ kernel.Stream = (*serverStream)(nil)

func newServerStream(st *stream, contentType string, maxMsg int) *serverStream {
	ss := &serverStream{st: st, contentType: contentType, maxMsg: maxMsg, gzip: header(st.headers, "grpc-encoding") == "gzip"}
	ss.cond.L = &ss.mu
	return ss
}

func (ss *serverStream) Context() context.Context { return ss.ctx }

// data takes a DATA frame's payload on the read loop: kept is false when
// the call has returned already (the bytes are the caller's to give back),
// ok false when a message in it is over the payload limit.
func (ss *serverStream) data(p []byte, end bool) (kept, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.done {
		return false, true
	}
	ss.held += len(p)
	if ss.msgs, ss.partial, ok = splitMessages(ss.msgs, ss.partial, p, ss.maxMsg); !ok {
		return true, false
	}
	if end {
		ss.ended = true
	}
	ss.cond.Broadcast()
	return true, true
}

// finish runs when the call has returned: the messages it did not
// receive, and the window it did not give back, go back to the
// connection and the server's budget.
func (ss *serverStream) finish() {
	ss.mu.Lock()
	if ss.done {
		ss.mu.Unlock()
		return
	}
	ss.done = true
	held, free := ss.held, ss.held+int(ss.unacked)
	ss.held, ss.unacked, ss.msgs, ss.partial = 0, 0, nil, nil
	ss.mu.Unlock()
	sc := ss.st.sc
	sc.f.buffered.Add(-int64(held))
	if free > 0 {
		sc.connHeld.Add(-int64(free))
		sc.send(h2.AppendWindowUpdate(nil, 0, uint32(free)))
	}
}

// fail ends the stream's receiving side with err.
func (ss *serverStream) fail(err error) {
	ss.mu.Lock()
	if ss.err == nil {
		ss.err = err
	}
	ss.cond.Broadcast()
	ss.mu.Unlock()
}

// RecvMsg decodes the next request into m, a protobuf message.
func (ss *serverStream) RecvMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return kernel.Errorf(kernel.CodeSerialization, "RecvMsg into %T: Triple streams carry protobuf messages", m)
	}
	msg, err := ss.recvRaw()
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(msg, pm); err != nil {
		return kernel.Wrap(kernel.CodeSerialization, err, "stream message as %T", m)
	}
	return nil
}

// recvRaw waits for the next request message and returns its encoding.
func (ss *serverStream) recvRaw() ([]byte, error) {
	ss.mu.Lock()
	for len(ss.msgs) == 0 && ss.err == nil && !ss.ended && ss.ctx.Err() == nil {
		if !ss.waiting {
			ss.waiting = true
			context.AfterFunc(ss.ctx, func() {
				ss.mu.Lock()
				ss.cond.Broadcast()
				ss.mu.Unlock()
			})
		}
		ss.cond.Wait()
	}
	switch {
	case len(ss.msgs) > 0:
	case ss.err != nil:
		err := ss.err
		ss.mu.Unlock()
		return nil, err
	case ss.ctx.Err() != nil:
		ss.mu.Unlock()
		return nil, ss.ctx.Err()
	default:
		ss.mu.Unlock()
		return nil, io.EOF
	}
	msg := ss.msgs[0]
	ss.msgs[0] = nil
	ss.msgs = ss.msgs[1:]
	// The client may send as much again, on the stream and the
	// connection, said once per 32 KiB received (a frame per message
	// would cost a write per message).
	ss.held -= len(msg)
	ack := ss.unacked.Consume(len(msg))
	ss.mu.Unlock()
	sc := ss.st.sc
	sc.f.buffered.Add(-int64(len(msg)))
	if ack > 0 {
		ss.st.window.Add(int64(ack))
		sc.connHeld.Add(-int64(ack))
		sc.send(h2.AppendWindowUpdate(h2.AppendWindowUpdate(nil, ss.st.id, ack), 0, ack))
	}
	if msg[0] != 0 {
		if !ss.gzip {
			return nil, kernel.Errorf(kernel.CodeSerialization, "a compressed message on a stream whose grpc-encoding is not gzip")
		}
		body, err := gunzip(msg[5:], ss.maxMsg)
		if err != nil {
			return nil, kernel.Wrap(kernel.CodeSerialization, err, "a compressed stream message")
		}
		return body, nil
	}
	return msg[5:], nil
}

// SendMsg sends one answer, HEADERS first.
func (ss *serverStream) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return kernel.Errorf(kernel.CodeSerialization, "SendMsg of %T: Triple streams carry protobuf messages", m)
	}
	bp, err := marshalFramed(pm)
	if err != nil {
		return err
	}
	defer netty.ReleaseBuffer(bp)
	return ss.sendFramed(*bp)
}

// sendRaw sends an encoded message.
func (ss *serverStream) sendRaw(b []byte) error {
	bp := netty.Buffer(h2.FrameHeaderLen + 5 + len(b))
	defer netty.ReleaseBuffer(bp)
	*bp = append((*bp)[:h2.FrameHeaderLen+5], b...)
	return ss.sendFramed(*bp)
}

// sendFramed sends a message that buf holds after room for a DATA frame's
// header and the gRPC prefix (see dataFrames).
func (ss *serverStream) sendFramed(buf []byte) error {
	out := prefixed(buf)
	st, sc := ss.st, ss.st.sc
	if !ss.sentHeaders {
		ss.sentHeaders = true
		hb := h2.AppendField(nil, ":status", "200")
		hb = h2.AppendField(hb, "content-type", ss.contentType)
		hb = appendMetadata(hb, headersOf(ss.inv))
		sc.sendMore(h2.AppendHeaders(nil, st.id, hb, sc.maxFrameNow(), false))
	}
	for len(out) > 0 {
		n, maxFrame := sc.reserve(ss.ctx, st, len(out))
		if n == 0 {
			if err := ss.ctx.Err(); err != nil {
				return err
			}
			return kernel.Errorf(kernel.CodeNetwork, "the stream was reset or its connection closed")
		}
		sc.dataOut.Add(int64((n + maxFrame - 1) / maxFrame))
		sc.sendMore(dataFrames(buf, out, n, maxFrame, st.id))
		out = out[n:]
	}
	return nil
}

// trailers ends a stream the method has answered on: its status and the
// reply attachments, after the answers.
func (ss *serverStream) trailers(grpcStatus int, code kernel.Code, msg string, att map[string]any) *netty.Response {
	if !ss.sentHeaders {
		b := appendTrailersOnly(nil, ss.st.id, 200, grpcStatus, msg, code)
		return &netty.Response{ID: uint64(ss.st.id), Status: kernel.ResponseOK, Data: rawFrames(b)}
	}
	tb := h2.AppendField(nil, "grpc-status", fmt.Sprint(grpcStatus))
	if msg != "" {
		tb = h2.AppendField(tb, "grpc-message", encodeMessage(msg))
	}
	if grpcStatus != statusOK {
		tb = h2.AppendField(tb, headerExceptionCode, fmt.Sprint(int(code)))
	}
	tb = appendMetadata(tb, att)
	return &netty.Response{ID: uint64(ss.st.id), Status: kernel.ResponseOK,
		Data: rawFrames(h2.AppendHeaders(nil, ss.st.id, tb, ss.st.sc.maxFrameNow(), true))}
}

// splitMessages appends p to partial, the start of a stream's next
// length-prefixed message, and moves each message it completes to msgs; ok
// is false when a message claims more than max bytes.
func splitMessages(msgs [][]byte, partial, p []byte, max int) (_ [][]byte, _ []byte, ok bool) {
	partial = append(partial, p...)
	for len(partial) >= 5 {
		n := int(binary.BigEndian.Uint32(partial[1:]))
		if n > max {
			return msgs, partial, false
		}
		if len(partial) < 5+n {
			break
		}
		msgs = append(msgs, partial[:5+n:5+n])
		partial = partial[5+n:]
	}
	if len(partial) == 0 {
		partial = nil
	}
	return msgs, partial, true
}

// marshalFramed marshals pm into a pooled buffer after room for a DATA
// frame's header and the gRPC prefix: when the windows take the message
// whole (the usual case), that buffer is its frame (dataFrames), sent with
// no copy. Give it back with netty.ReleaseBuffer once it is sent.
func marshalFramed(pm proto.Message) (*[]byte, error) {
	const room = h2.FrameHeaderLen + 5
	size := proto.Size(pm)
	bp := netty.Buffer(room + size)
	buf, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*bp)[:room], pm)
	*bp = buf
	if err != nil {
		netty.ReleaseBuffer(bp)
		return nil, kernel.Wrap(kernel.CodeSerialization, err, "stream message %T", pm)
	}
	return bp, nil
}

// prefixed writes the gRPC prefix of the message buf holds after a DATA
// frame's header's room, and returns prefix and message.
func prefixed(buf []byte) []byte {
	out := buf[h2.FrameHeaderLen:]
	out[0] = 0
	binary.BigEndian.PutUint32(out[1:], uint32(len(out)-5))
	return out
}

// dataFrames returns the DATA frames that carry out[:n], the front of the
// prefixed message that buf holds after a frame header's room: buf itself,
// its header written in place, when that is the whole message in one frame;
// else new frames.
func dataFrames(buf, out []byte, n, maxFrame int, stream uint32) []byte {
	if n == len(out) && n <= maxFrame && len(out) == len(buf)-h2.FrameHeaderLen {
		return h2.AppendFrameHeader(buf[:0], n, h2.FrameData, 0, stream)[:len(buf)]
	}
	return h2.AppendData(nil, stream, out[:n], maxFrame, false)
}
