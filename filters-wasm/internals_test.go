package wasmfilter

import (
	"context"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The wazero this module pins must give the fast path: if an upgrade changes
// what internals.go relies on, this fails (loudly, in CI) rather than
// letting every filter fall back to wazero's slower per-call watch, which
// only logs a warning.
func TestFastPathSelfTest(t *testing.T) {
	if err := fastPathError(); err != nil {
		t.Fatalf("the fast call path is unavailable with the pinned wazero (internals.go needs updating): %v", err)
	}
}

// A layout that is not the expected one is refused, not written to.
func TestLayoutChecks(t *testing.T) {
	type fakeFunction struct{ api.Function }
	type fakeModule struct{ api.Module }
	var le *errLayout
	if err := disableCallWatch(fakeFunction{}); !errors.As(err, &le) {
		t.Errorf("disableCallWatch of a foreign api.Function: %v", err)
	}
	if err := disableCallWatch(&fakeFunction{}); !errors.As(err, &le) {
		t.Errorf("disableCallWatch of a foreign *api.Function: %v", err)
	}
	if _, err := closedWord(&fakeModule{}); !errors.As(err, &le) {
		t.Errorf("closedWord of a foreign api.Module: %v", err)
	}
	if err := disableCallWatch(nil); err == nil {
		t.Error("disableCallWatch(nil) succeeded")
	}
}

func TestHasStartSection(t *testing.T) {
	// wat2wasm of (module (global $n (mut i32) (i32.const 0))
	// (func $init (global.set $n (i32.const 1))) (start $init))
	withStart := "\x00asm\x01\x00\x00\x00\x01\x04\x01`\x00\x00\x03\x02\x01\x00\x06\x06\x01\x7f\x01A\x00\v\b\x01\x00\n\b\x01\x06\x00A\x01$\x00\v"
	for _, c := range []struct {
		name string
		b    string
		want bool
	}{
		{"spin", string(spinWasm), false},
		{"start", withStart, true},
		{"header only", "\x00asm\x01\x00\x00\x00", false},
		{"truncated", string(spinWasm[:20]), true},
		{"short", "\x00asm", true},
	} {
		if got := hasStartSection([]byte(c.b)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A module the host marked closed stops its guest, and closeModule still
// closes it through wazero's own path (the Closed word then holds wazero's
// value, flags included: its Close ran in full, removing the module from
// the runtime, rather than returning early because the word was set).
func TestMarkThenClose(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(ctx, 1)
	defer rt.Close(ctx)
	mod, err := rt.InstantiateWithConfig(ctx, spinWasm, sandboxConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, err := closedWord(mod)
	if err != nil {
		t.Fatal(err)
	}
	spin := mod.ExportedFunction("spin")
	if err := disableCallWatch(spin); err != nil {
		t.Fatal(err)
	}
	in := &instance{mod: mod, closed: w}
	in.markClosed(sys.ExitCodeDeadlineExceeded)
	in.markClosed(sys.ExitCodeContextCanceled) // the first mark stands
	if in.marked != sys.ExitCodeDeadlineExceeded {
		t.Fatalf("marked %#x", in.marked)
	}
	err = spin.CallWithStack(ctx, []uint64{1 << 30})
	var exit *sys.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
		t.Fatalf("a guest marked closed: %v", err)
	}
	in.closeModule()
	if got := w.Load(); !mod.IsClosed() || got>>32 != 0 || got&0xff == 0 {
		t.Errorf("after closeModule: Closed %#x, want wazero's own close (exit code 0, a resource flag)", got)
	}
	in.markClosed(sys.ExitCodeDeadlineExceeded) // a timer firing late marks nothing
	if in.marked != 0 {
		t.Errorf("marked after close: %#x", in.marked)
	}
}
