package wasmfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// hostModule builds module "weft" for f's runtime. With f nil, the functions
// exist with their signatures and do nothing useful.
func hostModule(rt wazero.Runtime, f *Filter) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(HostModule)
	h := &host{f: f}
	def := func(name string, fn func(in *instance, ctx context.Context, s []uint64)) {
		sig := hostSignatures[name]
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, s []uint64) {
			fn(h.instance(mod), ctx, s)
		}), sig.params, sig.results).Export(name)
	}
	out := func(name string, get func(in *instance) (string, bool)) {
		def(name, func(in *instance, ctx context.Context, s []uint64) {
			if in == nil {
				s[0] = statusNotFound
				return
			}
			v, ok := get(in)
			if !ok {
				s[0] = statusNotFound
				return
			}
			s[0] = uint64(in.returnString(ctx, uint32(s[0]), uint32(s[1]), v))
		})
	}
	out("get_service", func(in *instance) (string, bool) {
		if in.next == nil {
			return "", false
		}
		return in.next.URL().ServiceKey(), true
	})
	out("get_method", func(in *instance) (string, bool) {
		if in.inv == nil {
			return "", false
		}
		return in.inv.Method, true
	})
	out("get_side", func(in *instance) (string, bool) {
		if in.next == nil {
			return "", false
		}
		side := in.next.URL().Param(kernel.KeySide)
		return side, side != ""
	})
	out("get_remote_address", func(in *instance) (string, bool) {
		if in.inv == nil || in.inv.RemoteAddr == "" {
			return "", false
		}
		return in.inv.RemoteAddr, true
	})
	out("get_config", func(in *instance) (string, bool) {
		return unsafe.String(unsafe.SliceData(in.v.config), len(in.v.config)), true
	})
	out("get_error", func(in *instance) (string, bool) {
		if in.phase != phaseResponse || in.callErr == nil {
			return "", false
		}
		return in.callErr.Error(), true
	})
	def("get_arguments", (*instance).hGetArguments)
	def("get_result", (*instance).hGetResult)
	def("get_attachment", (*instance).hGetAttachment)
	def("set_attachment", (*instance).hSetAttachment)
	def("remove_attachment", (*instance).hRemoveAttachment)
	def("reject", (*instance).hReject)
	def("log", (*instance).hLog)
	def("counter_add", (*instance).hCounterAdd)
	def("now_ms", (*instance).hNowMs)
	for name, c := range capHostFunctions {
		fn := c.fn
		if f != nil && !f.weft.allows(name) {
			fn = refusedCap(name) // not in allowed_capabilities
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, s []uint64) {
			fn(h.instance(mod), ctx, s)
		}), c.sig.params, c.sig.results).Export(name)
	}
	return b
}

type host struct{ f *Filter }

// hGetArguments is the host function get_arguments (ABI.md).
func (in *instance) hGetArguments(ctx context.Context, s []uint64) {
	if in == nil || in.inv == nil {
		s[0] = statusNotFound
		return
	}
	if in.args != nil {
		b, err := in.args()
		if err != nil {
			b = []byte(`"(not representable as JSON)"`) // as appendJSON says it
		}
		s[0] = uint64(in.returnBytes(ctx, uint32(s[0]), uint32(s[1]), b))
		return
	}
	in.scratch = appendJSON(in.scratch[:0], in.inv.Args)
	s[0] = uint64(in.returnBytes(ctx, uint32(s[0]), uint32(s[1]), in.scratch))
}

// hGetResult is the host function get_result (ABI.md).
func (in *instance) hGetResult(ctx context.Context, s []uint64) {
	if in == nil || in.phase != phaseResponse || in.callErr != nil {
		s[0] = statusNotFound
		return
	}
	in.scratch = appendJSON(in.scratch[:0], in.res.Value)
	s[0] = uint64(in.returnBytes(ctx, uint32(s[0]), uint32(s[1]), in.scratch))
}

// hGetAttachment is the host function get_attachment (ABI.md).
func (in *instance) hGetAttachment(ctx context.Context, s []uint64) {
	if in == nil || in.inv == nil {
		s[0] = statusNotFound
		return
	}
	key, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	v, found := in.attachment(unsafe.String(unsafe.SliceData(key), len(key)))
	if !found {
		s[0] = statusNotFound
		return
	}
	s[0] = uint64(in.returnString(ctx, uint32(s[2]), uint32(s[3]), v))
}

