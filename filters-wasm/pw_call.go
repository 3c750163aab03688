package wasmfilter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/weftrpc/weft/kernel"
)

// pwConfig is a proxy-wasm filter's plugin settings, Envoy's and Istio's
// (PluginConfig / WasmPlugin): fixed for the filter's life.
type pwConfig struct {
	rootID           string
	config, vmConfig []byte
	clusters         map[string]string // upstream name -> base URL, for proxy_http_call
	maxCallouts      int
	// reqBody, respBody: the body callbacks run (Config.Body).
	reqBody, respBody bool
	// allowed is allowed_capabilities: the host functions and callbacks
	// the filter may use; nil: all.
	allowed map[string]bool
}

// alwaysAllowed are what every proxy-wasm module needs to run at all.
var alwaysAllowed = map[string]bool{pwOnMemoryAllocate: true, pwMalloc: true, pwOnContextCreate: true,
	pwOnVMStart: true, pwOnConfigure: true, pwOnDone: true, pwOnLog: true, pwOnDelete: true}

// allows says whether the filter may use the host function or callback name.
func (c *pwConfig) allows(name string) bool {
	return c.allowed == nil || c.allowed[name] || alwaysAllowed[name]
}

// Context ids: the root context of a VM's k-th filter (its plugin) is k in
// every instance (Filter.rootCtx, 1 for a filter alone); a call's stream
// contexts count up from the last root context's id + 1 (firstStream).

// pwInstance is an instance's proxy-wasm side: its callbacks, and the state
// of the call it serves.
type pwInstance struct {
	version string
	onContextCreate, onVMStart, onConfigure, onRequestHeaders, onResponseHeaders,
	onResponseTrailers, onDone, onLog, onDelete, onTick, onHTTPCallResponse, onQueueReady api.Function
	onRequestBody, onResponseBody                             api.Function
	onGRPCInitial, onGRPCReceive, onGRPCTrailing, onGRPCClose api.Function

	nextID      uint32 // the next stream context's id
	firstStream uint32 // the first stream context id: after the root contexts
	inVMStart   bool   // proxy_get_configuration (0.1.0) answers the VM's configuration

	// The call being served.
	ctx              context.Context
	ctxID            uint32
	req, reqTrailers headerView
	resp, trailers   headerView
	local            *localReply
	resumed, closed  bool
	broken           bool // a callback failed: the instance goes
	props            map[string]string
	uv               urlView // the call's URL as the header view shows it
	timeoutBuf       []byte  // the grpc-timeout header's bytes (pwRequestHeaders)
	body             pwBody  // the body of the callback running (pw_body.go)
	inTick           bool    // proxy_on_tick runs, or its callouts' answers (pw_tick.go)

	// Callouts of the call (pw_callout.go): answers come on events (made
	// at the call's first callout), pending counts those not answered
	// yet, cancels ends them with the call; answer is the one
	// proxy_on_http_call_response is about.
	events    chan *callout
	pending   int
	nextToken uint32
	cancels   []context.CancelFunc
	answer    *callout
}

func newPWInstance(mod api.Module, version string, c *pwConfig, roots uint32) *pwInstance {
	export := func(name string) api.Function {
		if !c.allows(name) {
			return nil // a callback not allowed is never called
		}
		return mod.ExportedFunction(name)
	}
	return &pwInstance{version: version, nextID: roots + 1, firstStream: roots + 1,
		onContextCreate:    export(pwOnContextCreate),
		onVMStart:          export(pwOnVMStart),
		onConfigure:        export(pwOnConfigure),
		onRequestHeaders:   export(pwOnRequestHeaders),
		onResponseHeaders:  export(pwOnResponseHeaders),
		onResponseTrailers: export(pwOnResponseTrailers),
		onDone:             export(pwOnDone),
		onLog:              export(pwOnLog),
		onDelete:           export(pwOnDelete),
		onTick:             export(pwOnTick),
		onHTTPCallResponse: export(pwOnHTTPCallResponse),
		onQueueReady:       export(pwOnQueueReady),
		onRequestBody:      export(pwOnRequestBody),
		onResponseBody:     export(pwOnResponseBody),
		onGRPCInitial:      export(pwOnGRPCInitial),
		onGRPCReceive:      export(pwOnGRPCReceive),
		onGRPCTrailing:     export(pwOnGRPCTrailing),
		onGRPCClose:        export(pwOnGRPCClose),
	}
}

