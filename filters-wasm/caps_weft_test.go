package wasmfilter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// authServer is the upstream of the callout tests: user alice gets 200 with
// the header x-role admin, slow waits 2 s (or until the callout is
// abandoned), hold waits until release is closed, anyone else gets 403.
type authServer struct {
	*httptest.Server
	asked, inFlight atomic.Int32
	release         chan struct{}
}

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{release: make(chan struct{})}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.asked.Add(1)
		a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		if r.Header.Get("x-user") != r.URL.Query().Get("user") {
			w.WriteHeader(http.StatusBadRequest) // the guest's header did not arrive
			return
		}
		switch r.URL.Query().Get("user") {
		case "alice":
			w.Header().Set("x-role", "admin")
		case "slow":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		case "hold":
			select {
			case <-a.release:
				w.Header().Set("x-role", "held")
			case <-r.Context().Done():
			}
		default:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// calloutCall makes one call through f with the attachments (name, value
// pairs) under ctx, and returns the attachments the provider saw (nil when
// the call did not reach it) and the call's error.
func calloutCall(ctx context.Context, f *wasmfilter.Filter, kv ...string) (map[string]any, error) {
	ep := newEndpoint()
	var seen map[string]any
	ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
	inv := kernel.NewInvocation("sayHello", "world")
	for i := 0; i+1 < len(kv); i += 2 {
		inv.SetAttachment(kv[i], kv[i+1])
	}
	_, err := f.Invoke(ctx, ep, inv)
	return seen, err
}

func within(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_ = cancel // released at the deadline
	return ctx
}

// Weft ABI v1.1 http_call (testdata/callout.c) to a plain HTTP server: the
// answer's status and headers decide the call (x-role set from the
// answer, or a rejection); a callout refused by the server, its own
// timeout_ms and a cluster that is down are statuses the guest acts on; an
// upstream slower than the call's deadline (or, without one, the filter's
// timeout; or the call's cancellation) fails the call then, on both call
// paths (the host's timer, and wazero's watch). From _initialize, outside a
// call, http_call answers NOT_FOUND.
func TestWeftCalloutHTTP(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "callout")
	for _, watched := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "watched"}[watched], func(t *testing.T) {
			if watched {
				defer wasmfilter.ForceWatch()()
			}
			auth := newAuthServer(t)
			f := newFilter(t, path, wasmfilter.Config{Name: "callout", Timeout: 200 * time.Millisecond,
				Clusters: map[string]string{"auth": auth.URL}})
			if fast, _ := wasmfilter.FastPath(f); fast == watched {
				t.Fatalf("fast path %v, want %v", fast, !watched)
			}
			seen, err := calloutCall(within(5*time.Second), f, "x-user", "alice")
			if err != nil || seen["x-role"] != "admin" || seen["x-status"] != "200" {
				t.Fatalf("alice: err %v, attachments %v; want the call through with x-role admin", err, seen)
			}
			if seen["x-init-status"] != "1" {
				t.Errorf("http_call in _initialize answered %v, want 1 (NOT_FOUND: no call)", seen["x-init-status"])
			}
			seen, err = calloutCall(within(5*time.Second), f, "x-user", "bob")
			if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(fmt.Sprint(err), "not allowed: 403") || seen != nil {
				t.Fatalf("bob: err %v, reached the provider %v; want forbidden by the filter", err, seen != nil)
			}
			// The callout's own timeout_ms: the guest gets TIMEOUT and
			// answers; the instance is kept.
			start := time.Now()
			_, err = calloutCall(within(5*time.Second), f, "x-user", "slow", "x-timeout", "50")
			if kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(fmt.Sprint(err), "callout timeout") || time.Since(start) > time.Second {
				t.Fatalf("slow with timeout_ms 50: err %v after %v; want the guest's rejection for TIMEOUT", err, time.Since(start))
			}
			if st := f.Stats(); st.Failures != 0 {
				t.Fatalf("stats %+v: answered callouts cost instances", st)
			}
			// The call's deadline ends the wait: the call fails then.
			start = time.Now()
			_, err = calloutCall(within(150*time.Millisecond), f, "x-user", "slow")
			if el := time.Since(start); kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(fmt.Sprint(err), "deadline") || el > 250*time.Millisecond {
				t.Fatalf("slow auth: err %v after %v; want a timeout at the call's 150 ms deadline", err, el)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			// Without deadline, the filter's timeout (200 ms).
			start = time.Now()
			_, err = calloutCall(context.Background(), f, "x-user", "slow")
			if el := time.Since(start); kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(fmt.Sprint(err), "filter's timeout") || el > 300*time.Millisecond {
				t.Fatalf("slow auth, no deadline: err %v after %v; want a timeout at the filter's 200 ms", err, el)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			// A call without deadline cancelled while it waits.
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(80*time.Millisecond, cancel)
			start = time.Now()
			_, err = calloutCall(ctx, f, "x-user", "slow")
			if el := time.Since(start); !errors.Is(err, context.Canceled) || el > 180*time.Millisecond {
				t.Fatalf("slow auth, cancelled: err %v after %v; want the call cancelled at 80 ms", err, el)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			if st := f.Stats(); st.Timeouts != 3 {
				t.Errorf("stats %+v: want the 3 calls stopped at their bound counted as timeouts", st)
			}
			if n := auth.asked.Load(); n != 6 {
				t.Errorf("the auth server was asked %d times, want 6", n)
			}
			// In weft_on_response (its bound taken afresh without a
			// deadline: 200 ms from its start).
			ep := newEndpoint()
			inv := kernel.NewInvocation("sayHello", "world")
			inv.SetAttachment("x-user", "alice")
			inv.SetAttachment("x-resp-user", "alice")
			res, err := f.Invoke(context.Background(), ep, inv)
			if err != nil || res.Attachments["x-resp-role"] != "admin" {
				t.Fatalf("a callout in weft_on_response: err %v, result attachments %v; want x-resp-role admin", err, res.Attachments)
			}
			ep.seen = func(*kernel.Invocation) { time.Sleep(150 * time.Millisecond) }
			inv.SetAttachment("x-resp-user", "slow")
			start = time.Now()
			_, err = f.Invoke(context.Background(), ep, inv)
			if el := time.Since(start); kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(fmt.Sprint(err), "weft_on_response ran past the filter's timeout") ||
				el < 340*time.Millisecond || el > 450*time.Millisecond {
				t.Fatalf("a slow callout in weft_on_response without deadline: err %v after %v; want a timeout 200 ms into it (~350 ms)", err, el)
			}
			// After all that the filter still serves.
			if seen, err := calloutCall(within(5*time.Second), f, "x-user", "alice"); err != nil || seen["x-role"] != "admin" {
				t.Fatalf("alice again: %v %v", err, seen)
			}
		})
	}
	down := newFilter(t, path, wasmfilter.Config{Name: "callout-down", Clusters: map[string]string{"auth": "http://" + closedAddr(t)}})
	if _, err := calloutCall(within(5*time.Second), down, "x-user", "alice"); kernel.CodeOf(err) != kernel.CodeNetwork || !strings.Contains(err.Error(), "callout unavailable") {
		t.Fatalf("auth server down: %v; want the guest's rejection for UNAVAILABLE", err)
	}
	// A cluster the config does not name is a bad argument.
	none := newFilter(t, path, wasmfilter.Config{Name: "callout-none", Clusters: map[string]string{"other": "http://" + closedAddr(t)}})
	if _, err := calloutCall(within(5*time.Second), none, "x-user", "alice"); !strings.Contains(fmt.Sprint(err), "callout status 2") {
		t.Fatalf("unknown cluster: %v; want BAD_ARGUMENT (2)", err)
	}
}

