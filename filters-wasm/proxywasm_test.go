package wasmfilter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// buildProxyAS builds testdata/proxywasm-as/assembly/<name>.ts, a filter on
// the AssemblyScript proxy-wasm SDK (@solo-io/proxy-runtime), into dir.
// Without node and npm the test is skipped on a developer's machine and
// fails under CI, where the image has them.
func buildProxyAS(t testing.TB, dir, name string) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("%s is not installed; the AssemblyScript proxy-wasm guests are built with node >= 20 and npm", bin)
			}
			t.Fatalf("%s is not installed but CI is set", bin)
		}
	}
	out, err := exec.Command("bash", filepath.Join("testdata", "proxywasm-as", "build.sh"), dir, name).CombinedOutput()
	if err != nil {
		t.Fatalf("testdata/proxywasm-as/build.sh %s: %v\n%s", name, err, out)
	}
	return filepath.Join(dir, name+".wasm")
}

// A proxy-wasm filter written for Envoy on the AssemblyScript SDK runs on
// a weft call: it sees the call as a gRPC request (pseudo-headers, the
// attachments as headers, properties), its header edits become the call's
// attachments both ways, and send_local_response answers the call itself
// with the gRPC status it gave.
func TestProxyWasmASHeaders(t *testing.T) {
	testProxyHeaders(t, buildProxyAS(t, t.TempDir(), "headers"), "as_headers")
}

// Shared data and a tick on the AssemblyScript SDK (assembly/counter.ts):
// its CAS increments lose nothing under 8 callers, its 20 ms tick counts
// in a guest counter.
func TestProxyWasmASSharedDataAndTick(t *testing.T) {
	path := buildProxyAS(t, t.TempDir(), "counter")
	t.Run("shared-data-cas", func(t *testing.T) { testProxySharedCAS(t, path, "counter") })
	t.Run("tick-metric", func(t *testing.T) { testProxyTick(t, path, "counter") })
}

// The same filters written on proxy-wasm-go-sdk's API and built with Go's
// own compiler (testdata/proxywasm-go, wasmexport.go rewriting the SDK's
// TinyGo pragmas): headers, send_local_response, properties, an HTTP
// callout, shared data's CAS under 8 callers, a tick and a guest metric.
func TestProxyWasmGoSDK(t *testing.T) {
	paths := buildProxyGo(t, t.TempDir(), "headers", "authcall", "counter")
	t.Run("headers", func(t *testing.T) { testProxyHeaders(t, paths["headers"], "go_headers") })
	t.Run("http-callout", func(t *testing.T) { testProxyHTTPCallout(t, paths["authcall"]) })
	t.Run("shared-data-cas", func(t *testing.T) { testProxySharedCAS(t, paths["counter"], "") })
	t.Run("tick-metric", func(t *testing.T) { testProxyTick(t, paths["counter"], "") })
	t.Run("vm-shared", func(t *testing.T) { testProxyVM(t, paths["headers"]) })
}

// buildProxyGo builds the named filters of testdata/proxywasm-go into dir
// with testdata/proxywasm-go/build.sh: Go (which runs this test) and the
// module proxy, or a module cache holding proxy-wasm-go-sdk v0.24.0.
func buildProxyGo(t testing.TB, dir string, names ...string) map[string]string {
	t.Helper()
	args := append([]string{filepath.Join("testdata", "proxywasm-go", "build.sh"), dir}, names...)
	out, err := exec.Command("bash", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testdata/proxywasm-go/build.sh %s: %v\n%s", strings.Join(names, " "), err, out)
	}
	paths := map[string]string{}
	for _, name := range names {
		paths[name] = filepath.Join(dir, name+".wasm")
	}
	return paths
}

