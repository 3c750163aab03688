package triple

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple/internal/h2"
	"github.com/weftrpc/weft/proxy"
)

const iface = "org.weft.test.Echo"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// echo is a protobuf service as a plain Go value.
type echo struct {
	hold  chan struct{} // Slow waits on it, or on its context
	ended chan error    // what Slow's context said when it returned
}

func (e *echo) Echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	if in.GetValue() == "fail" {
		return nil, errors.New("failed as asked")
	}
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		if v := inv.AttachmentString("x-req"); v != "" {
			kernel.SetReplyAttachment(ctx, "x-resp", "resp-"+v)
		}
		if v := inv.AttachmentString("remote.application"); v != "" {
			kernel.SetReplyAttachment(ctx, "x-app", v)
		}
	}
	return in, nil
}

func (e *echo) Slow(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	select {
	case <-e.hold:
	case <-ctx.Done():
	}
	select {
	case e.ended <- ctx.Err():
	default:
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return in, nil
}

func (e *echo) Plain(ctx context.Context, s string) (string, error) { return s, nil }

// detailed is a business error with gRPC's rich details.
type detailed struct{}

func (detailed) Error() string             { return "with details" }
func (detailed) GRPCStatusDetails() []byte { return []byte{0x08, 0x03, 0x12, 0x01, 'x'} }

func (e *echo) Detailed(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return nil, detailed{}
}

// serve exports an echo on a free port and returns its address.
func serve(t *testing.T, params map[string]string) (string, *echo) {
	t.Helper()
	addr, e, _ := serveP(t, params)
	return addr, e
}

func serveP(t *testing.T, params map[string]string) (string, *echo, *Protocol) {
	t.Helper()
	p := New(quiet)
	t.Cleanup(p.Destroy)
	e := &echo{hold: make(chan struct{}), ended: make(chan error, 1)}
	t.Cleanup(func() { close(e.hold) })
	u := kernel.NewURL(Name, "127.0.0.1", 0, iface, params)
	iv, err := proxy.NewServiceInvoker(u, e)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := p.Export(context.Background(), iv)
	if err != nil {
		t.Fatal(err)
	}
	return exp.(*exporter).BoundAddr(), e, p
}

// client is a raw HTTP/2 client: it sends what a test asks, byte for byte
// where the test needs it, and reads every frame back.
type client struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &client{t: t, nc: nc, next: 1}
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

func (c *client) handshake() {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, http2.ClientPreface); err != nil {
		c.t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) headerBlock(fields ...string) []byte {
	c.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), c.hbuf.Bytes()...)
}

func grpcHeaders(method string, extra ...string) []string {
	return append([]string{":method", "POST", ":scheme", "http", ":path", "/" + iface + "/" + method,
		":authority", "test", "content-type", "application/grpc", "te", "trailers"}, extra...)
}

