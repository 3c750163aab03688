package wasmfilter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tetratelabs/wazero"

	"github.com/weftrpc/weft/kernel"
)

// A WASM module can implement a service rather than filter one (weft ABI
// v1.2, sdk/ABI.md "Services"): it exports weft_on_call, which the host
// runs for each call of the service, on an instance of the same pool, under
// the same limits, reloads and metrics as a filter's callbacks. The guest
// reads the call with the getters filters use (get_method, get_arguments,
// get_attachment, get_deadline), answers with set_result (a JSON value)
// and set_attachment (attachments that go back with the answer), and
// returns CONTINUE (0); or fails the call with reject and REJECT (1): code
// biz (3) for a business error, any other code for a framework one.

const exportOnCall = "weft_on_call"

// roleExports checks that a module exports the callback its role runs: a
// service's weft_on_call, a filter's weft_on_request.
func (f *Filter) roleExports(cm wazero.CompiledModule) error {
	funcs := cm.ExportedFunctions()
	switch {
	case f.service && funcs[exportOnCall] == nil:
		return fmt.Errorf("module %s exports no %s: a service's module answers each call in %s (sdk/ABI.md, Services); it exports %s, a filter's callback",
			f.path, exportOnCall, exportOnCall, exportOnRequest)
	case !f.service && funcs[exportOnRequest] == nil:
		return fmt.Errorf("module %s exports no %s: a filter's module handles calls in %s; it exports %s, a service's handler: use it as a service's impl.wasm",
			f.path, exportOnRequest, exportOnRequest, exportOnCall)
	}
	return nil
}

// Serve runs the module's weft_on_call for a call of the service it
// implements. args, when not nil, gives what get_arguments returns (the
// arguments in their declared types, as JSON), called only when the guest
// asks; without it the host renders inv's arguments. The result is the guest's JSON as it set it
// (kernel.Encoded, "json"; JSON null when it set none), with the
// attachments it set.
func (f *Filter) Serve(ctx context.Context, inv *kernel.Invocation, args func() ([]byte, error), values []any) (kernel.Result, error) {
	v, in, err := f.acquire(ctx, exportOnCall)
	if err != nil {
		if be, ok := err.(*backoffErr); ok {
			return kernel.Result{}, be.err
		}
		return kernel.Result{}, err
	}
	in.begin(nil, inv)
	in.phase, in.args, in.values = phaseServe, args, values
	if dl, ok := ctx.Deadline(); ok {
		in.deadline = dl.UnixMilli()
	}
	wc := f.weftTrack(in, ctx) // nil unless the module may call out (http_call)
	if wc != nil {
		defer f.weftUntrack(in, wc)
	}
	act, err := in.call(ctx, in.onCall, exportOnCall)
	if err != nil {
		in.end()
		if nr, ok := err.(*notRun); ok {
			v.put(in)
			return kernel.Result{}, f.ctxError(nr.err, "before "+exportOnCall+" ran")
		}
		v.discard(in)
		return kernel.Result{}, err
	}
	if act != actionContinue {
		err := in.serviceError(act)
		res := kernel.Result{Attachments: in.res.Attachments}
		in.end()
		v.put(in)
		return res, err
	}
	var out any = jsonResult(in.answer)
	if in.answerString {
		out = string(in.answer)
	}
	res := kernel.Result{Value: out, Attachments: in.res.Attachments}
	in.end()
	v.put(in)
	return res, nil
}

// serviceError is a service's REJECT: a business error (code biz) as the
// service raised it, any other code as the framework error it names.
func (in *instance) serviceError(act uint32) error {
	if act == actionReject && in.rejected && in.rejCode == kernel.CodeBiz {
		// "org.example.NotFound: no user 7" raises that Java class, as a
		// Java provider's exception reaches Java and dubbo-go callers.
		if class, msg, ok := strings.Cut(in.rejMsg, ": "); ok && javaClassName(class) {
			return &kernel.Error{Code: kernel.CodeBiz, Class: class, Msg: msg, Cause: &GuestError{Message: msg}}
		}
		return kernel.BizError(&GuestError{Message: in.rejMsg})
	}
	if act == actionReject && in.rejected {
		return kernel.Errorf(in.rejCode, "wasm service %q: %s", in.f.name, in.rejMsg)
	}
	return in.rejection(act, exportOnCall)
}