// authRef is a weft reference of the App as a callout reaches it: method
// check(user) answers "admin" for alice and fails forbidden for others.
type authRef struct {
	endpoint
	asked atomic.Int32
}

func (a *authRef) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	a.asked.Add(1)
	if inv.Method == "check" && len(inv.Args) == 1 && inv.Args[0] == "alice" {
		return kernel.Result{Value: "admin"}, nil
	}
	return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden, "%v may not", inv.Args)
}

// http_call to a cluster ref:<id> is a call through the App's reference:
// the method from the path, the arguments from the body (a JSON array),
// the result as the answer's body; an error is its HTTP status. A
// reference that does not exist is UNAVAILABLE.
func TestWeftCalloutToReference(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "callout")
	ref := &authRef{endpoint: *newEndpoint()}
	f := newFilter(t, path, wasmfilter.Config{Name: "callout-ref", Clusters: map[string]string{"users": "ref:auth"}})
	f.SetReferences(func(id string) (kernel.Invoker, error) {
		if id != "auth" {
			return nil, fmt.Errorf("no reference %q", id)
		}
		return ref, nil
	})
	seen, err := calloutCall(within(5*time.Second), f, "x-mode", "ref", "x-user", "alice")
	if err != nil || seen["x-role"] != "admin" {
		t.Fatalf("alice through the reference: err %v, attachments %v; want x-role admin", err, seen)
	}
	_, err = calloutCall(within(5*time.Second), f, "x-mode", "ref", "x-user", "bob")
	if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "not allowed: 403") {
		t.Fatalf("bob through the reference: %v; want the reference's forbidden as HTTP 403", err)
	}
	if n := ref.asked.Load(); n != 2 {
		t.Errorf("the reference was called %d times, want 2", n)
	}
	missing := newFilter(t, path, wasmfilter.Config{Name: "callout-ref-missing", Clusters: map[string]string{"users": "ref:nope"}})
	missing.SetReferences(func(id string) (kernel.Invoker, error) { return nil, fmt.Errorf("no reference %q", id) })
	if _, err := calloutCall(within(5*time.Second), missing, "x-mode", "ref", "x-user", "alice"); kernel.CodeOf(err) != kernel.CodeNetwork {
		t.Fatalf("a reference that does not exist: %v; want UNAVAILABLE (network)", err)
	}
}

