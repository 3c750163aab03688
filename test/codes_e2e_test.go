package test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// codesSvc is org.weft.Codes, one per provider App, counting how often each
// method ran there.
type codesSvc struct {
	name    string
	release chan struct{}
	mu      sync.Mutex
	ran     map[string]int
	// blockDone receives when Block's context ended.
	blockDone chan time.Time
	delay     time.Duration // of Slow
}

func newCodesSvc(name string) *codesSvc {
	return &codesSvc{name: name, release: make(chan struct{}), ran: map[string]int{}, blockDone: make(chan time.Time, 4)}
}

func (s *codesSvc) count(m string) {
	s.mu.Lock()
	s.ran[m]++
	s.mu.Unlock()
}

func (s *codesSvc) runs(m string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ran[m]
}

func (s *codesSvc) Guarded(_ context.Context, v string) (string, error) {
	s.count("guarded")
	return s.name, nil
}

func (s *codesSvc) Fail(_ context.Context, v string) error {
	s.count("fail")
	return errors.New("insufficient funds: " + v)
}

func (s *codesSvc) Who(_ context.Context, v string) (string, error) {
	s.count("who")
	return s.name, nil
}

func (s *codesSvc) Hold(_ context.Context) (string, error) {
	s.count("hold")
	<-s.release
	return s.name, nil
}

func (s *codesSvc) Big(_ context.Context, n int32) (string, error) {
	s.count("big")
	return strings.Repeat("b", int(n)), nil
}

// Slow takes the provider's delay.
func (s *codesSvc) Slow(_ context.Context) (string, error) {
	s.count("slow")
	time.Sleep(s.delay)
	return s.name, nil
}

// Block returns when its context ends, and tells when.
func (s *codesSvc) Block(ctx context.Context) (string, error) {
	s.count("block")
	<-ctx.Done()
	s.blockDone <- time.Now()
	return "", ctx.Err()
}

type codesClient struct {
	Guarded func(ctx context.Context, v string) (string, error)
	Fail    func(ctx context.Context, v string) error
	Who     func(ctx context.Context, v string) (string, error)
	Hold    func(ctx context.Context) (string, error)
	Big     func(ctx context.Context, n int32) (string, error)
	Block   func(ctx context.Context) (string, error)
	Slow    func(ctx context.Context) (string, error)
	// Missing is not a method of the provider.
	Missing func(ctx context.Context, v string) (string, error)
	// BigText calls big with a string, which does not convert to int32.
	BigText func(ctx context.Context, v string) (string, error) `weft:"big"`
}

// guard is a provider filter: it counts every call that reaches it, per
// method, and rejects "guarded" as forbidden.
type guard struct{ runs *sync.Map } // method -> *atomic.Int64

func (g guard) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	n, _ := g.runs.LoadOrStore(inv.Method, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if inv.Method == "guarded" {
		return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "caller may not call %s", inv.Method)
	}
	return next.Invoke(ctx, inv)
}

func guardRuns(m *sync.Map, method string) int64 {
	if n, ok := m.Load(method); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// startCodesProvider starts a provider App of svc at addr with the guard
// filter; protocol and service are extra YAML keys.
func startCodesProvider(t *testing.T, svc *codesSvc, addr, protocol, service string) (*weft.App, *sync.Map) {
	t.Helper()
	runs := &sync.Map{}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("codes", svc),
		weft.WithFilter("guard", nil, func() (extension.Filter, error) { return guard{runs}, nil }),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %s%s}}
provider:
  services:
    codes: {interface: org.weft.Codes, filter: guard%s}
`, port, protocol, service))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app, runs
}

// tries is a consumer filter per invoker: it records the provider of each
// try.
type tries struct {
	mu    *sync.Mutex
	addrs *[]string
}

func (r tries) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	r.mu.Lock()
	*r.addrs = append(*r.addrs, inv.Method+"@"+next.URL().Address())
	r.mu.Unlock()
	return next.Invoke(ctx, inv)
}

// codesConsumer starts a consumer App of org.weft.Codes over url with the
// tries filter; ref is extra YAML keys of the reference.
func codesConsumer(t *testing.T, url, ref string) (*codesClient, func() []string) {
	t.Helper()
	var c codesClient
	var mu sync.Mutex
	var seen []string
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("codes", &c),
		weft.WithFilter("tries", nil, func() (extension.Filter, error) { return tries{&mu, &seen}, nil }),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
consumer:
  references:
    codes: {interface: org.weft.Codes, url: "%s", filter: tries%s}
`, url, ref))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return &c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := append([]string(nil), seen...)
		seen = seen[:0]
		return out
	}
}

