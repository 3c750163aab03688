package triple

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// recorder is a connection that keeps what the state sends.
type recorder struct {
	sent   int
	closed bool
}

func (r *recorder) Send(msg any) error {
	b, err := (&codec{maxFrame: h2.DefaultMaxFrame}).Encode(nil, msg)
	r.sent += len(b)
	return err
}

func (r *recorder) SendNoWait(msg any) error { return r.Send(msg) }
func (r *recorder) SendMore(msg any) error   { return r.Send(msg) }

func (r *recorder) CloseGracefully(time.Duration) { r.closed = true }

func (r *recorder) Close() error { r.closed = true; return nil }

// CountControl says the peer reads everything at once.
func (r *recorder) CountControl() bool { return true }

func (r *recorder) Done() <-chan struct{} { return nil }

// seedCall is a well-formed connection: preface, SETTINGS, one call.
func seedCall(extra ...func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer)) []byte {
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/" + iface + "/Echo"},
		{"content-type", "application/grpc"}, {"x-a", "1"}, {"x-b-bin", "AAEC"}, {"grpc-timeout", "5S"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	fr.WriteData(1, true, lengthPrefixed(strMsg("hello")))
	for _, f := range extra {
		f(fr, enc, &hb)
	}
	return out.Bytes()
}

// FuzzFraming runs arbitrary bytes through a connection's HTTP/2 state, as
// the read loop does, and walks what each completed call carries: its
// attachments (view.Text) and its message, decoded as a protobuf. The state
// must neither panic nor hold more than its bounds.
func FuzzFraming(f *testing.F) {
	f.Add(seedCall())
	f.Add(seedCall(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
		fr.WritePing(false, [8]byte{1})
		fr.WriteWindowUpdate(0, 1000)
		hb.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/a/b"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndHeaders: false})
		fr.WriteContinuation(3, true, []byte{0x82})
		fr.WriteData(3, false, []byte{0, 0, 0, 0, 9})
		fr.WriteData(3, true, []byte("abc"))
	}))
	f.Add([]byte(http2.ClientPreface + "\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x7f\xff\xff\xff"))
	f.Add([]byte("PRI * HTTP/1.1\r\n"))
	f.Add([]byte("POST /" + iface + "/Echo HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n\"hi\"" +
		"POST /a/b HTTP/1.1\r\nContent-Length: 9\r\n\r\n[1,{},[]]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w := &recorder{}
		f := &framing{payload: 1 << 16}
		sc := newServerConn(f, w)
		cd := &codec{maxFrame: h2.DefaultMaxFrame, maxBody: 1 << 16}
		for len(data) > 0 && !w.closed {
			msg, n, err := cd.Decode(data)
			if err != nil {
				if fe, ok := err.(*netty.FrameError); ok && fe.Msg != nil {
					sc.received(fe.Msg)
				}
				return
			}
			if n == 0 {
				return
			}
			// The read loop reuses its buffer: so does this loop, so that
			// a frame's bytes kept past received show up as garbage.
			frameBytes := append([]byte(nil), data[:n]...)
			if fr, ok := msg.(*h2.Frame); ok {
				fr.Payload = frameBytes[h2.FrameHeaderLen:]
			}
			data = data[n:]
			req := sc.received(msg)
			for i := range frameBytes {
				frameBytes[i] = 0xee
			}
			if req == nil {
				continue
			}
			switch c := req.Data.(type) {
			case *serverCall:
				_ = view.Text(attachmentsOf(c.st.headers))
				if !c.gzip {
					(&protoArg{data: c.msg}).DecodeAs(reflect.TypeOf(&wrapperspb.StringValue{}))
				}
				sc.done(c.st)
			case *http1Call:
				if args, err := jsonArgsOf(c.r.body); err == nil {
					for _, a := range args {
						a.(*jsonArg).DecodeAs(reflect.TypeOf(&wrapperspb.StringValue{}))
						a.(*jsonArg).DecodeAs(reflect.TypeOf(map[string]any{}))
					}
				}
				c.answer(http1Answer(200, nil, false))
			}
		}
		if b := f.buffered.Load(); b < 0 || b > f.budget() || len(sc.streams) > defaultMaxStreams || sc.connHeld.Load() > h2.ConnRecvWindow {
			t.Fatalf("state out of bounds: %d bytes buffered, %d streams, %d bytes of the window held", b, len(sc.streams), sc.connHeld.Load())
		}
		// The connection ends: what its streams held goes back.
		sc.disconnected()
		if b := f.buffered.Load(); b != 0 {
			t.Fatalf("%d bytes still counted in the server's budget after the connection closed", b)
		}
	})
}
