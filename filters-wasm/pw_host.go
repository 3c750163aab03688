package wasmfilter

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// pwHostModule builds module env, the proxy-wasm host functions, for f's
// runtime. Functions weft does not implement yet answer UNIMPLEMENTED, as
// cpp-host's stubs do, so that a module importing them loads and learns at
// run time that the capability is missing.
func pwHostModule(rt wazero.Runtime, f *Filter) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(ProxyWasmModule)
	h := &host{f: f}
	defined := map[string]bool{}
	def := func(name string, fn func(h *host, in *instance, ctx context.Context, s []uint64)) {
		sg := pwHostSignatures[name]
		defined[name] = true
		if f != nil && f.pw != nil && !f.pw.allows(name) {
			// Not in allowed_capabilities (Envoy's capability
			// restriction): the guest gets INTERNAL_FAILURE, the log a
			// line naming the call.
			b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, s []uint64) {
				f.warn(warnRefused, "weft: proxy-wasm filter called a host function its allowed_capabilities do not list; it got INTERNAL_FAILURE",
					"function", name)
				s[0] = pwInternalFailure
			}), sg.params, sg.results).Export(name)
			return
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, s []uint64) {
			fn(h, h.instance(mod), ctx, s)
		}), sg.params, sg.results).Export(name)
	}
	def("proxy_log", pwLog)
	def("proxy_get_log_level", pwGetLogLevel)
	def("proxy_get_current_time_nanoseconds", pwNow)
	def("proxy_get_buffer_bytes", pwGetBufferBytes)
	def("proxy_get_buffer_status", pwGetBufferStatus)
	def("proxy_set_buffer_bytes", pwSetBufferBytes)
	def("proxy_get_configuration", pwGetConfiguration)
	def("proxy_get_header_map_pairs", pwGetHeaderMapPairs)
	def("proxy_set_header_map_pairs", pwSetHeaderMapPairs)
	def("proxy_get_header_map_size", pwGetHeaderMapSize)
	def("proxy_get_header_map_value", pwGetHeaderMapValue)
	def("proxy_add_header_map_value", func(h *host, in *instance, ctx context.Context, s []uint64) { pwEditHeader(in, s, editAdd) })
	def("proxy_replace_header_map_value", func(h *host, in *instance, ctx context.Context, s []uint64) { pwEditHeader(in, s, editReplace) })
	def("proxy_remove_header_map_value", func(h *host, in *instance, ctx context.Context, s []uint64) { pwEditHeader(in, s, editRemove) })
	def("proxy_continue_stream", pwContinueStream)
	def("proxy_close_stream", pwCloseStream)
	def("proxy_continue_request", func(h *host, in *instance, ctx context.Context, s []uint64) { pwResume(in, s) })
	def("proxy_continue_response", func(h *host, in *instance, ctx context.Context, s []uint64) { pwResume(in, s) })
	def("proxy_clear_route_cache", func(h *host, in *instance, ctx context.Context, s []uint64) { s[0] = pwOK })
	def("proxy_send_local_response", pwSendLocalResponse)
	def("proxy_get_property", pwGetProperty)
	def("proxy_set_property", pwSetProperty)
	def("proxy_set_effective_context", pwSetEffectiveContext)
	def("proxy_get_shared_data", pwGetSharedData)
	def("proxy_set_shared_data", pwSetSharedData)
	def("proxy_define_metric", pwDefineMetric)
	def("proxy_increment_metric", pwIncrementMetric)
	def("proxy_record_metric", pwRecordMetric)
	def("proxy_get_metric", pwGetMetric)
	def("proxy_set_tick_period_milliseconds", pwSetTickPeriod)
	def("proxy_http_call", pwHTTPCall)
	def("proxy_grpc_call", pwGRPCCall)
	def("proxy_get_status", pwGetStatus)
	def("proxy_register_shared_queue", pwRegisterQueue)
	def("proxy_resolve_shared_queue", pwResolveQueue)
	def("proxy_enqueue_shared_queue", pwEnqueue)
	def("proxy_dequeue_shared_queue", pwDequeue)
	def("proxy_done", func(h *host, in *instance, ctx context.Context, s []uint64) { s[0] = pwOK })
	for name, sg := range pwHostSignatures {
		if defined[name] {
			continue
		}
		name := name
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, s []uint64) {
			if in := h.instance(mod); in != nil {
				in.f.warn(warnUnimplemented, "weft: wasm filter called a proxy-wasm host function weft does not implement yet; it got UNIMPLEMENTED", "function", name)
			}
			s[0] = pwUnimplemented
		}), sg.params, sg.results).Export(name)
	}
	return b
}

