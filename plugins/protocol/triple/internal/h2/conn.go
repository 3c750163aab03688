package h2

import "golang.org/x/net/http2/hpack"

// The parts of a connection's state that the client and the server keep
// alike. Each end owns its own and says how it guards them.

// HeaderBlock is the header block a connection is reading: a HEADERS
// frame's fragment and the CONTINUATION frames after it, up to
// END_HEADERS, then its fields decoded. Its owner is the read loop.
type HeaderBlock struct {
	Stream uint32              // the stream whose block is open; 0: none
	End    bool                // its HEADERS had END_STREAM
	Fields []hpack.HeaderField // decoded, as far as MaxHeaderListSize
	Over   bool                // the fields passed MaxHeaderListSize: Fields holds those within it

	buf  []byte
	size int // of the fields decoded, as RFC 9113 counts them
}

// Admit is the connection's error for a frame that comes while a block is
// open and does not continue it (RFC 9113 6.10: nothing may come between
// a block's frames), or one malformed whatever the state (Check); nil
// when the connection may run it.
func (b *HeaderBlock) Admit(f *Frame) *ConnError {
	if b.Stream != 0 && (f.Type != FrameContinuation || f.Stream != b.Stream) {
		return connErrorf(CodeProtocol, "a header block of stream %d not continued by CONTINUATION", b.Stream)
	}
	return Check(f)
}

// Start opens a block on a HEADERS frame, with p its fragment (Payload's);
// it reports whether the block is whole (END_HEADERS).
func (b *HeaderBlock) Start(f *Frame, p []byte) bool {
	b.buf = append(b.buf[:0], p...)
	b.Stream, b.End = f.Stream, f.Flags&FlagEndStream != 0
	return f.Flags&FlagEndHeaders != 0
}

// CheckContinuation is the connection's error for a CONTINUATION frame
// with no block open, or one that would make the block larger than
// MaxHeaderBlock; nil when Continue may take it.
func (b *HeaderBlock) CheckContinuation(f *Frame) *ConnError {
	if b.Stream == 0 {
		return connErrorf(CodeProtocol, "CONTINUATION without HEADERS")
	}
	if len(b.buf)+len(f.Payload) > MaxHeaderBlock {
		return connErrorf(CodeEnhanceYourCalm, "a header block over %d bytes", MaxHeaderBlock)
	}
	return nil
}

// Continue adds a CONTINUATION frame's fragment; it reports whether the
// block is whole (END_HEADERS).
func (b *HeaderBlock) Continue(f *Frame) bool {
	b.buf = append(b.buf, f.Payload...)
	return f.Flags&FlagEndHeaders != 0
}

// Decode closes the whole block and decodes it into Fields and Over,
// calling check, when set, on every field (those past MaxHeaderListSize
// too); it returns the block's stream.
func (b *HeaderBlock) Decode(dec *Decoder, check func(hpack.HeaderField)) (uint32, error) {
	id := b.Stream
	b.Stream = 0
	b.Fields, b.size, b.Over = b.Fields[:0], 0, false
	err := dec.Decode(b.buf, func(f hpack.HeaderField) {
		b.size += len(f.Name) + len(f.Value) + 32
		if check != nil {
			check(f)
		}
		if b.size > MaxHeaderListSize {
			b.Over = true
			return
		}
		b.Fields = append(b.Fields, f)
	})
	if err == nil && cap(b.buf) > 4096 {
		b.buf = nil // a large block's buffer is not kept for the connection's life
	}
	return id, err
}

// SendWindows is the send side of a connection's flow control, as the
// peer's SETTINGS and WINDOW_UPDATE frames set it. Its owner guards it
// with the lock of its streams' send windows, which Apply and Take change
// with it.
type SendWindows struct {
	Conn     int64 // the connection's window
	Initial  int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE: a new stream's window
	MaxFrame int   // the peer's SETTINGS_MAX_FRAME_SIZE
}

// NewSendWindows is a connection's send side before the peer's SETTINGS.
func NewSendWindows() SendWindows {
	return SendWindows{Conn: DefaultInitialWindow, Initial: DefaultInitialWindow, MaxFrame: DefaultMaxFrame}
}

// Apply takes the peer's SETTINGS and returns what to add to the window
// of every stream open (RFC 9113 6.9.2): 0 unless s sets
// INITIAL_WINDOW_SIZE.
func (w *SendWindows) Apply(s Settings) (delta int64) {
	if s.HasWindow {
		delta = int64(s.Window) - w.Initial
		w.Initial = int64(s.Window)
	}
	if s.HasMaxFrame {
		w.MaxFrame = int(s.MaxFrame)
	}
	return delta
}

// Open adds a WINDOW_UPDATE of the connection's; false when the window
// passes 2^31-1, a FLOW_CONTROL_ERROR.
func (w *SendWindows) Open(inc int64) bool {
	w.Conn += inc
	return w.Conn <= MaxWindow
}

// Take takes up to n bytes of the connection's window and a stream's, as
// much as both hold: 0 when either is spent.
func (w *SendWindows) Take(stream *int64, n int64) int64 {
	k := min(n, w.Conn, *stream)
	if k <= 0 {
		return 0
	}
	w.Conn -= k
	*stream -= k
	return k
}

// Unacked counts the bytes of a receive window (a stream's or the
// connection's) consumed and not yet given back to the peer.
type Unacked int

// Consume counts n bytes consumed. Once they make a WINDOW_UPDATE worth
// its frame (WindowUpdateThreshold), it returns them all, to give back
// now, and counts from 0 again; it returns 0 before.
func (u *Unacked) Consume(n int) uint32 {
	if *u += Unacked(n); *u < WindowUpdateThreshold {
		return 0
	}
	v := uint32(*u)
	*u = 0
	return v
}