func lengthPrefixed(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// call sends one unary call on a new stream and returns its id.
func (c *client) call(method string, body []byte, extra ...string) uint32 {
	c.t.Helper()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(grpcHeaders(method, extra...)...), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
	if err := c.fr.WriteData(id, true, body); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// response is what came back on one stream.
type response struct {
	headers, trailers map[string]string
	data              []byte
	reset             http2.ErrCode
	wasReset          bool
}

func (r *response) status() int {
	n, _ := strconv.Atoi(r.trailers["grpc-status"])
	if r.trailers["grpc-status"] == "" {
		return -1
	}
	return n
}

// read reads frames until stream id ends (or the connection does: it
// returns the GOAWAY then).
func (c *client) read(id uint32) (*response, *http2.GoAwayFrame) {
	c.t.Helper()
	r := &response{}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			return r, f
		case *http2.WindowUpdateFrame:
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			m := map[string]string{}
			for _, hf := range f.Fields {
				m[hf.Name] = hf.Value
			}
			if r.headers == nil && m["grpc-status"] == "" {
				r.headers = m
			} else {
				r.trailers = m
			}
			if f.StreamEnded() {
				return r, nil
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			r.data = append(r.data, f.Data()...)
			if len(f.Data()) > 0 {
				c.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
				c.fr.WriteWindowUpdate(id, uint32(len(f.Data())))
			}
			if f.StreamEnded() {
				return r, nil
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				r.reset, r.wasReset = f.ErrCode, true
				return r, nil
			}
		}
	}
}

func strMsg(s string) []byte {
	b, err := proto.Marshal(wrapperspb.String(s))
	if err != nil {
		panic(err)
	}
	return b
}

func TestUnaryRoundTrip(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	id := c.call("Echo", lengthPrefixed(strMsg("hello")), "x-req", "42")
	r, ga := c.read(id)
	if ga != nil {
		t.Fatalf("GOAWAY %v", ga)
	}
	if r.headers[":status"] != "200" || r.headers["content-type"] != "application/grpc" {
		t.Fatalf("headers %v", r.headers)
	}
	if r.status() != 0 || r.trailers["x-resp"] != "resp-42" {
		t.Fatalf("trailers %v", r.trailers)
	}
	var out wrapperspb.StringValue
	if len(r.data) < 5 || proto.Unmarshal(r.data[5:], &out) != nil || out.GetValue() != "hello" {
		t.Fatalf("data %q", r.data)
	}
}

// TestMalformedCalls: each bad request gets a clear gRPC status on its own
// stream, and the connection goes on serving.
func TestMalformedCalls(t *testing.T) {
	addr, _ := serve(t, map[string]string{kernel.KeyPayload: "1024"})
	c := dial(t, addr)
	c.handshake()
	cases := []struct {
		name   string
		method string
		body   []byte
		extra  []string
		status int
		text   string
	}{
		{"unknown method", "Nope", lengthPrefixed(strMsg("x")), nil, statusUnimplemented, "has no method"},
		{"garbage protobuf", "Echo", lengthPrefixed([]byte{0xff, 0xff, 0xff, 0xff}), nil, statusInternal, "protobuf"},
		{"truncated message", "Echo", append([]byte{0, 0, 0, 0, 100}, "short"...), nil, statusInternal, "says 100 bytes"},
		{"no message", "Echo", nil, nil, statusInternal, "one length-prefixed message"},
		{"over payload", "Echo", lengthPrefixed(make([]byte, 2000)), nil, statusResourceExhausted, "payload limit of 1024"},
		{"bad timeout", "Echo", lengthPrefixed(strMsg("x")), []string{"grpc-timeout", "soon"}, statusInternal, "grpc-timeout"},
		{"unknown compression", "Echo", append([]byte{1, 0, 0, 0, 1}, 0), []string{"grpc-encoding", "br"}, statusUnimplemented, "not supported"},
		{"bad gzip", "Echo", append([]byte{1, 0, 0, 0, 3}, 1, 2, 3), []string{"grpc-encoding", "gzip"}, statusInternal, "gzip"},
		{"not protobuf arguments", "Plain", lengthPrefixed(strMsg("x")), nil, statusInternal, "not a protobuf message"},
		{"business error", "Echo", lengthPrefixed(strMsg("fail")), nil, statusUnknown, "failed as asked"},
	}
	for _, tc := range cases {
		id := c.call(tc.method, tc.body, tc.extra...)
		r, ga := c.read(id)
		if ga != nil {
			t.Fatalf("%s: GOAWAY %v", tc.name, ga)
		}
		msg := decodeMessage(r.trailers["grpc-message"])
		if r.status() != tc.status || !strings.Contains(msg, tc.text) {
			t.Errorf("%s: status %d %q, want %d and %q", tc.name, r.status(), msg, tc.status, tc.text)
		}
	}
	// Still serving.
	id := c.call("Echo", lengthPrefixed(strMsg("after")))
	if r, _ := c.read(id); r.status() != 0 {
		t.Fatalf("after the bad calls: %v", r.trailers)
	}
}

// TestMalformedConnections: what breaks HTTP/2 itself closes that
// connection with GOAWAY and its reason; the server serves the next one.
func TestMalformedConnections(t *testing.T) {
	addr, _ := serve(t, nil)
	cases := []struct {
		name string
		send func(c *client)
		code http2.ErrCode
	}{
		{"frame over max frame size", func(c *client) {
			c.handshake()
			c.nc.Write([]byte{0x10, 0, 0, h2.FrameData, 0, 0, 0, 0, 1}) // 1 MiB DATA
		}, http2.ErrCodeFrameSize},
		{"no settings first", func(c *client) {
			io.WriteString(c.nc, http2.ClientPreface)
			c.fr.WritePing(false, [8]byte{})
		}, http2.ErrCodeProtocol},
		{"even stream", func(c *client) {
			c.handshake()
			c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: true})
		}, http2.ErrCodeProtocol},
		{"bad hpack", func(c *client) {
			c.handshake()
			c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
		}, http2.ErrCodeCompression},
		{"interleaved header block", func(c *client) {
			c.handshake()
			c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: false})
			c.fr.WriteData(1, true, nil)
		}, http2.ErrCodeProtocol},
		{"window overflow", func(c *client) {
			c.handshake()
			c.fr.WriteWindowUpdate(0, 1<<31-1)
		}, http2.ErrCodeFlowControl},
		{"DATA on idle stream", func(c *client) {
			c.handshake()
			c.fr.WriteData(9, true, []byte("x"))
		}, http2.ErrCodeProtocol},
	}
	for _, tc := range cases {
		c := dial(t, addr)
		tc.send(c)
		_, ga := c.read(1 << 30)
		if ga == nil || ga.ErrCode != tc.code {
			t.Errorf("%s: GOAWAY %v, want code %v", tc.name, ga, tc.code)
		}
	}
	// Neither HTTP/2 nor HTTP/1.1: closed, with the server up.
	for _, junk := range []string{"\x16\x03\x01\x00\xa5", "PRI * HTTP/1.1\r\n\r\n", "GET /\r\n\r\n"} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(nc, junk)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Fatalf("%q: the connection should close, got %v", junk, err)
		}
		nc.Close()
	}
	c := dial(t, addr)
	c.handshake()
	if r, _ := c.read(c.call("Echo", lengthPrefixed(strMsg("still")))); r.status() != 0 {
		t.Fatalf("after the bad connections: %v", r.trailers)
	}
}

