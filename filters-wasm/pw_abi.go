package wasmfilter

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The proxy-wasm ABI (github.com/proxy-wasm/spec, abi-versions/v0.2.1), the
// ABI of the WASM filters Envoy, Istio, Kong and MOSN run. weft hosts it
// beside its own (sdk/ABI.md): a filter whose config says `abi: proxy-wasm`
// sees each call as Envoy presents a gRPC request (docs/wasm.md). Modules
// exporting proxy_abi_version_0_2_1, _0_2_0 or _0_1_0 are accepted, as Kong's
// ngx_wasm_module does: the host module holds the union of the three
// versions' functions, and the version marker picks the callbacks' shapes
// where they differ (0.1.0's header callbacks have no end_of_stream).

// ABI names of FilterSettings.ABI.
const (
	ABIWeft      = "weft"
	ABIProxyWasm = "proxy-wasm"
)

// ProxyWasmModule is the import module of proxy-wasm's host functions.
const ProxyWasmModule = "env"

// wasiUnstable is the pre-snapshot name of WASI some proxy-wasm SDKs import
// (AssemblyScript's proxy-runtime: wasi_unstable.proc_exit); wazero's
// snapshot_preview1 functions are exported under it too.
const wasiUnstable = "wasi_unstable"

// The ABI versions a module declares by exporting a marker function.
const (
	pwABI010 = "0.1.0"
	pwABI020 = "0.2.0"
	pwABI021 = "0.2.1"
)

var pwVersionMarkers = map[string]string{
	"proxy_abi_version_0_2_1": pwABI021,
	"proxy_abi_version_0_2_0": pwABI020,
	"proxy_abi_version_0_1_0": pwABI010,
}

// proxy_status_t.
const (
	pwOK                  = 0
	pwNotFound            = 1
	pwBadArgument         = 2
	pwSerializationFail   = 3
	pwParseFailure        = 4
	pwInvalidMemoryAccess = 6
	pwEmpty               = 7
	pwCasMismatch         = 8
	pwInternalFailure     = 10
	pwUnimplemented       = 12
)

// proxy_action_t: a callback's answer. cpp-host (Envoy) reads 0 and 2
// (ContinueAndEndStream) as going on and anything else as stopping.
const (
	pwContinue          = 0
	pwPause             = 1
	pwContinueAndEndStr = 2
)

// proxy_buffer_type_t.
const (
	pwBufRequestBody     = 0
	pwBufResponseBody    = 1
	pwBufHTTPCallBody    = 4
	pwBufVMConfiguration = 6
	pwBufPluginConfig    = 7
)

// proxy_map_type_t.
const (
	pwMapRequestHeaders   = 0
	pwMapRequestTrailers  = 1
	pwMapResponseHeaders  = 2
	pwMapResponseTrailers = 3
	pwMapCallHeaders      = 6
	pwMapCallTrailers     = 7
)

// proxy_stream_type_t.
const (
	pwStreamRequest  = 0
	pwStreamResponse = 1
)

// Bounds of a serialized header map the host reads from a guest, cpp-host's
// (PROXY_WASM_HOST_PAIRS_MAX_*): past them PARSE_FAILURE.
const (
	pwMaxPairs      = 1024
	pwMaxPairsBytes = 1 << 20
)

// The guest's exports the host calls (the callbacks), with their shapes in
// 0.2.x. proxy_on_request_headers and proxy_on_response_headers take two
// parameters in 0.1.0 (no end_of_stream).
const (
	pwOnMemoryAllocate   = "proxy_on_memory_allocate"
	pwMalloc             = "malloc"
	pwOnContextCreate    = "proxy_on_context_create"
	pwOnVMStart          = "proxy_on_vm_start"
	pwOnConfigure        = "proxy_on_configure"
	pwOnRequestHeaders   = "proxy_on_request_headers"
	pwOnRequestBody      = "proxy_on_request_body"
	pwOnGRPCInitial      = "proxy_on_grpc_receive_initial_metadata"
	pwOnGRPCReceive      = "proxy_on_grpc_receive"
	pwOnGRPCTrailing     = "proxy_on_grpc_receive_trailing_metadata"
	pwOnGRPCClose        = "proxy_on_grpc_close"
	pwOnResponseBody     = "proxy_on_response_body"
	pwOnResponseHeaders  = "proxy_on_response_headers"
	pwOnResponseTrailers = "proxy_on_response_trailers"
	pwOnDone             = "proxy_on_done"
	pwOnLog              = "proxy_on_log"
	pwOnDelete           = "proxy_on_delete"
	pwOnTick             = "proxy_on_tick"
	pwOnHTTPCallResponse = "proxy_on_http_call_response"
	pwOnQueueReady       = "proxy_on_queue_ready"
	pwStart              = "_start"
	pwMain               = "main"
	pwMainVoid           = "__main_void"
)

