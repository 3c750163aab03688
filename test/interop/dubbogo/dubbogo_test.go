package dubbogo

import (
	"context"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func startProvider(t *testing.T) (addr string, stop func()) {
	t.Helper()
	addr = freeAddr(t)
	stop, err := StartProvider(addr)
	if err != nil {
		t.Fatalf("StartProvider(%s): %v", addr, err)
	}
	t.Cleanup(stop)
	return addr, stop
}

func newClient(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := NewClient("dubbo://" + addr)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestProviderAndConsumer(t *testing.T) {
	ResetCalls()
	addr, _ := startProvider(t)
	c := newClient(t, addr)
	ctx := context.Background()

	t.Run("echo", func(t *testing.T) {
		got, err := c.Echo(ctx, "hello")
		if err != nil || got != "hello" {
			t.Fatalf("Echo = %q, %v", got, err)
		}
	})
	t.Run("echo 1MiB", func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		got, err := c.Echo(ctx, big)
		if err != nil {
			t.Fatal(err)
		}
		if got != big {
			t.Fatalf("1 MiB echo came back with %d bytes", len(got))
		}
	})
	t.Run("getUser", func(t *testing.T) {
		u, err := c.GetUser(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := &User{ID: 7, Name: "user-7", Tags: []string{"a", "b", "c"}, Score: 10.5}
		if !reflect.DeepEqual(u, want) {
			t.Fatalf("GetUser(7) = %+v, want %+v", u, want)
		}
	})
	t.Run("fail", func(t *testing.T) {
		before := FailCalls.Load()
		err := c.Fail(ctx, "boom")
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("Fail(boom) = %v, want an error containing boom", err)
		}
		if n := FailCalls.Load() - before; n != 1 {
			t.Fatalf("fail ran %d times, want exactly 1", n)
		}
		t.Logf("fail error: %v", err)
	})
	t.Run("attachments", func(t *testing.T) {
		got, resp, err := c.EchoWithAttachments(ctx, "hi", map[string]any{ReqAttachment: "v1"})
		if err != nil || got != "hi" {
			t.Fatalf("EchoWithAttachments = %q, %v", got, err)
		}
		if resp[RespAttachment] != "resp-v1" {
			t.Fatalf("response attachments %v: want %s=resp-v1", resp, RespAttachment)
		}
		t.Logf("response attachments: %v", resp)
	})
	t.Run("100 concurrent", func(t *testing.T) {
		const n = 100
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := "c-" + strings.Repeat("y", i)
				got, err := c.Echo(ctx, s)
				if err == nil && got != s {
					err = &mismatch{got, s}
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

type mismatch struct{ got, want string }

func (m *mismatch) Error() string { return "echo mismatch: got " + m.got + " want " + m.want }

func TestStopReleasesPort(t *testing.T) {
	addr := freeAddr(t)
	for round := range 2 {
		stop, err := StartProvider(addr)
		if err != nil {
			t.Fatalf("round %d: StartProvider: %v", round, err)
		}
		if _, err := StartProvider(freeAddr(t)); err == nil {
			t.Fatal("a second provider in the same process was accepted")
		}
		c, err := NewClient(addr)
		if err != nil {
			stop()
			t.Fatalf("round %d: NewClient: %v", round, err)
		}
		if got, err := c.Echo(context.Background(), "r"); err != nil || got != "r" {
			t.Errorf("round %d: Echo = %q, %v", round, got, err)
		}
		c.Close()
		if _, err := c.Echo(context.Background(), "r"); err != ErrClosed {
			t.Errorf("round %d: Echo after Close = %v, want ErrClosed", round, err)
		}
		stop()
		stop() // idempotent
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("round %d: port not released after stop: %v", round, err)
		}
		l.Close()
	}
}

// The provider going away under a connected dubbo-go consumer: calls fail
// fast, and Close afterwards is clean (also under -race).
func TestProviderStopsFirst(t *testing.T) {
	addr, stop := startProvider(t)
	c := newClient(t, addr)
	if _, err := c.Echo(context.Background(), "before"); err != nil {
		t.Fatal(err)
	}
	stop()
	start := time.Now()
	if _, err := c.Echo(context.Background(), "after"); err == nil {
		t.Fatal("echo to a stopped provider succeeded")
	} else if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("echo to a stopped provider took %v: %v", d, err)
	}
	c.Close()
}

func TestStopClosesAcceptedConnections(t *testing.T) {
	addr, stop := startProvider(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(100 * time.Millisecond) // let getty accept it
	stop()
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read on a connection to a stopped provider: %v, want EOF/reset", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestNewClientNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 6s: dubbo-go retries the connect for its 3s connect timeout twice")
	}
	start := time.Now()
	c, err := NewClient(freeAddr(t))
	if err == nil {
		c.Close()
		t.Fatal("NewClient to a closed port succeeded")
	}
	t.Logf("NewClient to a closed port: %v (after %v)", err, time.Since(start))
}
