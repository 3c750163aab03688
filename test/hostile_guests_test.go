package test

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
)

// cyclicSvc answers with values that contain themselves, as a hostile (or
// merely Java, with back references) provider may.
type cyclicSvc struct{}

func (cyclicSvc) Echo(_ context.Context, s string) (string, error) { return s, nil }

func (cyclicSvc) Loop(context.Context) ([]any, error) {
	l := make([]any, 2)
	l[0], l[1] = "head", l
	return l, nil
}

type cyclicClient struct {
	Loop func(ctx context.Context) ([]any, error)
}

// WASM guests read arguments and results as JSON through the host's bounded
// view: a provider's guest reading a request whose argument contains itself
// (79 51 90), and a consumer's guest reading a result that contains itself,
// get "(cycle)" where the host used to recurse until the stack overflowed
// (a fatal error that kills the process: on the old code this test binary
// dies).
func TestWasmFiltersReadCyclicValues(t *testing.T) {
	noLeaks(t)
	inspect := buildWasmGuest(t, t.TempDir(), "inspect")
	addr := freePort(t)
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
wasm:
  filters:
    inspect: {path: %q, groups: [provider]}
provider:
  services:
    cyc: {interface: %s}
`, addr[strings.LastIndexByte(addr, ':')+1:], inspect, strInterface), weft.WithService("cyc", cyclicSvc{}))

	// A raw request whose argument is a list containing itself.
	c := dialRaw(t, addr)
	c.send(t, requestFrame(1, requestBody("echo", stringDescriptor, []byte{0x79, 0x51, 0x90})))
	r, err := c.read(5 * time.Second)
	if err != nil {
		t.Fatalf("no answer to a cyclic argument read by a WASM guest: %v", err)
	}
	t.Logf("cyclic argument: %v", r)
	if r.Status == kernel.ResponseOK && r.value() != nil {
		if _, isErr := r.value().(error); !isErr {
			t.Fatalf("a cyclic list was accepted as a String: %v", r.value())
		}
	}
	echoWorks(t, addr)

	var cc cyclicClient
	startApp(t, fmt.Sprintf(`
wasm:
  filters:
    inspect: {path: %q, groups: [consumer]}
consumer:
  references:
    cyc: {interface: %s, url: "dubbo://%s", retries: 0}
`, inspect, strInterface, addr), weft.WithReference("cyc", &cc))
	got, err := cc.Loop(context.Background())
	if err != nil {
		t.Fatalf("a cyclic result read by a consumer's WASM guest: %v", err)
	}
	inner, ok := got[1].([]any)
	if len(got) != 2 || got[0] != "head" || !ok || len(inner) != 2 || &inner[0] != &got[0] {
		t.Fatalf("result %T %d, not the cyclic list sent", got, len(got))
	}
}

// A guest that spins is stopped at the consumer's deadline, which travels
// with the call: with a 300 ms consumer timeout it ran for its filter's own
// timeout (here 5 s) before.
func TestWasmGuestStopsAtTheConsumersDeadline(t *testing.T) {
	noLeaks(t)
	misbehave := buildWasmGuest(t, t.TempDir(), "misbehave")
	addr := freePort(t)
	var inner atomic.Int64 // ms the guest's call took, seen by an outer filter
	outer := extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
		start := time.Now()
		res, err := next.Invoke(ctx, inv)
		inner.Store(time.Since(start).Milliseconds())
		return res, err
	})
	startApp(t, fmt.Sprintf(`
protocols: {dubbo: {port: %s}}
wasm:
  filters:
    misbehave: {path: %q, timeout: 5000}
provider:
  services:
    str: {interface: %s, filter: "outer,misbehave", timeout: 5000}
`, addr[strings.LastIndexByte(addr, ':')+1:], misbehave, strInterface),
		weft.WithService("str", strSvc{}),
		weft.WithFilter("outer", nil, func() (extension.Filter, error) { return outer, nil }))
	var c struct {
		Echo func(ctx context.Context, s string) (string, error)
	}
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    str: {interface: %s, url: "dubbo://%s", retries: 0, timeout: 300}
`, strInterface, addr), weft.WithReference("str", &c))
	if got, err := c.Echo(context.Background(), "warm"); err != nil || got != "warm" {
		t.Fatalf("warm-up: %q %v", got, err)
	}
	inner.Store(0) // the warm-up call set it
	start := time.Now()
	_, err := c.Echo(kernel.WithAttachments(context.Background(), map[string]any{"mode": "loop"}), "x")
	if kernel.CodeOf(err) != kernel.CodeTimeout {
		t.Fatalf("spinning guest: %v, want a timeout", err)
	}
	t.Logf("consumer gave up after %v", time.Since(start).Round(time.Millisecond))
	for deadline := time.Now().Add(6 * time.Second); inner.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	ms := inner.Load()
	t.Logf("the provider's guest ran %d ms", ms)
	if ms < 250 || ms > 1500 {
		t.Fatalf("the spinning guest ran %d ms at the provider, want about 300 (the consumer's timeout), not its own 5000", ms)
	}
}