// testProxyHeaders runs a headers filter (assembly/headers.ts or
// proxywasm-go/headers) that answers x-served-by with its root id.
func testProxyHeaders(t *testing.T, path, rootID string) {
	logs := &allRecords{store: &recStore{}}
	f := newFilter(t, path, wasmfilter.Config{Name: rootID, ABI: wasmfilter.ABIProxyWasm,
		RootID: rootID, Configuration: []byte("cfg-1"), Log: slog.New(logs)})
	ep := newEndpoint()
	var seen map[string]any
	ep.seen = func(inv *kernel.Invocation) {
		seen = map[string]any{}
		for k, v := range inv.Attachments() {
			seen[k] = v
		}
	}
	inv := kernel.NewInvocation("sayHello", "world")
	inv.SetAttachment("x-user", "alice")
	inv.SetAttachment("X-Secret", "s3cret")
	inv.SetAttachment("x-path", "stale")
	res, err := f.Invoke(context.Background(), ep, inv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"x-user": "alice", "x-proxy-wasm": "cfg-1", "x-path": "/org.example.Greeter/sayHello",
		"x-method": "sayHello", "x-side": "provider"}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("the provider got %s=%v, want %v (all: %v)", k, seen[k], v, seen)
		}
	}
	if _, ok := seen["X-Secret"]; ok {
		t.Errorf("x-secret, removed by the filter, reached the provider: %v", seen)
	}
	if got := res.Attachments["x-served-by"]; got != rootID {
		t.Errorf("response attachment x-served-by = %v, want %s (result %+v)", got, rootID, res)
	}

	seen = nil
	deny := kernel.NewInvocation("sayHello", "world")
	deny.SetAttachment("x-user", "mallory")
	deny.SetAttachment("x-mode", "deny")
	_, err = f.Invoke(context.Background(), ep, deny)
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeForbidden || !strings.Contains(ke.Msg, "no entry for mallory") {
		t.Fatalf("a call the filter answers with 403 / PERMISSION_DENIED: err %v, want forbidden with the filter's body", err)
	}
	if seen != nil {
		t.Error("the call the filter answered itself still reached the provider")
	}
	// proxy_log at info reaches the App's logger at info, with the filter.
	if !logs.has(slog.LevelInfo, "denying mallory", rootID) {
		t.Errorf("the guest's info log \"denying mallory\" is not in the filter's log at INFO: %v", logs.lines())
	}
	if st := f.Stats(); st.Failures != 0 || st.Live < 1 {
		t.Errorf("stats %+v: want no failures", st)
	}
}

// The ABI's corners, on a module written from the spec alone
// (testdata/proxywasm.wat): bad pointers and oversized maps answer their
// statuses without harm, an absent header is NOT_FOUND in 0.2.x, a trap, a
// loop and a memory bomb fail the call (within its deadline) and cost the
// instance, a pause nothing can resume fails at once, and with fail_open a
// failed guest lets the call through unchanged.
func TestProxyWasmABICorners(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	cases := []struct {
		mode     string
		failOpen bool
		ok       bool        // the call succeeds
		wantCode kernel.Code // else its code
		wantMode bool        // the filter's x-mode header reached the provider
	}{
		{"o", false, true, 0, true},
		{"b", false, true, 0, true},
		{"s", false, true, 0, true},
		{"n", false, true, 0, true},
		{"t", false, false, kernel.CodeUnknown, false},
		{"l", false, false, kernel.CodeTimeout, false},
		{"g", false, false, kernel.CodeUnknown, false},
		{"p", false, false, kernel.CodeUnknown, false},
		{"t", true, true, 0, false},
		{"l", true, false, kernel.CodeTimeout, false}, // the call's own deadline has passed: nothing to let through
	}
	for _, tc := range cases {
		name := tc.mode
		if tc.failOpen {
			name += "/fail_open"
		}
		t.Run(name, func(t *testing.T) {
			f := newFilter(t, path, wasmfilter.Config{Name: "pw-" + tc.mode, ABI: wasmfilter.ABIProxyWasm,
				Configuration: []byte(tc.mode), FailOpen: tc.failOpen, MaxMemoryPages: 32})
			ep := newEndpoint()
			var seen map[string]any
			ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := f.Invoke(ctx, ep, kernel.NewInvocation("sayHello", "world"))
			took := time.Since(start)
			if tc.ok {
				if err != nil {
					t.Fatalf("mode %s: %v", tc.mode, err)
				}
				if got := seen["x-mode"]; tc.wantMode && got != tc.mode {
					t.Errorf("x-mode = %v, want %s (attachments %v)", got, tc.mode, seen)
				}
				if !tc.wantMode && seen["x-mode"] != nil {
					t.Errorf("fail_open let through the failed filter's edit: %v", seen)
				}
				return
			}
			if kernel.CodeOf(err) != tc.wantCode {
				t.Fatalf("mode %s: err %v (code %v), want code %v", tc.mode, err, kernel.CodeOf(err), tc.wantCode)
			}
			if seen != nil {
				t.Errorf("mode %s: the failed call reached the provider", tc.mode)
			}
			if took > 200*time.Millisecond+100*time.Millisecond {
				t.Errorf("mode %s: failed after %v, past the call's 200 ms deadline", tc.mode, took)
			}
		})
	}
}

