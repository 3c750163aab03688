package wasmfilter_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	path := buildProxyAS(t, t.TempDir(), "headers")
	f := newFilter(t, path, wasmfilter.Config{Name: "as-headers", ABI: wasmfilter.ABIProxyWasm,
		RootID: "as_headers", Configuration: []byte("cfg-1")})
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
	if got := res.Attachments["x-served-by"]; got != "as_headers" {
		t.Errorf("response attachment x-served-by = %v, want as_headers (result %+v)", got, res)
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
	if st := f.Stats(); st.Failures != 0 || st.Live < 1 {
		t.Errorf("stats %+v: want no failures", st)
	}
}