// TestResetCancelsTheCall: RST_STREAM from the client ends the provider's
// context (no provider works for a consumer that gave up).
func TestResetCancelsTheCall(t *testing.T) {
	addr, e := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	id := c.call("Slow", lengthPrefixed(strMsg("x")))
	time.Sleep(50 * time.Millisecond)
	c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	select {
	case err := <-e.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the provider's context ended with %v, want Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RST_STREAM did not end the provider's call")
	}
}

// TestGRPCTimeoutReachesTheProvider: grpc-timeout bounds the call on the
// provider; the answer is DEADLINE_EXCEEDED.
func TestGRPCTimeoutReachesTheProvider(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	start := time.Now()
	r, _ := c.read(c.call("Slow", lengthPrefixed(strMsg("x")), "grpc-timeout", "100m"))
	if r.status() != statusDeadlineExceeded || r.trailers[headerExceptionCode] != "2" {
		t.Fatalf("status %d %v, want DEADLINE_EXCEEDED", r.status(), r.trailers)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}
}

// TestThreadsBound: past `threads`, calls are answered RESOURCE_EXHAUSTED at
// once, as the dubbo protocol answers status 100.
func TestThreadsBound(t *testing.T) {
	addr, e := serve(t, map[string]string{kernel.KeyThreads: "1"})
	c := dial(t, addr)
	c.handshake()
	c.call("Slow", lengthPrefixed(strMsg("x")))
	time.Sleep(50 * time.Millisecond)
	r, _ := c.read(c.call("Echo", lengthPrefixed(strMsg("y"))))
	if r.status() != statusResourceExhausted || !strings.Contains(decodeMessage(r.trailers["grpc-message"]), "threads") {
		t.Fatalf("status %d %v, want RESOURCE_EXHAUSTED naming threads", r.status(), r.trailers)
	}
	e.hold <- struct{}{}
}

// TestLargeMessagesAndFlowControl: messages larger than HTTP/2's default
// windows and frames go both ways, in pieces, as the windows open.
func TestLargeMessagesAndFlowControl(t *testing.T) {
	addr, _ := serve(t, nil)
	c := dial(t, addr)
	c.handshake()
	big := strings.Repeat("x", 300<<10)
	body := lengthPrefixed(strMsg(big))
	id := c.next
	c.next += 2
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(grpcHeaders("Echo")...), EndHeaders: true})
	for len(body) > 0 {
		n := min(len(body), 16384)
		c.fr.WriteData(id, n == len(body), body[:n])
		body = body[n:]
	}
	r, ga := c.read(id)
	if ga != nil || r.status() != 0 {
		t.Fatalf("status %v, goaway %v", r.trailers, ga)
	}
	var out wrapperspb.StringValue
	if proto.Unmarshal(r.data[5:], &out) != nil || out.GetValue() != big {
		t.Fatalf("echo of %d bytes came back as %d", len(big), len(r.data))
	}
}

