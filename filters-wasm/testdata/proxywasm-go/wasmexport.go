//go:build ignore

// wasmexport rewrites a copy of proxy-wasm-go-sdk's proxywasm/internal
// package (v0.24.0, written for TinyGo) so that Go's own compiler builds it
// for GOOS=wasip1 -buildmode=c-shared. The filters' code and the SDK's
// public API stay as they are; only the ABI glue changes:
//
//   - the `//export proxy_on_*` pragmas of abi_callback_*.go are removed and
//     zz_wasip1_exports.go holds a `//go:wasmexport` wrapper for each, with
//     int32/uint32 where the SDK says int/uint (TinyGo's int is 32 bits,
//     gc's wasm int is 64, and the ABI's values are i32);
//   - zz_wasip1_hostcalls.go declares each host function of abi_hostcalls.go
//     (TinyGo-only there) with `//go:wasmimport env proxy_*` on int32 and
//     unsafe.Pointer, under the SDK's own name and signature; an out
//     parameter **byte or *int is zeroed first, since the host writes only
//     its low 32 bits;
//   - abi_hostcalls_mock.go, the SDK's host for native unit tests, is left
//     out of wasip1 builds;
//   - `main` is exported: c-shared never runs main.main, where filters call
//     proxywasm.SetVMContext, so the host calls main(0, 0) after
//     _initialize, as proxy-wasm-cpp-host does for WASI reactors.
//
// Usage: go run wasmexport.go DIR   (DIR: the copy's proxywasm/internal)
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run wasmexport.go SDKCOPY/proxywasm/internal")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "wasmexport:", err)
		os.Exit(1)
	}
}

var exportLine = regexp.MustCompile(`(?m)^//export (proxy_\w+)\n`)

func run(dir string) error {
	fset := token.NewFileSet()
	callbacks, err := filepath.Glob(filepath.Join(dir, "abi_callback_*.go"))
	if err != nil {
		return err
	}
	var exports bytes.Buffer
	imports := map[string]bool{}
	n := 0
	for _, path := range callbacks {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			imports[imp.Path.Value] = true
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil {
				continue
			}
			name := exported(fd.Doc)
			if name == "" {
				continue
			}
			writeExport(&exports, fset, name, fd)
			n++
		}
		if err := os.WriteFile(path, exportLine.ReplaceAll(src, nil), 0o644); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("no //export pragmas in %s/abi_callback_*.go: not proxy-wasm-go-sdk v0.24.0's layout", dir)
	}
	exports.WriteString(`
//go:linkname mainMain main.main
func mainMain()

// main(argc, argv) runs the filter's main.main, which registers its VM
// context; the host calls it once after _initialize.
//
//go:wasmexport main
func wasmexportMain(int32, int32) int32 {
	mainMain()
	return 0
}
`)
	imports[`"unsafe"`] = true
	if err := writeGo(filepath.Join(dir, "zz_wasip1_exports.go"), imports, exports.Bytes()); err != nil {
		return err
	}

	hostPath := filepath.Join(dir, "abi_hostcalls.go")
	f, err := parser.ParseFile(fset, hostPath, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	var hosts bytes.Buffer
	m := 0
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Doc == nil || fd.Body != nil {
			continue
		}
		name := exported(fd.Doc)
		if name == "" {
			continue
		}
		writeImport(&hosts, fset, name, fd)
		m++
	}
	if m == 0 {
		return fmt.Errorf("no host functions in %s", hostPath)
	}
	if err := writeGo(filepath.Join(dir, "zz_wasip1_hostcalls.go"), map[string]bool{`"unsafe"`: true}, hosts.Bytes()); err != nil {
		return err
	}

	mockPath := filepath.Join(dir, "abi_hostcalls_mock.go")
	mock, err := os.ReadFile(mockPath)
	if err != nil {
		return err
	}
	fixed := bytes.Replace(mock, []byte("//go:build !tinygo\n"), []byte("//go:build !tinygo && !wasip1\n"), 1)
	if bytes.Equal(fixed, mock) {
		return fmt.Errorf("%s has no `//go:build !tinygo` line", mockPath)
	}
	fmt.Printf("wasmexport: %d callbacks exported, %d host functions imported\n", n, m)
	return os.WriteFile(mockPath, fixed, 0o644)
}

func exported(doc *ast.CommentGroup) string {
	for _, c := range doc.List {
		if name, ok := strings.CutPrefix(c.Text, "//export "); ok {
			return strings.TrimSpace(name)
		}
	}
	return ""
}

type param struct{ name, typ string }

