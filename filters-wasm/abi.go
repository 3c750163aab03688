package wasmfilter

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ABIVersion is the version of sdk/ABI.md this host implements; a module's
// weft_abi_version must return it.
const ABIVersion = 1

// HostModule is the import module of the host functions.
const HostModule = "weft"

// WASIModule is the import module of the WASI functions the host provides.
const WASIModule = "wasi_snapshot_preview1"

// Names of the guest's exports (ABI.md, "What the guest exports").
const (
	exportMemory     = "memory"
	exportVersion    = "weft_abi_version"
	exportAlloc      = "weft_alloc"
	exportOnRequest  = "weft_on_request"
	exportOnResponse = "weft_on_response"
	exportInitialize = "_initialize"
)

// Status codes of host functions that return data.
const (
	statusOK          = 0
	statusNotFound    = 1
	statusBadArgument = 2
	statusAllocFailed = 3
)

// Actions returned by the guest's callbacks.
const (
	actionContinue = 0
	actionReject   = 1
)

type signature struct {
	params, results []api.ValueType
}

func (s signature) String() string {
	return "(" + typeList(s.params) + ") -> (" + typeList(s.results) + ")"
}

func typeList(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return strings.Join(names, ", ")
}

func (s signature) matches(params, results []api.ValueType) bool {
	return equalTypes(s.params, params) && equalTypes(s.results, results)
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64

	sigOut  = signature{[]api.ValueType{i32, i32}, []api.ValueType{i32}}
	sigKey  = signature{[]api.ValueType{i32, i32}, []api.ValueType{i32}}
	sigKV   = signature{[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}}
	sigMsg  = signature{[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}}
	sigCtr  = signature{[]api.ValueType{i32, i32, i64, i64}, []api.ValueType{i64}}
	sigNow  = signature{nil, []api.ValueType{i64}}
	sigVoid = signature{nil, nil}
	sigI32  = signature{nil, []api.ValueType{i32}}
	sigArgs = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
)

// hostSignatures is the table of ABI.md's host functions: every import from
// module "weft" must name one of them with exactly this signature.
var hostSignatures = map[string]signature{
	"get_service":        sigOut,
	"get_method":         sigOut,
	"get_side":           sigOut,
	"get_arguments":      sigOut,
	"get_remote_address": sigOut,
	"get_config":         sigOut,
	"get_result":         sigOut,
	"get_error":          sigOut,
	"get_attachment":     sigKV,
	"set_attachment":     sigKV,
	"remove_attachment":  sigKey,
	"reject":             sigMsg,
	"log":                sigMsg,
	"counter_add":        sigCtr,
	"now_ms":             sigNow,
}

// guestExports lists the exports the host looks for, with their signature and
// whether a module must have them.
var guestExports = []struct {
	name     string
	sig      signature
	required bool
}{
	{exportVersion, sigI32, true},
	{exportAlloc, sigArgs, true},
	{exportOnRequest, sigI32, false}, // a filter's (or weft_on_call: staticReport)
	{exportOnCall, sigI32, false},
	{exportOnResponse, sigI32, false},
	{exportInitialize, sigVoid, false},
	{exportOnTick, sigVoid, false},
	{exportOnQueueReady, sigQueueCB, false},
}

// Import is one function a module imports, as Check reports it.
type Import struct {
	Module, Name string
	Signature    string
	// Problem is empty when the host provides the function with this
	// signature.
	Problem string
}

// Export is one export of a module, as Check reports it.
type Export struct {
	Name string
	// Kind is "func" or "memory".
	Kind      string
	Signature string
	// Role says what the ABI uses it for ("" for exports the ABI ignores).
	Role    string
	Problem string
}

