package dubbo

import (
	"errors"
	"testing"

	netty "github.com/weftrpc/weft/transport-netty"
)

func seedFrames(f *testing.F) {
	c := NewCodec(1 << 20)
	req := &netty.Request{ID: 1, TwoWay: true, Data: &RPCRequest{DubboVersion: DubboVersion, Path: "org.example.Greeter",
		Method: "sayHello", Args: []any{"world", int64(7)}, Attachments: map[string]any{"path": "org.example.Greeter", "timeout": "1000"}}}
	for _, m := range []any{
		req,
		&netty.Request{ID: 2, TwoWay: true, Event: true},
		&netty.Response{ID: 3, Status: netty.StatusOK, Data: &RPCResult{Value: "hi", WithAttachments: true}},
		&netty.Response{ID: 4, Status: netty.StatusOK, Data: &RPCResult{Exception: errors.New("boom")}},
		&netty.Response{ID: 5, Status: netty.StatusServiceNotFound, ErrMsg: "no such service"},
		&netty.Response{ID: 6, Status: netty.StatusOK, Data: &RPCResult{}},
	} {
		b, err := c.Encode(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xda, 0xbb, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0xda, 0xbb})
}

// FuzzDecodeFrame feeds arbitrary bytes to the frame decoder: it may reject
// them, never panic, never claim more bytes than it was given, and never
// allocate from a declared length it has not checked.
func FuzzDecodeFrame(f *testing.F) {
	seedFrames(f)
	c := NewCodec(1 << 20)
	f.Fuzz(func(t *testing.T, data []byte) {
		for len(data) > 0 {
			msg, n, err := c.Decode(data)
			var fe *netty.FrameError
			if errors.As(err, &fe) {
				if fe.Msg == nil || fe.Skip < HeaderLength {
					t.Fatalf("frame error without a message or extent: %+v", fe)
				}
				return
			}
			if err != nil || n == 0 {
				return
			}
			if n > len(data) || msg == nil {
				t.Fatalf("decoded %d of %d bytes, msg %v", n, len(data), msg)
			}
			data = data[n:]
		}
	})
}

// FuzzDecodeRequestBody feeds arbitrary bytes as a request body.
func FuzzDecodeRequestBody(f *testing.F) {
	c := NewCodec(1 << 20)
	for _, args := range [][]any{{"world"}, {int64(1), true, 2.5}, {[]string{"a", "b"}, map[string]any{"k": "v"}}, nil} {
		var vals []any
		desc := ""
		if args != nil {
			desc = "Ljava/lang/String;"
		}
		vals = append(vals, DubboVersion, "org.example.S", "1.0", "m", desc)
		vals = append(vals, args...)
		vals = append(vals, map[string]any{"path": "org.example.S"})
		b, err := c.ser.Marshal(nil, vals...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r RPCRequest
		if err := c.decodeRequestBody(body, &r); err == nil && r.Method == "" && len(r.Args) > 0 {
			t.Fatal("arguments decoded without a method")
		}
	})
}
