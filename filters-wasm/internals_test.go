package wasmfilter

import (
	"errors"
	"testing"

	"github.com/tetratelabs/wazero/api"
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
