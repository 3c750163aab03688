package interop_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// guardedEcho is EchoService whose echo blocks until its context ends when
// asked to, recording when that was.
type guardedEcho struct {
	weftEcho
	stopped atomic.Int64 // ms from the call's start to ctx.Done
}

func (s *guardedEcho) Echo(ctx context.Context, v string) (string, error) {
	if v != "block" {
		return s.weftEcho.Echo(ctx, v)
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		s.stopped.Store(time.Since(start).Milliseconds())
		return "", ctx.Err()
	case <-time.After(5 * time.Second):
		s.stopped.Store(-1)
		return "too late", nil
	}
}

// startGuardedProvider exports EchoService behind a filter that refuses
// calls carrying the attachment x-deny as forbidden, with a provider
// timeout of 3 s.
func startGuardedProvider(t *testing.T) (*guardedEcho, *atomic.Int64, string) {
	t.Helper()
	addr, port := freeAddr(t)
	svc := &guardedEcho{}
	var guarded atomic.Int64
	deny := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
		guarded.Add(1)
		if inv.AttachmentString("x-deny") != "" {
			return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "caller may not call %s", inv.Method)
		}
		return next.Invoke(ctx, inv)
	})
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %d}}
provider:
  services:
    echo: {interface: %s, filter: "deny,default", timeout: 3000}
`, port, dubbogo.Interface))),
		weft.WithService("echo", svc),
		weft.WithFilter("deny", nil, func() (extension.Filter, error) { return deny, nil }))
	return svc, &guarded, addr
}

// A framework error of a weft provider reaches a dubbo-go consumer in the
// readable form it expects: an error whose text says what happened, with
// one "weft: forbidden:" prefix; the service did not run.
func TestDubboGoConsumerGetsWeftForbidden(t *testing.T) {
	svc, guarded, addr := startGuardedProvider(t)
	c, err := dubbogo.NewClient("dubbo://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.EchoWithAttachments(context.Background(), "x", map[string]any{"x-deny": "1"})
	if err == nil {
		t.Fatal("forbidden call succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "weft: forbidden: caller may not call echo") || strings.Count(msg, "weft: forbidden:") != 1 {
		t.Fatalf("dubbo-go consumer got %q", msg)
	}
	if svc.echoes.Load() != 0 || guarded.Load() != 1 {
		t.Fatalf("echo ran %d times, guard %d times", svc.echoes.Load(), guarded.Load())
	}
	// The same connection still serves.
	if got, err := c.Echo(context.Background(), "ok"); err != nil || got != "ok" {
		t.Fatalf("echo after forbidden: %q %v", got, err)
	}
}

// A dubbo-go consumer's deadline travels: with its 300 ms timeout, the weft
// provider's context ends at about 300 ms, not at its own 3 s.
func TestDubboGoConsumerDeadlineReachesWeftProvider(t *testing.T) {
	svc, _, addr := startGuardedProvider(t)
	c, err := dubbogo.NewClient("dubbo://"+addr, dubbogo.WithTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Echo(context.Background(), "block"); err == nil {
		t.Fatal("blocked echo succeeded")
	}
	gaveUp := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for svc.stopped.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stopped := svc.stopped.Load()
	t.Logf("dubbo-go gave up after %v; the weft provider's context ended after %d ms", gaveUp.Round(time.Millisecond), stopped)
	if stopped < 250 || stopped > 1000 {
		t.Fatalf("provider context ended after %d ms, want about 300 (the consumer's timeout)", stopped)
	}
}

// A weft consumer gets the code back: forbidden stays forbidden, once.
func TestWeftConsumerGetsForbiddenCode(t *testing.T) {
	svc, guarded, addr := startGuardedProvider(t)
	var stub echoClient
	startWeft(t,
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    echo: {interface: %s, url: "dubbo://%s", retries: 2}
`, dubbogo.Interface, addr))),
		weft.WithReference("echo", &stub))
	ctx := kernel.WithAttachments(context.Background(), map[string]any{"x-deny": "1"})
	_, err := stub.Echo(ctx, "x")
	if kernel.CodeOf(err) != kernel.CodeForbidden || strings.Count(err.Error(), "weft: forbidden:") != 1 {
		t.Fatalf("err %v (code %v)", err, kernel.CodeOf(err))
	}
	if svc.echoes.Load() != 0 || guarded.Load() != 1 {
		t.Fatalf("echo ran %d times, guard %d times (forbidden must not be retried)", svc.echoes.Load(), guarded.Load())
	}
}