// A 0.1.0 module runs with 0.1.0's shapes: two-parameter header
// callbacks, proxy_get_configuration, an absent header read as empty, and
// proxy_continue_request resuming a paused request within its callback.
func TestProxyWasm010(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm010", "")
	f := newFilter(t, path, wasmfilter.Config{Name: "pw-010", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("c0")})
	ep := newEndpoint()
	var seen map[string]any
	ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
	if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello", "world")); err != nil {
		t.Fatal(err)
	}
	if seen["x-abi"] != "0.1.0" || seen["x-config"] != "c0" {
		t.Errorf("attachments %v: want x-abi 0.1.0 and x-config c0", seen)
	}
	r := wasmfilter.Check(context.Background(), mustRead(t, path))
	if !r.Valid() || r.ProxyWasm != "0.1.0" {
		t.Errorf("Check: valid %v, proxy-wasm %q, problems %v", r.Valid(), r.ProxyWasm, r.Problems)
	}
}

// A proxy-wasm module configured as a weft-ABI filter (the default) is
// refused with the fix; an unknown abi is refused naming the known ones.
func TestProxyWasmABIMismatch(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	_, err := wasmfilter.New(context.Background(), wasmfilter.Config{Name: "pw", Path: path})
	if err == nil || !strings.Contains(err.Error(), "abi: proxy-wasm") {
		t.Errorf("a proxy-wasm module as a weft filter: %v, want the hint abi: proxy-wasm", err)
	}
	_, err = wasmfilter.New(context.Background(), wasmfilter.Config{Name: "pw", Path: path, ABI: "wasi-http"})
	if err == nil || !strings.Contains(err.Error(), "proxy-wasm") || !strings.Contains(err.Error(), "weft") {
		t.Errorf("an unknown abi: %v, want the known ones named", err)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Shared data's compare-and-swap across instances: 8 callers at once, each
// call on its own instance incrementing one counter with get, then set with
// the token it read (again on CAS_MISMATCH), lose no increment; a second
// filter with another vm_id counts apart, one with the same vm_id shares.
func TestProxyWasmSharedDataCAS(t *testing.T) {
	testProxySharedCAS(t, buildWAT(t, t.TempDir(), "proxywasm_cas", ""), "")
}

func testProxySharedCAS(t *testing.T, path, rootID string) {
	shared := wasmfilter.NewSharedData()
	f := newFilter(t, path, wasmfilter.Config{Name: "cas", ABI: wasmfilter.ABIProxyWasm, RootID: rootID, VMID: "limits", Shared: shared})
	ep := newEndpoint()
	const callers, each = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Live < 2 {
		t.Logf("only %d instance(s) ran: the race was not between instances", st.Live)
	}
	count := func(f *wasmfilter.Filter) string {
		var got any
		ep := newEndpoint()
		ep.seen = func(inv *kernel.Invocation) { got = inv.Attachments()["x-n"] }
		if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
			t.Fatal(err)
		}
		s, _ := got.(string)
		return s
	}
	if got, want := count(f), fmt.Sprint(callers*each+1); got != want {
		t.Fatalf("after %d increments from %d callers the next call counted %s, want %s: increments were lost", callers*each, callers, got, want)
	}
	other := newFilter(t, path, wasmfilter.Config{Name: "cas-other", ABI: wasmfilter.ABIProxyWasm, RootID: rootID, VMID: "other", Shared: shared})
	if got := count(other); got != "1" {
		t.Errorf("a filter with another vm_id counted %s, want 1 (its own space)", got)
	}
	same := newFilter(t, path, wasmfilter.Config{Name: "cas-same", ABI: wasmfilter.ABIProxyWasm, RootID: rootID, VMID: "limits", Shared: shared})
	if got, want := count(same), fmt.Sprint(callers*each+2); got != want {
		t.Errorf("a filter with the same vm_id counted %s, want %s (the shared space)", got, want)
	}
}

// A root context that sets a tick period gets proxy_on_tick at that period
// on the filter's idle instances, until the filter closes.
func TestProxyWasmTick(t *testing.T) {
	testProxyTick(t, buildWAT(t, t.TempDir(), "proxywasm_tick", ""), "")
}

// testProxyTick runs a filter that counts its 20 ms ticks in the guest
// counter "ticks".
func testProxyTick(t *testing.T, path, rootID string) {
	f, err := wasmfilter.New(context.Background(), wasmfilter.Config{Name: "ticker", Path: path, ABI: wasmfilter.ABIProxyWasm, RootID: rootID, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ticks := func() int64 { v, _ := guestMetric(f, "ticks"); return v }
	deadline := time.Now().Add(5 * time.Second)
	for ticks() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := ticks(); n < 5 {
		t.Fatalf("%d ticks in 5 s at a 20 ms period", n)
	}
	f.Close()
	n := ticks()
	time.Sleep(100 * time.Millisecond)
	if m := ticks(); m != n {
		t.Errorf("ticks went on after Close: %d then %d", n, m)
	}
}

// A callout: an AssemblyScript filter pauses the call, asks an HTTP auth
// server through proxy_http_call, and on its answer resumes the call with
// a header from it, or answers the call itself; a server that does not
// answer in time fails the call at its deadline, and an unreachable one is
// an empty answer to the filter.
func TestProxyWasmHTTPCallout(t *testing.T) {
	testProxyHTTPCallout(t, buildProxyAS(t, t.TempDir(), "authcall"))
}

func testProxyHTTPCallout(t *testing.T, path string) {
	var asked atomic.Int32
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		switch r.URL.Query().Get("user") {
		case "alice":
			w.Header().Set("x-role", "admin")
		case "slow":
			time.Sleep(2 * time.Second)
		default:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer auth.Close()
	f := newFilter(t, path, wasmfilter.Config{Name: "authcall", ABI: wasmfilter.ABIProxyWasm, RootID: "authcall",
		Clusters: map[string]string{"auth": auth.URL}})
	call := func(f *wasmfilter.Filter, user string, d time.Duration) (map[string]any, error) {
		ep := newEndpoint()
		var seen map[string]any
		ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
		inv := kernel.NewInvocation("sayHello", "world")
		inv.SetAttachment("x-user", user)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := f.Invoke(ctx, ep, inv)
		return seen, err
	}
	seen, err := call(f, "alice", 5*time.Second)
	if err != nil || seen["x-role"] != "admin" {
		t.Fatalf("alice: err %v, attachments %v; want the call through with x-role admin", err, seen)
	}
	seen, err = call(f, "bob", 5*time.Second)
	if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "not allowed: 403") || seen != nil {
		t.Fatalf("bob: err %v, reached the provider %v; want forbidden from the filter", err, seen != nil)
	}
	start := time.Now()
	_, err = call(f, "slow", 150*time.Millisecond)
	if kernel.CodeOf(err) != kernel.CodeTimeout || time.Since(start) > 150*time.Millisecond+100*time.Millisecond {
		t.Fatalf("slow auth: err %v after %v; want a timeout at the call's 150 ms deadline", err, time.Since(start))
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("the auth server was asked %d times, want 3", n)
	}
	down := newFilter(t, path, wasmfilter.Config{Name: "authcall-down", ABI: wasmfilter.ABIProxyWasm, RootID: "authcall",
		Clusters: map[string]string{"auth": "http://" + closedAddr(t)}})
	if _, err := call(down, "alice", 5*time.Second); kernel.CodeOf(err) != kernel.CodeForbidden {
		t.Fatalf("auth server down: %v; want the filter's answer to an empty callout (forbidden)", err)
	}
	if st := f.Stats(); st.Failures != 0 {
		t.Errorf("stats %+v: the callouts cost instances", st)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// allowed_capabilities (Envoy's capability restriction): a host function
// the list lacks answers INTERNAL_FAILURE and is logged by name, a callback
// it lacks is never called; a name weft does not know is refused at New.
func TestProxyWasmAllowedCapabilities(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	var logs syncBuffer
	f := newFilter(t, path, wasmfilter.Config{Name: "pw-restricted", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("o"),
		AllowedCapabilities: []string{"proxy_on_request_headers", "proxy_get_buffer_bytes"},
		Log:                 slog.New(slog.NewTextHandler(&logs, nil))})
	ep := newEndpoint()
	var seen map[string]any
	ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
	if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
		t.Fatal(err)
	}
	if seen["x-mode"] != nil {
		t.Errorf("proxy_add_header_map_value, not allowed, still added a header: %v", seen)
	}
	if !strings.Contains(logs.String(), "proxy_add_header_map_value") || !strings.Contains(logs.String(), "allowed_capabilities") {
		t.Errorf("no log line names the refused call: %q", logs.String())
	}
	// Without proxy_on_request_headers in the list, the callback that
	// would trap is never called.
	trap := newFilter(t, path, wasmfilter.Config{Name: "pw-trap-restricted", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("t"),
		AllowedCapabilities: []string{"proxy_get_buffer_bytes"}})
	if _, err := trap.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
		t.Errorf("a callback not allowed ran: %v", err)
	}
	_, err := wasmfilter.New(context.Background(), wasmfilter.Config{Name: "pw-bad", Path: path, ABI: wasmfilter.ABIProxyWasm,
		AllowedCapabilities: []string{"proxy_launch_missiles"}})
	if err == nil || !strings.Contains(err.Error(), "proxy_launch_missiles") {
		t.Errorf("an unknown capability: %v", err)
	}
}

// A module whose new instances keep failing to start is not restarted at
// the rate calls come: after 5 failed start-ups within 10 s no instance is
// started for a back-off, and a call that finds none idle fails at once
// (or goes through with fail_open); once the back-off has passed, one is
// tried again.
func TestProxyWasmCrashLoopBackoff(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	for _, failOpen := range []bool{false, true} {
		// Mode c: the first instance starts, its call traps (discarding
		// it), and every later instance refuses to start.
		f := newFilter(t, path, wasmfilter.Config{Name: "pw-crash", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("c"),
			FailOpen: failOpen, Shared: wasmfilter.NewSharedData()})
		ep := newEndpoint()
		var err error
		for i := 0; i < 20; i++ {
			if _, err = f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil && strings.Contains(err.Error(), "crash-loop back-off") || failOpen && err == nil && i > 0 {
				break
			}
		}
		switch {
		case failOpen && err != nil:
			t.Errorf("fail_open during the back-off: %v, want the call through", err)
		case !failOpen && (err == nil || !strings.Contains(err.Error(), "crash-loop back-off")):
			t.Errorf("calls while start-ups fail: %v, want one failed at once naming the back-off", err)
		}
		time.Sleep(300 * time.Millisecond) // past the first back-off, 100 ms
		_, err = f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello"))
		if !failOpen && (err == nil || strings.Contains(err.Error(), "crash-loop back-off") || !strings.Contains(err.Error(), "proxy_on_configure returned false")) {
			t.Errorf("after the back-off: %v, want a start-up tried again (and refused by the module)", err)
		}
		// What weft_wasm_start_failures_total and weft_wasm_backoffs_total export.
		if st := f.Stats(); st.StartFailures < 5 || st.Backoffs < 1 {
			t.Errorf("stats: %d start failures, %d back-offs; want at least 5 and 1", st.StartFailures, st.Backoffs)
		}
	}
}

// Hostile guests against the host's bounds: a storm of callouts from one
// callback gets max_callouts of them and INTERNAL_FAILURE for the rest,
// and never more than that many reach the upstream at once; a flood of
// shared-data keys is refused past the bound; both calls still succeed.
func TestProxyWasmCalloutStormAndSharedFlood(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	var inFlight, most atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
	}))
	defer up.Close()
	storm := newFilter(t, path, wasmfilter.Config{Name: "pw-storm", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("x"),
		MaxCallouts: 4, Clusters: map[string]string{"up": up.URL}})
	for range 5 {
		if _, err := storm.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
			t.Fatalf("a call whose filter stormed callouts: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if m := most.Load(); m > 4 {
		t.Errorf("%d callouts reached the upstream at once, over max_callouts 4", m)
	}
	flood := newFilter(t, path, wasmfilter.Config{Name: "pw-flood", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("f"),
		VMID: "flood"})
	if _, err := flood.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
		t.Fatalf("a call whose filter flooded shared data: %v (the guest traps if nothing was refused)", err)
	}
}

