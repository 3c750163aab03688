package triple

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
)

func refer(t *testing.T, addr string, params map[string]string) kernel.Invoker {
	t.Helper()
	p := New(quiet)
	t.Cleanup(p.Destroy)
	host, port := splitHostPort(t, addr)
	iv, err := p.Refer(context.Background(), kernel.NewURL(Name, host, port, iface, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iv.Destroy)
	deadline := time.Now().Add(5 * time.Second)
	for !iv.IsAvailable() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return iv
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	var port int
	fmt.Sscan(addr[i+1:], &port)
	return addr[:i], port
}

var stringValueType = reflect.TypeOf(&wrapperspb.StringValue{})

func echoOf(t *testing.T, res kernel.Result) string {
	t.Helper()
	d, ok := res.Value.(kernel.Decodable)
	if !ok {
		t.Fatalf("value %T is not Decodable", res.Value)
	}
	v, err := d.DecodeAs(stringValueType)
	if err != nil {
		t.Fatal(err)
	}
	return v.Interface().(*wrapperspb.StringValue).GetValue()
}

func TestClientRoundTrip(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, map[string]string{kernel.KeyApplication: "shop"})
	inv := kernel.NewInvocation("Echo", wrapperspb.String("hi"))
	inv.SetAttachment("x-req", "7")
	res, err := iv.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if got := echoOf(t, res); got != "hi" {
		t.Fatalf("echo %q", got)
	}
	if res.Attachments["x-resp"] != "resp-7" || res.Attachments["x-app"] != "shop" {
		t.Fatalf("attachments %v", res.Attachments)
	}
}

// TestClientLargeMessages: a request larger than the provider's windows
// waits for its WINDOW_UPDATEs (the read loop sends the rest), and the
// answer as large comes back.
func TestClientLargeMessages(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	big := strings.Repeat("y", 1<<20)
	res, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String(big)))
	if err != nil {
		t.Fatal(err)
	}
	if got := echoOf(t, res); got != big {
		t.Fatalf("echo of %d bytes came back as %d", len(big), len(got))
	}
}

func TestClientConcurrent(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	var wg sync.WaitGroup
	// Fewer callers than the provider's 200 threads: beyond, calls are
	// refused (RESOURCE_EXHAUSTED), as TestThreadsBound shows.
	errs := make(chan error, 150)
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat(fmt.Sprint(i), i*10+1)
			res, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String(want)))
			if err == nil {
				var v reflect.Value
				if v, err = res.Value.(kernel.Decodable).DecodeAs(stringValueType); err == nil && v.Interface().(*wrapperspb.StringValue).GetValue() != want {
					err = fmt.Errorf("call %d: wrong answer", i)
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientErrors: the codes cross the process: a business error is one,
// with its text; an unknown method is method not found; the provider's
// deadline is a timeout.
func TestClientErrors(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	_, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String("fail")))
	if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "failed as asked") {
		t.Fatalf("business error: %v (code %v)", err, kernel.CodeOf(err))
	}
	_, err = iv.Invoke(context.Background(), kernel.NewInvocation("Nope", wrapperspb.String("x")))
	if kernel.CodeOf(err) != kernel.CodeMethodNotFound {
		t.Fatalf("unknown method: %v (code %v)", err, kernel.CodeOf(err))
	}
	_, err = iv.Invoke(context.Background(), kernel.NewInvocation("Echo", "not a message"))
	if kernel.CodeOf(err) != kernel.CodeSerialization {
		t.Fatalf("a string argument: %v", err)
	}
}

