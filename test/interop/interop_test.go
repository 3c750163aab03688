// Interop between weft and a real dubbo-go v3.3.1 peer (classic dubbo
// protocol, hessian2, direct URL), in both directions: a dubbo-go consumer
// calling a weft provider, and a weft consumer calling a dubbo-go provider.
//
// The module also holds TestNacosOutage (nacos_outage_test.go): weft Apps
// through a Nacos server that is stopped and restarted under load. It is
// here because this module runs without -race and nacos-sdk-go v2.3.2 races
// on reconnect; it needs NACOS_TEST_ADDR and NACOS_TEST_POLARIS_DIR.
package interop_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startWeft builds and starts a quiet weft App (no environment), stopped
// when the test ends.
func startWeft(t *testing.T, opts ...weft.Option) *weft.App {
	t.Helper()
	app, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app
}

func freeAddr(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// weftEcho is org.weft.bench.EchoService on weft, with the same POJO type as
// the dubbo-go side (hessian's class registry is process-wide).
type weftEcho struct {
	echoes, users, fails atomic.Int64
}

func (s *weftEcho) Echo(ctx context.Context, v string) (string, error) {
	s.echoes.Add(1)
	if inv, ok := kernel.InvocationFrom(ctx); ok {
		if x := inv.AttachmentString("x-req"); x != "" {
			kernel.SetReplyAttachment(ctx, "x-resp", "resp-"+x)
		}
	}
	return v, nil
}

func (s *weftEcho) GetUser(ctx context.Context, id int64) (*dubbogo.User, error) {
	s.users.Add(1)
	return dubbogo.NewUser(id), nil
}

func (s *weftEcho) Fail(ctx context.Context, msg string) error {
	s.fails.Add(1)
	return fmt.Errorf("fail: %s", msg)
}

func startWeftProvider(t *testing.T) (*weftEcho, string) {
	t.Helper()
	addr, port := freeAddr(t)
	svc := &weftEcho{}
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc))
	return svc, addr
}

func TestDubboGoConsumerToWeftProvider(t *testing.T) {
	svc, addr := startWeftProvider(t)
	c, err := dubbogo.NewClient("dubbo://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if got, err := c.Echo(ctx, "hello"); err != nil || got != "hello" {
		t.Fatalf("echo: %q %v", got, err)
	}
	big := strings.Repeat("é", 1<<19) // 1 MiB of UTF-8
	if got, err := c.Echo(ctx, big); err != nil || got != big {
		t.Fatalf("1 MiB echo: %d bytes back, %v", len(got), err)
	}
	u, err := c.GetUser(ctx, 7)
	if err != nil || u.ID != 7 || u.Name != "user-7" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 10.5 {
		t.Fatalf("getUser: %+v %v", u, err)
	}
	before := svc.fails.Load()
	err = c.Fail(ctx, "boom")
	if err == nil || !strings.Contains(err.Error(), "fail: boom") {
		t.Fatalf("fail: %v, want the provider's message", err)
	}
	if n := svc.fails.Load() - before; n != 1 {
		t.Fatalf("weft's fail ran %d times, want 1", n)
	}
	got, resp, err := c.EchoWithAttachments(ctx, "x", map[string]any{"x-req": "42"})
	if err != nil || got != "x" || resp["x-resp"] != "resp-42" {
		t.Fatalf("attachments: %q %v %v", got, resp, err)
	}
	concurrent(t, func(i int) error {
		want := fmt.Sprintf("c-%d", i)
		got, err := c.Echo(ctx, want)
		if err == nil && got != want {
			err = fmt.Errorf("got %q", got)
		}
		return err
	})
}

type echoClient struct {
	Echo    func(ctx context.Context, v string) (string, error)
	GetUser func(ctx context.Context, id int64) (*dubbogo.User, error)
	Fail    func(ctx context.Context, msg string) error
}

func TestWeftConsumerToDubboGoProvider(t *testing.T) {
	addr, _ := freeAddr(t)
	stop, err := dubbogo.StartProvider(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dubbogo.ResetCalls()
	var c echoClient
	app := startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "dubbo://%s", timeout: 5000, retries: 0}
`, dubbogo.Interface, addr))),
		weft.WithReference("echo", &c))
	ctx := context.Background()

	if got, err := c.Echo(ctx, "hello"); err != nil || got != "hello" {
		t.Fatalf("echo: %q %v", got, err)
	}
	big := strings.Repeat("ü", 1<<19)
	if got, err := c.Echo(ctx, big); err != nil || got != big {
		t.Fatalf("1 MiB echo: %d bytes back, %v", len(got), err)
	}
	u, err := c.GetUser(ctx, 9)
	if err != nil || u.ID != 9 || u.Name != "user-9" || strings.Join(u.Tags, ",") != "a,b,c" || u.Score != 13.5 {
		t.Fatalf("getUser: %+v %v", u, err)
	}
	before := dubbogo.FailCalls.Load()
	err = c.Fail(ctx, "boom")
	if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("fail: %v (biz %t), want a business error with the message", err, kernel.IsBiz(err))
	}
	if n := dubbogo.FailCalls.Load() - before; n != 1 {
		t.Fatalf("dubbo-go's fail ran %d times, want 1", n)
	}
	// Attachments both ways, through the generic invoker.
	ref, err := app.Reference("echo")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("echo", "att")
	inv.SetAttachment("x-req", "42")
	res, err := ref.Invoke(ctx, inv)
	if err != nil || res.Value != "att" || res.Attachments["x-resp"] != "resp-42" {
		t.Fatalf("attachments: %v %v %v", res.Value, res.Attachments, err)
	}
	concurrent(t, func(i int) error {
		want := fmt.Sprintf("c-%d", i)
		got, err := c.Echo(ctx, want)
		if err == nil && got != want {
			err = fmt.Errorf("got %q", got)
		}
		return err
	})
}

func concurrent(t *testing.T, call func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = ctx
			errs <- call(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent call: %v", err)
		}
	}
}