func sig(params []api.ValueType, results ...api.ValueType) signature {
	return signature{params: params, results: results}
}

func i32s(n int) []api.ValueType {
	ts := make([]api.ValueType, n)
	for i := range ts {
		ts[i] = i32
	}
	return ts
}

// pwCallbacks are the callbacks' signatures (0.2.x); a module exporting one
// with another signature is refused at load, naming it.
var pwCallbacks = map[string]signature{
	pwOnMemoryAllocate:   sig(i32s(1), i32),
	pwMalloc:             sig(i32s(1), i32),
	pwOnContextCreate:    sig(i32s(2)),
	pwOnVMStart:          sig(i32s(2), i32),
	pwOnConfigure:        sig(i32s(2), i32),
	pwOnRequestHeaders:   sig(i32s(3), i32),
	pwOnResponseHeaders:  sig(i32s(3), i32),
	pwOnResponseTrailers: sig(i32s(2), i32),
	pwOnDone:             sig(i32s(1), i32),
	pwOnLog:              sig(i32s(1)),
	pwOnDelete:           sig(i32s(1)),
	pwOnTick:             sig(i32s(1)),
	pwOnHTTPCallResponse: sig(i32s(5)),
	pwOnQueueReady:       sig(i32s(2)),
	pwOnRequestBody:      sig(i32s(3), i32),
	pwOnGRPCInitial:      sig(i32s(3)),
	pwOnGRPCReceive:      sig(i32s(3)),
	pwOnGRPCTrailing:     sig(i32s(3)),
	pwOnGRPCClose:        sig(i32s(3)),
	pwOnResponseBody:     sig(i32s(3), i32),
}

// pwHostSignatures are the host functions of module env: the union of ABI
// 0.1.0, 0.2.0 and 0.2.1. Every one returns proxy_status_t.
var pwHostSignatures = map[string]signature{
	"proxy_log":                          sig(i32s(3), i32),
	"proxy_get_log_level":                sig(i32s(1), i32),
	"proxy_get_current_time_nanoseconds": sig(i32s(1), i32),
	"proxy_set_tick_period_milliseconds": sig(i32s(1), i32),
	"proxy_get_buffer_bytes":             sig(i32s(5), i32),
	"proxy_get_buffer_status":            sig(i32s(3), i32),
	"proxy_set_buffer_bytes":             sig(i32s(5), i32),
	"proxy_get_header_map_pairs":         sig(i32s(3), i32),
	"proxy_set_header_map_pairs":         sig(i32s(3), i32),
	"proxy_get_header_map_size":          sig(i32s(2), i32),
	"proxy_get_header_map_value":         sig(i32s(5), i32),
	"proxy_add_header_map_value":         sig(i32s(5), i32),
	"proxy_replace_header_map_value":     sig(i32s(5), i32),
	"proxy_remove_header_map_value":      sig(i32s(3), i32),
	"proxy_continue_stream":              sig(i32s(1), i32),
	"proxy_close_stream":                 sig(i32s(1), i32),
	"proxy_continue_request":             sig(nil, i32),
	"proxy_continue_response":            sig(nil, i32),
	"proxy_clear_route_cache":            sig(nil, i32),
	"proxy_get_configuration":            sig(i32s(2), i32),
	"proxy_send_local_response":          sig(i32s(8), i32),
	"proxy_http_call":                    sig(i32s(10), i32),
	"proxy_grpc_call":                    sig(i32s(12), i32),
	"proxy_grpc_stream":                  sig(i32s(9), i32),
	"proxy_grpc_send":                    sig(i32s(4), i32),
	"proxy_grpc_cancel":                  sig(i32s(1), i32),
	"proxy_grpc_close":                   sig(i32s(1), i32),
	"proxy_get_status":                   sig(i32s(3), i32),
	"proxy_set_shared_data":              sig(i32s(5), i32),
	"proxy_get_shared_data":              sig(i32s(5), i32),
	"proxy_register_shared_queue":        sig(i32s(3), i32),
	"proxy_resolve_shared_queue":         sig(i32s(5), i32),
	"proxy_enqueue_shared_queue":         sig(i32s(3), i32),
	"proxy_dequeue_shared_queue":         sig(i32s(3), i32),
	"proxy_define_metric":                sig(i32s(4), i32),
	"proxy_increment_metric":             sig([]api.ValueType{i32, i64}, i32),
	"proxy_record_metric":                sig([]api.ValueType{i32, i64}, i32),
	"proxy_get_metric":                   sig(i32s(2), i32),
	"proxy_get_property":                 sig(i32s(4), i32),
	"proxy_set_property":                 sig(i32s(4), i32),
	"proxy_set_effective_context":        sig(i32s(1), i32),
	"proxy_done":                         sig(nil, i32),
	"proxy_call_foreign_function":        sig(i32s(6), i32),
}

