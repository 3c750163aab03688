package wasmfilter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Report is what Check found in a module.
type Report struct {
	Imports []Import
	Exports []Export
	// Version is what weft_abi_version returned; Ran says whether it could be
	// called at all (for a proxy-wasm module: whether an instance started).
	Version int32
	Ran     bool
	// ProxyWasm is the proxy-wasm ABI version a proxy-wasm module declares
	// ("" for a weft-ABI module); it is checked as such, and started as a
	// filter with CheckOptions' root id and configuration would be.
	ProxyWasm string
	// Problems lists every way the module breaks ABI v1; none means valid.
	Problems []string
}

// Valid reports whether the module can be loaded as a filter.
func (r *Report) Valid() bool { return len(r.Problems) == 0 }

// Check validates a module against ABI v1 as a filter would load it: it
// compiles it, checks its imports and exports, then starts one instance the
// way a filter does (the same code: start function, _initialize and
// weft_abi_version under DefaultInitTimeout, memory capped at
// DefaultMaxMemoryPages, host functions answering as in an App's start-up,
// get_config with {}) and checks the version it reports.
func Check(ctx context.Context, wasm []byte) *Report {
	return CheckWith(ctx, wasm, CheckOptions{})
}

// CheckOptions are what a proxy-wasm module is started with by CheckWith:
// its plugin_root_id and plugin configuration, as a filter's root_id and
// configuration give them (SDKs that register root contexts by id refuse
// to start without theirs).
type CheckOptions struct {
	RootID        string
	Configuration []byte
}

// CheckWith is Check with the root id and configuration a proxy-wasm module
// is started with.
func CheckWith(ctx context.Context, wasm []byte, o CheckOptions) *Report {
	r := &Report{}
	f := &Filter{name: "check", path: "the module", timeout: DefaultTimeout, initTimeout: DefaultInitTimeout,
		maxPages: DefaultMaxMemoryPages, maxIdle: 1, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		counters: NewCounters(), shared: NewSharedData(), config: []byte("{}"), modCfg: sandboxConfig()}
	f.warns.every = DefaultWarnInterval
	f.host, f.members, f.rootCtx = f, []*Filter{f}, 1
	f.starting, f.stopStarting = context.WithCancel(ctx)
	defer f.stopStarting()
	f.rt = newRuntime(ctx, f.maxPages)
	defer f.rt.Close(ctx)
	cm, err := f.rt.CompileModule(ctx, wasm)
	if err != nil {
		r.Problems = append(r.Problems, "does not compile: "+err.Error())
		return r
	}
	if r.ProxyWasm = pwVersion(cm); r.ProxyWasm != "" {
		f.pw = &pwConfig{rootID: o.RootID, config: o.Configuration}
	}
	wasi, err := instantiateHost(ctx, f.rt, f)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	if f.pw != nil {
		r.Imports, r.Exports, r.Problems = pwStaticReport(cm, wasi)
	} else {
		r.Imports, r.Exports, r.Problems = staticReport(cm, wasi)
	}
	if len(r.Problems) > 0 {
		return r
	}
	v := &version{f: f, cm: cm, seq: 1, config: f.config, live: 1, creating: 1, pwABI: r.ProxyWasm}
	in, err := v.instantiate()
	var ve *versionError
	switch {
	case err == nil && f.pw != nil:
		r.Ran = true
		in.close()
	case err == nil:
		r.Ran, r.Version = true, ABIVersion
		in.close()
	case errors.As(err, &ve):
		r.Ran, r.Version = true, ve.got
		r.Problems = append(r.Problems, err.Error())
	default:
		r.Problems = append(r.Problems, err.Error())
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
	switch {
	case r.ProxyWasm != "" && r.Ran:
		fmt.Fprintf(w, "abi: proxy-wasm %s (started: _initialize/main, proxy_on_vm_start, the root context and proxy_on_configure)\n", r.ProxyWasm)
	case r.ProxyWasm != "":
		fmt.Fprintf(w, "abi: proxy-wasm %s (not started)\n", r.ProxyWasm)
	case r.Ran:
		fmt.Fprintf(w, "abi version: %d\n", r.Version)
	default:
		fmt.Fprintln(w, "abi version: not run")
	}
	if r.Valid() && r.ProxyWasm != "" {
		fmt.Fprintf(w, "verdict: valid (proxy-wasm ABI %s; configure it with abi: proxy-wasm)\n", r.ProxyWasm)
		return
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