// Shared queues: a filter registers "jobs" in its vm_id, its calls resolve
// and enqueue into it, and proxy_on_queue_ready on one of its instances
// dequeues every item.
func TestProxyWasmSharedQueue(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm_queue", "")
	f := newFilter(t, path, wasmfilter.Config{Name: "pw-queue", ABI: wasmfilter.ABIProxyWasm, VMID: "q"})
	const calls = 20
	for range calls {
		if _, err := f.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
			t.Fatal(err)
		}
	}
	dequeued := func() int64 { v, _ := guestMetric(f, "dequeued"); return v }
	for deadline := time.Now().Add(5 * time.Second); dequeued() < calls && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if n := dequeued(); n != calls {
		t.Fatalf("%d items dequeued by proxy_on_queue_ready, want %d", n, calls)
	}
}

// Weft ABI v1.1: a weft-ABI guest (testdata/caps.c) gets the capabilities
// of proxy-wasm filters on the same implementation: shared data with
// compare-and-swap across instances (8 callers lose no increment), guest
// metrics, ticks.
func TestWeftABICapabilities(t *testing.T) {
	path := buildGuest(t, t.TempDir(), "caps")
	f := newFilter(t, path, wasmfilter.Config{Name: "caps", VMID: "caps"})
	const callers, each = 8, 100
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := f.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ep := newEndpoint()
	var n any
	ep.seen = func(inv *kernel.Invocation) { n = inv.Attachments()["n"] }
	if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(callers*each + 1); n != want {
		t.Fatalf("the shared counter reads %v after %d increments, want %s", n, callers*each+1, want)
	}
	metric := func(name string) int64 {
		if v, ok := guestMetric(f, name); ok {
			return v
		}
		return -1
	}
	if c := metric("calls"); c != callers*each+1 {
		t.Errorf("metric calls = %d, want %d", c, callers*each+1)
	}
	for deadline := time.Now().Add(5 * time.Second); metric("ticks") < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if ticks := metric("ticks"); ticks < 3 {
		t.Errorf("metric ticks = %d after up to 5 s at a 20 ms period", ticks)
	}
}