// Error codes travel across processes (real TCP, two providers, failover
// with retries 2), and only what another provider could answer is retried.
// Before issue 10: forbidden arrived as "weft: unknown: weft: forbidden:",
// the guard ran three times, method not found arrived as unknown and was
// retried, and a response too large for the payload was computed three
// times.
func TestCodesTravelAndOnlyRetryableFailuresAreRetried(t *testing.T) {
	noLeaks(t)
	a, b := newCodesSvc("a"), newCodesSvc("b")
	addrA, addrB := freePort(t), freePort(t)
	// a has one thread, so that a call holding it makes a answer status 100.
	_, runsA := startCodesProvider(t, a, addrA, ", threads: 1, payload: 1048576", "")
	_, runsB := startCodesProvider(t, b, addrB, ", payload: 1048576", "")
	c, triesOf := codesConsumer(t, "dubbo://"+addrA+";dubbo://"+addrB,
		", cluster: failover, retries: 2, loadbalance: roundrobin, timeout: 3000")
	ctx := context.Background()
	total := func(method string) int { return a.runs(method) + b.runs(method) }
	guardTotal := func(method string) int64 { return guardRuns(runsA, method) + guardRuns(runsB, method) }

	t.Run("forbidden", func(t *testing.T) {
		_, err := c.Guarded(ctx, "x")
		t.Logf("err: %v; tries %v", err, triesOf())
		if kernel.CodeOf(err) != kernel.CodeForbidden {
			t.Errorf("code %v, want forbidden (err %v)", kernel.CodeOf(err), err)
		}
		if err != nil && strings.Count(err.Error(), "weft: forbidden:") != 1 {
			t.Errorf("want exactly one \"weft: forbidden:\" in %q", err)
		}
		if err != nil && strings.Count(err.Error(), "weft: ") != 1 {
			t.Errorf("want one \"weft: \" prefix in %q", err)
		}
		if n := guardTotal("guarded"); n != 1 {
			t.Errorf("the guard ran %d times for one forbidden call, want 1", n)
		}
		if n := total("guarded"); n != 0 {
			t.Errorf("the guarded method ran %d times", n)
		}
	})

	t.Run("method not found", func(t *testing.T) {
		_, err := c.Missing(ctx, "x")
		t.Logf("err: %v; tries %v", err, triesOf())
		if kernel.CodeOf(err) != kernel.CodeMethodNotFound {
			t.Errorf("code %v, want method not found (err %v)", kernel.CodeOf(err), err)
		}
		if n := guardTotal("missing"); n != 1 {
			t.Errorf("the call of a missing method reached providers %d times, want 1 (not retried)", n)
		}
	})

	t.Run("business error", func(t *testing.T) {
		err := c.Fail(ctx, "42")
		t.Logf("err: %v; tries %v", err, triesOf())
		if !kernel.IsBiz(err) || !strings.Contains(err.Error(), "insufficient funds: 42") {
			t.Errorf("err %v, want the business error", err)
		}
		if n := total("fail"); n != 1 {
			t.Errorf("the method ran %d times, want 1", n)
		}
	})

	t.Run("response over the payload", func(t *testing.T) {
		_, err := c.Big(ctx, 2<<20) // 2 MiB > payload 1 MiB
		t.Logf("err: %v; tries %v", err, triesOf())
		if kernel.CodeOf(err) != kernel.CodeSerialization {
			t.Errorf("code %v, want serialization (err %v)", kernel.CodeOf(err), err)
		}
		if n := total("big"); n != 1 {
			t.Errorf("the too-large response was computed %d times, want 1", n)
		}
	})

	t.Run("status 100 is retried on the other provider", func(t *testing.T) {
		// Hold a's only thread with a call of its own consumer.
		holder, _ := codesConsumer(t, "dubbo://"+addrA, ", retries: 0, timeout: 10000")
		held := make(chan error, 1)
		go func() { _, err := holder.Hold(ctx); held <- err }()
		defer func() {
			close(a.release)
			if err := <-held; err != nil {
				t.Errorf("the holding call: %v", err)
			}
		}()
		for deadline := time.Now().Add(3 * time.Second); a.runs("hold") != 1; {
			if time.Now().After(deadline) {
				t.Fatal("the holding call did not reach provider a")
			}
			time.Sleep(time.Millisecond)
		}
		triesOf()
		const calls = 6
		for i := range calls {
			got, err := c.Who(ctx, "x")
			if err != nil || got != "b" {
				t.Fatalf("call %d with a busy: %q %v, want b's answer", i, got, err)
			}
		}
		seen := triesOf()
		onA := 0
		for _, s := range seen {
			if strings.HasSuffix(s, "@"+addrA) {
				onA++
			}
		}
		t.Logf("tries: %v", seen)
		if onA == 0 {
			t.Errorf("no try went to the busy provider a (round robin): the retry was not exercised")
		}
		if a.runs("who") != 0 || b.runs("who") != calls {
			t.Errorf("who ran %d times on a, %d on b; want 0 and %d", a.runs("who"), b.runs("who"), calls)
		}
	})
}