// pwAllocator is the guest function the host asks for memory it hands data
// in: proxy_on_memory_allocate, else malloc (AssemblyScript's SDK).
func pwAllocator(mod api.Module) api.Function {
	if fn := mod.ExportedFunction(pwOnMemoryAllocate); fn != nil {
		return fn
	}
	return mod.ExportedFunction(pwMalloc)
}

// pwStartup starts a new instance as cpp-host (Envoy) does: the reactor's
// _initialize then main(0, 0) (or __main_void), or a command's _start; then
// for each filter of the VM (in.f is the host) its plugin's root context,
// proxy_on_vm_start with the VM's configuration and proxy_on_configure with
// the plugin's, each running as that filter (its properties, its logger,
// its tick). Either refusing (returning 0) fails the start-up, as it fails
// the plugin in Envoy.
func (in *instance) pwStartup(ctx context.Context) error {
	mod, host := in.mod, in.f
	defer func() { in.f = host }()
	run := func(name string, fn api.Function, args ...uint64) (uint64, error) {
		copy(in.stack[:], args)
		if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
			var exit *sys.ExitError
			if name == pwStart && errors.As(err, &exit) && exit.ExitCode() == 0 {
				return 0, nil // a command's main returned: proc_exit(0)
			}
			return 0, fmt.Errorf("%s failed: %w", name, guestErr(explainCtx(ctx, err, host.initTimeout)))
		}
		if in.abiErr != nil {
			return 0, fmt.Errorf("%s broke the ABI: %w", name, in.abiErr)
		}
		return in.stack[0], nil
	}
	if init := mod.ExportedFunction(exportInitialize); init != nil {
		if _, err := run(exportInitialize, init); err != nil {
			return err
		}
		if m := mod.ExportedFunction(pwMain); m != nil && sig(i32s(2), i32).matches(m.Definition().ParamTypes(), m.Definition().ResultTypes()) {
			if _, err := run(pwMain, m, 0, 0); err != nil {
				return err
			}
		} else if m := mod.ExportedFunction(pwMainVoid); m != nil && len(m.Definition().ParamTypes()) == 0 {
			if _, err := run(pwMainVoid, m); err != nil {
				return err
			}
		}
	} else if start := mod.ExportedFunction(pwStart); start != nil {
		if _, err := run(pwStart, start); err != nil {
			return err
		}
	}
	for _, m := range host.members {
		in.f = m
		if err := in.pwStartRoot(run); err != nil {
			if len(host.members) > 1 {
				return fmt.Errorf("filter %q (root context %d of vm_id %q): %w", m.name, m.rootCtx, m.vmID, err)
			}
			return err
		}
	}
	return nil
}

// pwStartRoot creates the root context of in.f's plugin and starts and
// configures it, with run (pwStartup's).
func (in *instance) pwStartRoot(run func(name string, fn api.Function, args ...uint64) (uint64, error)) error {
	p, pc, id := in.pw, in.f.pw, uint64(in.f.rootCtx)
	if p.onContextCreate != nil {
		if _, err := run(pwOnContextCreate, p.onContextCreate, id, 0); err != nil {
			return err
		}
	}
	if p.onVMStart != nil {
		p.inVMStart = true
		ok, err := run(pwOnVMStart, p.onVMStart, id, uint64(len(pc.vmConfig)))
		p.inVMStart = false
		if err != nil {
			return err
		}
		if uint32(ok) == 0 {
			return errors.New("proxy_on_vm_start returned false: the module refused to start (its vm_configuration?)")
		}
	}
	if p.onConfigure != nil {
		ok, err := run(pwOnConfigure, p.onConfigure, id, uint64(len(pc.config)))
		if err != nil {
			return err
		}
		if uint32(ok) == 0 {
			return errors.New("proxy_on_configure returned false: the plugin refused its configuration")
		}
	}
	return nil
}