// wasiUnstableModule exports wazero's WASI functions under wasi_unstable.
func wasiUnstableModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(wasiUnstable)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	return b
}

func pwLog(h *host, in *instance, ctx context.Context, s []uint64) {
	level := slog.LevelInfo
	switch int32(s[0]) {
	case 0, 1: // trace, debug
		level = slog.LevelDebug
	case 2:
		level = slog.LevelInfo
	case 3:
		level = slog.LevelWarn
	case 4, 5: // error, critical
		level = slog.LevelError
	default:
		s[0] = pwBadArgument
		return
	}
	if in == nil {
		// A start section: there is no instance to read memory from yet.
		s[0] = pwOK
		return
	}
	msg, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	if in.f.log.Enabled(context.Background(), level) {
		in.f.log.Log(context.Background(), level, string(bytes.ToValidUTF8(msg, []byte("\uFFFD"))), "module_version", in.v.seq)
	}
	s[0] = pwOK
}

func pwGetLogLevel(h *host, in *instance, ctx context.Context, s []uint64) {
	level := uint32(4) // error
	for _, l := range []struct {
		slog slog.Level
		pw   uint32
	}{{slog.LevelDebug, 1}, {slog.LevelInfo, 2}, {slog.LevelWarn, 3}} {
		if h.f != nil && h.f.log.Enabled(context.Background(), l.slog) {
			level = l.pw
			break
		}
	}
	s[0] = pwWriteU32(in, uint32(s[0]), level)
}

func pwNow(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || !in.mem.WriteUint64Le(uint32(s[0]), uint64(time.Now().UnixNano())) {
		s[0] = pwInvalidMemoryAccess
		return
	}
	s[0] = pwOK
}

func pwWriteU32(in *instance, ptr, v uint32) uint64 {
	if in == nil || !in.mem.WriteUint32Le(ptr, v) {
		return pwInvalidMemoryAccess
	}
	return pwOK
}

// pwReturn hands data to the guest in memory from its allocator, with the
// pointer and length written at the out-parameters (returnData), in
// proxy-wasm's statuses.
func pwReturn(in *instance, ctx context.Context, ptrPtr, lenPtr uint32, data []byte) uint64 {
	if in == nil {
		return pwNotFound
	}
	switch in.returnBytes(ctx, ptrPtr, lenPtr, data) {
	case statusOK:
		return pwOK
	case statusAllocFailed:
		return pwInternalFailure
	}
	return pwInvalidMemoryAccess
}

// pwBuffer is a buffer proxy_get_buffer_bytes reads: the VM's and the
// plugin's configuration, a callout's answer, and the body of the body
// callback running.
func pwBuffer(in *instance, typ uint32) ([]byte, bool) {
	if in == nil || in.pw == nil {
		return nil, false
	}
	switch typ {
	case pwBufVMConfiguration:
		return in.f.pw.vmConfig, true
	case pwBufPluginConfig:
		return in.f.pw.config, true
	case pwBufRequestBody, pwBufResponseBody:
		if in.pw.body.data == nil || in.pw.body.typ != typ {
			return nil, false
		}
		return in.pw.body.data, true
	case pwBufGRPCReceive:
		if in.pw.answer == nil || !in.pw.answer.grpc {
			return nil, false
		}
		return in.pw.answer.body, true
	case pwBufHTTPCallBody:
		if in.pw.answer == nil || in.pw.answer.grpc {
			return nil, false
		}
		return in.pw.answer.body, true
	}
	return nil, false
}

func pwGetBufferBytes(h *host, in *instance, ctx context.Context, s []uint64) {
	buf, ok := pwBuffer(in, uint32(s[0]))
	if !ok {
		s[0] = pwNotFound
		return
	}
	start, max := uint64(uint32(s[1])), uint64(uint32(s[2]))
	if start > uint64(len(buf)) {
		s[0] = pwBadArgument
		return
	}
	end := min(start+max, uint64(len(buf)))
	s[0] = pwReturn(in, ctx, uint32(s[3]), uint32(s[4]), buf[start:end])
}