// javaClassName: a dotted name of Java identifiers (a package and a class).
func javaClassName(s string) bool {
	if !strings.Contains(s, ".") || len(s) > 256 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// GuestError is the business error a service's module raised (reject with
// code biz): its message, as a caller sees it.
type GuestError struct{ Message string }

func (e *GuestError) Error() string { return e.Message }

// jsonResult is a service's answer: JSON, which the service's declared
// interface puts in its declared type.
type jsonResult []byte

// Encoding says that Bytes are JSON (kernel.Encoded).
func (j jsonResult) Encoding() string { return "json" }

// Bytes are the JSON the guest set ("null" when it set none).
func (j jsonResult) Bytes() []byte {
	if j == nil {
		return []byte("null")
	}
	return j
}

// hSetResult is set_result(ptr, len) (v1.2): in weft_on_call, the call's
// answer, a JSON value (BAD_ARGUMENT when it is not); NOT_FOUND elsewhere.
func (in *instance) hSetResult(ctx context.Context, s []uint64) {
	if in == nil || in.phase != phaseServe {
		s[0] = statusNotFound
		return
	}
	b, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok || !json.Valid(b) {
		s[0] = statusBadArgument
		return
	}
	in.answer, in.answerString = append(in.answer[:0:0], b...), false
	s[0] = statusOK
}

// hGetArgumentString is get_argument_string(index, ret_ptr_ptr,
// ret_len_ptr) (v1.2): in weft_on_call, the index-th argument when it is a
// string, as it is (no JSON to parse: a guest's loop over each byte is
// what a WASM call pays most for), always valid UTF-8 (invalid sequences
// replaced by U+FFFD); NOT_FOUND when there is no such argument,
// BAD_ARGUMENT when it is not a string.
func (in *instance) hGetArgumentString(ctx context.Context, s []uint64) {
	i := uint32(s[0]) // an i32: the stack slot's upper bits are not the guest's
	if in == nil || in.phase != phaseServe || int64(i) >= int64(len(in.values)) {
		s[0] = statusNotFound
		return
	}
	str, ok := in.values[i].(string)
	if !ok {
		s[0] = statusBadArgument
		return
	}
	if !utf8.ValidString(str) {
		// The guest may take the bytes as UTF-8 without checking them
		// (a check is a loop over every byte, which a guest pays dearly).
		str = strings.ToValidUTF8(str, "\uFFFD")
	}
	s[0] = uint64(in.returnBytes(ctx, uint32(s[1]), uint32(s[2]), unsafe.Slice(unsafe.StringData(str), len(str))))
}

// hSetResultString is set_result_string(ptr, len) (v1.2): in
// weft_on_call, the call's answer is this string (valid UTF-8, else
// BAD_ARGUMENT), with no JSON to write.
func (in *instance) hSetResultString(ctx context.Context, s []uint64) {
	if in == nil || in.phase != phaseServe {
		s[0] = statusNotFound
		return
	}
	b, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok || !utf8.Valid(b) {
		s[0] = statusBadArgument
		return
	}
	in.answer, in.answerString = append(in.answer[:0:0], b...), true
	s[0] = statusOK
}

// hGetDeadline is get_deadline() -> i64 (v1.2): the call's deadline in
// Unix milliseconds, 0 when it has none or outside a call.
func (in *instance) hGetDeadline(ctx context.Context, s []uint64) {
	if in == nil || in.phase == phaseIdle {
		s[0] = 0
		return
	}
	s[0] = uint64(in.deadline)
}