// staticReport checks a compiled module's imports and exports against ABI v1
// without running it. wasi lists the WASI functions the host provides (name to
// definition).
func staticReport(cm wazero.CompiledModule, wasi map[string]api.FunctionDefinition) (imports []Import, exports []Export, problems []string) {
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		im := Import{Module: mod, Name: name, Signature: signature{d.ParamTypes(), d.ResultTypes()}.String()}
		switch mod {
		case HostModule:
			want, ok := hostSignatures[name]
			if c, v11 := capHostFunctions[name]; v11 {
				want, ok = c.sig, true
			}
			switch {
			case !ok:
				im.Problem = fmt.Sprintf("weft has no host function %q (ABI v1.1 has: %s)", name, strings.Join(hostNames(), ", "))
			case !want.matches(d.ParamTypes(), d.ResultTypes()):
				im.Problem = fmt.Sprintf("wrong signature: ABI v1 declares %s %s", name, want)
			}
		case WASIModule:
			w, ok := wasi[name]
			switch {
			case !ok:
				im.Problem = "wazero's " + WASIModule + " has no function " + name
			case !equalTypes(w.ParamTypes(), d.ParamTypes()) || !equalTypes(w.ResultTypes(), d.ResultTypes()):
				im.Problem = fmt.Sprintf("wrong signature: %s.%s is %s", WASIModule, name, signature{w.ParamTypes(), w.ResultTypes()})
			}
		default:
			im.Problem = fmt.Sprintf("module %q is not provided: a filter may import only from %q and %q", mod, HostModule, WASIModule)
		}
		if im.Problem != "" {
			problems = append(problems, fmt.Sprintf("import %s.%s: %s", mod, name, im.Problem))
		}
		imports = append(imports, im)
	}
	imports, problems = importedMemories(cm, imports, problems)

	funcs := cm.ExportedFunctions()
	mems := cm.ExportedMemories()
	roles := map[string]string{
		exportVersion:      "ABI version (required)",
		exportAlloc:        "allocator for data the host returns (required)",
		exportOnRequest:    "request callback (a filter's)",
		exportOnCall:       "call handler (a service's, v1.2)",
		exportOnResponse:   "response callback (optional)",
		exportInitialize:   "reactor initialisation, run once per instance (optional)",
		exportOnTick:       "tick callback, after set_tick_period (optional, v1.1)",
		exportOnQueueReady: "queue callback, after queue_register (optional, v1.1)",
	}
	for name := range mems {
		e := Export{Name: name, Kind: "memory", Signature: "memory"}
		if name == exportMemory {
			e.Role = "linear memory (required)"
		}
		exports = append(exports, e)
	}
	if _, ok := mems[exportMemory]; !ok {
		problems = append(problems, `missing export "memory": the module must export its linear memory as "memory"`)
	}
	for name, d := range funcs {
		exports = append(exports, Export{Name: name, Kind: "func",
			Signature: signature{d.ParamTypes(), d.ResultTypes()}.String(), Role: roles[name]})
	}
	sort.Slice(exports, func(i, j int) bool { return exports[i].Name < exports[j].Name })
	for _, want := range guestExports {
		d, ok := funcs[want.name]
		if !ok {
			if want.required {
				problems = append(problems, fmt.Sprintf("missing export %q %s", want.name, want.sig))
			}
			continue
		}
		if !want.sig.matches(d.ParamTypes(), d.ResultTypes()) {
			p := fmt.Sprintf("export %q has signature %s, ABI v1 wants %s", want.name,
				signature{d.ParamTypes(), d.ResultTypes()}, want.sig)
			for i := range exports {
				if exports[i].Name == want.name {
					exports[i].Problem = p
				}
			}
			problems = append(problems, p)
		}
	}
	if funcs[exportOnRequest] == nil && funcs[exportOnCall] == nil {
		problems = append(problems, fmt.Sprintf("missing export %q %s (a filter's request callback), or %q %s (a service's call handler)",
			exportOnRequest, sigI32, exportOnCall, sigI32))
	}
	return imports, exports, problems
}

func hostNames() []string {
	names := make([]string, 0, len(hostSignatures)+len(capHostFunctions))
	for n := range hostSignatures {
		names = append(names, n)
	}
	for n := range capHostFunctions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// importedMemories reports each memory the module imports as a problem: both
// ABIs need the guest to define and export its own.
func importedMemories(cm wazero.CompiledModule, imports []Import, problems []string) ([]Import, []string) {
	for _, d := range cm.ImportedMemories() {
		mod, name, _ := d.Import()
		im := Import{Module: mod, Name: name, Signature: "memory",
			Problem: "imported memory: the module must define and export its own memory"}
		problems = append(problems, fmt.Sprintf("import %s.%s: %s", mod, name, im.Problem))
		imports = append(imports, im)
	}
	return imports, problems
}