func pwGetBufferStatus(h *host, in *instance, ctx context.Context, s []uint64) {
	buf, ok := pwBuffer(in, uint32(s[0]))
	if !ok {
		s[0] = pwNotFound
		return
	}
	if st := pwWriteU32(in, uint32(s[1]), uint32(len(buf))); st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwWriteU32(in, uint32(s[2]), 0)
}

// pwGetConfiguration is 0.1.0's proxy_get_configuration: the VM's
// configuration in proxy_on_vm_start, the plugin's elsewhere.
func pwGetConfiguration(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	cfg := in.f.pw.config
	if in.pw.inVMStart {
		cfg = in.f.pw.vmConfig
	}
	s[0] = pwReturn(in, ctx, uint32(s[0]), uint32(s[1]), cfg)
}

// headerView is one header map of a call as the guest sees it: built on the
// guest's first look (a callback gets only the count), edited in place, and
// applied to the call's attachments when the callback lets the call go on.
type headerView struct {
	built, dirty bool
	kv           []hdr
}

type hdr struct{ k, v string }

// pwMap returns the header map of typ for the call in, building it; nil
// when the call has none of that type now.
func pwMap(in *instance, typ uint32) *headerView {
	if in == nil || in.pw == nil {
		return nil
	}
	p := in.pw
	if in.inv == nil && typ <= pwMapResponseTrailers {
		return nil // a tick's: no call
	}
	switch typ {
	case pwMapRequestHeaders:
		if !p.req.built {
			p.req = headerView{built: true, kv: in.pwRequestHeaders(p.req.kv[:0])}
		}
		return &p.req
	case pwMapRequestTrailers:
		p.reqTrailers.built = true
		return &p.reqTrailers
	case pwMapGRPCInitial, pwMapGRPCTrailing:
		if p.answer == nil || !p.answer.grpc {
			return nil
		}
		v := &headerView{built: true, kv: p.answer.headers}
		if typ == pwMapGRPCTrailing {
			v.kv = p.answer.trailers
		}
		return v
	case pwMapCallHeaders, pwMapCallTrailers:
		if p.answer == nil || p.answer.grpc {
			return nil
		}
		v := &headerView{built: true}
		if typ == pwMapCallHeaders && p.answer.err == nil {
			v.kv = p.answer.headers
		}
		return v
	case pwMapResponseHeaders:
		if in.phase != phaseResponse {
			return nil
		}
		if !p.resp.built {
			p.resp = headerView{built: true, kv: in.pwResponseHeaders(p.resp.kv[:0])}
		}
		return &p.resp
	case pwMapResponseTrailers:
		if in.phase != phaseResponse {
			return nil
		}
		if !p.trailers.built {
			p.trailers = headerView{built: true, kv: in.pwResponseTrailers(p.trailers.kv[:0])}
		}
		return &p.trailers
	}
	return nil
}

// appendPairs serializes a header map as proxy-wasm does: a u32 count, a
// (u32 key length, u32 value length) per pair, then each key and value
// followed by a NUL; little-endian.
func appendPairs(dst []byte, kv []hdr) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(kv)))
	for _, h := range kv {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.k)))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.v)))
	}
	for _, h := range kv {
		dst = append(append(append(append(dst, h.k...), 0), h.v...), 0)
	}
	return dst
}

