package netty

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// slowHandler answers every request after a delay.
type slowHandler struct{ delay time.Duration }

func (h slowHandler) Reply(_ *Conn, req *Request) *Response {
	time.Sleep(h.delay)
	return &Response{Status: kernel.ResponseOK, Data: req.Data}
}

// CloseGracefully: the client is unavailable at once, the calls in flight
// get their answers, a call sent while it drains still goes through, and
// the connection closes once they have ended.
func TestCloseGracefullyLetsCallsInFlightFinish(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr := NewTransporter(log)
	srv, err := Bind(tr, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, slowHandler{200 * time.Millisecond}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(time.Second)
	c := NewExchangeClient(tr, kernel.MustParseURL("dubbo://"+srv.Addr()), testCodec{}, ClientOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	call := func() {
		defer wg.Done()
		resp, err := c.Request(context.Background(), "x", time.Second)
		if err == nil && resp.Status != kernel.ResponseOK {
			err = kernel.ResponseError(resp.Status, resp.ErrMsg)
		}
		errs <- err
	}
	for range 8 {
		wg.Add(1)
		go call()
	}
	for c.Pending() < 8 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { c.CloseGracefully(time.Minute); close(closed) }()
	for c.IsAvailable() {
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	go call() // chose the client just before it drained
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call failed while the client drained: %v", err)
		}
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the client did not close once idle")
	}
	if _, err := c.Request(context.Background(), "x", time.Second); kernel.CodeOf(err) != kernel.CodeNetwork {
		t.Fatalf("a call after the close: %v, want a network error", err)
	}
}

// enteredHandler answers every request after a delay and counts the
// requests it has begun to serve.
type enteredHandler struct {
	delay   time.Duration
	entered atomic.Int32
}

func (h *enteredHandler) Reply(_ *Conn, req *Request) *Response {
	h.entered.Add(1)
	time.Sleep(h.delay)
	return &Response{Status: kernel.ResponseOK, Data: req.Data}
}

// panicHandler panics on every request.
type panicHandler struct{}

func (panicHandler) Reply(*Conn, *Request) *Response { panic("handler bug") }

// A panic while serving a request fails that call with an answer and leaves
// the server (and the process) serving.
func TestPanicInHandlerFailsOnlyThatCall(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr := NewTransporter(log)
	srv, err := Bind(tr, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, panicHandler{}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(time.Second)
	c := NewExchangeClient(tr, kernel.MustParseURL("dubbo://"+srv.Addr()), testCodec{}, ClientOptions{})
	defer c.Close()
	for range 3 {
		resp, err := c.Request(context.Background(), "x", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != kernel.ResponseServiceError || !strings.Contains(resp.ErrMsg, "handler bug") {
			t.Fatalf("status %d %q", resp.Status, resp.ErrMsg)
		}
	}
}

// A server that starts a graceful stop sends each connection the READONLY
// event first: its client stops taking new calls at once (the directory
// chooses other providers), says why, and the calls it had sent are still
// answered before the connection closes.
func TestReadOnlyEventOnServerClose(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr := NewTransporter(log)
	h := &enteredHandler{delay: 300 * time.Millisecond}
	srv, err := Bind(tr, kernel.MustParseURL("dubbo://127.0.0.1:0"), testCodec{}, h, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewExchangeClient(tr, kernel.MustParseURL("dubbo://"+srv.Addr()), testCodec{}, ClientOptions{})
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Request(context.Background(), "x", 5*time.Second)
			if err == nil && resp.Status != kernel.ResponseOK {
				err = kernel.ResponseError(resp.Status, resp.ErrMsg)
			}
			errs <- err
		}()
	}
	// Served, not only sent: a call still on its way when the server
	// begins to stop is refused (and retried elsewhere by a cluster).
	for deadline := time.Now().Add(5 * time.Second); h.entered.Load() < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls being served", h.entered.Load())
		}
	}
	closed := make(chan struct{})
	go func() { srv.Close(5 * time.Second); close(closed) }()
	for deadline := time.Now().Add(5 * time.Second); c.IsAvailable(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client is still available 5 s after its server began to stop")
		}
	}
	// Unavailable while the calls are still in flight: the event, not the
	// closed connection, made it so.
	if n := c.Pending(); n == 0 {
		t.Fatal("no call in flight when the client turned unavailable: the READONLY event was not what did it")
	}
	if err := c.Unavailable(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("Unavailable: %v, want the READONLY reason", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call in flight failed during the graceful stop: %v", err)
		}
	}
	<-closed
}
