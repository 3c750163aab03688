package dubbo

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// A header claiming far more than the payload limit closes the connection
// (FrameError.Close) with an answer for that id; one a little over it is
// skipped, the connection living on.
func TestOversizedFrameClosesBeyondTwicePayload(t *testing.T) {
	c := NewCodec(1 << 20)
	hdr := func(n uint32) []byte {
		b := []byte{0xda, 0xbb, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[12:], n)
		return b
	}
	for _, tc := range []struct {
		n     uint32
		close bool
	}{{1<<20 + 1, false}, {2 << 20, false}, {2<<20 + 1, true}, {1 << 31, true}, {1<<32 - 1, true}} {
		_, _, err := c.Decode(hdr(tc.n))
		var fe *netty.FrameError
		if !errors.As(err, &fe) {
			t.Fatalf("%d: err %v", tc.n, err)
		}
		req, _ := fe.Msg.(*netty.Request)
		if fe.Close != tc.close || req == nil || req.ID != 7 || req.Broken == nil {
			t.Fatalf("%d bytes: close %v, msg %+v", tc.n, fe.Close, fe.Msg)
		}
		if !tc.close && fe.Skip != HeaderLength+int(tc.n) {
			t.Fatalf("%d bytes: skip %d", tc.n, fe.Skip)
		}
	}
	if n := c.FrameSize(hdr(1234)); n != HeaderLength+1234 {
		t.Fatalf("FrameSize %d", n)
	}
}

// The countdown goes on the wire as Dubbo's `_TO`, an Integer, beside the
// fixed attachments, and does not override one the caller set.
func TestCountdownAttachment(t *testing.T) {
	c := NewCodec(0)
	for _, tc := range []struct {
		att  map[string]any
		want any
	}{
		{nil, int32(250)},
		{map[string]any{"k": "v"}, int32(250)},
		{map[string]any{KeyCountdown: int32(9)}, int32(9)},
		{map[string]any{"list": []any{"not scalar"}}, int32(250)},
	} {
		frame, err := c.Encode(nil, &netty.Request{ID: 1, TwoWay: true, Data: &RPCRequest{Path: "S", Method: "m",
			Args: []any{"a"}, Fixed: map[string]any{kernel.KeyTimeout: "1000"}, Attachments: tc.att, Countdown: 250}})
		if err != nil {
			t.Fatal(err)
		}
		msg, _, err := c.Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		r := msg.(*netty.Request).Data.(*RPCRequest)
		if r.Attachments[KeyCountdown] != tc.want || r.Attachments[kernel.KeyTimeout] != "1000" {
			t.Fatalf("attachments %v", r.Attachments)
		}
		if got := consumerBudget(r.Attachments); got.Milliseconds() != int64(tc.want.(int32)) {
			t.Fatalf("budget %v", got)
		}
	}
	if got := consumerBudget(map[string]any{kernel.KeyTimeout: int32(300)}); got.Milliseconds() != 300 {
		t.Fatalf("budget from an Integer timeout: %v", got)
	}
	if got := consumerBudget(map[string]any{kernel.KeyTimeout: "bad"}); got != 0 {
		t.Fatalf("budget from a bad timeout: %v", got)
	}
}

// A frame struct keeps its decoder for the life of the call; once the body
// is decoded, the decoder holds nothing of it: the body is the transport's
// read buffer (a large frame's is pooled and reused, and a server's budget
// for large frames counts it free).
func TestDecodedFramesHoldNoBody(t *testing.T) {
	c := NewCodec(0)
	frame, err := c.Encode(nil, &netty.Request{ID: 1, TwoWay: true, Data: &RPCRequest{Path: "S", Method: "m",
		ParamTypes: "Ljava/lang/String;", Args: []any{"a"}, Attachments: map[string]any{"k": "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	msg, _, err := c.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	req := msg.(*netty.Request).Data.(*RPCRequest)
	if req.frame == nil || holdsBody(req.frame.dec) {
		t.Fatalf("the request's decoder still holds its body: %+v", req.frame)
	}
	resp, body := NewResponse()
	resp.ID, body.Value = 1, "answer"
	frame, err = c.Encode(nil, resp)
	if err != nil {
		t.Fatal(err)
	}
	if msg, _, err = c.Decode(frame); err != nil {
		t.Fatal(err)
	}
	dr, ok := msg.(*netty.Response)
	if !ok || dr.Data.(*RPCResult).Value != "answer" {
		t.Fatalf("decoded %#v", msg)
	}
	f := (*decodedResponse)(unsafe.Pointer(dr))
	if holdsBody(f.dec) {
		t.Fatal("the response's decoder still holds its body")
	}
}

// holdsBody reports whether a decoder still refers to a body: its data,
// the library decoder made over it, or the value ends it found.
func holdsBody(d hessian2.Decoder) bool {
	v := reflect.ValueOf(d)
	return !v.FieldByName("data").IsNil() || !v.FieldByName("lib").IsNil() || !v.FieldByName("ends").IsNil()
}