// TestConcurrentStreams: many calls in flight on one connection, answered
// each on its own stream.
func TestConcurrentStreams(t *testing.T) {
	// threads well above the 200 calls: one connection may hold only 7/8
	// of them (the transport's share), and this one sends all at once.
	addr, _ := serve(t, map[string]string{kernel.KeyThreads: "400"})
	c := dial(t, addr)
	c.handshake()
	ids := map[uint32]string{}
	for i := range 200 {
		ids[c.call("Echo", lengthPrefixed(strMsg(fmt.Sprint("m", i))))] = fmt.Sprint("m", i)
	}
	var mu sync.Mutex
	got := map[uint32]string{}
	for len(got) < len(ids) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok {
			var out wrapperspb.StringValue
			if err := proto.Unmarshal(d.Data()[5:], &out); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got[d.StreamID] = out.GetValue()
			mu.Unlock()
		}
	}
	for id, want := range ids {
		if got[id] != want {
			t.Fatalf("stream %d: %q, want %q", id, got[id], want)
		}
	}
}

// TestHTTP1JSON: Triple's HTTP/1.1 form, as curl sends it: the arguments as
// a JSON array (or a protobuf message in its JSON form), the answer as JSON,
// answers in request order on a kept-alive connection.
func TestHTTP1JSON(t *testing.T) {
	addr, _ := serve(t, nil)
	post := func(path, body string) (int, string) {
		t.Helper()
		res, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := post("/"+iface+"/plain", `["world"]`); code != 200 || body != `"world"` {
		t.Fatalf("plain: %d %s", code, body)
	}
	if code, body := post("/"+iface+"/Echo", `"hi"`); code != 200 || body != `"hi"` {
		t.Fatalf("protobuf message: %d %s", code, body)
	}
	if code, body := post("/"+iface+"/Echo", `"fail"`); code != 500 || !strings.Contains(body, "failed as asked") {
		t.Fatalf("business error: %d %s", code, body)
	}
	if code, body := post("/"+iface+"/nope", `[]`); code != 404 || !strings.Contains(body, "has no method") {
		t.Fatalf("unknown method: %d %s", code, body)
	}
	if code, body := post("/no.Such/x", `[]`); code != 404 || !strings.Contains(body, "unknown service") {
		t.Fatalf("unknown service: %d %s", code, body)
	}
	if code, body := post("/"+iface+"/plain", `[1, 2`); code != 400 {
		t.Fatalf("bad JSON: %d %s", code, body)
	}
	if code, body := post("/"+iface+"/plain", `[{"not":"a string"}]`); code != 500 || !strings.Contains(body, "JSON argument") {
		t.Fatalf("wrong argument type: %d %s", code, body)
	}
	// Pipelined on one connection: answers in order.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var req strings.Builder
	for i := range 20 {
		body := fmt.Sprintf(`["m%d"]`, i)
		fmt.Fprintf(&req, "POST /%s/plain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", iface, len(body), body)
	}
	io.WriteString(nc, req.String())
	br := bufio.NewReader(nc)
	for i := range 20 {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if want := fmt.Sprintf(`"m%d"`, i); string(b) != want {
			t.Fatalf("answer %d: %s, want %s", i, b, want)
		}
	}
}

// TestCurlJSON is the README's curl line against a weft provider.
func TestCurlJSON(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed; .ci/run installs it")
		}
		t.Skip("no curl")
	}
	addr, _ := serve(t, nil)
	out, err := exec.Command(curl, "-s", "-S", "--max-time", "10", "-H", "content-type: application/json",
		"-d", `["world"]`, "http://"+addr+"/"+iface+"/plain").CombinedOutput()
	if err != nil || string(out) != `"world"` {
		t.Fatalf("curl: %s %v", out, err)
	}
	out, err = exec.Command(curl, "-s", "-S", "--max-time", "10", "-w", " %{http_code}", "-H", "content-type: application/json",
		"-d", `["x"]`, "http://"+addr+"/"+iface+"/nope").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), " 404") || !strings.Contains(string(out), "has no method") {
		t.Fatalf("curl of an unknown method: %s %v", out, err)
	}
}