// pwCall runs one callback with its arguments (see instance.call for the
// bounds); a callback the module does not export answers CONTINUE.
func (in *instance) pwCall(ctx context.Context, fn api.Function, name string, args ...uint32) (uint32, error) {
	if fn == nil {
		return pwContinue, nil
	}
	for i, a := range args {
		in.stack[i] = uint64(a)
	}
	return in.call(ctx, fn, name)
}

// begin readies the proxy-wasm state for a call: a new stream context.
func (p *pwInstance) begin(ctx context.Context) {
	p.ctx = ctx
	p.ctxID = p.nextID
	if p.nextID++; p.nextID == 0 {
		p.nextID = p.firstStream
	}
	p.req.built, p.req.dirty = false, false
	p.reqTrailers = headerView{}
	p.resp.built, p.resp.dirty = false, false
	p.trailers.built, p.trailers.dirty = false, false
	p.local, p.resumed, p.closed, p.broken = nil, false, false, false
	p.props = nil
}

func (p *pwInstance) end() {
	p.ctx = nil
	for _, cancel := range p.cancels {
		cancel()
	}
	clear(p.cancels)
	p.cancels, p.events, p.pending, p.answer = p.cancels[:0], nil, 0, nil
	// Views of one call's headers are not kept for the instance's life.
	p.req.kv, p.resp.kv, p.trailers.kv = clearHdrs(p.req.kv), clearHdrs(p.resp.kv), clearHdrs(p.trailers.kv)
}

func clearHdrs(kv []hdr) []hdr {
	if cap(kv) > 64 {
		return nil
	}
	clear(kv)
	return kv[:0]
}

// countAttachments counts the headers attachments make (countless: the
// callback gets the number, the map is built only if the guest looks).
func countAttachments(m map[string]any) uint32 {
	n := uint32(0)
	for k := range m {
		if !pwSynthetic(k) {
			n++
		}
	}
	return n
}

func (in *instance) pwRequestCount() uint32 {
	n := uint32(6) + countAttachments(in.inv.Attachments())
	if _, ok := in.pw.ctx.Deadline(); ok {
		n++
	}
	return n
}

// pwHeadersCall runs a headers callback with the count of headers and
// end_of_stream; 0.1.0's callbacks take no end_of_stream.
func (in *instance) pwHeadersCall(ctx context.Context, fn api.Function, name string, n uint32, end bool) (uint32, error) {
	if in.pw.version == pwABI010 {
		return in.pwCall(ctx, fn, name, in.pw.ctxID, n)
	}
	eos := uint32(0)
	if end {
		eos = 1
	}
	return in.pwCall(ctx, fn, name, in.pw.ctxID, n, eos)
}

// verdict is what a callback's answer means for the call: nil to go on, or
// the call's error (a local response, a closed stream, a pause nothing can
// resume).
func (in *instance) verdict(act uint32, what string) error {
	p, f := in.pw, in.f
	switch {
	case p.local != nil:
		return kernel.Errorf(p.local.code(), "wasm filter %q answered the call itself (%s: HTTP %d, grpc-status %d): %s",
			f.name, what, p.local.httpStatus, p.local.grpcStatus, p.local.msg)
	case p.closed:
		return kernel.Errorf(kernel.CodeNetwork, "wasm filter %q closed the call's stream in %s", f.name, what)
	case act == pwContinue || act == pwContinueAndEndStr || p.resumed:
		return nil
	}
	f.warn(warnPaused, "weft: proxy-wasm filter paused a call with nothing pending that could resume it (no callout in flight); the call fails",
		"callback", what, "action", act)
	return kernel.Errorf(kernel.CodeUnknown, "wasm filter %q paused the call in %s (action %d) with nothing pending that could resume it",
		f.name, what, act)
}