// pwVersion is the proxy-wasm ABI version a compiled module declares, ""
// when it exports no marker.
func pwVersion(cm wazero.CompiledModule) string {
	best := ""
	for name := range cm.ExportedFunctions() {
		if v, ok := pwVersionMarkers[name]; ok && v > best {
			best = v
		}
	}
	return best
}

// pwStaticReport checks a compiled module against the proxy-wasm ABI: a
// version marker, memory, an allocator, the callbacks' signatures, and
// imports the host provides with the signatures it provides.
func pwStaticReport(cm wazero.CompiledModule, wasi map[string]api.FunctionDefinition) (imports []Import, exports []Export, problems []string) {
	version := pwVersion(cm)
	if version == "" {
		problems = append(problems, "no proxy_abi_version_0_2_1, _0_2_0 or _0_1_0 export: not a proxy-wasm module (a weft-ABI module is configured with abi: weft, the default)")
	}
	if len(cm.ExportedMemories()) == 0 {
		problems = append(problems, "the module exports no memory")
	}
	fns := cm.ExportedFunctions()
	if fns[pwOnMemoryAllocate] == nil && fns[pwMalloc] == nil {
		problems = append(problems, "the module exports neither proxy_on_memory_allocate nor malloc: the host cannot hand it data")
	}
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := fns[n]
		e := Export{Name: n, Kind: "func", Signature: sig(d.ParamTypes(), d.ResultTypes()...).String()}
		want, known := pwCallbacks[n]
		if (n == pwOnRequestHeaders || n == pwOnResponseHeaders) && version == pwABI010 {
			want = sig(i32s(2), i32)
		}
		switch {
		case known && !want.matches(d.ParamTypes(), d.ResultTypes()):
			e.Problem = fmt.Sprintf("has signature %s, want %s (proxy-wasm ABI %s)", e.Signature, want, version)
			problems = append(problems, n+" "+e.Problem)
		case known:
			e.Role = "proxy-wasm callback"
		case pwVersionMarkers[n] != "":
			e.Role = "proxy-wasm ABI " + pwVersionMarkers[n]
		case strings.HasPrefix(n, "proxy_on_"):
			e.Role = "proxy-wasm callback (not called by weft)"
		}
		exports = append(exports, e)
	}
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		im := Import{Module: mod, Name: name, Signature: sig(d.ParamTypes(), d.ResultTypes()...).String()}
		var want signature
		var ok bool
		switch mod {
		case ProxyWasmModule:
			want, ok = pwHostSignatures[name]
		case WASIModule, wasiUnstable:
			if w := wasi[name]; w != nil {
				want, ok = sig(w.ParamTypes(), w.ResultTypes()...), true
			}
		}
		switch {
		case !ok:
			im.Problem = "not provided by weft's proxy-wasm host"
		case !want.matches(d.ParamTypes(), d.ResultTypes()):
			im.Problem = fmt.Sprintf("weft provides it as %s", want)
		}
		if im.Problem != "" {
			problems = append(problems, fmt.Sprintf("import %s.%s %s: %s", mod, name, im.Signature, im.Problem))
		}
		imports = append(imports, im)
	}
	imports, problems = importedMemories(cm, imports, problems)
	return imports, exports, problems
}