// TestClientTimeoutCancelsTheProvider: a call the consumer stops waiting
// for is reset, and the provider's context ends (not only the caller's
// wait).
func TestClientTimeoutCancelsTheProvider(t *testing.T) {
	addr, e := serve(t, nil)
	iv := refer(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := iv.Invoke(ctx, kernel.NewInvocation("Slow", wrapperspb.String("x")))
	if kernel.CodeOf(err) != kernel.CodeTimeout {
		t.Fatalf("got %v, want a timeout", err)
	}
	select {
	case err := <-e.ended:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("provider's context: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's call outlived the consumer's deadline")
	}
}

// TestClientCancelResetsTheStream: a caller that cancels (no deadline
// involved) resets the stream, which ends the provider's context.
func TestClientCancelResetsTheStream(t *testing.T) {
	addr, e := serve(t, nil)
	iv := refer(t, addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := iv.Invoke(ctx, kernel.NewInvocation("Slow", wrapperspb.String("x")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want canceled", err)
	}
	select {
	case err := <-e.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("provider's context ended with %v, want Canceled (the reset)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RST_STREAM did not reach the provider")
	}
}

// TestGracefulStopSaysGoAway: a provider that stops says GOAWAY: the call
// it is serving finishes and is answered; a call sent after is refused at
// once with a retryable error (another provider can take it), not lost.
func TestGracefulStopSaysGoAway(t *testing.T) {
	addr, e, p := serveP(t, nil)
	iv := refer(t, addr, nil)
	slow := make(chan error, 1)
	go func() {
		_, err := iv.Invoke(context.Background(), kernel.NewInvocation("Slow", wrapperspb.String("x")))
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { p.Destroy(); close(stopped) }()
	time.Sleep(50 * time.Millisecond)
	_, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String("late")))
	if err == nil || !kernel.Retryable(err) {
		t.Fatalf("a call after GOAWAY: %v (retryable %t), want a retryable refusal", err, kernel.Retryable(err))
	}
	e.hold <- struct{}{}
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight at the stop: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider did not stop")
	}
}

// TestNonIDL: a method of plain Go types over Triple, as Dubbo 3 and
// dubbo-go carry it (hessian2 in a TripleRequestWrapper).
func TestNonIDL(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	res, err := iv.Invoke(context.Background(), kernel.NewInvocation("plain", "hello"))
	if err != nil || res.Value != "hello" {
		t.Fatalf("plain: %v %v", res.Value, err)
	}
	big := strings.Repeat("é", 100000)
	res, err = iv.Invoke(context.Background(), kernel.NewInvocation("plain", big))
	if err != nil || res.Value != big {
		t.Fatalf("plain of %d bytes: %v", len(big), err)
	}
	_, err = iv.Invoke(context.Background(), kernel.NewInvocation("plain", int64(3)))
	if kernel.CodeOf(err) != kernel.CodeSerialization {
		t.Fatalf("a long for a string: %v", err)
	}
}

// TestClientHTTPStatusWithBody: an answer that is no gRPC one, with a body
// and no trailers (net/http's 404 page, which dubbo-go's Triple server sends
// for a method it does not serve), is the HTTP status mapped as gRPC maps
// it, not a malformed response.
func TestClientHTTPStatusWithBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/"+iface+"/Busy", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "try later", http.StatusServiceUnavailable)
	})
	hs := &http.Server{Handler: h2c.NewHandler(mux, &http2.Server{})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	iv := refer(t, ln.Addr().String(), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		arg    any
		want   kernel.Code
	}{
		{"Missing", wrapperspb.String("x"), kernel.CodeMethodNotFound}, // 404 page not found
		{"missing", "non-IDL", kernel.CodeMethodNotFound},
		{"Busy", wrapperspb.String("x"), kernel.CodeNetwork}, // 503
	} {
		_, err := iv.Invoke(ctx, kernel.NewInvocation(tc.method, tc.arg))
		if kernel.CodeOf(err) != tc.want || !strings.Contains(err.Error(), "HTTP") {
			t.Errorf("%s: %v (code %v), want %v from the HTTP status", tc.method, err, kernel.CodeOf(err), tc.want)
		}
	}
}

// TestStatusDetails: a business error's grpc-status-details-bin reaches the
// consumer as it was sent.
func TestStatusDetails(t *testing.T) {
	addr, _ := serve(t, nil)
	iv := refer(t, addr, nil)
	_, err := iv.Invoke(context.Background(), kernel.NewInvocation("Detailed", wrapperspb.String("x")))
	var se *StatusError
	if !kernel.IsBiz(err) || !errors.As(err, &se) || se.Message != "with details" || string(se.Details) != "\x08\x03\x12\x01x" {
		t.Fatalf("%v: %+v", err, se)
	}
}

