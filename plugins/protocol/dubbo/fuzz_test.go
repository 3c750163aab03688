package dubbo

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/filter/accesslog"
	"github.com/weftrpc/weft/proxy"
	netty "github.com/weftrpc/weft/transport-netty"
)

func seedFrames(f *testing.F) {
	c := NewCodec(1 << 20)
	req := &netty.Request{ID: 1, TwoWay: true, Data: &RPCRequest{DubboVersion: DubboVersion, Path: "org.example.Greeter",
		Method: "sayHello", Args: []any{"world", int64(7)}, Attachments: map[string]any{"path": "org.example.Greeter", "timeout": "1000"}}}
	for _, m := range []any{
		req,
		&netty.Request{ID: 2, TwoWay: true, Event: true},
		&netty.Response{ID: 3, Status: kernel.ResponseOK, Data: &RPCResult{Value: "hi", WithAttachments: true}},
		&netty.Response{ID: 4, Status: kernel.ResponseOK, Data: &RPCResult{Exception: errors.New("boom")}},
		&netty.Response{ID: 5, Status: kernel.ResponseServiceNotFound, ErrMsg: "no such service"},
		&netty.Response{ID: 6, Status: kernel.ResponseOK, Data: &RPCResult{}},
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
				if fe.Msg == nil || !fe.Close && fe.Skip < HeaderLength {
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

// walkTarget is a service whose argument type refers to itself.
type walkTarget struct{}

type walkNode struct {
	Name  string
	Kids  []*walkNode
	Attrs map[string]any
	Next  *walkNode
}

func (walkTarget) Take(_ context.Context, n walkNode) error { return nil }

// FuzzDecodeAndWalk decodes frames and then walks what they carried the way
// weft does: the access log line, the JSON view WASM guests read, the
// generic form and its encoding back to hessian. Decoding alone is not
// enough: a ~100-byte body whose back reference makes a list contain itself
// decodes fine and then crashed every walker with a stack overflow.
func FuzzDecodeAndWalk(f *testing.F) {
	seedFrames(f)
	c := NewCodec(1 << 20)
	hdr := func(flag byte, body []byte) []byte {
		b := []byte{0xda, 0xbb, flag, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0}
		b[12], b[13], b[14], b[15] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
		return append(b, body...)
	}
	reqHead, _ := c.ser.Marshal(nil, DubboVersion, "org.example.S", "", "echo", "Ljava/lang/Object;")
	for _, arg := range [][]byte{
		{0x79, 0x51, 0x90},                   // a list that contains itself
		{'H', 0x01, 'a', 0x51, 0x90, 'Z'},    // a map that contains itself
		{0x7a, 0x79, 0x51, 0x90, 0x51, 0x91}, // shared lists
	} {
		f.Add(hdr(0xc2, append(append(append([]byte{}, reqHead...), arg...), 'H', 'Z')))
		f.Add(hdr(0x02, append([]byte{0x91}, arg...)))
	}
	u := kernel.MustParseURL("dubbo://127.0.0.1:20880/org.example.S?accesslog=true")
	// The conversion of arguments to Go types walks them too, into a type
	// that refers to itself.
	conv, err := proxy.NewServiceInvoker(u, walkTarget{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for len(data) > 0 {
			msg, n, err := c.Decode(data)
			if err != nil || n == 0 {
				return
			}
			data = data[n:]
			var vals []any
			switch m := msg.(type) {
			case *netty.Request:
				r, ok := m.Data.(*RPCRequest)
				if !ok {
					continue
				}
				inv := &kernel.Invocation{Method: r.Method, ParamTypes: r.ParamTypes, Args: r.Args, RemoteAddr: "127.0.0.1:1"}
				inv.SetAttachments(r.Attachments)
				if line := accesslog.Line(time.Now(), u, inv); len(line) > 1<<20 {
					t.Fatalf("access log line of %d bytes", len(line))
				}
				for k := range r.Attachments {
					if s := inv.AttachmentString(k); len(s) > 1<<20 {
						t.Fatalf("attachment text of %d bytes", len(s))
					}
				}
				for _, a := range r.Args {
					conv.Invoke(context.Background(), kernel.NewInvocation("take", a))
				}
				vals = append(vals, r.Args, r.Attachments)
			case *netty.Response:
				if r, ok := m.Data.(*RPCResult); ok {
					vals = append(vals, r.Value, r.Attachments)
				}
			}
			for _, v := range vals {
				if _, err := json.Marshal(view.JSON(v)); err != nil {
					t.Fatalf("JSON view does not encode: %v", err)
				}
				if s := view.Text(v); len(s) > 1<<20 {
					t.Fatalf("text of %d bytes", len(s))
				}
				g := view.Generic(v)
				if _, err := c.ser.Marshal(nil, g); err != nil {
					// An encoding may fail (a type the library refuses); it
					// must not crash or run away.
					continue
				}
			}
		}
	})
}