// hSetAttachment is the host function set_attachment (ABI.md).
func (in *instance) hSetAttachment(ctx context.Context, s []uint64) {
	if in == nil || in.inv == nil {
		s[0] = statusNotFound
		return
	}
	key, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	val, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 || len(key) == 0 || !utf8.Valid(key) || !utf8.Valid(val) {
		s[0] = statusBadArgument
		return
	}
	k := in.intern(key)
	if in.phase == phaseResponse || in.phase == phaseServe {
		if in.res.Attachments == nil {
			in.res.Attachments = make(map[string]any, 2)
		}
		in.res.Attachments[k] = string(val)
	} else {
		in.inv.SetAttachment(k, string(val))
	}
	s[0] = statusOK
}

// hRemoveAttachment is the host function remove_attachment (ABI.md).
func (in *instance) hRemoveAttachment(ctx context.Context, s []uint64) {
	if in == nil || in.inv == nil {
		s[0] = statusNotFound
		return
	}
	key, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	k := unsafe.String(unsafe.SliceData(key), len(key))
	if in.phase == phaseResponse || in.phase == phaseServe {
		delete(in.res.Attachments, k)
	} else {
		in.inv.RemoveAttachment(k)
	}
	s[0] = statusOK
}

// hReject is the host function reject (ABI.md).
func (in *instance) hReject(ctx context.Context, s []uint64) {
	if in == nil || in.phase == phaseIdle {
		// In _initialize or a start function there is no call to
		// reject (ABI.md: the functions about a call return NOT_FOUND
		// there).
		s[0] = statusNotFound
		return
	}
	code := int32(s[0])
	msg, ok := in.readOK(uint32(s[1]), uint32(s[2]))
	if in == nil || !ok || code < int32(kernel.CodeUnknown) || code > int32(kernel.CodeLimitExceeded) || !utf8.Valid(msg) {
		s[0] = statusBadArgument
		return
	}
	in.rejected, in.rejCode, in.rejMsg = true, kernel.Code(code), string(msg)
	s[0] = statusOK
}

// hLog is the host function log (ABI.md).
func (in *instance) hLog(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusOK
		return
	}
	level := slog.LevelInfo
	switch int32(s[0]) {
	case 0:
		level = slog.LevelDebug
	case 1:
		level = slog.LevelInfo
	case 2:
		level = slog.LevelWarn
	case 3:
		level = slog.LevelError
	default:
		s[0] = statusBadArgument
		return
	}
	msg, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	if in.f.log.Enabled(context.Background(), level) {
		in.f.log.Log(context.Background(), level, string(bytes.ToValidUTF8(msg, []byte("\uFFFD"))), "module_version", in.v.seq)
	}
	s[0] = statusOK
}

// hCounterAdd is the host function counter_add (ABI.md).
func (in *instance) hCounterAdd(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = 0
		return
	}
	key, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		in.violate("counter_add: key (ptr %d, len %d) is outside the guest's memory", uint32(s[0]), uint32(s[1]))
	}
	s[0] = uint64(in.f.counters.add(key, int64(s[2]), int64(s[3])))
}

// hNowMs is the host function now_ms (ABI.md).
func (in *instance) hNowMs(ctx context.Context, s []uint64) {
	s[0] = uint64(time.Now().UnixMilli())
}

// instance finds the instance a host function was called from. It is nil
// while a module's start function runs (the instance is not made yet), or
// when f is nil.
func (h *host) instance(mod api.Module) *instance {
	if h.f == nil {
		return nil
	}
	in, _ := h.f.byMod.Load(mod)
	i, _ := in.(*instance)
	return i
}

// attachment finds an attachment as text. In weft_on_response the result's
// attachments (those going back with the response) are looked at first, then
// the call's.
func (in *instance) attachment(k string) (string, bool) {
	var v any
	var ok bool
	if in.phase == phaseResponse || in.phase == phaseServe {
		v, ok = in.res.Attachments[k]
	}
	if !ok {
		v, ok = in.inv.Attachments()[k]
	}
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case nil:
		return "", true
	default:
		return view.Text(x), true
	}
}

