package triple

import (
	"fmt"

	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// preface is the client's connection preface, split off like a frame.
type preface struct{}

// codec is the transport's side of HTTP/2 for both ends: it splits frames
// (h2.Parse) and encodes what the connection layer sends. It has no state:
// the HPACK decoder and the streams belong to each connection (serverConn,
// clientConn), and what it encodes needs none (see h2.AppendField).
type codec struct {
	maxFrame int // the largest frame payload we accept (our SETTINGS_MAX_FRAME_SIZE)
	maxBody  int // the largest HTTP/1.1 body (the payload limit); 0 on clients
}

// Decode splits the next frame (or the client preface, or an HTTP/1.1
// request) off src.
func (c *codec) Decode(src []byte) (any, int, error) {
	if c.maxBody > 0 && isHTTP1(src) {
		return decodeHTTP1(src, c.maxBody)
	}
	if len(src) > 0 && src[0] == 'P' {
		// No frame starts with 'P': its length would be over 5 MB, above
		// any SETTINGS_MAX_FRAME_SIZE we announce.
		n := min(len(src), len(h2.ClientPreface))
		if string(src[:n]) != h2.ClientPreface[:n] {
			return nil, 0, badPreface(src[:n])
		}
		if n < len(h2.ClientPreface) {
			return nil, 0, nil
		}
		return preface{}, len(h2.ClientPreface), nil
	}
	if len(src) > 0 && src[0] == 0x16 && c.maxBody > 0 {
		// A TLS record (a ClientHello) where no frame can start: our
		// frames are under 64 KiB, so their first byte is 0.
		return nil, 0, frameError(&h2.ConnError{Code: h2.CodeProtocol,
			Msg: "a TLS handshake on a plaintext Triple port: call it without TLS, or configure TLS on the provider"})
	}
	f, n, e := h2.Parse(src, c.maxFrame)
	if e != nil {
		return nil, 0, frameError(e)
	}
	if f == nil {
		return nil, 0, nil // not whole yet
	}
	return f, n, nil
}

// frameError is a frame the codec refuses: the connection answers GOAWAY
// (the state's fail, given e as the message) and closes.
func frameError(e *h2.ConnError) error {
	return &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s", e.Msg)}
}

func badPreface(got []byte) error {
	e := &h2.ConnError{Code: h2.CodeProtocol, Msg: "not an HTTP/2 connection preface (Triple speaks HTTP/2: gRPC, or h2c with prior knowledge)"}
	return &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s, got %q", e.Msg, got)}
}

// FrameSize tells the transport how long the frame at src is.
func (c *codec) FrameSize(src []byte) int {
	if len(src) > 0 && src[0] == 'P' {
		return 0
	}
	return h2.Size(src)
}

// appender is what the connection layer sends: it writes its own frames.
type appender interface {
	appendFrames(dst []byte) ([]byte, error)
}

// rawFrames are frames built already (settings, acks, window updates).
type rawFrames []byte

func (r rawFrames) appendFrames(dst []byte) ([]byte, error) { return append(dst, r...), nil }

// RawFrame is frames built already, the transport's to send as they are
// (extension.RawFramer): no copy of an answer into an encoding buffer.
func (c *codec) RawFrame(msg any) ([]byte, bool) {
	switch m := msg.(type) {
	case rawFrames:
		return m, true
	case *netty.Response:
		switch r := m.Data.(type) {
		case rawFrames:
			return r, true
		case *pooledFrames:
			return *r, true
		}
	}
	return nil, false
}

// pooledFrames are an answer's frames built in a buffer from the
// transport's pools (netty.Buffer), which goes back once the transport has
// written or copied them (netty.SentData): a unary answer makes no garbage
// of its size.
type pooledFrames []byte

// Sent gives the buffer back.
func (p *pooledFrames) Sent() { netty.ReleaseBuffer((*[]byte)(p)) }

func (p *pooledFrames) appendFrames(dst []byte) ([]byte, error) { return append(dst, *p...), nil }

// Encode appends msg's frames: an appender's own, or a response of the
// exchange layer (an answer, or one it makes itself: status 100, shutting
// down) as a gRPC response on its stream.
func (c *codec) Encode(dst []byte, msg any) ([]byte, error) {
	switch m := msg.(type) {
	case appender:
		return m.appendFrames(dst)
	case *netty.Response:
		return appendResponse(dst, m)
	}
	return dst, fmt.Errorf("weft: triple: cannot encode %T", msg)
}
