package wasmfilter

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// Report is what Check found in a module.
type Report struct {
	Imports []Import
	Exports []Export
	// Version is what weft_abi_version returned; Ran says whether it could be
	// called at all.
	Version int32
	Ran     bool
	// Problems lists every way the module breaks ABI v1; none means valid.
	Problems []string
}

// Valid reports whether the module can be loaded as a filter.
func (r *Report) Valid() bool { return len(r.Problems) == 0 }

// Check validates a module against ABI v1 as a filter would load it: it
// compiles it, checks its imports and exports, then instantiates it in the
// same sandbox (memory capped at DefaultMaxMemoryPages, DefaultInitTimeout
// for _initialize and weft_abi_version) and checks the version it reports.
func Check(ctx context.Context, wasm []byte) *Report {
	r := &Report{}
	rt := newRuntime(ctx, DefaultMaxMemoryPages)
	defer rt.Close(ctx)
	wasi, err := instantiateHost(ctx, rt, nil)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		r.Problems = append(r.Problems, "does not compile: "+err.Error())
		return r
	}
	r.Imports, r.Exports, r.Problems = staticReport(cm, wasi)
	if len(r.Problems) > 0 {
		return r
	}
	mod, err := rt.InstantiateModule(ctx, cm, sandboxConfig())
	if err != nil {
		r.Problems = append(r.Problems, "instantiate: "+guestErr(err).Error())
		return r
	}
	cctx, cancel := context.WithTimeout(ctx, DefaultInitTimeout)
	defer cancel()
	if init := mod.ExportedFunction(exportInitialize); init != nil {
		if _, err := init.Call(cctx); err != nil {
			r.Problems = append(r.Problems, "_initialize: "+guestErr(explainCtx(cctx, err, DefaultInitTimeout)).Error())
			return r
		}
	}
	res, err := mod.ExportedFunction(exportVersion).Call(cctx)
	if err != nil {
		r.Problems = append(r.Problems, "weft_abi_version: "+guestErr(explainCtx(cctx, err, DefaultInitTimeout)).Error())
		return r
	}
	r.Ran, r.Version = true, api.DecodeI32(res[0])
	if r.Version != ABIVersion {
		r.Problems = append(r.Problems, fmt.Sprintf("weft_abi_version returned %d; this host implements ABI version %d", r.Version, ABIVersion))
	}
	return r
}

// Print writes the report for a person: imports, exports, version, verdict.
func (r *Report) Print(w io.Writer, name string) {
	fmt.Fprintf(w, "module %s\n", name)
	fmt.Fprintf(w, "imports (%d):\n", len(r.Imports))
	for _, im := range r.Imports {
		status := "ok"
		if im.Problem != "" {
			status = "PROBLEM: " + im.Problem
		}
		line(w, im.Module+"."+im.Name, im.Signature, status)
	}
	fmt.Fprintf(w, "exports (%d):\n", len(r.Exports))
	for _, e := range r.Exports {
		note := e.Role
		if e.Problem != "" {
			note = "PROBLEM: " + e.Problem
		}
		line(w, e.Name, e.Signature, note)
	}
	if r.Ran {
		fmt.Fprintf(w, "abi version: %d\n", r.Version)
	} else {
		fmt.Fprintln(w, "abi version: not run")
	}
	if r.Valid() {
		fmt.Fprintf(w, "verdict: valid (weft WASM ABI v%d)\n", ABIVersion)
		return
	}
	fmt.Fprintf(w, "verdict: INVALID (%d problem(s)):\n  - %s\n", len(r.Problems), strings.Join(r.Problems, "\n  - "))
}

func line(w io.Writer, name, sig, note string) {
	fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-45s %-32s %s", name, sig, note), " "))
}
