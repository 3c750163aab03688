package dubbo_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/echo"
	"github.com/weftrpc/weft/plugins/filter/generic"
	"github.com/weftrpc/weft/plugins/filter/timeout"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
	netty "github.com/weftrpc/weft/transport-netty"
)

func TestMain(m *testing.M) {
	hessian2.RegisterPOJO(&User{})
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type User struct {
	ID    int64    `hessian:"id"`
	Name  string   `hessian:"name"`
	Tags  []string `hessian:"tags"`
	Score float64  `hessian:"score"`
}

func (User) JavaClassName() string { return "org.weft.test.User" }

type svc struct {
	fails   atomic.Int64
	release chan struct{}
	notes   chan string
}

func (s *svc) Echo(ctx context.Context, v string) (string, error) {
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		if x := inv.AttachmentString("x-req"); x != "" {
			kernel.SetReplyAttachment(ctx, "x-resp", "resp-"+x)
		}
	}
	return v, nil
}

func (s *svc) GetUser(ctx context.Context, id int64) (*User, error) {
	return &User{ID: id, Name: fmt.Sprintf("user-%d", id), Tags: []string{"a", "b", "c"}, Score: float64(id) * 1.5}, nil
}

func (s *svc) Fail(ctx context.Context, msg string) error {
	s.fails.Add(1)
	return fmt.Errorf("fail called with %q", msg)
}

func (s *svc) Big(ctx context.Context, n int64) (string, error) {
	return strings.Repeat("b", int(n)), nil
}

func (s *svc) Sleep(ctx context.Context, ms int64) (string, error) {
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return "slept", nil
}

func (s *svc) Note(ctx context.Context, v string) error {
	s.notes <- v
	return nil
}

func (s *svc) Block(ctx context.Context) (string, error) {
	<-s.release
	return "released", nil
}

const iface = "org.weft.test.Svc"

type env struct {
	svc      *svc
	provider *dubbo.Protocol
	consumer *dubbo.Protocol
	addr     string
}

// start exports svc on a free port with the echo and generic filters, as
// an App's provider chain would have them.
func start(t *testing.T, params string) *env {
	t.Helper()
	e := &env{svc: &svc{release: make(chan struct{}), notes: make(chan string, 16)}, provider: dubbo.New(quiet), consumer: dubbo.New(quiet)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	ln.Close()
	u := kernel.MustParseURL("dubbo://" + e.addr + "/" + iface + "?interface=" + iface + params)
	inner, err := proxy.NewServiceInvoker(u, e.svc)
	if err != nil {
		t.Fatal(err)
	}
	chain := extension.BuildChain(inner, []extension.Filter{echo.New(), generic.New(), timeout.New(quiet)})
	if _, err := e.provider.Export(context.Background(), chain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-e.svc.release:
		default:
			close(e.svc.release)
		}
		e.consumer.Destroy()
		e.provider.Destroy()
	})
	return e
}