// max_callouts bounds the callouts of a filter in flight: past it
// http_call answers LIMIT at once, and the callouts in flight finish.
func TestWeftCalloutMaxCallouts(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "callout")
	auth := newAuthServer(t)
	f := newFilter(t, path, wasmfilter.Config{Name: "callout-max", MaxCallouts: 2, Clusters: map[string]string{"auth": auth.URL}})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	roles := make([]any, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen, err := calloutCall(within(5*time.Second), f, "x-user", "hold")
			errs[i], roles[i] = err, seen["x-role"]
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); auth.inFlight.Load() < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	start := time.Now()
	_, err := calloutCall(within(5*time.Second), f, "x-user", "alice")
	if kernel.CodeOf(err) != kernel.CodeLimitExceeded || !strings.Contains(fmt.Sprint(err), "callout limit") || time.Since(start) > time.Second {
		t.Errorf("a third callout with 2 in flight: %v after %v; want LIMIT at once", err, time.Since(start))
	}
	close(auth.release)
	wg.Wait()
	for i := range errs {
		if errs[i] != nil || roles[i] != "held" {
			t.Errorf("callout %d in flight: err %v, x-role %v; want it answered", i, errs[i], roles[i])
		}
	}
	if seen, err := calloutCall(within(5*time.Second), f, "x-user", "alice"); err != nil || seen["x-role"] != "admin" {
		t.Errorf("once the others ended: %v %v", err, seen)
	}
}

