// Package h2 is the HTTP/2 (RFC 9113) that both ends of Triple share: the
// frames, how they are split and written, the SETTINGS, PING, GOAWAY,
// RST_STREAM and WINDOW_UPDATE frames checked the one way, the HPACK
// decoder and the stateless encoder, and the pieces of a connection's state
// that the client and the server keep alike (the header block being read,
// the send windows, the receive window given back). What each end does with
// a frame, and the netty codec that hands frames to it, stay in package
// triple: this package knows nothing of the transport.
package h2

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// HTTP/2 frame types, flags, settings and error codes (RFC 9113).
const (
	FrameData         = 0x0
	FrameHeaders      = 0x1
	FramePriority     = 0x2
	FrameRSTStream    = 0x3
	FrameSettings     = 0x4
	FramePushPromise  = 0x5
	FramePing         = 0x6
	FrameGoAway       = 0x7
	FrameWindowUpdate = 0x8
	FrameContinuation = 0x9

	FlagEndStream  = 0x1
	FlagAck        = 0x1
	FlagEndHeaders = 0x4
	FlagPadded     = 0x8
	FlagPriority   = 0x20

	SettingHeaderTableSize      = 0x1
	SettingEnablePush           = 0x2
	SettingMaxConcurrentStreams = 0x3
	SettingInitialWindowSize    = 0x4
	SettingMaxFrameSize         = 0x5
	SettingMaxHeaderListSize    = 0x6

	CodeNo                 = 0x0
	CodeProtocol           = 0x1
	CodeInternal           = 0x2
	CodeFlowControl        = 0x3
	CodeStreamClosed       = 0x5
	CodeFrameSize          = 0x6
	CodeRefusedStream      = 0x7
	CodeCancel             = 0x8
	CodeCompression        = 0x9
	CodeEnhanceYourCalm    = 0xb
	CodeInadequateSecurity = 0xc // the peer's connection is not secure enough: a plaintext client on a TLS port

	FrameHeaderLen       = 9
	DefaultMaxFrame      = 16384
	DefaultInitialWindow = 65535
	MaxWindow            = 1<<31 - 1
	ClientPreface        = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

// What both of weft's ends announce and hold a peer to.
const (
	MaxHeaderBlock        = 64 << 10 // a header block (HEADERS + CONTINUATION), decoded or not
	MaxHeaderListSize     = 16 << 10 // decoded header fields, as SETTINGS_MAX_HEADER_LIST_SIZE says
	RecvWindow            = 1 << 20  // what each stream may send before we read it
	ConnRecvWindow        = 16 << 20 // and the whole connection
	WindowUpdateThreshold = 32 << 10 // consumed bytes that make a WINDOW_UPDATE worth a frame
)

// Frame is one HTTP/2 frame as Parse splits it off the read buffer. Its
// payload aliases that buffer: it is valid until the transport's handler
// returns, which is why both ends process frames on the read loop and copy
// what outlives them.
type Frame struct {
	Type, Flags byte
	Stream      uint32
	Payload     []byte
}

var framePool = sync.Pool{New: func() any { return new(Frame) }}

// Release gives a frame Parse returned back to the pool, once it has been
// run through the connection's state.
func Release(f *Frame) {
	f.Payload = nil
	framePool.Put(f)
}

// ConnError is a connection error (RFC 9113 5.4.1): the connection answers
// GOAWAY with Code, saying Msg, and closes.
type ConnError struct {
	Code uint32
	Msg  string
}

func connErrorf(code uint32, format string, args ...any) *ConnError {
	return &ConnError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Parse splits the frame at the front of src, whose payload may be at most
// maxFrame bytes (our SETTINGS_MAX_FRAME_SIZE): n is 0, and f nil, when src
// does not hold it whole yet. The frame is from a pool: Release it.
func Parse(src []byte, maxFrame int) (f *Frame, n int, e *ConnError) {
	if len(src) > 0 && src[0] != 0 && maxFrame < 1<<16 {
		// Over any frame we accept: say so now, not after 9 bytes.
		return nil, 0, connErrorf(CodeFrameSize, "a frame of over 64 KiB (first byte 0x%02x), over SETTINGS_MAX_FRAME_SIZE %d", src[0], maxFrame)
	}
	if len(src) < FrameHeaderLen {
		return nil, 0, nil
	}
	size := int(src[0])<<16 | int(src[1])<<8 | int(src[2])
	if size > maxFrame {
		return nil, 0, connErrorf(CodeFrameSize, "frame of %d bytes, over SETTINGS_MAX_FRAME_SIZE %d", size, maxFrame)
	}
	if len(src) < FrameHeaderLen+size {
		return nil, 0, nil
	}
	f = framePool.Get().(*Frame)
	f.Type, f.Flags = src[3], src[4]
	f.Stream = binary.BigEndian.Uint32(src[5:]) & 0x7fffffff
	f.Payload = src[FrameHeaderLen : FrameHeaderLen+size]
	return f, FrameHeaderLen + size, nil
}

// Size is the length of the frame at src, header included; 0 when src
// holds too little of it to tell.
func Size(src []byte) int {
	if len(src) < 3 {
		return 0
	}
	return FrameHeaderLen + (int(src[0])<<16 | int(src[1])<<8 | int(src[2]))
}

// Payload strips a frame's padding (and a HEADERS frame's priority); ok
// is false when the padding is longer than the frame.
func Payload(f *Frame) (p []byte, ok bool) {
	p = f.Payload
	pad := 0
	if f.Flags&FlagPadded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		pad = int(p[0])
		p = p[1:]
	}
	if f.Type == FrameHeaders && f.Flags&FlagPriority != 0 {
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

// Check is the connection error of a frame malformed whatever the state
// of its connection: a SETTINGS frame (not an ACK) off stream 0, not in
// pairs of 6 bytes or with a value out of range, a PING not of 8 bytes, a
// RST_STREAM or WINDOW_UPDATE not of 4, a GOAWAY under 8. Both ends check
// each frame so before their state reads it; the readers below take a
// frame that passed.
func Check(f *Frame) *ConnError {
	switch f.Type {
	case FrameSettings:
		if f.Flags&FlagAck == 0 {
			_, e := settings(f)
			return e
		}
	case FramePing:
		if len(f.Payload) != 8 {
			return connErrorf(CodeFrameSize, "PING of %d bytes", len(f.Payload))
		}
	case FrameRSTStream:
		if len(f.Payload) != 4 {
			return connErrorf(CodeFrameSize, "RST_STREAM of %d bytes", len(f.Payload))
		}
	case FrameWindowUpdate:
		if len(f.Payload) != 4 {
			return connErrorf(CodeFrameSize, "WINDOW_UPDATE of %d bytes", len(f.Payload))
		}
	case FrameGoAway:
		if len(f.Payload) < 8 {
			return connErrorf(CodeFrameSize, "GOAWAY of %d bytes", len(f.Payload))
		}
	}
	return nil
}

// Settings are the values of a SETTINGS frame that weft's ends use;
// HEADER_TABLE_SIZE needs nothing (our encoder never indexes).
type Settings struct {
	Window, MaxFrame       uint32
	HasWindow, HasMaxFrame bool
}

// ParseSettings reads a SETTINGS frame (not an ACK) that passed Check.
func ParseSettings(f *Frame) Settings {
	s, _ := settings(f)
	return s
}

// settings reads a SETTINGS frame (not an ACK) whole: a value out of range
// is the connection's error, and nothing of the frame is applied.
func settings(f *Frame) (Settings, *ConnError) {
	var s Settings
	if f.Stream != 0 {
		return s, connErrorf(CodeProtocol, "SETTINGS on stream %d", f.Stream)
	}
	if len(f.Payload)%6 != 0 {
		return s, connErrorf(CodeFrameSize, "SETTINGS of %d bytes", len(f.Payload))
	}
	for p := f.Payload; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case SettingEnablePush:
			if v > 1 {
				return s, connErrorf(CodeProtocol, "SETTINGS_ENABLE_PUSH %d", v)
			}
		case SettingInitialWindowSize:
			if v > MaxWindow {
				return s, connErrorf(CodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE %d over 2^31-1", v)
			}
			s.Window, s.HasWindow = v, true
		case SettingMaxFrameSize:
			if v < DefaultMaxFrame || v > 1<<24-1 {
				return s, connErrorf(CodeProtocol, "SETTINGS_MAX_FRAME_SIZE %d out of [16384, 16777215]", v)
			}
			s.MaxFrame, s.HasMaxFrame = v, true
		}
	}
	return s, nil
}

// PingAck is the acknowledgement of a PING that passed Check; nil when the
// PING is one itself.
func PingAck(f *Frame) []byte {
	if f.Flags&FlagAck != 0 {
		return nil
	}
	return append(AppendFrameHeader(nil, 8, FramePing, FlagAck, 0), f.Payload...)
}

// WindowIncrement is the increment of a WINDOW_UPDATE that passed Check.
func WindowIncrement(f *Frame) int64 {
	return int64(binary.BigEndian.Uint32(f.Payload) & 0x7fffffff)
}

// ResetCode is the error code of a RST_STREAM that passed Check.
func ResetCode(f *Frame) uint32 { return binary.BigEndian.Uint32(f.Payload) }

// GoAway is what a GOAWAY frame says.
type GoAway struct {
	Last, Code uint32
	Debug      string // its debug data, at most 256 bytes of it
}

// ParseGoAway reads a GOAWAY that passed Check.
func ParseGoAway(f *Frame) GoAway {
	return GoAway{Last: binary.BigEndian.Uint32(f.Payload) & 0x7fffffff, Code: binary.BigEndian.Uint32(f.Payload[4:]),
		Debug: string(f.Payload[8:min(len(f.Payload), 8+256)])}
}

// CodeName is an error code's name, as RFC 9113 §7 and grpc-go spell it.
func CodeName(code uint32) string {
	names := [...]string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
		"STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
		"ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("error code %d", code)
}

// AppendFrameHeader appends a frame header: a payload of n bytes follows.
func AppendFrameHeader(dst []byte, n int, typ, flags byte, stream uint32) []byte {
	return append(dst, byte(n>>16), byte(n>>8), byte(n), typ, flags,
		byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream))
}

// AppendSettings appends a SETTINGS frame of the pairs kv: id, value, ...
func AppendSettings(dst []byte, kv ...uint32) []byte {
	dst = AppendFrameHeader(dst, len(kv)/2*6, FrameSettings, 0, 0)
	for i := 0; i+1 < len(kv); i += 2 {
		dst = append(dst, byte(kv[i]>>8), byte(kv[i]))
		dst = binary.BigEndian.AppendUint32(dst, kv[i+1])
	}
	return dst
}

// AppendSettingsAck appends the acknowledgement of the peer's SETTINGS.
func AppendSettingsAck(dst []byte) []byte {
	return AppendFrameHeader(dst, 0, FrameSettings, FlagAck, 0)
}

// AppendPing appends a PING (not an ACK) carrying data.
func AppendPing(dst []byte, data uint64) []byte {
	dst = AppendFrameHeader(dst, 8, FramePing, 0, 0)
	return binary.BigEndian.AppendUint64(dst, data)
}

// AppendWindowUpdate appends a WINDOW_UPDATE giving n bytes back.
func AppendWindowUpdate(dst []byte, stream uint32, n uint32) []byte {
	dst = AppendFrameHeader(dst, 4, FrameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(dst, n)
}

// AppendRST appends a RST_STREAM.
func AppendRST(dst []byte, stream, code uint32) []byte {
	dst = AppendFrameHeader(dst, 4, FrameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(dst, code)
}

// AppendGoAway appends a GOAWAY, its debug data cut to 256 bytes.
func AppendGoAway(dst []byte, last, code uint32, debug string) []byte {
	if len(debug) > 256 {
		debug = debug[:256]
	}
	dst = AppendFrameHeader(dst, 8+len(debug), FrameGoAway, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, last)
	dst = binary.BigEndian.AppendUint32(dst, code)
	return append(dst, debug...)
}

// AppendData appends data as DATA frames of at most maxFrame bytes, the
// last with END_STREAM when end is set.
func AppendData(dst []byte, stream uint32, data []byte, maxFrame int, end bool) []byte {
	for {
		n := min(len(data), maxFrame)
		var flags byte
		if n == len(data) && end {
			flags = FlagEndStream
		}
		dst = AppendFrameHeader(dst, n, FrameData, flags, stream)
		dst = append(dst, data[:n]...)
		data = data[n:]
		if len(data) == 0 {
			return dst
		}
	}
}

// AppendHeaders appends a header block as HEADERS (and CONTINUATION frames
// when it exceeds maxFrame).
func AppendHeaders(dst []byte, stream uint32, block []byte, maxFrame int, end bool) []byte {
	var flags byte
	if end {
		flags = FlagEndStream
	}
	typ := byte(FrameHeaders)
	for {
		n := min(len(block), maxFrame)
		f := flags
		if n == len(block) {
			f |= FlagEndHeaders
		}
		dst = AppendFrameHeader(dst, n, typ, f, stream)
		dst = append(dst, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return dst
		}
		typ, flags = FrameContinuation, 0
	}
}
