package triple

import (
	"encoding/binary"
	"fmt"
	"sync"

	netty "github.com/weftrpc/weft/transport-netty"
)

// HTTP/2 frame types, flags, settings and error codes (RFC 9113).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingHeaderTableSize      = 0x1
	settingEnablePush           = 0x2
	settingMaxConcurrentStreams = 0x3
	settingInitialWindowSize    = 0x4
	settingMaxFrameSize         = 0x5
	settingMaxHeaderListSize    = 0x6

	errNo                 = 0x0
	errProtocol           = 0x1
	errInternal           = 0x2
	errFlowControl        = 0x3
	errStreamClosed       = 0x5
	errFrameSize          = 0x6
	errRefusedStream      = 0x7
	errCancel             = 0x8
	errCompression        = 0x9
	errEnhanceYourCalm    = 0xb
	frameHeaderLen        = 9
	defaultMaxFrame       = 16384
	defaultInitialWindow  = 65535
	maxWindow             = 1<<31 - 1
	clientPreface         = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	maxHeaderBlock        = 64 << 10 // a header block (HEADERS + CONTINUATION), decoded or not
	maxHeaderListSize     = 16 << 10 // decoded header fields, as SETTINGS_MAX_HEADER_LIST_SIZE says
	recvWindow            = 1 << 20  // what each stream may send before we read it
	connRecvWindow        = 16 << 20 // and the whole connection
	windowUpdateThreshold = 32 << 10 // consumed bytes that make a WINDOW_UPDATE worth a frame
)

// frame is one HTTP/2 frame as the codec splits it off the read buffer. Its
// payload aliases that buffer: it is valid until Received returns, which
// is why the connection layer processes frames on the read loop and copies
// what outlives them.
type frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

var framePool = sync.Pool{New: func() any { return new(frame) }}

// preface is the client's connection preface, split off like a frame.
type preface struct{}

// connError is a frame the codec refuses: the connection answers GOAWAY
// with code and closes.
type connError struct {
	code uint32
	msg  string
}

// codec splits HTTP/2 frames. It has no state: the HPACK decoder and the
// streams belong to each connection (serverConn), and what it encodes needs
// none (see appendHeaderField).
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
		n := min(len(src), len(clientPreface))
		if string(src[:n]) != clientPreface[:n] {
			return nil, 0, badPreface(src[:n])
		}
		if n < len(clientPreface) {
			return nil, 0, nil
		}
		return preface{}, len(clientPreface), nil
	}
	if len(src) > 0 && src[0] == 0x16 && c.maxBody > 0 {
		// A TLS record (a ClientHello) where no frame can start: our
		// frames are under 64 KiB, so their first byte is 0.
		e := &connError{code: errProtocol, msg: "a TLS handshake on a plaintext Triple port: call it without TLS, or configure TLS on the provider"}
		return nil, 0, &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s", e.msg)}
	}
	if len(src) > 0 && src[0] != 0 && c.maxFrame < 1<<16 {
		// Over any frame we accept: say so now, not after 9 bytes.
		e := &connError{code: errFrameSize, msg: fmt.Sprintf("a frame of over 64 KiB (first byte 0x%02x), over SETTINGS_MAX_FRAME_SIZE %d", src[0], c.maxFrame)}
		return nil, 0, &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s", e.msg)}
	}
	if len(src) < frameHeaderLen {
		return nil, 0, nil
	}
	n := int(src[0])<<16 | int(src[1])<<8 | int(src[2])
	if n > c.maxFrame {
		e := &connError{code: errFrameSize, msg: fmt.Sprintf("frame of %d bytes, over SETTINGS_MAX_FRAME_SIZE %d", n, c.maxFrame)}
		return nil, 0, &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s", e.msg)}
	}
	if len(src) < frameHeaderLen+n {
		return nil, 0, nil
	}
	f := framePool.Get().(*frame)
	f.typ, f.flags = src[3], src[4]
	f.stream = binary.BigEndian.Uint32(src[5:]) & 0x7fffffff
	f.payload = src[frameHeaderLen : frameHeaderLen+n]
	return f, frameHeaderLen + n, nil
}

func badPreface(got []byte) error {
	e := &connError{code: errProtocol, msg: "not an HTTP/2 connection preface (Triple speaks HTTP/2: gRPC, or h2c with prior knowledge)"}
	return &netty.FrameError{Close: true, Msg: e, Err: fmt.Errorf("weft: triple: %s, got %q", e.msg, got)}
}

// FrameSize tells the transport how long the frame at src is.
func (c *codec) FrameSize(src []byte) int {
	if len(src) < 3 || src[0] == 'P' {
		return 0
	}
	return frameHeaderLen + (int(src[0])<<16 | int(src[1])<<8 | int(src[2]))
}

// appender is what the connection layer sends: it writes its own frames.
type appender interface {
	appendFrames(dst []byte) ([]byte, error)
}

// rawFrames are frames built already (settings, acks, window updates).
type rawFrames []byte

func (r rawFrames) appendFrames(dst []byte) ([]byte, error) { return append(dst, r...), nil }

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

func appendFrameHeader(dst []byte, n int, typ, flags byte, stream uint32) []byte {
	return append(dst, byte(n>>16), byte(n>>8), byte(n), typ, flags,
		byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream))
}

