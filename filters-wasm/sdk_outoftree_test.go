package wasmfilter_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// TestSDKsOutOfTree follows sdk/README.md's "Start a filter in your own
// project" for each SDK as a new user would: the recipe's files and
// commands, taken from the README itself (so the two cannot drift), in a
// folder outside the repository, /path/to/weft standing for this checkout.
// The module it builds must load into the host, let a call with a token
// through with the attachment x-filter set, and reject one without.
//
// The toolchains are Debian's (the README names /usr/bin/cargo and
// /usr/bin/rustc); without one a subtest skips, unless CI is set
// (.ci/run installs them), where it fails.
func TestSDKsOutOfTree(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	recipes := readRecipes(t, filepath.Join(root, "sdk", "README.md"))
	for _, sdk := range []struct {
		section, value string
		tools          []string // commands the recipe needs on PATH or by path
		maxPages       uint32   // the most initial memory pages the module may declare; 0: not checked
	}{
		{"Go", "go", []string{"go"}, 0},
		{"Rust", "rust", []string{"/usr/bin/rustc", "/usr/bin/cargo"}, 3},
		{"AssemblyScript", "assemblyscript", []string{"node", "npm"}, 1},
		{"C", "c", []string{"clang", "wasm-ld"}, 3},
	} {
		t.Run(sdk.value, func(t *testing.T) {
			steps, ok := recipes[sdk.section]
			if !ok {
				t.Fatalf("sdk/README.md has no recipe %q under %q", sdk.section, recipeHeading)
			}
			for _, tool := range sdk.tools {
				if _, err := exec.LookPath(tool); err != nil {
					missingTool(t, fmt.Sprintf("%s is not installed (%v)", tool, err))
				}
			}
			if sdk.section == "Rust" {
				out, err := exec.Command("/usr/bin/rustc", "--print", "sysroot").Output()
				if err != nil {
					t.Fatalf("rustc --print sysroot: %v", err)
				}
				if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown")); err != nil {
					missingTool(t, "Debian's rustc has no wasm32 std (apt-get install libstd-rust-dev-wasm32)")
				}
			}

			dir := t.TempDir()
			if rel, err := filepath.Rel(root, dir); err != nil || !strings.HasPrefix(rel, "..") {
				t.Fatalf("%s is inside the repository %s: the recipe must build outside it", dir, root)
			}
			start := time.Now()
			for _, s := range steps {
				text := strings.ReplaceAll(s.text, "/path/to/weft", root)
				if s.file != "" {
					path := filepath.Join(dir, filepath.FromSlash(s.file))
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
				cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", text)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("sdk/README.md:%d: %v\n%s\n%s", s.line, err, text, out)
				}
			}
			t.Logf("built in %v", time.Since(start).Round(time.Millisecond))

			path := filepath.Join(dir, "myfilter.wasm")
			bin, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("the recipe built no myfilter.wasm: %v", err)
			}
			if sdk.maxPages != 0 {
				if pages := declaredPages(t, bin); pages > sdk.maxPages {
					t.Errorf("the module declares %d initial pages, want at most %d (sdk/README.md)", pages, sdk.maxPages)
				}
			}

			f := newFilter(t, path, wasmfilter.Config{Name: "myfilter-" + sdk.value})
			ep := newEndpoint()
			var got any
			called := 0
			ep.seen = func(inv *kernel.Invocation) {
				called++
				got, _ = inv.Attachment("x-filter")
			}
			inv := kernel.NewInvocation("sayHello", "world")
			inv.SetAttachment("token", "s3cret")
			if _, err := f.Invoke(context.Background(), ep, inv); err != nil {
				t.Fatalf("a call with a token: %v", err)
			}
			if got != sdk.value {
				t.Errorf("the provider saw x-filter = %v, want %q", got, sdk.value)
			}
			_, err = f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello", "world"))
			if kernel.CodeOf(err) != kernel.CodeForbidden || !strings.Contains(err.Error(), "no token") {
				t.Errorf("a call without a token: %v (code %v), want code forbidden and \"no token\"", err, kernel.CodeOf(err))
			}
			if called != 1 {
				t.Errorf("the provider saw %d calls, want 1 (the one with a token)", called)
			}
		})
	}
}

// missingTool skips the test, or fails it when CI is set: .ci/run installs
// every toolchain, and a missing one must not turn the test into a skip.
func missingTool(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why + ", but CI is set: .ci/run must install it")
	}
	t.Skip(why)
}

const recipeHeading = "## Start a filter in your own project"

// recipeStep is a fenced block of a recipe: a file to write (the line just
// before the block is "`PATH`:") or a ```sh block to run.
type recipeStep struct {
	file string
	text string
	line int
}

var fileMarker = regexp.MustCompile("^`([^`]+)`:$")

// readRecipes returns the recipes of sdk/README.md's recipeHeading section
// by their "### NAME" heading, each a list of steps in the README's order.
// A fenced block in a recipe that is neither a file nor ```sh fails the
// test: a file whose marker went astray would otherwise not be written.
func readRecipes(t *testing.T, readme string) map[string][]recipeStep {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string][]recipeStep{}
	var (
		in      bool   // inside recipeHeading's section
		name    string // the current recipe
		prev    string // the last non-blank line outside a block
		fence   bool
		lang    string
		start   int
		body    strings.Builder
		lineNum int
	)
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		lineNum++
		if fence {
			if strings.TrimSpace(line) == "```" {
				fence = false
				if name == "" {
					continue
				}
				step := recipeStep{text: body.String(), line: start}
				if m := fileMarker.FindStringSubmatch(prev); m != nil {
					step.file = m[1]
				} else if lang != "sh" {
					t.Fatalf("sdk/README.md:%d: a ```%s block in recipe %q with no \"`FILE`:\" line before it", start, lang, name)
				}
				recipes[name] = append(recipes[name], step)
				prev = ""
				continue
			}
			body.WriteString(line + "\n")
			continue
		}
		switch {
		case strings.HasPrefix(line, "```"):
			fence, lang, start = true, strings.TrimSpace(strings.TrimPrefix(line, "```")), lineNum
			body.Reset()
		case strings.HasPrefix(line, "## "):
			in, name = line == recipeHeading, ""
		case in && strings.HasPrefix(line, "### "):
			name = strings.TrimPrefix(line, "### ")
		case strings.TrimSpace(line) != "":
			prev = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recipes) == 0 {
		t.Fatalf("sdk/README.md has no recipes under %q", recipeHeading)
	}
	return recipes
}

// declaredPages is the initial size, in 64 KiB pages, of the module's memory.
func declaredPages(t *testing.T, bin []byte) uint32 {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cm.ExportedMemories() {
		return m.Min()
	}
	t.Fatal("the module exports no memory")
	return 0
}