// intern returns key as a string, reusing the one made for the same key
// before: a filter sets the same few keys on every call, so this saves an
// allocation per set_attachment. Per instance, so no lock; bounded.
func (in *instance) intern(key []byte) string {
	if k, ok := in.keys[unsafe.String(unsafe.SliceData(key), len(key))]; ok {
		return k
	}
	k := string(key)
	if in.keys == nil {
		in.keys = make(map[string]string, 8)
	}
	if len(in.keys) < maxInternedKeys {
		in.keys[k] = k
	}
	return k
}

const maxInternedKeys = 64

// read returns a view of guest memory (valid until the guest runs again or
// its memory grows); ok is false when the range is outside memory.
func (in *instance) read(ptr, n uint32) ([]byte, bool) {
	return in.mem.Read(ptr, n)
}

func (in *instance) readOK(ptr, n uint32) ([]byte, bool) {
	if in == nil {
		return nil, false
	}
	return in.read(ptr, n)
}

// violate aborts the running callback: the host function cannot report the
// misuse through a status. wazero turns the panic into the callback's error.
func (in *instance) violate(format string, args ...any) {
	err := &abiError{msg: fmt.Sprintf(format, args...)}
	if in.abiErr == nil {
		in.abiErr = err
	}
	panic(err)
}

func (in *instance) returnString(ctx context.Context, retPtrPtr, retLenPtr uint32, v string) uint32 {
	return in.returnData(ctx, retPtrPtr, retLenPtr, len(v), func(ptr uint32) bool { return in.mem.WriteString(ptr, v) })
}

func (in *instance) returnBytes(ctx context.Context, retPtrPtr, retLenPtr uint32, v []byte) uint32 {
	return in.returnData(ctx, retPtrPtr, retLenPtr, len(v), func(ptr uint32) bool { return in.mem.Write(ptr, v) })
}

// returnData hands n bytes to the guest (ABI.md, Strings): into memory from
// weft_alloc, with the pointer and length written at the out-parameters. Empty
// data still gets a 1-byte allocation, so the pointer is always one the guest
// gave out (some languages reject null or dangling pointers even for empty
// slices).
func (in *instance) returnData(ctx context.Context, retPtrPtr, retLenPtr uint32, n int, write func(ptr uint32) bool) uint32 {
	size := in.mem.Size()
	if uint64(retPtrPtr)+4 > uint64(size) || uint64(retLenPtr)+4 > uint64(size) {
		return statusBadArgument
	}
	if uint64(n) > uint64(^uint32(0)>>1) {
		return statusAllocFailed
	}
	ask := n
	if ask == 0 {
		ask = 1
	}
	in.allocStack[0] = uint64(ask)
	if err := in.alloc.CallWithStack(ctx, in.allocStack[:]); err != nil {
		in.violate("weft_alloc(%d) failed: %v", ask, guestErr(err))
	}
	ptr := uint32(in.allocStack[0])
	if ptr == 0 || uint64(ptr)+uint64(ask) > uint64(in.mem.Size()) {
		return statusAllocFailed
	}
	if !write(ptr) || !in.mem.WriteUint32Le(retPtrPtr, ptr) || !in.mem.WriteUint32Le(retLenPtr, uint32(n)) {
		return statusBadArgument
	}
	return statusOK
}

// appendJSON encodes v for the guest. Values decoded from hessian may be
// cyclic, share containers a million times over, or hold maps with
// non-string keys; view.JSONWith turns them into a bounded tree that
// encoding/json always accepts (cycles and cuts marked), so the guest always
// gets valid JSON and the host never recurses without end.
func appendJSON(dst []byte, v any) []byte {
	b, err := json.Marshal(view.JSONWith(v, guestJSONLimits))
	if err != nil {
		b = []byte(`"(not representable as JSON)"`)
	}
	return append(dst, b...)
}

// guestJSONLimits: guests need strings whole (a token, a key), so only the
// total is bounded, well below the default memory cap of an instance.
var guestJSONLimits = view.Limits{MaxDepth: 64, MaxNodes: 1 << 20, MaxString: 0, MaxBytes: 8 << 20}