func params(fset *token.FileSet, fl *ast.FieldList) []param {
	var ps []param
	if fl == nil {
		return ps
	}
	for i, field := range fl.List {
		typ := expr(fset, field.Type)
		if len(field.Names) == 0 {
			ps = append(ps, param{fmt.Sprintf("r%d", i), typ})
		}
		for _, id := range field.Names {
			name := id.Name
			if name == "_" {
				name = fmt.Sprintf("p%d", len(ps))
			}
			ps = append(ps, param{name, typ})
		}
	}
	return ps
}

func expr(fset *token.FileSet, e ast.Expr) string {
	var b bytes.Buffer
	printer.Fprint(&b, fset, e)
	return b.String()
}

// abiType is the type a wasmexport/wasmimport signature may carry for an
// SDK type, and how a value converts to and from it.
func abiType(typ string) string {
	switch typ {
	case "int":
		return "int32"
	case "uint":
		return "uint32"
	}
	if strings.HasPrefix(typ, "*") {
		return "unsafe.Pointer"
	}
	return typ
}

func writeExport(b *bytes.Buffer, fset *token.FileSet, name string, fd *ast.FuncDecl) {
	ps := params(fset, fd.Type.Params)
	rs := params(fset, fd.Type.Results)
	var decl, args []string
	for _, p := range ps {
		decl = append(decl, p.name+" "+abiType(p.typ))
		if abiType(p.typ) != p.typ {
			args = append(args, p.typ+"("+p.name+")")
		} else {
			args = append(args, p.name)
		}
	}
	call := fd.Name.Name + "(" + strings.Join(args, ", ") + ")"
	fmt.Fprintf(b, "\n//go:wasmexport %s\nfunc wasmexport_%s(%s)", name, name, strings.Join(decl, ", "))
	switch len(rs) {
	case 0:
		fmt.Fprintf(b, " {\n\t%s\n}\n", call)
	case 1:
		rt := abiType(rs[0].typ)
		if rt != rs[0].typ {
			call = rt + "(" + call + ")"
		}
		fmt.Fprintf(b, " %s {\n\treturn %s\n}\n", rt, call)
	}
}

func writeImport(b *bytes.Buffer, fset *token.FileSet, name string, fd *ast.FuncDecl) {
	ps := params(fset, fd.Type.Params)
	rs := params(fset, fd.Type.Results)
	var decl, sig, args, zero []string
	for _, p := range ps {
		decl = append(decl, p.name+" "+abiType(p.typ))
		sig = append(sig, p.name+" "+p.typ)
		switch {
		case p.typ == "**byte":
			zero = append(zero, "*"+p.name+" = nil")
			args = append(args, "unsafe.Pointer("+p.name+")")
		case p.typ == "*int":
			zero = append(zero, "*"+p.name+" = 0")
			args = append(args, "unsafe.Pointer("+p.name+")")
		case strings.HasPrefix(p.typ, "*"):
			args = append(args, "unsafe.Pointer("+p.name+")")
		case abiType(p.typ) != p.typ:
			args = append(args, abiType(p.typ)+"("+p.name+")")
		default:
			args = append(args, p.name)
		}
	}
	ret := ""
	if len(rs) == 1 {
		ret = " " + rs[0].typ
	}
	fmt.Fprintf(b, "\n//go:wasmimport env %s\nfunc wasmimport_%s(%s)%s\n", name, name, strings.Join(decl, ", "), ret)
	fmt.Fprintf(b, "\nfunc %s(%s)%s {\n", fd.Name.Name, strings.Join(sig, ", "), ret)
	for _, z := range zero {
		fmt.Fprintf(b, "\t%s\n", z)
	}
	call := "wasmimport_" + name + "(" + strings.Join(args, ", ") + ")"
	if ret != "" {
		call = "return " + call
	}
	fmt.Fprintf(b, "\t%s\n}\n", call)
}

func writeGo(path string, imports map[string]bool, body []byte) error {
	var b bytes.Buffer
	b.WriteString("// Code generated by weft's wasmexport.go from proxy-wasm-go-sdk's TinyGo pragmas. DO NOT EDIT.\n\n")
	b.WriteString("//go:build wasip1 && !tinygo\n\npackage internal\n\nimport (\n")
	var list []string
	for imp := range imports {
		list = append(list, imp)
	}
	sort.Strings(list)
	for _, imp := range list {
		// Only the packages the signatures name (types.Action ...).
		pkg := strings.Trim(imp, `"`)
		pkg = pkg[strings.LastIndex(pkg, "/")+1:]
		if pkg == "unsafe" || bytes.Contains(body, []byte(pkg+".")) {
			b.WriteString("\t" + imp + "\n")
		}
	}
	b.WriteString(")\n\nvar _ unsafe.Pointer\n")
	b.Write(body)
	out, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", path, err, b.Bytes())
	}
	return os.WriteFile(path, out, 0o644)
}