// parsePairs reads a serialized header map from a guest, bounded
// (pwMaxPairs, pwMaxPairsBytes); ok is false when it is malformed.
func parsePairs(b []byte) (kv []hdr, ok bool) {
	if len(b) == 0 || len(b) == 1 && b[0] == 0 {
		return nil, true
	}
	if len(b) < 4 || len(b) > pwMaxPairsBytes {
		return nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n > pwMaxPairs || uint64(len(b)) < 4+8*uint64(n) {
		return nil, false
	}
	sizes, data := b[4:4+8*n], b[4+8*n:]
	kv = make([]hdr, 0, n)
	for i := uint32(0); i < n; i++ {
		kl, vl := uint64(binary.LittleEndian.Uint32(sizes[8*i:])), uint64(binary.LittleEndian.Uint32(sizes[8*i+4:]))
		if kl+vl+2 > uint64(len(data)) || data[kl] != 0 || data[kl+1+vl] != 0 {
			return nil, false
		}
		kv = append(kv, hdr{string(data[:kl]), string(data[kl+1 : kl+1+vl])})
		data = data[kl+vl+2:]
	}
	return kv, true
}

func pwGetHeaderMapPairs(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMap(in, uint32(s[0]))
	if m == nil {
		s[0] = pwNotFound
		return
	}
	in.scratch = appendPairs(in.scratch[:0], m.kv)
	s[0] = pwReturn(in, ctx, uint32(s[1]), uint32(s[2]), in.scratch)
}

func pwSetHeaderMapPairs(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMap(in, uint32(s[0]))
	if m == nil || !in.pwWritable(uint32(s[0])) {
		s[0] = pwBadArgument
		return
	}
	b, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	kv, ok := parsePairs(b)
	if !ok {
		s[0] = pwParseFailure
		return
	}
	m.kv, m.dirty = kv, true
	s[0] = pwOK
}

func pwGetHeaderMapSize(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMap(in, uint32(s[0]))
	if m == nil {
		s[0] = pwNotFound
		return
	}
	size := 4
	for _, h := range m.kv {
		size += 10 + len(h.k) + len(h.v)
	}
	s[0] = pwWriteU32(in, uint32(s[1]), uint32(size))
}

func pwGetHeaderMapValue(h *host, in *instance, ctx context.Context, s []uint64) {
	m := pwMap(in, uint32(s[0]))
	if m == nil {
		s[0] = pwNotFound
		return
	}
	key, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	for _, kv := range m.kv {
		if strings.EqualFold(kv.k, unsafeString(key)) {
			in.scratch = append(in.scratch[:0], kv.v...)
			s[0] = pwReturn(in, ctx, uint32(s[3]), uint32(s[4]), in.scratch)
			return
		}
	}
	if in.pw.version == pwABI010 {
		// 0.1.0 answers an absent header with an empty value.
		s[0] = pwReturn(in, ctx, uint32(s[3]), uint32(s[4]), nil)
		return
	}
	s[0] = pwNotFound
}

type headerEdit int

const (
	editAdd headerEdit = iota
	editReplace
	editRemove
)

// pwEditHeader adds, replaces or removes a header. Keys compare without
// case, as HTTP/2's lower-case names against attachments of any case.
func pwEditHeader(in *instance, s []uint64, op headerEdit) {
	typ := uint32(s[0])
	m := pwMap(in, typ)
	if m == nil || !in.pwWritable(typ) {
		s[0] = pwBadArgument
		return
	}
	key, ok := in.read(uint32(s[1]), uint32(s[2]))
	var val []byte
	if ok && op != editRemove {
		val, ok = in.read(uint32(s[3]), uint32(s[4]))
	}
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	if len(key) == 0 || !utf8.Valid(key) || !utf8.Valid(val) {
		s[0] = pwBadArgument
		return
	}
	k := unsafeString(key)
	m.dirty = true
	switch op {
	case editAdd:
		m.kv = append(m.kv, hdr{string(key), string(val)})
	case editReplace:
		set := false
		kv := m.kv[:0]
		for _, h := range m.kv {
			if strings.EqualFold(h.k, k) {
				if set {
					continue
				}
				h.v, set = string(val), true
			}
			kv = append(kv, h)
		}
		if m.kv = kv; !set {
			m.kv = append(m.kv, hdr{string(key), string(val)})
		}
	case editRemove:
		kv := m.kv[:0]
		for _, h := range m.kv {
			if !strings.EqualFold(h.k, k) {
				kv = append(kv, h)
			}
		}
		m.kv = kv
	}
	s[0] = pwOK
}

// pwWritable says whether the guest may edit map typ now: the request's
// headers in the request's callbacks, the response's in the response's.
func (in *instance) pwWritable(typ uint32) bool {
	switch typ {
	case pwMapRequestHeaders:
		return in.phase == phaseRequest
	case pwMapResponseHeaders, pwMapResponseTrailers:
		return in.phase == phaseResponse
	}
	return false
}

func pwContinueStream(h *host, in *instance, ctx context.Context, s []uint64) {
	switch uint32(s[0]) {
	case pwStreamRequest, pwStreamResponse:
		pwResume(in, s)
	default:
		s[0] = pwBadArgument
	}
}

func pwResume(in *instance, s []uint64) {
	if in == nil || in.pw == nil || in.inv == nil {
		s[0] = pwNotFound
		return
	}
	in.pw.resumed = true
	s[0] = pwOK
}

func pwCloseStream(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil || in.inv == nil {
		s[0] = pwNotFound
		return
	}
	in.pw.closed = true
	s[0] = pwOK
}

// localReply is what proxy_send_local_response asked: the call fails with
// it instead of going on.
type localReply struct {
	httpStatus, grpcStatus int32
	msg                    string
}

// maxLocalMessage bounds the text of a local response kept as the call's
// error message.
const maxLocalMessage = 4 << 10

func pwSendLocalResponse(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil || in.inv == nil {
		s[0] = pwNotFound
		return
	}
	details, ok1 := in.read(uint32(s[1]), uint32(s[2]))
	body, ok2 := in.read(uint32(s[3]), uint32(s[4]))
	hdrs, ok3 := in.read(uint32(s[5]), uint32(s[6]))
	if !ok1 || !ok2 || !ok3 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	if _, ok := parsePairs(hdrs); !ok {
		s[0] = pwParseFailure
		return
	}
	msg := body
	if len(msg) == 0 {
		msg = details
	}
	if len(msg) > maxLocalMessage {
		msg = msg[:maxLocalMessage]
	}
	in.pw.local = &localReply{httpStatus: int32(s[0]), grpcStatus: int32(s[7]), msg: string(bytes.ToValidUTF8(msg, []byte("\uFFFD")))}
	s[0] = pwOK
}

// code maps a local response to weft's code: its gRPC status when it has one
// (not -1), else its HTTP status as Envoy's gRPC bridge does.
func (r *localReply) code() kernel.Code {
	if r.grpcStatus > 0 && r.grpcStatus <= kernel.GRPCUnauthenticated {
		return kernel.CodeOfGRPCStatus(int(r.grpcStatus))
	}
	switch s := r.httpStatus; {
	case s == 401 || s == 403:
		return kernel.CodeForbidden
	case s == 408 || s == 504:
		return kernel.CodeTimeout
	case s == 429:
		return kernel.CodeLimitExceeded
	case s == 502 || s == 503:
		return kernel.CodeNetwork
	case s == 404:
		return kernel.CodeMethodNotFound
	case s >= 400 && s < 500:
		return kernel.CodeForbidden
	}
	return kernel.CodeUnknown
}

func pwSetEffectiveContext(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwBadArgument
		return
	}
	id := uint32(s[0])
	if id == in.f.rootCtx || in.inv != nil && id == in.pw.ctxID {
		s[0] = pwOK
		return
	}
	s[0] = pwBadArgument
}

