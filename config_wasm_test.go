package weft_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weftrpc/weft"
)

// A relative wasm path is relative to the config file that set it, whatever
// the working directory; the source that set the path last decides, and a
// path from a YAML string or the environment stays relative to the working
// directory.
func TestWasmPathRelativeToItsConfigFile(t *testing.T) {
	confDir, otherDir, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(dir, name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write(confDir, "weft.yaml", `
wasm:
  filters:
    wasm-a: {path: filters/a.wasm, order: 1}
    wasm-b: {path: b.wasm}
    wasm-abs: {path: /opt/weft/abs.wasm}
`)
	// Sets a's order only (a's path stays main's) and b's path (now this file's).
	over := write(otherDir, "override.yaml", `
wasm:
  filters:
    wasm-a: {order: 2, config: {path: not-a-module}}
    wasm-b: {path: ../b2.wasm}
`)
	t.Chdir(cwd)
	abs := func(p string) string {
		t.Helper()
		p, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	cfg, err := weft.LoadConfig(weft.ConfigFiles(main, over)...)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"wasm-a":   filepath.Join(confDir, "filters", "a.wasm"),
		"wasm-b":   filepath.Join(filepath.Dir(otherDir), "b2.wasm"),
		"wasm-abs": "/opt/weft/abs.wasm",
	} {
		if got := cfg.Wasm.Filters[name].Path; got != want {
			t.Errorf("%s: path %q, want %q", name, got, want)
		}
	}
	if cfg.Wasm.Filters["wasm-a"].Order != 2 {
		t.Errorf("the override's order was not merged: %+v", cfg.Wasm.Filters["wasm-a"])
	}

	// A config file named by a relative path: its directory is taken
	// against the working directory at load.
	rel, err := filepath.Rel(cwd, main)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = weft.LoadConfig(weft.ConfigFiles(rel)...); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Wasm.Filters["wasm-a"].Path, filepath.Join(confDir, "filters", "a.wasm"); abs(got) != want || !filepath.IsAbs(got) {
		t.Errorf("config file %s: path %q, want %q", rel, got, want)
	}

	// A YAML string or a WEFT_* variable that sets the path last: the
	// working directory, as before.
	cfg, err = weft.LoadConfig(weft.ConfigFiles(main)[0], weft.ConfigYAML(`wasm: {filters: {wasm-a: {path: y.wasm}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Wasm.Filters["wasm-a"].Path; got != "y.wasm" {
		t.Errorf("path from a YAML string: %q, want y.wasm", got)
	}
	t.Setenv("WEFT_WASM_FILTERS_WASM-B_PATH", "env.wasm")
	if cfg, err = weft.LoadConfig(weft.ConfigFiles(main)[0], weft.ConfigEnv()); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Wasm.Filters["wasm-b"].Path; got != "env.wasm" {
		t.Errorf("path from WEFT_WASM_FILTERS_WASM-B_PATH: %q, want env.wasm", got)
	}
	// A file after the string sets it again: relative to that file.
	cfg, err = weft.LoadConfig(weft.ConfigYAML(`wasm: {filters: {wasm-a: {path: y.wasm}}}`), weft.ConfigFiles(main)[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Wasm.Filters["wasm-a"].Path, filepath.Join(confDir, "filters", "a.wasm"); got != want {
		t.Errorf("file after a string: %q, want %q", got, want)
	}
}