// The SDKs' v1.1 functions (examples/sharedcount of sdk/go, rust,
// assemblyscript and c): a filter built with each counts calls across its
// instances in shared data with compare-and-swap, and in a guest metric.
func TestSDKSharedData(t *testing.T) {
	for _, sdk := range sdkToolchains {
		t.Run(sdk.name, func(t *testing.T) {
			testSharedCount(t, buildSDKExample(t, sdk.name, sdk.tool, "sharedcount"))
		})
	}
}

func testSharedCount(t *testing.T, path string) {
	f := newFilter(t, path, wasmfilter.Config{Name: "sharedcount", VMID: "count"})
	call := func() string {
		ep := newEndpoint()
		var got any
		ep.seen = func(inv *kernel.Invocation) { got = inv.Attachments()["x-count"] }
		if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
			t.Error(err)
		}
		s, _ := got.(string)
		return s
	}
	// The key's first write takes no token (cas 0 stores unconditionally):
	// one call makes it before the callers race.
	if got := call(); got != "1" {
		t.Fatalf("first call counted %q, want 1", got)
	}
	// get_property (v1.1) through the SDK's wrapper: the filter's name.
	ep := newEndpoint()
	var by any
	ep.seen = func(inv *kernel.Invocation) { by = inv.Attachments()["x-counted-by"] }
	if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil || by != "sharedcount" {
		t.Fatalf("x-counted-by %v (%v), want sharedcount: the SDK's property wrapper over get_property", by, err)
	}
	const callers, each = 8, 50
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				call()
			}
		}()
	}
	wg.Wait()
	if got, want := call(), fmt.Sprint(callers*each+3); got != want {
		t.Fatalf("count %s after %d calls, want %s: increments were lost", got, callers*each+3, want)
	}
	if v, ok := guestMetric(f, "requests"); !ok {
		t.Error("no metric requests")
	} else if v != callers*each+3 {
		t.Errorf("metric requests = %d, want %d", v, callers*each+3)
	}
	// The SDK's tick and queue wrappers: a 20 ms tick counted in "ticks",
	// each call's item on the queue "seen" counted as dequeued.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ticks, _ := guestMetric(f, "ticks")
		dequeued, _ := guestMetric(f, "dequeued")
		if ticks >= 3 && dequeued == callers*each+3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ticks, _ := guestMetric(f, "ticks")
	dequeued, _ := guestMetric(f, "dequeued")
	if ticks < 3 || dequeued != callers*each+3 {
		t.Errorf("metric ticks = %d (want at least 3 at a 20 ms period), dequeued = %d (want %d, one per call)", ticks, dequeued, callers*each+3)
	}
}

