package wasmfilter_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// buildWAT assembles WebAssembly text (a testdata/<name>.wat file, or src
// when given) with wabt's wat2wasm into dir. Without wat2wasm the test is
// skipped on a developer's machine and fails under CI, where .ci/run
// installs wabt.
func buildWAT(t testing.TB, dir, name, src string, flags ...string) string {
	t.Helper()
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("wat2wasm is not installed (apt-get install wabt); the raw-WAT guests are assembled with it")
		}
		t.Fatal("wat2wasm is not installed but CI is set: .ci/run must install wabt")
	}
	in := filepath.Join("testdata", name+".wat")
	if src != "" {
		in = filepath.Join(dir, name+".wat")
		if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, name+".wasm")
	args := append(append([]string(nil), flags...), in, "-o", out)
	if b, err := exec.Command(wat2wasm, args...).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// A filter written in raw WAT from sdk/ABI.md alone (testdata/spec.wat)
// behaves as the spec says.
func TestSpecWATGuest(t *testing.T) {
	path := buildWAT(t, t.TempDir(), "spec", "")
	ep := newEndpoint()
	var seen map[string]any
	ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
	const timeout = 50 * time.Millisecond
	f := newFilter(t, path, wasmfilter.Config{Name: "wasm-spec", Timeout: timeout,
		Settings: map[string]any{"b": "x", "a": 1, "n": map[string]any{"z": true, "y": []any{1, 2.5, nil}}}})
	invoke := func(ctx context.Context, mode string) (kernel.Result, error) {
		seen = nil
		return f.Invoke(ctx, ep, withMode(mode))
	}

	t.Run("get_config", func(t *testing.T) {
		// Compact JSON, object keys sorted, numbers as numbers.
		if _, err := invoke(context.Background(), "config"); err != nil {
			t.Fatal(err)
		}
		if want := `{"a":1,"b":"x","n":{"y":[1,2.5,null],"z":true}}`; seen["out"] != want {
			t.Errorf("get_config: %q, want %q", seen["out"], want)
		}
		g := newFilter(t, path, wasmfilter.Config{Name: "wasm-spec-none"})
		seen = nil
		if _, err := g.Invoke(context.Background(), ep, withMode("config")); err != nil || seen["out"] != "{}" {
			t.Errorf("get_config without config: %q, %v", seen["out"], err)
		}
	})

	t.Run("ignored BAD_ARGUMENT", func(t *testing.T) {
		// The host function did nothing and said so; the guest went on and
		// the call with it: a status is not a trap.
		_, err := invoke(context.Background(), "badarg")
		if err != nil || seen["status"] != "2" || len(seen) != 2 { // mode and status: the bad key set nothing
			t.Errorf("ignored BAD_ARGUMENT: %v, attachments %v", err, seen)
		}
		if s := f.Stats(); s.Failures != 0 {
			t.Errorf("a BAD_ARGUMENT cost an instance: %+v", s)
		}
	})

	t.Run("reject", func(t *testing.T) {
		_, err := invoke(context.Background(), "reject")
		if kernel.CodeOf(err) != kernel.CodeLimitExceeded || !strings.Contains(err.Error(), `wasm filter "wasm-spec" rejected the call: slow down`) {
			t.Errorf("reject: %v", err)
		}
	})

	t.Run("response callback after an inner reject", func(t *testing.T) {
		// An inner filter (here the endpoint) fails the call: weft_on_response
		// runs, get_error has the message, and the call's error stands.
		inner := *ep
		inner.err = kernel.Errorf(kernel.CodeForbidden, "inner filter says no")
		res, err := f.Invoke(context.Background(), &inner, withMode(""))
		if kernel.CodeOf(err) != kernel.CodeForbidden || res.Attachments["saw.error"] != "weft: forbidden: inner filter says no" {
			t.Errorf("after an inner reject: %v, result attachments %v", err, res.Attachments)
		}
	})

	t.Run("deadlines", func(t *testing.T) {
		// With a deadline, the call's deadline bounds the guest, even when it
		// is longer than the filter's timeout; without one, the timeout does.
		// The lower bounds are exact; the upper ones only tell "stopped".
		const deadline = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		_, err := invoke(ctx, "loop")
		took := time.Since(start)
		if kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(err.Error(), "weft_on_request was still running at the call's deadline") ||
			took < deadline-time.Millisecond || took > deadline+5*time.Second {
			t.Errorf("loop with a %v deadline (filter timeout %v): %v after %v", deadline, timeout, err, took)
		}
		waitFor(t, 5*time.Second, func() bool { return f.Stats().Idle >= 1 })
		start = time.Now()
		_, err = invoke(context.Background(), "loop")
		took = time.Since(start)
		if kernel.CodeOf(err) != kernel.CodeTimeout || !strings.Contains(err.Error(), "ran past the filter's timeout of 50ms") ||
			took < timeout-time.Millisecond || took > timeout+5*time.Second {
			t.Errorf("loop without deadline: %v after %v", err, took)
		}
	})

	t.Run("WASI", func(t *testing.T) {
		// errno, then what the call reported (see spec.wat for the order):
		// no arguments or environment; clocks and randomness work; stdout
		// takes the bytes, stdin is empty; fd 3 (a preopen, a file, a socket)
		// is EBADF (8); proc_raise is ENOSYS (52); a 10 s sleep returns at
		// once with its event.
		start := time.Now()
		if _, err := invoke(context.Background(), "wasi"); err != nil {
			t.Fatal(err)
		}
		const want = "00,00,00,00," + "00,00,00," + "00,05,00,00," + "08,08,08,52,00," + "00,01,"
		if seen["wasi"] != want {
			t.Errorf("WASI results %q, want %q", seen["wasi"], want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("poll_oneoff slept: the call took %v", took)
		}
	})
}

// Modules that break the spec's other rules, in raw WAT.
func TestSpecWATModules(t *testing.T) {
	dir := t.TempDir()
	const exports = `
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weft_on_request") (result i32) (i32.const 0))`
	load := func(name, src string, c wasmfilter.Config, flags ...string) error {
		t.Helper()
		c.Name, c.Path, c.Log = "wasm-"+name, buildWAT(t, dir, name, src, flags...), quiet
		f, err := wasmfilter.New(context.Background(), c)
		if err == nil {
			f.Close()
		}
		return err
	}
	for _, c := range []struct {
		name, src string
		flags     []string
		cfg       wasmfilter.Config
		want      string // "" loads
	}{
		{name: "minimal", src: `(module (memory (export "memory") 1)` + exports + `)`},
		{name: "no-alloc", src: `(module (memory (export "memory") 1)
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_on_request") (result i32) (i32.const 0)))`, want: `missing export "weft_alloc" (i32) -> (i32)`},
		{name: "no-memory", src: `(module (memory 1)` + exports + `)`, want: `missing export "memory"`},
		// A declared maximum over max_memory_pages is lowered to it; a
		// declared minimum over it does not load.
		{name: "max-over-cap", src: `(module (memory (export "memory") 1 1000)` + exports + `)`},
		{name: "min-over-cap", src: `(module (memory (export "memory") 600)` + exports + `)`,
			want: "min 600 pages (37 Mi) over limit of 512 pages"},
		// WebAssembly 2.0's features are on (SIMD here); later proposals,
		// such as threads and tail calls, are not.
		{name: "simd", src: `(module (memory (export "memory") 1)` + exports + `
  (func (export "sum") (result i32) (i32x4.extract_lane 0 (i32x4.add (v128.const i32x4 1 2 3 4) (v128.const i32x4 5 6 7 8)))))`},
		{name: "threads", src: `(module (memory (export "memory") 1 1 shared)` + exports + `)`,
			flags: []string{"--enable-threads"}, want: "shared memory"},
		{name: "tail-call", src: `(module (memory (export "memory") 1)` + exports + `
  (func $f (result i32) (return_call $f)))`, flags: []string{"--enable-tail-call"}, want: "does not compile"},
	} {
		err := load(c.name, c.src, c.cfg, c.flags...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	// In _initialize get_config works and the functions about a call,
	// reject included, answer NOT_FOUND: in an App and in `weft wasm check`
	// alike (the guest traps otherwise).
	initSrc := `(module
  (import "weft" "get_config" (func $get_config (param i32 i32) (result i32)))
  (import "weft" "get_method" (func $get_method (param i32 i32) (result i32)))
  (import "weft" "reject" (func $reject (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)` + exports + `
  (func (export "_initialize")
    (if (i32.ne (call $get_config (i32.const 0) (i32.const 4)) (i32.const 0)) (then unreachable))
    (if (i32.ne (call $get_method (i32.const 0) (i32.const 4)) (i32.const 1)) (then unreachable))
    (if (i32.ne (call $reject (i32.const 4) (i32.const 0) (i32.const 0)) (i32.const 1)) (then unreachable))))`
	if err := load("init", initSrc, wasmfilter.Config{}); err != nil {
		t.Errorf("_initialize as the spec says: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "init.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if r := wasmfilter.Check(context.Background(), b); !r.Valid() {
		t.Errorf("weft wasm check of the same module: %v", r.Problems)
	}

	// A start function (the module's start section) runs at instantiation,
	// under the start-up limit like _initialize: one that spins fails the
	// load instead of hanging it.
	const limit = 200 * time.Millisecond
	start := time.Now()
	err = load("start", `(module (memory (export "memory") 1)`+exports+`
  (func $spin (loop $l (br $l)))
  (start $spin))`, wasmfilter.Config{InitTimeout: limit})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "still running after the start-up limit of 200ms") || took > limit+5*time.Second {
		t.Errorf("spinning start function: %v after %v", err, took)
	}
}

// sdk/ABI.md names every WASI function the host provides, and no other.
func TestABIDocListsWASIFunctions(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "sdk", "ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	i := strings.Index(sec, "\n## WASI\n")
	if i < 0 {
		t.Fatal("ABI.md has no WASI section")
	}
	sec = sec[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	defs := rt.Module(wasmfilter.WASIModule).ExportedFunctionDefinitions()
	for name := range defs {
		if !strings.Contains(sec, "`"+name+"`") {
			t.Errorf("ABI.md's WASI section does not name %s", name)
		}
	}
	if want := fmt.Sprintf("every one of its %d", len(defs)); !strings.Contains(sec, want) {
		t.Errorf("ABI.md's WASI section does not say %q", want)
	}
}