func pwGetProperty(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	path, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	v, found := in.pwProperty(propertyPath(path))
	if !found {
		s[0] = pwNotFound
		return
	}
	in.scratch = append(in.scratch[:0], v...)
	s[0] = pwReturn(in, ctx, uint32(s[2]), uint32(s[3]), in.scratch)
}

func pwSetProperty(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil || in.inv == nil {
		s[0] = pwNotFound
		return
	}
	path, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	val, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	key := propertyPath(path)
	if _, builtin := in.pwProperty(key); builtin && in.pw.props[key] == "" {
		s[0] = pwBadArgument // the host's own attributes are read-only
		return
	}
	if in.pw.props == nil {
		in.pw.props = map[string]string{}
	}
	if len(in.pw.props) >= maxProps {
		s[0] = pwInternalFailure
		return
	}
	in.pw.props[key] = string(val)
	s[0] = pwOK
}

// maxProps bounds the properties a call's filters set.
const maxProps = 64

// propertyPath is a property path in dotted form: the Go SDK joins its
// segments with NUL (request\0path), the AssemblyScript one sends a single
// name (plugin_root_id); Envoy's docs write request.path.
func propertyPath(p []byte) string {
	return strings.TrimRight(strings.ReplaceAll(string(p), "\x00", "."), ".")
}

