package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// buildWasmGuest compiles ../filters-wasm/testdata/<name>.c into dir (see
// filters-wasm's buildGuest): skipped without clang on a developer's machine,
// a failure under CI.
func buildWasmGuest(t testing.TB, dir, name string, defines ...string) string {
	t.Helper()
	clang, err := exec.LookPath("clang")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("clang is not installed (apt-get install clang lld); the WASM guests are built from C source")
		}
		t.Fatal("clang is not installed but CI is set: .ci/run must install clang and lld")
	}
	src, err := filepath.Abs(filepath.Join("..", "filters-wasm", "testdata", name+".c"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+strings.NewReplacer("=", "_", "\"", "").Replace(strings.Join(defines, ""))+".wasm")
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

// buildProxyWasmAS builds a proxy-wasm filter on the AssemblyScript SDK
// (filters-wasm/testdata/proxywasm-as/assembly/<name>.ts), once per test
// binary (see builtGuest; dir is not used). Without node and npm the test
// is skipped on a developer's machine and fails under CI.
func buildProxyWasmAS(t testing.TB, dir, name string) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("%s is not installed; the AssemblyScript proxy-wasm guests are built with node >= 20 and npm", bin)
			}
			t.Fatalf("%s is not installed but CI is set", bin)
		}
	}
	return builtGuest(t, "proxywasm-as", name)
}

// guests holds the guests built by a build.sh of filters-wasm/testdata:
// each is built once per test binary (an AssemblyScript or Go build takes
// seconds, more on a loaded machine, and several tests run the same
// filter), into guestDir, which TestMain removes. The files are not to be
// written: a test that swaps a module copies it first.
var guests struct {
	sync.Mutex
	dir   string
	built map[string]string
}

// builtGuest is filters-wasm/testdata/<folder>/build.sh's build of name.
func builtGuest(t testing.TB, folder, name string) string {
	t.Helper()
	guests.Lock()
	defer guests.Unlock()
	key := folder + "/" + name
	if path, ok := guests.built[key]; ok {
		return path
	}
	if guests.dir == "" {
		dir, err := os.MkdirTemp("", "weft-test-guests-")
		if err != nil {
			t.Fatal(err)
		}
		guests.dir, guests.built = dir, map[string]string{}
	}
	out := filepath.Join(guests.dir, folder)
	script := filepath.Join("..", "filters-wasm", "testdata", folder, "build.sh")
	if b, err := exec.Command("bash", script, out, name).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, name, err, b)
	}
	path := filepath.Join(out, name+".wasm")
	guests.built[key] = path
	return path
}

// removeGuests removes what builtGuest built (TestMain, after the tests).
func removeGuests() {
	if guests.dir != "" {
		os.RemoveAll(guests.dir)
	}
}

// buildProxyWasmWAT assembles filters-wasm/testdata/<name>.wat, a
// proxy-wasm module written from the spec, into dir with wabt's wat2wasm.
func buildProxyWasmWAT(t testing.TB, dir, name string) string {
	t.Helper()
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("wat2wasm is not installed (apt-get install wabt)")
		}
		t.Fatal("wat2wasm is not installed but CI is set: .ci/run must install wabt")
	}
	out := filepath.Join(dir, name+".wasm")
	src := filepath.Join("..", "filters-wasm", "testdata", name+".wat")
	if b, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", src, err, b)
	}
	return out
}

// buildProxyWasmGo builds a proxy-wasm filter on proxy-wasm-go-sdk's API
// (filters-wasm/testdata/proxywasm-go/<name>) with Go's own compiler
// (GOOS=wasip1, the SDK's pragmas rewritten by the folder's build.sh), once
// per test binary (see builtGuest; dir is not used).
func buildProxyWasmGo(t testing.TB, dir, name string) string {
	t.Helper()
	return builtGuest(t, "proxywasm-go", name)
}

// traceFilter is a native filter that does what the trace guest does: its
// name onto attachment "trace" on the way in, onto the result's "rtrace" on
// the way out.
func traceFilter(name string) kernel.Factory[extension.Filter] {
	return func() (extension.Filter, error) {
		return extension.FilterFunc(func(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
			inv.SetAttachment("trace", appendName(inv.AttachmentString("trace"), name))
			res, err := next.Invoke(ctx, inv)
			if res.Attachments == nil {
				res.Attachments = map[string]any{}
			}
			prev, _ := res.Attachments["rtrace"].(string)
			res.Attachments["rtrace"] = appendName(prev, name)
			return res, err
		}), nil
	}
}

func appendName(list, name string) string {
	if list == "" {
		return name
	}
	return list + "," + name
}

// tracer is the service: it answers with the trace its call carried.
type tracer struct{}

func (tracer) Trace(ctx context.Context) (string, error) {
	inv, ok := kernel.InvocationFrom(ctx)
	if !ok {
		return "", fmt.Errorf("no invocation in context")
	}
	return inv.AttachmentString("trace"), nil
}

func (tracer) Version(ctx context.Context) (string, error) {
	inv, _ := kernel.InvocationFrom(ctx)
	return inv.AttachmentString("version"), nil
}

func (tracer) Echo(ctx context.Context, s string) (string, error) { return s, nil }

type tracerClient struct {
	Trace   func(ctx context.Context) (string, error)
	Version func(ctx context.Context) (string, error)
	Echo    func(ctx context.Context, s string) (string, error)
}

func startApp(t testing.TB, yaml string, opts ...weft.Option) *weft.App {
	t.Helper()
	app, err := weft.New(append([]weft.Option{weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithConfig(weft.ConfigYAML(yaml))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app
}

// freeAddr is freePort for benchmarks too.
func freeAddr(tb testing.TB) string { return freePort(tb) }
