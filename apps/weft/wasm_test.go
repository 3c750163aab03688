package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func buildGuest(t *testing.T, name string) string {
	t.Helper()
	clang, err := exec.LookPath("clang")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("clang is not installed (apt-get install clang lld)")
		}
		t.Fatal("clang is not installed but CI is set: .ci/run must install clang and lld")
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	src := filepath.Join("..", "..", "filters-wasm", "testdata", name+".c")
	cmd := exec.Command(clang, "--target=wasm32", "-nostdlib", "-O2", "-Wl,--no-entry", "-Wl,--export-dynamic",
		"-Wl,--allow-undefined", "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clang: %v\n%s", err, b)
	}
	return out
}

func TestWasmCheck(t *testing.T) {
	var out, errb bytes.Buffer
	good := buildGuest(t, "inspect")
	if code := cli([]string{"wasm", "check", good}, &out, &errb); code != 0 {
		t.Fatalf("valid module: code %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"weft.get_attachment", "(i32, i32, i32, i32) -> (i32)", "weft_on_response",
		"response callback (optional)", "abi version: 1", "verdict: valid (weft WASM ABI v1)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("valid report lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := cli([]string{"wasm", "check", buildGuest(t, "badabi")}, &out, &errb); code != 1 {
		t.Fatalf("invalid module: code %d\n%s", code, out.String())
	}
	for _, want := range []string{"verdict: INVALID (4 problem(s))", `missing export "weft_on_request"`,
		"PROBLEM: wrong signature: ABI v1 declares get_method (i32, i32) -> (i32)", `module "env" is not provided`,
		"abi version: not run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("invalid report lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("weft wasm check badabi.wasm:\n%s", out.String())
}

func TestWasmCheckUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"wasm", "check"}, &out, &errb); code != 2 {
		t.Errorf("no file: code %d", code)
	}
	if code := cli([]string{"wasm", "check", "/nonexistent.wasm"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no such file") {
		t.Errorf("missing file: code %d, %q", code, errb.String())
	}
	garbage := filepath.Join(t.TempDir(), "g.wasm")
	os.WriteFile(garbage, []byte("not wasm"), 0o644)
	out.Reset()
	if code := cli([]string{"wasm", "check", garbage}, &out, &errb); code != 1 || !strings.Contains(out.String(), "does not compile") {
		t.Errorf("garbage: code %d, %q", code, out.String())
	}
}

// -h prints what the check does, its argument and flags, and exits 0;
// an unknown flag or a wrong number of arguments exits 2 with the usage.
func TestWasmCheckHelp(t *testing.T) {
	for _, args := range [][]string{{"wasm", "check", "-h"}, {"wasm", "check", "-help"}, {"wasm", "-h"}} {
		var out, errb bytes.Buffer
		if code := cli(args, &out, &errb); code != 0 {
			t.Errorf("%v: code %d, want 0\n%s", args, code, errb.String())
		}
		for _, want := range []string{"usage: weft wasm check [-h] [-root-id ID] [-configuration TEXT] FILE.wasm", "weft_on_request", "FILE.wasm   the module file",
			"-h, -help", "Exit status: 0 valid, 1 invalid or unreadable, 2 usage error", "512 pages", "5s start-up limit"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%v: usage lacks %q:\n%s", args, want, errb.String())
			}
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %q", args, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"wasm", "check", "-x", "f.wasm"}, "flag provided but not defined: -x"},
		{[]string{"wasm", "check", "a.wasm", "b.wasm"}, "want one module file, got 2 arguments"},
		{[]string{"wasm", "inspect", "a.wasm"}, `unknown subcommand "inspect"`},
		{[]string{"wasm"}, "usage: weft wasm check"},
	} {
		var out, errb bytes.Buffer
		if code := cli(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) ||
			!strings.Contains(errb.String(), "usage: weft wasm check [-h] [-root-id ID] [-configuration TEXT] FILE.wasm") {
			t.Errorf("%v: code %d, want 2 with %q and the usage:\n%s", c.args, code, c.want, errb.String())
		}
	}
}