// pwProperty answers a property for a proxy-wasm filter: what only
// proxy-wasm has (its root id, what filters set with proxy_set_property,
// the header maps), then the properties both ABIs share (property).
func (in *instance) pwProperty(path string) (string, bool) {
	if path == "plugin_root_id" {
		return in.f.pw.rootID, true
	}
	if v, ok := in.pw.props[path]; ok {
		return v, true
	}
	if in.inv == nil || in.next == nil {
		return in.property(path)
	}
	switch path {
	case "request.headers":
		// Envoy's map attribute: the header map's pairs encoding.
		return string(appendPairs(nil, pwMap(in, pwMapRequestHeaders).kv)), true
	case "response.headers", "response.trailers":
		typ := uint32(pwMapResponseHeaders)
		if path == "response.trailers" {
			typ = pwMapResponseTrailers
		}
		if m := pwMap(in, typ); m != nil && in.phase == phaseResponse {
			return string(appendPairs(nil, m.kv)), true
		}
		return "", false
	case "response.grpc_status":
		if in.phase != phaseResponse {
			return "", false
		}
		return strconv.Itoa(in.pwGRPCStatus()), true
	}
	// One header of a map: request.headers.<name> (Envoy's map access).
	for _, m := range [...]struct {
		prefix string
		typ    uint32
	}{{"request.headers.", pwMapRequestHeaders}, {"response.headers.", pwMapResponseHeaders}, {"response.trailers.", pwMapResponseTrailers}} {
		name, ok := strings.CutPrefix(path, m.prefix)
		if !ok {
			continue
		}
		if m.typ != pwMapRequestHeaders && in.phase != phaseResponse {
			return "", false
		}
		if hv := pwMap(in, m.typ); hv != nil {
			for _, h := range hv.kv {
				if strings.EqualFold(h.k, name) {
					return h.v, true
				}
			}
		}
		return "", false
	}
	return in.property(path)
}

// property answers the properties both ABIs share (proxy-wasm's
// proxy_get_property, weft's get_property), with Envoy's attribute names
// where they apply and weft.* for what only weft knows. Values are text,
// but for Envoy's bool attributes: one byte, 0 or 1.
func (in *instance) property(path string) (string, bool) {
	f := in.f
	switch path {
	case "plugin_name":
		return f.name, true
	case "plugin_vm_id":
		return f.vmID, true
	}
	if in.inv == nil || in.next == nil {
		return "", false
	}
	u := in.next.URL()
	switch path {
	case "request.path", "request.url_path":
		return in.callPath(u), true
	case "request.method":
		return "POST", true
	case "request.scheme":
		return pwScheme(in.inv), true
	case "request.host", "destination.address":
		return u.Address(), true
	case "request.protocol":
		if u.Protocol == "tri" {
			return "HTTP/2", true
		}
		return u.Protocol, true
	case "source.address":
		if in.inv.RemoteAddr == "" {
			return "", false
		}
		return in.inv.RemoteAddr, true
	case "connection.mtls":
		// Envoy's bool attribute. A provider's call only: a consumer's
		// call has no downstream connection.
		if in.inv.RemoteAddr == "" {
			return "", false
		}
		if in.inv.MTLS {
			return "\x01", true
		}
		return "\x00", true
	case "weft.interface":
		return u.Interface(), true
	case "weft.method":
		return in.inv.Method, true
	case "weft.group":
		return u.Param(kernel.KeyGroup), true
	case "weft.version":
		return u.Param(kernel.KeyVersion), true
	case "weft.side":
		return u.Param(kernel.KeySide), true
	case "weft.protocol":
		return u.Protocol, true
	case "weft.service":
		return u.ServiceKey(), true
	case "weft.application":
		return u.Param(kernel.KeyApplication), true
	}
	return "", false
}

// callPath is the call's :path, /<interface>/<method>: a proxy-wasm
// instance keeps it from call to call.
func (in *instance) callPath(u *kernel.URL) string {
	if in.pw != nil {
		return in.pw.urlView(u, in.inv.Method).path
	}
	return "/" + u.Interface() + "/" + in.inv.Method
}

// pwScheme is the call's :scheme: https for a provider's call that came
// over TLS, http otherwise (a consumer's call shows http: its connection
// is the transport's, not the call's).
func pwScheme(inv *kernel.Invocation) string {
	if inv.TLS {
		return "https"
	}
	return "http"
}