// The rest of the table's rows over TCP: a provider that does not export
// the service is skipped for one that does (service not found, retried);
// arguments that do not convert fail once (serialization, not retried).
func TestCodesServiceNotFoundRetriedBadArgumentsNot(t *testing.T) {
	noLeaks(t)
	b := newCodesSvc("b")
	addrOther, addrB := freePort(t), freePort(t)
	// A provider App at addrOther exporting another interface only.
	other := newCodesSvc("other")
	port := addrOther[strings.LastIndexByte(addrOther, ':')+1:]
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("codes", other),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
provider:
  services:
    codes: {interface: org.weft.NotCodes}
`, port))))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	_, runsB := startCodesProvider(t, b, addrB, "", "")
	c, triesOf := codesConsumer(t, "dubbo://"+addrOther+";dubbo://"+addrB,
		", cluster: failover, retries: 2, loadbalance: roundrobin, timeout: 3000")
	ctx := context.Background()

	for i := range 4 {
		got, err := c.Who(ctx, "x")
		if err != nil || got != "b" {
			t.Fatalf("call %d: %q %v, want b's answer (service not found at %s is retried)", i, got, err, addrOther)
		}
	}
	seen := triesOf()
	onOther := 0
	for _, s := range seen {
		if strings.HasSuffix(s, "@"+addrOther) {
			onOther++
		}
	}
	t.Logf("tries: %v", seen)
	if onOther == 0 {
		t.Error("no try went to the provider without the service: the retry was not exercised")
	}
	if other.runs("who") != 0 || b.runs("who") != 4 {
		t.Errorf("who ran %d times on the other, %d on b", other.runs("who"), b.runs("who"))
	}

	triesOf()
	_, err = c.BigText(ctx, "not a number")
	t.Logf("err: %v; tries %v", err, triesOf())
	if kernel.CodeOf(err) != kernel.CodeSerialization || strings.Count(err.Error(), "weft: ") != 1 {
		t.Errorf("err %v (code %v), want one serialization error", err, kernel.CodeOf(err))
	}
	if n := guardRuns(runsB, "big"); n > 1 || b.runs("big") != 0 {
		t.Errorf("bad arguments reached b's guard %d times and the method %d times; want at most once and never", n, b.runs("big"))
	}
}

// The network and timeout rows: a provider that drops the connection of a
// call it received (network, status 35), and one too slow for the try's
// timeout, are each retried on the other provider, and every call succeeds.
func TestCodesNetworkAndTimeoutRetried(t *testing.T) {
	noLeaks(t)
	// A provider that reads a request and closes the connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				buf := make([]byte, 16)
				for {
					if _, err := io.ReadFull(nc, buf); err != nil {
						return
					}
					if buf[2]&0x20 == 0 { // a call, not a heartbeat: drop it all
						dropped.Add(1)
						return
					}
					io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(buf[12:])))
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })

	a, b := newCodesSvc("a"), newCodesSvc("b")
	addrA, addrB := freePort(t), freePort(t)
	startCodesProvider(t, a, addrA, "", "")
	startCodesProvider(t, b, addrB, "", "")

	c, triesOf := codesConsumer(t, "dubbo://"+ln.Addr().String()+"?reconnect=50;dubbo://"+addrB,
		", cluster: failover, retries: 2, loadbalance: roundrobin, timeout: 2000")
	for i := range 6 {
		if got, err := c.Who(context.Background(), "x"); err != nil || got != "b" {
			t.Fatalf("call %d with a provider that drops calls: %q %v", i, got, err)
		}
		time.Sleep(60 * time.Millisecond) // let the dropped connection come back
	}
	t.Logf("tries: %v; calls dropped by the provider: %d", triesOf(), dropped.Load())
	if dropped.Load() == 0 {
		t.Error("no call reached the provider that drops calls: the retry was not exercised")
	}
	if b.runs("who") != 6 {
		t.Errorf("who ran %d times on b, want 6", b.runs("who"))
	}

	// a takes 1.5 s, more than the try's 400 ms timeout: each call that
	// tries a first is answered by b within about one timeout more.
	a.delay = 1500 * time.Millisecond
	slow, slowTries := codesConsumer(t, "dubbo://"+addrA+";dubbo://"+addrB,
		", cluster: failover, retries: 2, loadbalance: roundrobin, timeout: 400")
	for i := range 4 {
		start := time.Now()
		got, err := slow.Slow(context.Background())
		if err != nil || got != "b" {
			t.Fatalf("call %d with a slow provider: %q %v after %v", i, got, err, time.Since(start))
		}
	}
	t.Logf("tries: %v", slowTries())
	if a.runs("slow") == 0 || b.runs("slow") != 4 {
		t.Errorf("slow ran %d times on a and %d on b; want some on a (each timed out, then retried) and 4 on b", a.runs("slow"), b.runs("slow"))
	}
}

// A reference whose only url is a closed port says which address and why
// (the dial error), not that no provider is configured.
func TestConnectionFailureIsNamed(t *testing.T) {
	noLeaks(t)
	addr := freePort(t) // nothing listens there
	c, _ := codesConsumer(t, "dubbo://"+addr, ", retries: 0, timeout: 500, check: false")
	_, err := c.Who(context.Background(), "x")
	t.Logf("err: %v", err)
	if err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, addr) {
		t.Errorf("the error does not name the address %s: %q", addr, msg)
	}
	if !strings.Contains(msg, "connection refused") {
		t.Errorf("the error does not give the dial error (connection refused): %q", msg)
	}
	if strings.Contains(msg, "no provider available") || strings.Contains(msg, "check that a provider is running") {
		t.Errorf("the error blames the configuration, not the connection: %q", msg)
	}
}

// The consumer's deadline travels with the call: with a 300 ms consumer
// timeout, the provider's context (its own timeout is 2000 ms) ends at
// about 300 ms, not 2000.
func TestConsumerDeadlineReachesTheProvider(t *testing.T) {
	noLeaks(t)
	svc := newCodesSvc("p")
	addr := freePort(t)
	startCodesProvider(t, svc, addr, "", ", timeout: 2000")
	c, _ := codesConsumer(t, "dubbo://"+addr, ", retries: 0, timeout: 300")
	// A first call connects and warms both sides.
	if got, err := c.Who(context.Background(), "x"); err != nil || got != "p" {
		t.Fatalf("warm-up: %q %v", got, err)
	}
	start := time.Now()
	_, err := c.Block(context.Background())
	consumerGaveUp := time.Since(start)
	if kernel.CodeOf(err) != kernel.CodeTimeout {
		t.Errorf("the consumer got %v, want a timeout", err)
	}
	select {
	case done := <-svc.blockDone:
		d := done.Sub(start)
		t.Logf("consumer gave up after %v; the provider's context ended %v after the call", consumerGaveUp.Round(time.Millisecond), d.Round(time.Millisecond))
		if d < 250*time.Millisecond || d > 600*time.Millisecond {
			t.Errorf("the provider's context ended %v after the call; want about 300 ms (the consumer's timeout), within [250 ms, 600 ms]", d.Round(time.Millisecond))
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the provider's context did not end within 3 s")
	}
}
