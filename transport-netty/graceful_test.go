package netty

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// slowHandler answers every request after a delay.
type slowHandler struct{ delay time.Duration }

func (h slowHandler) Reply(_ *Conn, req *Request) *Response {
	time.Sleep(h.delay)
	return &Response{Status: StatusOK, Data: req.Data}
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
		if err == nil && resp.Status != StatusOK {
			err = StatusError(resp.Status, resp.ErrMsg)
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
		if resp.Status != StatusServiceError || !strings.Contains(resp.ErrMsg, "handler bug") {
			t.Fatalf("status %d %q", resp.Status, resp.ErrMsg)
		}
	}
}