// Names of the headers the host makes up rather than reads from
// attachments: edits to them are not applied (as Envoy ignores pseudo-header
// edits once a route is chosen).
func pwSynthetic(k string) bool {
	if strings.HasPrefix(k, ":") {
		return true
	}
	// EqualFold, not ToLower: this runs for every attachment of every call,
	// and ToLower allocates for a key with capitals.
	for _, s := range [...]string{"content-type", "te", "grpc-timeout", "grpc-status", "grpc-message"} {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// pwRequestHeaders is the request's header map: a gRPC request's
// pseudo-headers and content type, its deadline as grpc-timeout, then one
// header per attachment.
func (in *instance) pwRequestHeaders(kv []hdr) []hdr {
	uv := in.pw.urlView(in.next.URL(), in.inv.Method)
	kv = append(kv,
		hdr{":method", "POST"},
		hdr{":scheme", pwScheme(in.inv)},
		hdr{":path", uv.path},
		hdr{":authority", uv.authority},
		hdr{"content-type", uv.contentType},
		hdr{"te", "trailers"})
	if d, ok := in.pw.ctx.Deadline(); ok {
		// Into the instance's own buffer: the view (and with it this
		// string) is dropped at the call's end, before the buffer is
		// written again.
		in.pw.timeoutBuf = kernel.AppendGRPCTimeout(in.pw.timeoutBuf[:0], time.Until(d))
		kv = append(kv, hdr{"grpc-timeout", unsafeString(in.pw.timeoutBuf)})
	}
	return appendAttachments(kv, in.inv.Attachments())
}

// urlView is what the header view makes of a call's URL and method, kept
// per instance: the same provider URL and method come back call after
// call, and each of these strings would otherwise be made for every call.
type urlView struct {
	u                             *kernel.URL
	authority, contentType, iface string
	method, path                  string
}

func (p *pwInstance) urlView(u *kernel.URL, method string) *urlView {
	c := &p.uv
	if c.u != u {
		*c = urlView{u: u, authority: u.Address(), contentType: pwContentType(u), iface: u.Interface()}
	}
	if c.path == "" || c.method != method {
		c.method, c.path = method, "/"+c.iface+"/"+method
	}
	return c
}

func pwContentType(u *kernel.URL) string {
	if u.Protocol == "tri" {
		return "application/grpc+proto"
	}
	return "application/" + u.Protocol + "+" + u.ParamOr(kernel.KeySerialization, "hessian2")
}

func appendAttachments(kv []hdr, m map[string]any) []hdr {
	for k, v := range m {
		if pwSynthetic(k) {
			continue
		}
		s, ok := v.(string)
		if !ok {
			s = view.Text(v)
		}
		kv = append(kv, hdr{k, s})
	}
	return kv
}

// pwResponseHeaders is the response's header map: :status 200, the content
// type, then one header per attachment of the result.
func (in *instance) pwResponseHeaders(kv []hdr) []hdr {
	kv = append(kv, hdr{":status", "200"}, hdr{"content-type", in.pw.urlView(in.next.URL(), in.inv.Method).contentType})
	return appendAttachments(kv, in.res.Attachments)
}

// pwResponseTrailers are grpc-status, and grpc-message on an error.
func (in *instance) pwResponseTrailers(kv []hdr) []hdr {
	kv = append(kv, hdr{"grpc-status", strconv.Itoa(in.pwGRPCStatus())})
	if in.callErr != nil {
		kv = append(kv, hdr{"grpc-message", in.callErr.Error()})
	}
	return kv
}

func (in *instance) pwGRPCStatus() int {
	if in.callErr == nil {
		return kernel.GRPCOK
	}
	return kernel.GRPCStatus(kernel.CodeOf(in.callErr))
}

// applyAttachments makes m hold what the edited header map kv says: headers
// the host made up are skipped; an attachment no header names any more is
// removed; a header sets the attachment equal to it ignoring case (keeping
// the attachment's spelling) unless its text is unchanged (the value keeps
// its type), or adds one. Repeated headers join with commas, as HTTP does.
func applyAttachments(kv []hdr, get func() map[string]any, set func(k string, v any), del func(k string)) {
	want := make(map[string]string, len(kv))
	var order []string
	for _, h := range kv {
		if pwSynthetic(h.k) {
			continue
		}
		key := strings.ToLower(h.k)
		if old, ok := want[key]; ok {
			want[key] = old + "," + h.v
			continue
		}
		want[key] = h.v
		order = append(order, h.k)
	}
	for k, v := range get() {
		if pwSynthetic(k) {
			continue
		}
		nv, ok := want[strings.ToLower(k)]
		if !ok {
			del(k)
			continue
		}
		delete(want, strings.ToLower(k))
		if s, isStr := v.(string); isStr && s == nv || !isStr && view.Text(v) == nv {
			continue
		}
		set(k, nv)
	}
	for _, k := range order {
		if v, ok := want[strings.ToLower(k)]; ok {
			set(k, v)
		}
	}
}

// unsafeString views b as a string without copying; for lookups only, as b
// is guest memory that changes when the guest runs.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
