package test

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The design keeps fx and koanf in the root package and forbids init()
// functions that fill registries: the set of plugins belongs to an App.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Each layer and the imports it must not have (prefixes of import paths).
	rules := map[string][]string{
		"kernel":             {"github.com/", "go.uber.org/fx", "go.uber.org/dig", "golang.org/x/"},
		"extension":          {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins", "github.com/weftrpc/weft/cluster"},
		"proxy":              {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		"plugins":            {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		"cluster":            {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins", "github.com/weftrpc/weft/governance"},
		"governance":         {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins"},
		"transport-netty":    {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins"},
		"registry-nacos":     {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		"registry-zookeeper": {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		"mesh-xds":           {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		// The registry layer (Dubbo's RegistryProtocol) sees registries only
		// through extension.Registry: no plugin of them.
		"registry":     {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins"},
		"filters-wasm": {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		// The QoS server sees the App only through qos.App.
		"qos": {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/", "github.com/weftrpc/weft/plugins", "github.com/weftrpc/weft/cluster"},
		// Below the root, config is types and checks; the engine's parts
		// are plain packages: fx and koanf stay in the root.
		"config":   {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
		"internal": {"go.uber.org/fx", "go.uber.org/dig", "github.com/knadh/"},
	}
	// Each layer and the packages of weft it may import: an allow-list, as
	// docs/architecture.md's "may import" column says. Anything of weft
	// not listed is a layering break, whatever its name. plugins/ may
	// import one other plugin: the hessian2 serialization, which the
	// protocols, the generic and exception filters and proxy/ speak.
	const w = "github.com/weftrpc/weft/"
	allow := map[string][]string{
		"kernel":          {w + "kernel/view"},
		"extension":       {w + "kernel"},
		"transport-netty": {w + "kernel", w + "extension"},
		"cluster":         {w + "kernel", w + "extension"},
		"registry":        {w + "kernel", w + "extension", w + "cluster"},
		"proxy":           {w + "kernel", w + "extension", w + "plugins/serialization/hessian2"},
		"qos":             {w + "kernel"},
		"filters-wasm":    {w + "kernel", w + "extension"},
		"internal":        {w + "kernel", w + "extension", w + "internal/"},
		// The types of the config; each feature's own block is in the
		// feature's package.
		"config": {w + "kernel", w + "extension", w + "transport-netty", w + "qos", w + "filters-wasm", w + "plugins/filter/metrics", w + "plugins/filter/tracing"},
		// The engine (internal/engine: export, refer, join, stop, dynamic
		// config, QoS's view of the App, the MetadataService) composes
		// every layer below the root; its helpers have one role each.
		"internal/engine":       {w + "kernel", w + "extension", w + "config", w + "cluster", w + "governance", w + "registry", w + "proxy", w + "qos", w + "filters-wasm", w + "plugins/", w + "internal/"},
		"internal/builtin":      {w + "kernel", w + "extension", w + "cluster", w + "plugins/", w + "transport-netty"},
		"internal/configcenter": {w + "kernel", w + "extension", w + "config", w + "internal/optin"},
		"internal/observe":      {w + "kernel", w + "extension", w + "filters-wasm", w + "transport-netty", w + "plugins/filter/metrics", w + "plugins/protocol/dubbo"},
		"internal/tracer":       {w + "kernel", w + "extension", w + "plugins/filter/tracing"},
		"plugins":               {w + "kernel", w + "extension", w + "transport-netty", w + "proxy", w + "internal/exports", w + "plugins/serialization/hessian2"},
		"registry-nacos":        {"github.com/weftrpc/weft", w + "kernel", w + "extension", w + "registry"},
		"registry-zookeeper":    {"github.com/weftrpc/weft", w + "kernel", w + "extension", w + "registry"},
		// The mesh's registry and router: a provider URL's keys are
		// cluster's (protocols).
		"mesh-xds": {"github.com/weftrpc/weft", w + "kernel", w + "extension", w + "cluster"},
		// Rule documents build on cluster's routers and matchers; cluster
		// knows no rule document (its list above has no governance).
		"governance": {w + "kernel", w + "extension", w + "cluster", w + "registry"},
	}
	allowed := func(layer, rel, p string) bool {
		if !strings.HasPrefix(p, "github.com/weftrpc/weft") {
			return true // other modules: the deny rules above
		}
		list, ruled := allow[layer]
		if !ruled {
			return true // the root, apps/, sdk/, test/, tracing-otlp/
		}
		// Tests wire real parts: other plugins, test certificates, a
		// config center in memory, an example's generated IDL service
		// (mesh-xds' grpc-go interop).
		if strings.HasSuffix(rel, "_test.go") && (strings.HasPrefix(p, w+"plugins/") || p == w+"internal/testpki" || p == w+"internal/testcc" || strings.HasPrefix(p, w+"apps/examples/")) {
			return true
		}
		// A package's own sub-packages and its tests' own package.
		dir := "github.com/weftrpc/weft/" + filepath.ToSlash(filepath.Dir(rel))
		if p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(p, w+layer) && layer != "plugins" {
			return true
		}
		for _, a := range list {
			// "github.com/weftrpc/weft" alone is the root package, exactly.
			if p == a || a != "github.com/weftrpc/weft" && strings.HasPrefix(p, a) && (strings.HasSuffix(a, "/") || strings.HasPrefix(p, a+"/")) {
				return true
			}
		}
		return false
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		layer := parts[0]
		// internal/<x> has a rule of its own where the table gives one.
		if layer == "internal" && len(parts) > 2 {
			if _, ok := allow[layer+"/"+parts[1]]; ok {
				layer += "/" + parts[1]
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if layer == "kernel" && strings.HasSuffix(rel, "_test.go") && p == "github.com/weftrpc/weft/kernel" {
				continue
			}
			// kernel/view is part of the kernel (std lib only itself).
			if layer == "kernel" && p == "github.com/weftrpc/weft/kernel/view" {
				continue
			}
			// The layer's tests run it over a real registry (the
			// embedded one); the layer itself does not know it.
			if layer == "registry" && strings.HasSuffix(rel, "_test.go") && p == "github.com/weftrpc/weft/plugins/registry/embedded" {
				continue
			}
			for _, banned := range rules[parts[0]] {
				if strings.HasPrefix(p, banned) {
					t.Errorf("%s imports %s: the %s layer must not", rel, p, layer)
				}
			}
			// extension/ is contracts only: the standard library and
			// kernel/, no other module (a contract in another module's
			// types belongs to the feature that speaks them).
			if layer == "extension" && strings.Contains(strings.Split(p, "/")[0], ".") && !strings.HasPrefix(p, "github.com/weftrpc/weft/") {
				t.Errorf("%s imports %s: extension/ may import only the standard library and kernel/", rel, p)
			}
			if !allowed(layer, rel, p) {
				t.Errorf("%s imports %s: the %s layer may import only %s of weft (docs/architecture.md)", rel, p, layer, strings.Join(allow[layer], ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files; is the walk rooted right?", checked)
	}
}

func TestNoInitFunctions(t *testing.T) {
	root, _ := filepath.Abs("..")
	found := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		// sdk/ is guest code compiled to WASM: a Go filter registers its
		// handlers in init because a c-shared module never runs main, and
		// that registry lives in one sandboxed instance, not in weft.
		if d.IsDir() && path == filepath.Join(root, "sdk") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		found++
		// Code protoc-gen-go generates registers its messages' descriptors
		// in protobuf's own registry (what protobuf's reflection and JSON
		// need): the library's convention, not a weft registry.
		if strings.HasSuffix(path, ".pb.go") && ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s has an init function; plugins must be registered per App, not at import", path)
			}
		}
		return nil
	})
	if found == 0 {
		t.Fatal("no Go files found")
	}
}

// gofmt is part of the test command, so CI rejects unformatted code.
func TestGofmt(t *testing.T) {
	root, _ := filepath.Abs("..")
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		} else if !bytes.Equal(out, src) {
			t.Errorf("%s is not gofmt-formatted; run gofmt -w", path)
		}
		return nil
	})
}

// TestCoreDependencies: what a program using the core links (the packages
// of the core module's non-test code and what they import, `go list -deps`,
// GOWORK=off: what a program importing it gets) holds no registry client
// and no cloud SDK — they belong to the opt-in modules (registry-nacos,
// registry-zookeeper) — and does hold apache/dubbo-go-hessian2, the
// serialization weft was promised on. The module graph (`go list -m all`)
// is not the measure: dubbo-go-hessian2 → gost, a go 1.16 module whose
// requirements are not pruned, lists nacos-sdk-go there without a line of
// it being built.
func TestCoreDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the core's packages")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/nacos-group/nacos-sdk-go", "github.com/aliyun/", "github.com/alibabacloud-go/",
		"github.com/go-zookeeper/", "github.com/dubbogo/go-zookeeper",
	}
	pkgs, hessian := 0, false
	for line := range strings.Lines(string(out)) {
		pkg := strings.TrimSpace(line)
		if pkg == "" {
			continue
		}
		pkgs++
		if pkg == "github.com/apache/dubbo-go-hessian2" {
			hessian = true
		}
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("the core links %s; find the importer with: GOWORK=off go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./... | grep %s", pkg, f)
			}
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list -deps listed %d packages:\n%s", pkgs, out)
	}
	if !hessian {
		t.Errorf("the core does not link github.com/apache/dubbo-go-hessian2: the hessian2 serialization must encode and decode with it")
	}
}