func appendSettings(dst []byte, kv ...uint32) []byte {
	dst = appendFrameHeader(dst, len(kv)/2*6, frameSettings, 0, 0)
	for i := 0; i+1 < len(kv); i += 2 {
		dst = append(dst, byte(kv[i]>>8), byte(kv[i]))
		dst = binary.BigEndian.AppendUint32(dst, kv[i+1])
	}
	return dst
}

func appendWindowUpdate(dst []byte, stream uint32, n uint32) []byte {
	dst = appendFrameHeader(dst, 4, frameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(dst, n)
}

func appendRST(dst []byte, stream, code uint32) []byte {
	dst = appendFrameHeader(dst, 4, frameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(dst, code)
}

func appendGoAway(dst []byte, last, code uint32, debug string) []byte {
	if len(debug) > 256 {
		debug = debug[:256]
	}
	dst = appendFrameHeader(dst, 8+len(debug), frameGoAway, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, last)
	dst = binary.BigEndian.AppendUint32(dst, code)
	return append(dst, debug...)
}

// appendData appends data as DATA frames of at most maxFrame bytes, the
// last with END_STREAM when end is set.
func appendData(dst []byte, stream uint32, data []byte, maxFrame int, end bool) []byte {
	for {
		n := min(len(data), maxFrame)
		var flags byte
		if n == len(data) && end {
			flags = flagEndStream
		}
		dst = appendFrameHeader(dst, n, frameData, flags, stream)
		dst = append(dst, data[:n]...)
		data = data[n:]
		if len(data) == 0 {
			return dst
		}
	}
}

// The header block is encoded without the HPACK dynamic table: literals
// never indexed, names from the static table where it has them. That makes
// encoding stateless, so that every goroutine answering a call encodes its
// own frames in parallel, in any order on the wire, with no lock and no
// per-connection encoder; the cost is some bytes per response that a
// dynamic table would have saved.
var staticNames = map[string]byte{
	":authority": 1, ":method": 2, ":path": 4, ":scheme": 6, ":status": 8,
	"accept-encoding": 16, "content-type": 31, "user-agent": 58,
}

// appendHeaderField appends name: value as a literal field never indexed
// (RFC 7541 6.2.3), ":status: 200" as the static entry it is.
func appendHeaderField(dst []byte, name, value string) []byte {
	if name == ":status" && value == "200" {
		return append(dst, 0x88)
	}
	if i := staticNames[name]; i != 0 {
		dst = appendHpackInt(dst, 0x10, 4, uint64(i))
	} else {
		dst = append(dst, 0x10)
		dst = appendHpackInt(dst, 0, 7, uint64(len(name)))
		dst = append(dst, name...)
	}
	dst = appendHpackInt(dst, 0, 7, uint64(len(value)))
	return append(dst, value...)
}

// appendHpackInt is RFC 7541 5.1's integer with an n-bit prefix, first
// byte's high bits from first.
func appendHpackInt(dst []byte, first byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(max))
	v -= max
	for v >= 128 {
		dst = append(dst, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(dst, byte(v))
}

// appendHeaders appends a header block as HEADERS (and CONTINUATION frames
// when it exceeds maxFrame).
func appendHeaders(dst []byte, stream uint32, block []byte, maxFrame int, end bool) []byte {
	var flags byte
	if end {
		flags = flagEndStream
	}
	typ := byte(frameHeaders)
	for {
		n := min(len(block), maxFrame)
		f := flags
		if n == len(block) {
			f |= flagEndHeaders
		}
		dst = appendFrameHeader(dst, n, typ, f, stream)
		dst = append(dst, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return dst
		}
		typ, flags = frameContinuation, 0
	}
}

// peerSettings are the values a SETTINGS frame sets that this side uses;
// HEADER_TABLE_SIZE needs nothing (our encoder never indexes).
type peerSettings struct {
	window, maxFrame       uint32
	hasWindow, hasMaxFrame bool
}

// parseSettings checks a SETTINGS frame (not an ACK) whole, as both ends
// read it: a value out of range is the connection's error, and nothing of
// the frame is applied.
func parseSettings(f *frame) (peerSettings, *connError) {
	var ps peerSettings
	if f.stream != 0 {
		return ps, &connError{code: errProtocol, msg: fmt.Sprintf("SETTINGS on stream %d", f.stream)}
	}
	if len(f.payload)%6 != 0 {
		return ps, &connError{code: errFrameSize, msg: fmt.Sprintf("SETTINGS of %d bytes", len(f.payload))}
	}
	for p := f.payload; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case settingEnablePush:
			if v > 1 {
				return ps, &connError{code: errProtocol, msg: fmt.Sprintf("SETTINGS_ENABLE_PUSH %d", v)}
			}
		case settingInitialWindowSize:
			if v > maxWindow {
				return ps, &connError{code: errFlowControl, msg: fmt.Sprintf("SETTINGS_INITIAL_WINDOW_SIZE %d over 2^31-1", v)}
			}
			ps.window, ps.hasWindow = v, true
		case settingMaxFrameSize:
			if v < defaultMaxFrame || v > 1<<24-1 {
				return ps, &connError{code: errProtocol, msg: fmt.Sprintf("SETTINGS_MAX_FRAME_SIZE %d out of [16384, 16777215]", v)}
			}
			ps.maxFrame, ps.hasMaxFrame = v, true
		}
	}
	return ps, nil
}