// Weft ABI v1.1 shared queues (testdata/queue.c): the filter registers
// "jobs" in its vm_id, its calls resolve it and enqueue, and
// weft_on_queue_ready on one of its instances dequeues every item.
func TestWeftQueue(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "queue")
	f := newFilter(t, path, wasmfilter.Config{Name: "weft-queue", VMID: "q"})
	const calls = 20
	for i := range calls {
		if _, err := calloutCall(context.Background(), f, "x-n", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(name string) int64 { v, _ := guestMetric(f, name); return v }
	for deadline := time.Now().Add(5 * time.Second); metric("dequeued") < calls && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if n, m := metric("enqueued"), metric("dequeued"); n != calls || m != calls {
		t.Fatalf("%d items enqueued, %d dequeued by weft_on_queue_ready; want %d each", n, m, calls)
	}
	if st := f.Stats(); st.Failures != 0 {
		t.Errorf("stats %+v", st)
	}
}

// allowed_capabilities on a weft-ABI filter: a v1.1 function it does not
// list answers REFUSED (logged by name), v1's are always allowed, and a
// name that is not a host function fails New.
func TestWeftCapsAllowed(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "callout")
	auth := newAuthServer(t)
	var logs syncBuffer
	f := newFilter(t, path, wasmfilter.Config{Name: "callout-restricted", Clusters: map[string]string{"auth": auth.URL},
		AllowedCapabilities: []string{"shared_get", "log"}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err := calloutCall(within(5*time.Second), f, "x-user", "alice")
	if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(fmt.Sprint(err), "callout refused") {
		t.Fatalf("http_call not allowed: %v; want the guest's rejection for REFUSED", err)
	}
	if !strings.Contains(logs.String(), "http_call") || !strings.Contains(logs.String(), "allowed_capabilities") {
		t.Errorf("no log line names the refused function: %q", logs.String())
	}
	if n := auth.asked.Load(); n != 0 {
		t.Errorf("a refused callout reached the server (%d)", n)
	}
	allowed := newFilter(t, path, wasmfilter.Config{Name: "callout-allowed", Clusters: map[string]string{"auth": auth.URL},
		AllowedCapabilities: []string{"http_call"}})
	if seen, err := calloutCall(within(5*time.Second), allowed, "x-user", "alice"); err != nil || seen["x-role"] != "admin" {
		t.Fatalf("http_call allowed: %v %v", err, seen)
	}
	_, err = wasmfilter.New(context.Background(), wasmfilter.Config{Name: "callout-bad", Path: path,
		AllowedCapabilities: []string{"launch_missiles"}})
	if err == nil || !strings.Contains(err.Error(), "launch_missiles") || !strings.Contains(err.Error(), "http_call") {
		t.Errorf("an unknown capability: %v; want New to name it and the known ones", err)
	}
}

// Callout settings are valid on weft-ABI filters too, and checked alike.
func TestWeftCapsSettings(t *testing.T) {
	s := wasmfilter.Settings{Filters: map[string]wasmfilter.FilterSettings{
		"good": {Path: "x.wasm", Clusters: map[string]string{"auth": "http://127.0.0.1:1", "users": "ref:auth"}, MaxCallouts: 4,
			AllowedCapabilities: []string{"http_call"}},
		"bad": {Path: "x.wasm", Clusters: map[string]string{"auth": "ftp://x", "users": "ref:"}, MaxCallouts: -1},
	}}
	var msgs []string
	for _, err := range s.Validate() {
		msgs = append(msgs, err.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"wasm.filters.bad.clusters.auth", "wasm.filters.bad.clusters.users", "wasm.filters.bad.max_callouts"} {
		if !strings.Contains(all, want) {
			t.Errorf("Validate: %q not among\n%s", want, all)
		}
	}
	if strings.Contains(all, "wasm.filters.good") || len(msgs) != 3 {
		t.Errorf("Validate:\n%s\nwant exactly the 3 errors of filter bad", all)
	}
}

// The SDKs' http_call (example authcall of each SDK): a filter built with
// the SDK asks an HTTP server whether the caller may go on.
func TestSDKCallout(t *testing.T) {
	for _, sdk := range sdkToolchains {
		t.Run(sdk.name, func(t *testing.T) {
			path := buildSDKExample(t, sdk.name, sdk.tool, "authcall")
			auth := newAuthServer(t)
			f := newFilter(t, path, wasmfilter.Config{Name: "authcall-" + sdk.name, MaxMemoryPages: 256,
				Clusters: map[string]string{"auth": auth.URL}})
			seen, err := calloutCall(within(5*time.Second), f, "x-user", "alice")
			if err != nil || seen["x-role"] != "admin" {
				t.Fatalf("alice: err %v, attachments %v; want the call through with x-role admin", err, seen)
			}
			_, err = calloutCall(within(5*time.Second), f, "x-user", "bob")
			if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(fmt.Sprint(err), "403") {
				t.Fatalf("bob: %v; want forbidden naming the auth server's 403", err)
			}
			start := time.Now()
			_, err = calloutCall(within(150*time.Millisecond), f, "x-user", "slow")
			if el := time.Since(start); kernel.CodeOf(err) != kernel.CodeTimeout || el > 250*time.Millisecond {
				t.Fatalf("slow: %v after %v; want a timeout at the call's 150 ms deadline", err, el)
			}
		})
	}
}