func (e *env) refer(t *testing.T, params string) kernel.Invoker {
	t.Helper()
	iv, err := e.consumer.Refer(context.Background(), kernel.MustParseURL("dubbo://"+e.addr+"/"+iface+"?interface="+iface+params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iv.Destroy)
	return iv
}

func call(iv kernel.Invoker, method string, args ...any) (kernel.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return iv.Invoke(ctx, kernel.NewInvocation(method, args...))
}

func TestCallsOverTCP(t *testing.T) {
	e := start(t, "")
	iv := e.refer(t, "")
	if res, err := call(iv, "echo", "hello"); err != nil || res.Value != "hello" {
		t.Fatalf("echo: %v %v", res.Value, err)
	}
	// Go's name is accepted too, as dubbo-go does.
	if res, err := call(iv, "Echo", "hi"); err != nil || res.Value != "hi" {
		t.Fatalf("Echo: %v %v", res.Value, err)
	}
	res, err := call(iv, "getUser", int64(7))
	if err != nil {
		t.Fatal(err)
	}
	var u User
	switch v := res.Value.(type) {
	case *User:
		u = *v
	case User:
		u = v
	default:
		t.Fatalf("getUser returned %T", res.Value)
	}
	if u.ID != 7 || u.Name != "user-7" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 10.5 {
		t.Fatalf("getUser = %+v", u)
	}
	_, err = call(iv, "fail", "boom")
	if !kernel.IsBiz(err) || !strings.Contains(err.Error(), `fail called with "boom"`) {
		t.Fatalf("fail: %v (biz %t)", err, kernel.IsBiz(err))
	}
	if n := e.svc.fails.Load(); n != 1 {
		t.Fatalf("fail ran %d times", n)
	}
	if res, err := call(iv, "$echo", "alive"); err != nil || res.Value != "alive" {
		t.Fatalf("$echo: %v %v", res.Value, err)
	}
}

func TestAttachmentsBothWays(t *testing.T) {
	e := start(t, "")
	iv := e.refer(t, "")
	inv := kernel.NewInvocation("echo", "x")
	inv.SetAttachment("x-req", "42")
	res, err := iv.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attachments["x-resp"] != "resp-42" {
		t.Fatalf("response attachments %v", res.Attachments)
	}
}

func TestGenericInvoke(t *testing.T) {
	e := start(t, "")
	iv := e.refer(t, "")
	g := proxy.NewGenericClient(func() (kernel.Invoker, error) { return iv, nil })
	v, err := g.GenericInvoke(context.Background(), "getUser", []string{"long"}, []any{int64(3)})
	if err != nil {
		t.Fatal(err)
	}
	m := fmt.Sprint(v)
	for _, want := range []string{"class:org.weft.test.User", "name:user-3", "id:3", "score:4.5"} {
		if !strings.Contains(m, want) {
			t.Fatalf("generic result %s lacks %s", m, want)
		}
	}
}

func TestUnknownServiceAndMethod(t *testing.T) {
	e := start(t, "")
	other, err := e.consumer.Refer(context.Background(), kernel.MustParseURL("dubbo://"+e.addr+"/org.weft.Nope?interface=org.weft.Nope&version=2.0"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Destroy()
	_, err = call(other, "echo", "x")
	if kernel.CodeOf(err) != kernel.CodeServiceNotFound || !strings.Contains(err.Error(), "org.weft.Nope:2.0") || !strings.Contains(err.Error(), iface) {
		t.Fatalf("unknown service: %v", err)
	}
	_, err = call(e.refer(t, ""), "nope", "x")
	if err == nil || !strings.Contains(err.Error(), `no method "nope"`) || !strings.Contains(err.Error(), "echo, fail, getUser") {
		t.Fatalf("unknown method: %v", err)
	}
}

func TestConcurrentCallers(t *testing.T) {
	e := start(t, "")
	iv := e.refer(t, "")
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				want := fmt.Sprintf("%d/%d", i, j)
				if res, err := call(iv, "echo", want); err != nil || res.Value != want {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d calls failed", bad.Load())
	}
}

func TestPayloadLimitFailsOneCallKeepsConnection(t *testing.T) {
	e := start(t, "&payload=1048576")
	iv := e.refer(t, "&payload=1048576")
	_, err := call(iv, "echo", strings.Repeat("x", 2<<20))
	if err == nil || !strings.Contains(err.Error(), "payload limit") {
		t.Fatalf("oversized request: %v", err)
	}
	// The provider's answer too large for its own limit: a clear error.
	_, err = call(iv, "big", int64(2<<20))
	if err == nil || !strings.Contains(err.Error(), "payload limit") {
		t.Fatalf("oversized response: %v", err)
	}
	if res, err := call(iv, "echo", "small"); err != nil || res.Value != "small" {
		t.Fatalf("after oversized calls: %v %v", res.Value, err)
	}
}

func TestOversizedResponseRejectedByConsumer(t *testing.T) {
	e := start(t, "")                  // provider: 8 MiB
	iv := e.refer(t, "&payload=65536") // consumer: 64 KiB
	_, err := call(iv, "big", int64(100<<10))
	if err == nil || !strings.Contains(err.Error(), "payload limit") {
		t.Fatalf("oversized response: %v", err)
	}
	if res, err := call(iv, "echo", "small"); err != nil || res.Value != "small" {
		t.Fatalf("same connection afterwards: %v %v", res.Value, err)
	}
}

func TestThreadPoolFullAnswersStatus100(t *testing.T) {
	e := start(t, "&threads=2")
	iv := e.refer(t, "&timeout=5000")
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := call(iv, "block"); done <- err }()
	}
	time.Sleep(100 * time.Millisecond)
	_, err := call(iv, "echo", "x")
	if kernel.CodeOf(err) != kernel.CodeLimitExceeded || !strings.Contains(err.Error(), "threads") {
		t.Fatalf("third call: %v, want limit exceeded from a full pool", err)
	}
	close(e.svc.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// rawFrame builds a Dubbo request frame with the given body.
func rawFrame(id uint64, body []byte, declared int) []byte {
	f := make([]byte, 16, 16+len(body))
	binary.BigEndian.PutUint16(f, dubbo.Magic)
	f[2] = dubbo.FlagRequest | dubbo.FlagTwoWay | hessian2.ID
	binary.BigEndian.PutUint64(f[4:], id)
	binary.BigEndian.PutUint32(f[12:], uint32(declared))
	return append(f, body...)
}

func readResponse(t *testing.T, c net.Conn) (status byte, id uint64) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	h := make([]byte, 16)
	if _, err := io.ReadFull(c, h); err != nil {
		t.Fatalf("no response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(h[12:]))
	io.ReadFull(c, body)
	return h[3], binary.BigEndian.Uint64(h[4:])
}

func TestMalformedInput(t *testing.T) {
	e := start(t, "")
	good := e.refer(t, "")
	check := func() {
		t.Helper()
		if res, err := call(good, "echo", "ok"); err != nil || res.Value != "ok" {
			t.Fatalf("a well-behaved connection was affected: %v %v", res.Value, err)
		}
	}
	dialRaw := func() net.Conn {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err := c.Read(make([]byte, 64))
		return err != nil
	}

	t.Run("bad magic", func(t *testing.T) {
		c := dialRaw()
		c.Write([]byte("\xca\xfe not dubbo at all, sixteen+ bytes"))
		if !closed(c) {
			t.Fatal("connection with a bad magic stays open")
		}
		check()
	})
	t.Run("truncated header", func(t *testing.T) {
		c := dialRaw()
		c.Write(rawFrame(1, nil, 0)[:9])
		c.Close()
		check()
	})
	t.Run("length over payload", func(t *testing.T) {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		c := dialRaw()
		c.Write(rawFrame(7, []byte("tiny"), 1<<30))
		status, id := readResponse(t, c)
		if status != 40 || id != 7 {
			t.Fatalf("status %d id %d, want BadRequest for request 7", status, id)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Fatalf("allocated %d MiB for a frame it rejects", grew>>20)
		}
		check()
	})
	t.Run("garbage body", func(t *testing.T) {
		c := dialRaw()
		body := []byte{0xff, 0xfe, 0x00, 0x13, 0x37, 'x', 'y'}
		c.Write(rawFrame(9, body, len(body)))
		if status, id := readResponse(t, c); status != 40 || id != 9 {
			t.Fatalf("status %d id %d, want BadRequest", status, id)
		}
		// Same connection still serves a good request.
		good, _ := dubbo.NewCodec(0).Encode(nil, requestOf(10, "echo", "again"))
		c.Write(good)
		if status, id := readResponse(t, c); status != 20 || id != 10 {
			t.Fatalf("after garbage: status %d id %d", status, id)
		}
		check()
	})
	t.Run("huge list length", func(t *testing.T) {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		// Header fields, then an argument that is a hessian list declaring
		// 2^31 elements: 'V' (typed/variable list)... use fixed-length
		// untyped list 0x58 with a huge int length.
		hdr, _ := hessian2.New().Marshal(nil, "2.0.2", iface, "", "echo", "Ljava/util/List;")
		body := append(hdr, 0x58, 'I', 0x80, 0x00, 0x00, 0x00)
		c := dialRaw()
		c.Write(rawFrame(11, body, len(body)))
		if status, id := readResponse(t, c); status != 40 || id != 11 {
			t.Fatalf("status %d id %d, want BadRequest", status, id)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Fatalf("allocated %d MiB for a list that is not there", grew>>20)
		}
		check()
	})
}

func TestTimeoutStatuses(t *testing.T) {
	e := start(t, "&sleep.timeout=50")
	iv := e.refer(t, "&timeout=2000")
	// The provider's own timeout (50 ms) runs out first: status 31.
	_, err := call(iv, "sleep", int64(120))
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeTimeout || !ke.ServerSide {
		t.Fatalf("provider-side timeout: %v, want a server-side timeout", err)
	}
	// The consumer's runs out first: a client-side timeout, and the late
	// response is dropped and counted.
	short := e.refer(t, "&timeout=30")
	_, err = call(short, "sleep", int64(45))
	if !errors.As(err, &ke) || ke.Code != kernel.CodeTimeout || ke.ServerSide {
		t.Fatalf("consumer-side timeout: %v, want a client-side timeout", err)
	}
}

func TestOnewayCalls(t *testing.T) {
	e := start(t, "")
	iv := e.refer(t, "&note.return=false")
	if _, err := call(iv, "note", "fire-and-forget"); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-e.svc.notes:
		if v != "fire-and-forget" {
			t.Fatalf("provider got %q", v)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("one-way call never reached the provider")
	}
}

type clientsOf interface {
	Clients() []*netty.ExchangeClient
}

func TestConnectionsSetting(t *testing.T) {
	e := start(t, "")
	shared1 := e.refer(t, "")
	shared2 := e.refer(t, "")
	if a, b := shared1.(clientsOf).Clients(), shared2.(clientsOf).Clients(); len(a) != 1 || a[0] != b[0] {
		t.Fatalf("two references to one address do not share their connection")
	}
	own := e.refer(t, "&connections=3")
	cs := own.(clientsOf).Clients()
	if len(cs) != 3 || cs[0] == shared1.(clientsOf).Clients()[0] {
		t.Fatalf("connections=3 gave %d clients", len(cs))
	}
	for i := range 6 {
		if res, err := call(own, "echo", fmt.Sprint(i)); err != nil || res.Value != fmt.Sprint(i) {
			t.Fatalf("call %d: %v %v", i, res.Value, err)
		}
	}
}

// The READONLY event on the wire is what Java's ExchangeCodec writes for
// HeaderExchangeServer.sendChannelReadOnlyEvent: a one-way event request
// (flag 0x80|0x20|2) whose body is the Hessian string "R"; decoding those
// bytes gives the event back, and a heartbeat's body (null) stays a
// heartbeat.
func TestReadOnlyEventBytes(t *testing.T) {
	c := dubbo.NewCodec(0)
	got, err := c.Encode(nil, &netty.Request{ID: 7, Event: true, Data: netty.ReadOnlyEvent})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xda, 0xbb, 0xa2, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0x01, 'R'}
	if string(got) != string(want) {
		t.Fatalf("READONLY frame\n got % x\nwant % x", got, want)
	}
	msg, n, err := c.Decode(want)
	if err != nil || n != len(want) {
		t.Fatalf("Decode: %v, %d bytes", err, n)
	}
	if req, ok := msg.(*netty.Request); !ok || !req.Event || req.TwoWay || req.Data != netty.ReadOnlyEvent {
		t.Fatalf("decoded %#v, want the one-way READONLY event", msg)
	}
	hb, _ := c.Encode(nil, &netty.Request{ID: 8, TwoWay: true, Event: true})
	msg, _, _ = c.Decode(hb)
	if req := msg.(*netty.Request); req.Data != nil {
		t.Fatalf("a heartbeat decoded with data %v", req.Data)
	}
	if _, err := c.Encode(nil, &netty.Request{ID: 9, Data: "R"}); err == nil {
		t.Fatal("a call request with string data encoded; only events carry a string")
	}
}