// invokeProxy serves a call through a proxy-wasm filter, as Envoy runs an
// HTTP filter over a gRPC request: a stream context, the request headers
// (the call's attachments, end_of_stream set: no body callbacks run), the
// rest of the chain, the response headers and trailers, then proxy_on_done,
// proxy_on_log and proxy_on_delete. The instance is held for the whole call.
func (f *Filter) invokeProxy(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	v, in, err := f.acquire(ctx, pwOnRequestHeaders)
	if err != nil {
		if be, ok := err.(*backoffErr); ok {
			return f.failedOpen(ctx, be.err, next, inv, nil)
		}
		return kernel.Result{}, err
	}
	in.begin(next, inv)
	p := in.pw
	p.begin(ctx)
	in.arm(ctx)
	if _, err := in.pwCall(ctx, p.onContextCreate, pwOnContextCreate, p.ctxID, f.rootCtx); err != nil {
		return f.pwFailed(ctx, v, in, err, next, inv)
	}
	reqBody := f.pw.reqBody && p.onRequestBody != nil
	act, err := in.pwHeadersCall(ctx, p.onRequestHeaders, pwOnRequestHeaders, in.pwRequestCount(), !reqBody)
	if err != nil {
		return f.pwFailed(ctx, v, in, err, next, inv)
	}
	rej, err := in.await(ctx, act, pwOnRequestHeaders)
	if err != nil {
		return f.pwFailed(ctx, v, in, err, next, inv)
	}
	var args []any
	if rej == nil && reqBody {
		if args, rej, err = in.pwBodyCall(ctx, p.onRequestBody, pwOnRequestBody, pwBufRequestBody, inv.Args); err != nil {
			return f.pwFailed(ctx, v, in, err, next, inv)
		}
	}
	if rej != nil {
		in.pwDone(ctx)
		in.pwRelease(v)
		return kernel.Result{}, rej
	}
	if p.req.dirty {
		applyAttachments(p.req.kv, inv.Attachments, inv.SetAttachment, inv.RemoveAttachment)
	}
	if args != nil {
		inv.Args = args
	}
	// The timer armed above stays armed while the rest of the chain runs:
	// if the deadline passes meanwhile, the response's callbacks could not
	// run anyway (notRun) and the instance would go all the same.
	res, callErr := next.Invoke(ctx, inv)
	in.respond(res, callErr)
	respBody := f.pw.respBody && p.onResponseBody != nil && callErr == nil
	var value []any
	if p.onResponseHeaders != nil || p.onResponseTrailers != nil || respBody {
		n := 2 + countAttachments(res.Attachments)
		act, err := in.pwHeadersCall(ctx, p.onResponseHeaders, pwOnResponseHeaders, n, false)
		var rej error
		if err == nil {
			rej, err = in.await(ctx, act, pwOnResponseHeaders)
		}
		if err == nil && rej == nil && respBody {
			value, rej, err = in.pwBodyCall(ctx, p.onResponseBody, pwOnResponseBody, pwBufResponseBody, []any{res.Value})
		}
		if err == nil && rej != nil {
			in.res, in.callErr = kernel.Result{}, rej
		} else if err == nil {
			n = 1
			if callErr != nil {
				n = 2
			}
			act, err = in.pwCall(ctx, p.onResponseTrailers, pwOnResponseTrailers, p.ctxID, n)
			if err == nil {
				rej, err = in.await(ctx, act, pwOnResponseTrailers)
				if err == nil && rej != nil {
					in.res, in.callErr = kernel.Result{}, rej
				}
			}
		}
		if err != nil {
			if _, ok := err.(*notRun); ok {
				// No time is left to run the guest: the call's own
				// outcome (most likely its timeout) is the answer.
				// Its stream context cannot be ended in the guest: the
				// instance goes.
				in.pw.broken = true
				in.pwRelease(v)
				return res, callErr
			}
			return f.pwFailed(ctx, v, in, err, next, inv)
		}
		if in.callErr == callErr {
			if value != nil {
				in.res.Value = value[0]
			}
			in.pwApplyResponse()
		}
	}
	res, callErr = in.res, in.callErr
	in.pwDone(ctx)
	in.pwRelease(v)
	return res, callErr
}

