package h2

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestAdmit: the frames both ends refuse before their state reads them,
// with the code each gets.
func TestAdmit(t *testing.T) {
	frame := func(typ, flags byte, stream uint32, n int) *Frame {
		return &Frame{Type: typ, Flags: flags, Stream: stream, Payload: make([]byte, n)}
	}
	var open HeaderBlock
	open.Start(frame(FrameHeaders, 0, 1, 0), nil)
	for _, c := range []struct {
		name  string
		block *HeaderBlock
		f     *Frame
		code  uint32 // 0: admitted
	}{
		{"PING of 7", nil, frame(FramePing, 0, 0, 7), CodeFrameSize},
		{"PING ack", nil, frame(FramePing, FlagAck, 0, 8), 0},
		{"RST_STREAM of 5", nil, frame(FrameRSTStream, 0, 1, 5), CodeFrameSize},
		{"WINDOW_UPDATE of 3", nil, frame(FrameWindowUpdate, 0, 0, 3), CodeFrameSize},
		{"GOAWAY of 7", nil, frame(FrameGoAway, 0, 0, 7), CodeFrameSize},
		{"SETTINGS on stream 1", nil, frame(FrameSettings, 0, 1, 0), CodeProtocol},
		{"SETTINGS of 5", nil, frame(FrameSettings, 0, 0, 5), CodeFrameSize},
		{"SETTINGS ack", nil, frame(FrameSettings, FlagAck, 0, 0), 0}, // each end checks its own
		{"unknown type", nil, frame(0xee, 0, 0, 3), 0},
		{"DATA inside a header block", &open, frame(FrameData, 0, 1, 1), CodeProtocol},
		{"CONTINUATION of another stream", &open, frame(FrameContinuation, 0, 3, 1), CodeProtocol},
		{"its CONTINUATION", &open, frame(FrameContinuation, 0, 1, 1), 0},
	} {
		b := c.block
		if b == nil {
			b = &HeaderBlock{}
		}
		e := b.Admit(c.f)
		if (e == nil) != (c.code == 0) || e != nil && e.Code != c.code {
			t.Errorf("%s: %+v, want code %d", c.name, e, c.code)
		}
	}
}

// TestHeaderBlockOver: fields past MaxHeaderListSize are counted and
// checked, not kept.
func TestHeaderBlockOver(t *testing.T) {
	block := AppendField(nil, "a", "1")
	block = AppendField(block, "big", strings.Repeat("x", MaxHeaderListSize))
	block = AppendField(block, "b", "2")
	var b HeaderBlock
	if !b.Start(&Frame{Type: FrameHeaders, Flags: FlagEndHeaders | FlagEndStream, Stream: 5}, block) {
		t.Fatal("a HEADERS with END_HEADERS is not whole")
	}
	checked := 0
	id, err := b.Decode(NewDecoder(4096, 2*MaxHeaderListSize), func(hpack.HeaderField) { checked++ })
	if err != nil || id != 5 || !b.End || b.Stream != 0 {
		t.Fatalf("Decode: stream %d, end %v, open %d, %v", id, b.End, b.Stream, err)
	}
	if !b.Over || len(b.Fields) != 1 || checked != 3 {
		t.Fatalf("over %v, %d fields kept, %d checked; want over, 1, 3", b.Over, len(b.Fields), checked)
	}
}