// TestClientHeartbeatsArePings: an idle consumer's heartbeats are HTTP/2
// PINGs: the provider answers them, and the connection outlives a silence
// of many heartbeats without reconnecting.
//
// Both idle rules are timing rules that a loaded machine breaks without any
// defect. The consumer closes a connection that has read nothing for 3 of
// its heartbeats H, so a PING's round trip, counted from the keepalive tick
// that should send it, must fit in 5/3 H (it goes H to 4/3 H after the last
// read); the provider closes one silent for 3 of its own heartbeats (4 H
// here, far the looser rule). So H is made from a baseline measured in the
// test: the worst round trip of a trivial call (Echo on a connection of its
// own, sent on a ticker as the keepalive sends its PINGs, timed from the
// tick's due time) measured just before, times heartbeatFactor, plus
// heartbeatMargin. The same probe runs all through the silence: a
// reconnection fails the test when the probe stayed within what H absorbs,
// for then the pings did not keep the connection (the provider did not
// answer them, or did not count them). When the probe saw a stall past it,
// the silence proves nothing and is run again, with H made from that stall
// and at least doubled (heartbeatTries in all).
func TestClientHeartbeatsArePings(t *testing.T) {
	const (
		heartbeatFactor = 2
		heartbeatMargin = 5 * time.Millisecond
		heartbeatFloor  = 25 * time.Millisecond
		heartbeatTries  = 4
	)
	// fits is the worst probe round trip a heartbeat of h absorbs;
	// heartbeatFor the heartbeat, in whole milliseconds (the URL's unit),
	// that absorbs worst.
	fits := func(h time.Duration) time.Duration { return (5*h/3 - heartbeatMargin) / heartbeatFactor }
	heartbeatFor := func(worst time.Duration) time.Duration {
		return max(heartbeatFloor, (3*(heartbeatFactor*worst+heartbeatMargin)/5 + time.Millisecond).Truncate(time.Millisecond))
	}
	h := heartbeatFor(probeRoundTrips(t, refer(t, serveAddr(t, nil), nil), 10*time.Millisecond, 200*time.Millisecond))
	for try := 1; ; try++ {
		addr := serveAddr(t, map[string]string{"heartbeat": strconv.Itoa(int(4 * h / time.Millisecond))})
		iv := refer(t, addr, map[string]string{"heartbeat": strconv.Itoa(int(h / time.Millisecond))})
		if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String("a"))); err != nil {
			t.Fatal(err)
		}
		// 24 H: 1.5 times the longest the provider takes to close a
		// connection whose pings it does not count (3 of its heartbeats
		// of silence, seen at its next tick: 16 H).
		silence := 24 * h
		worst := probeRoundTrips(t, refer(t, addr, nil), h/3, silence)
		_, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String("b")))
		n := iv.(*invoker).sc.c.Connects()
		t.Logf("try %d: heartbeat %v (provider %v), silence %v: %d connection(s), call after it: %v; the probe's worst round trip %v (the heartbeat absorbs %v)",
			try, h, 4*h, silence, n, err, worst.Round(100*time.Microsecond), fits(h).Round(100*time.Microsecond))
		if err == nil && n == 1 {
			return
		}
		if worst <= fits(h) {
			t.Fatalf("the connection did not outlive a silence of %v (%d connections made, the call after it: %v): the pings should have kept it, and this machine's round trips (worst %v) were well within the heartbeat of %v",
				silence, n, err, worst, h)
		}
		if try == heartbeatTries {
			t.Fatalf("%d tries, each with a stall past its heartbeat (the last: a trivial round trip took %v, heartbeat %v): the machine is too busy to tell whether the pings keep the connection",
				try, worst, h)
		}
		// At least double: a stall just past the last one must not make
		// every try inconclusive.
		h = max(2*h, heartbeatFor(worst))
	}
}

// serveAddr is serve's address.
func serveAddr(t *testing.T, params map[string]string) string {
	t.Helper()
	addr, _ := serve(t, params)
	return addr
}

// probeRoundTrips calls Echo on iv every tick for d and returns the worst
// time from a call's due time to its answer: a trivial round trip on this
// machine now, with the wait of the goroutine that starts it, as a
// keepalive's PING from its tick to its ACK. After a late call the ticks
// start again from now, so that one stall counts once.
func probeRoundTrips(t *testing.T, iv kernel.Invoker, tick, d time.Duration) time.Duration {
	t.Helper()
	var worst time.Duration
	now := time.Now()
	end, due := now.Add(d), now
	for due.Before(end) {
		due = due.Add(tick)
		time.Sleep(time.Until(due))
		if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("Echo", wrapperspb.String("probe"))); err != nil {
			t.Fatalf("the probe's call: %v", err)
		}
		now = time.Now()
		worst = max(worst, now.Sub(due))
		if now.Sub(due) > tick {
			due = now
		}
	}
	return worst
}