// guestMetric is the value of the guest metric name of f, and whether the
// guest defined it.
func guestMetric(f *wasmfilter.Filter, name string) (int64, bool) {
	for _, m := range f.Stats().GuestMetrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Hostile proxy-wasm guests, one for each callback a call runs and each way
// of failing, under a 20 ms deadline: a guest looping in
// proxy_on_context_create, _request_headers, _request_body or
// _response_headers fails the call with a timeout; one looping in
// proxy_on_done, _log or _delete (the call's outcome decided before them)
// returns that outcome; a trap or a memory bomb fails the call at once; bad
// pointers, a callout storm and a shared-data flood get their statuses and
// the call goes through. Each ends within the deadline + 5 ms (the median
// of its repeats, past what a correct host costs on this machine now,
// measured alongside as in TestLoopDeadlinePrecision: a spinning goroutine
// stopped by a timer, and a call whose guest traps at once, the failure's
// path without the stop), and the filter's memory stays within its
// instances' caps.
func TestProxyWasmHostileDeadline(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm", "")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) }))
	defer up.Close()
	const deadline = 20 * time.Millisecond
	const repeats = 7
	const target = 5 * time.Millisecond
	const pages = 64
	cases := []struct {
		mode  string
		fails bool // the call fails, with code want
		want  kernel.Code
		// slow: a guest that does much (a memory bomb, a flood) may also
		// be stopped at the deadline on a slow machine (-race): a timeout
		// is an answer too.
		slow bool
	}{
		{"A", true, kernel.CodeTimeout, false},
		{"l", true, kernel.CodeTimeout, false},
		{"Y", true, kernel.CodeTimeout, false},
		{"R", true, kernel.CodeTimeout, false},
		{"D", false, 0, false},
		{"L", false, 0, false},
		{"E", false, 0, false},
		{"t", true, kernel.CodeUnknown, false},
		{"T", true, kernel.CodeUnknown, false},
		{"g", true, kernel.CodeUnknown, true},
		{"M", true, kernel.CodeUnknown, true},
		{"b", false, 0, false},
		{"x", false, 0, false},
		{"f", false, 0, true},
	}
	trapper := newFilter(t, path, wasmfilter.Config{Name: "pw-hostile-trap", ABI: wasmfilter.ABIProxyWasm, Configuration: []byte("t")})
	trapCost := func() time.Duration {
		waitFor(t, 5*time.Second, func() bool { return trapper.Stats().Idle >= 1 })
		start := time.Now()
		if _, err := trapper.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err == nil {
			t.Fatal("the trapping guest's call succeeded")
		}
		return time.Since(start)
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFilter(t, path, wasmfilter.Config{Name: "pw-hostile-" + tc.mode, ABI: wasmfilter.ABIProxyWasm,
				Configuration: []byte(tc.mode), MaxMemoryPages: pages, VMID: "hostile-" + tc.mode,
				Clusters: map[string]string{"up": up.URL}, MaxCallouts: 4, Body: []string{wasmfilter.BodyRequest}})
			// A Triple IDL call: its request body is its message, made
			// without a serialization.
			ep := newEndpoint()
			ep.url = kernel.NewURL("tri", "127.0.0.1", 50051, "org.example.Greeter", map[string]string{kernel.KeySide: kernel.SideProvider})
			var excess []time.Duration
			for range repeats {
				waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
				base := timerLateness(deadline, false) + trapCost()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				_, err := f.Invoke(ctx, ep, kernel.NewInvocation("sayHello", wrapperspb.String("world")))
				took := time.Since(start)
				cancel()
				timedOut := tc.slow && err != nil && kernel.CodeOf(err) == kernel.CodeTimeout
				if got := kernel.CodeOf(err); !timedOut && (tc.fails != (err != nil) || err != nil && got != tc.want) {
					t.Fatalf("mode %s: err %v (code %v), want code %v", tc.mode, err, got, tc.want)
				}
				excess = append(excess, took-deadline-base)
			}
			xs := spreadOf(excess)
			t.Logf("mode %s: time past the deadline, less a timer's lateness and a failed call now: %v", tc.mode, xs)
			// Under -race a memory bomb's grows and its discarded
			// megabytes cost the race detector's bookkeeping, which the
			// trapping baseline (2 pages) does not show.
			if xs.median > target && !(raceEnabled && tc.slow) {
				t.Errorf("mode %s: calls ended %v past their %v deadline (median of %d), over %v", tc.mode, xs.median, deadline, repeats, target)
			}
			// Once the pool has replaced the last instance lost; one the
			// pool may be starting meanwhile is in MemoryBytes but not yet
			// in Live: at most one more.
			waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
			if st := f.Stats(); st.MemoryBytes > int64(st.Live+1)*pages*65536 {
				t.Errorf("mode %s: %d bytes of guest memory in %d instances (and one starting), over their cap of %d pages each (%+v)",
					tc.mode, st.MemoryBytes, st.Live, pages, st)
			}
		})
	}
}