// pwApplyResponse applies the guest's edits of the response: its headers to
// the result's attachments, and a grpc-status it set in the trailers to the
// call's outcome (a success turned into that error; an error cannot be
// turned into a success, which has no value).
func (in *instance) pwApplyResponse() {
	p := in.pw
	if p.resp.dirty {
		applyAttachments(p.resp.kv, func() map[string]any { return in.res.Attachments },
			func(k string, v any) {
				if in.res.Attachments == nil {
					in.res.Attachments = make(map[string]any, 2)
				}
				in.res.Attachments[k] = v
			},
			func(k string) { delete(in.res.Attachments, k) })
	}
	if !p.trailers.dirty {
		return
	}
	status, msg := -1, ""
	for _, h := range p.trailers.kv {
		switch {
		case strings.EqualFold(h.k, "grpc-status"):
			if n, err := strconv.Atoi(h.v); err == nil {
				status = n
			}
		case strings.EqualFold(h.k, "grpc-message"):
			msg = h.v
		}
	}
	switch {
	case status > 0 && in.callErr == nil:
		in.res, in.callErr = kernel.Result{}, kernel.Errorf(kernel.CodeOfGRPCStatus(status),
			"wasm filter %q set grpc-status %d on the response: %s", in.f.name, status, msg)
	case status == 0 && in.callErr != nil:
		in.f.warn(warnTrap, "weft: proxy-wasm filter set grpc-status 0 on a failed call; the error stands (a failure has no value to return)",
			"error", in.callErr.Error())
	}
}

// pwDone ends the call's stream context: proxy_on_done, then proxy_on_log
// and proxy_on_delete. A failure here costs the instance, not the call,
// whose outcome is decided.
func (in *instance) pwDone(ctx context.Context) {
	p := in.pw
	for _, cb := range []struct {
		fn   api.Function
		name string
	}{{p.onDone, pwOnDone}, {p.onLog, pwOnLog}, {p.onDelete, pwOnDelete}} {
		if _, err := in.pwCall(ctx, cb.fn, cb.name, p.ctxID); err != nil {
			p.broken = true // pwRelease discards the instance
			return
		}
	}
}

// pwRelease ends the call on the instance and returns it, or discards it
// when its stream context could not be ended.
func (in *instance) pwRelease(v *version) {
	// A timer that fired as the callbacks ended has marked the instance.
	broken := in.disarm() || in.pw.broken
	in.pw.end()
	in.end()
	if broken {
		v.discard(in)
		return
	}
	v.put(in)
}

// pwFailed handles a callback that failed (trap, timeout, memory, ABI
// violation): the instance is discarded, and the call fails, or with
// fail_open goes on as if the filter were not there (in the response's
// callbacks, with the response as the chain answered it).
func (f *Filter) pwFailed(ctx context.Context, v *version, in *instance, err error, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	phase, res, callErr := in.phase, in.res, in.callErr
	in.pw.end()
	in.end()
	v.discard(in)
	if nr, ok := err.(*notRun); ok {
		if phase == phaseResponse {
			return res, callErr
		}
		return kernel.Result{}, f.ctxError(nr.err, "before the filter's callbacks ran")
	}
	if phase == phaseResponse {
		return f.failedOpen(ctx, err, next, inv, func() (kernel.Result, error) { return res, callErr })
	}
	return f.failedOpen(ctx, err, next, inv, nil)
}
