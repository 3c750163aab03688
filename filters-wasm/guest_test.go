package wasmfilter_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// buildGuest compiles testdata/<name>.c, freestanding, into dir and returns
// the module's path. Without clang the test is skipped on a developer's
// machine but fails under CI (CI set), where .ci/run installs the toolchain:
// a missing toolchain must not turn the WASM tests into silent skips.
func buildGuest(t testing.TB, dir, name string, defines ...string) string {
	t.Helper()
	clang, err := exec.LookPath("clang")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("clang is not installed (apt-get install clang lld); the WASM guests are built from C source")
		}
		t.Fatal("clang is not installed but CI is set: .ci/run must install clang and lld")
	}
	src, err := filepath.Abs(filepath.Join("testdata", name+".c"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+strings.Join(defines, "")+".wasm")
	out = strings.NewReplacer("=", "_", "\"", "", "'", "").Replace(out)
	args := []string{"--target=wasm32", "-nostdlib", "-O2", "-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--allow-undefined"}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	args = append(args, "-o", out, src)
	if b, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// endpoint is the invoker at the end of a chain: it answers "ok" (or err) and
// records the attachments it received.
type endpoint struct {
	url  *kernel.URL
	err  error
	seen func(inv *kernel.Invocation)
}

func newEndpoint() *endpoint {
	return &endpoint{url: kernel.NewURL("dubbo", "127.0.0.1", 20880, "org.example.Greeter",
		map[string]string{kernel.KeySide: kernel.SideProvider, kernel.KeyVersion: "1.0", kernel.KeyGroup: "g"})}
}

func (e *endpoint) URL() *kernel.URL  { return e.url }
func (e *endpoint) IsAvailable() bool { return true }
func (e *endpoint) Destroy()          {}
func (e *endpoint) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	if e.seen != nil {
		e.seen(inv)
	}
	if e.err != nil {
		return kernel.Result{}, e.err
	}
	return kernel.Result{Value: map[string]any{"greeting": "hello"}}, nil
}

// sdkToolchains are weft's SDKs (sdk/<name>) and the tool each builds with.
var sdkToolchains = []struct{ name, tool string }{{"go", "go"}, {"rust", "/usr/bin/rustc"}, {"assemblyscript", "npm"}, {"c", "clang"}}

// buildSDKExample builds examples/<example> of sdk/<sdk> with its build.sh
// into a temporary folder; without tool the test is skipped on a
// developer's machine and fails under CI.
func buildSDKExample(t *testing.T, sdk, tool, example string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed but CI is set", tool)
		}
		t.Skipf("%s is not installed", tool)
	}
	dir := t.TempDir()
	if out, err := exec.Command("bash", filepath.Join("..", "sdk", sdk, "build.sh"), dir, example).CombinedOutput(); err != nil {
		t.Fatalf("sdk/%s/build.sh %s: %v\n%s", sdk, example, err, out)
	}
	return filepath.Join(dir, example+".wasm")
}