// weft wasm check starts a proxy-wasm module as a filter would: an SDK
// filter registered under a root id starts only when given it
// (CheckOptions.RootID, the CLI's -root-id), and says why otherwise.
func TestProxyWasmCheckRootID(t *testing.T) {
	b := mustRead(t, buildProxyAS(t, t.TempDir(), "headers"))
	if r := wasmfilter.Check(context.Background(), b); r.Valid() || len(r.Problems) == 0 {
		t.Fatalf("checked without its root id: %+v; want a problem (the SDK aborts on an unknown root id)", r.Problems)
	}
	if r := wasmfilter.CheckWith(context.Background(), b, wasmfilter.CheckOptions{RootID: "as_headers"}); !r.Valid() || !r.Ran {
		t.Fatalf("checked with root id as_headers: ran %v, problems %v", r.Ran, r.Problems)
	}
}

// Callouts from proxy_on_tick, as filters refresh a key set on a timer
// (testdata/proxywasm_tickcall.wat): the root context calls an HTTP server
// every 20 ms, its answer handler stores the key in shared data, and calls
// see keys that change as the server's do.
func TestProxyWasmTickCallout(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "proxywasm_tickcall", "")
	var n atomic.Int32
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/key" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("x-key", fmt.Sprintf("k-%d", n.Add(1)))
	}))
	defer keys.Close()
	f := newFilter(t, path, wasmfilter.Config{Name: "pw-tickcall", ABI: wasmfilter.ABIProxyWasm, VMID: "tickcall",
		Clusters: map[string]string{"keys": keys.URL}})
	key := func() string {
		var got any
		ep := newEndpoint()
		ep.seen = func(inv *kernel.Invocation) { got = inv.Attachments()["x-key"] }
		if _, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello")); err != nil {
			t.Fatal(err)
		}
		s, _ := got.(string)
		return s
	}
	var first string
	waitFor(t, 5*time.Second, func() bool { first = key(); return first != "" })
	waitFor(t, 5*time.Second, func() bool { k := key(); return k != "" && k != first })
	if st := f.Stats(); st.Failures != 0 {
		t.Errorf("stats %+v: the ticks' callouts cost instances", st)
	}
	f.Close()
	// A request sent just before Close may reach the server after it:
	// what must not happen is a new one, at the next ticks.
	time.Sleep(50 * time.Millisecond)
	asked := n.Load()
	time.Sleep(100 * time.Millisecond)
	if m := n.Load(); m != asked {
		t.Errorf("the key server was asked %d more times after Close", m-asked)
	}
}

// allRecords is a slog.Handler that keeps every record, with the attributes
// of the logger it came through (loggers made With share the store).
type allRecords struct {
	store *recStore
	attrs []slog.Attr
}

type recStore struct {
	mu    sync.Mutex
	lines []string
}

func (r *allRecords) st() *recStore {
	if r.store == nil {
		r.store = &recStore{}
	}
	return r.store
}

func (r *allRecords) Enabled(context.Context, slog.Level) bool { return true }
func (r *allRecords) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	for _, a := range r.attrs {
		line += " " + a.String()
	}
	st := r.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lines = append(st.lines, line)
	return nil
}
func (r *allRecords) WithAttrs(as []slog.Attr) slog.Handler {
	return &allRecords{store: r.st(), attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}
func (r *allRecords) WithGroup(string) slog.Handler { return r }

func (r *allRecords) lines() []string {
	st := r.st()
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]string(nil), st.lines...)
}

// has says whether a record at level has msg and names filter.
func (r *allRecords) has(level slog.Level, msg, filter string) bool {
	for _, l := range r.lines() {
		if strings.HasPrefix(l, level.String()+" "+msg) && strings.Contains(l, "filter="+filter) {
			return true
		}
	}
	return false
}
