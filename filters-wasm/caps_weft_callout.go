package wasmfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/sys"
)

// Callouts for weft-ABI filters (ABI v1.1, sdk/ABI.md "Capabilities
// (v1.1)"), on proxy-wasm's implementation (pw_callout.go): the same
// clusters (an http(s) URL or ref:<reference id>), the same max_callouts
// count, the same dispatch. weft's ABI has one callback per phase, so
// http_call blocks the callback that made it: the guest is paused inside
// the host function while the call's goroutine waits for the answer, then
// goes on with it. The wait is bounded by the callback's own bound (the
// call's deadline, or the filter's timeout without one; the guest call's
// timer in instance.call ends it at that moment): when that bound comes
// first, the callout is abandoned and the guest stopped, and the call
// fails as any callback still running at its bound does (code timeout,
// the instance discarded). timeout_ms, when shorter, bounds the callout
// alone: past it the guest gets TIMEOUT and decides.

// weftCaps is a weft-ABI filter's settings of v1.1's capabilities, fixed
// for its life, and the calls that may call out.
type weftCaps struct {
	clusters    map[string]string // name -> base URL or ref:<id>; nil: no callouts
	maxCallouts int
	// allowed is allowed_capabilities: v1.1's functions the filter may
	// call (v1's are always allowed); nil: all.
	allowed map[string]bool
	// calls are the calls being served by an instance, while it serves
	// them (*instance -> *weftCall): http_call finds there the bound of
	// the running callback. Only filters with clusters track them.
	calls sync.Map
}

// initWeftCaps reads a weft-ABI filter's capability settings from its
// Config (New).
func (f *Filter) initWeftCaps(c Config) error {
	w := &f.weft
	if len(c.Clusters) > 0 {
		w.clusters = c.Clusters
		f.httpClient = newCalloutClient()
	}
	if w.maxCallouts = c.MaxCallouts; w.maxCallouts <= 0 {
		w.maxCallouts = DefaultMaxCallouts
	}
	if len(c.AllowedCapabilities) == 0 {
		return nil
	}
	w.allowed = map[string]bool{}
	for _, name := range c.AllowedCapabilities {
		_, v1 := hostSignatures[name]
		if _, v11 := capHostFunctions[name]; !v1 && !v11 {
			return fmt.Errorf("allowed_capabilities: %q is not a host function of weft's ABI; its capabilities (v1.1) are %s (v1's functions, get_attachment, log..., are always allowed)",
				name, strings.Join(capNames(), ", "))
		}
		w.allowed[name] = true
	}
	return nil
}

// allows says whether the filter may call the host function name.
func (w *weftCaps) allows(name string) bool {
	if w.allowed == nil || w.allowed[name] {
		return true
	}
	_, v1 := hostSignatures[name]
	return v1
}

func capNames() []string {
	names := make([]string, 0, len(capHostFunctions))
	for n := range capHostFunctions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// refusedCap is what a v1.1 function not in allowed_capabilities does:
// REFUSED, and a log line naming it.
func refusedCap(name string) func(in *instance, ctx context.Context, s []uint64) {
	return func(in *instance, ctx context.Context, s []uint64) {
		if in != nil {
			in.f.warn(warnRefused, "weft: wasm filter called a host function its allowed_capabilities do not list; it got REFUSED",
				"function", name)
		}
		s[0] = statusRefused
	}
}

// weftCall is a call served by an instance of a filter that may call out.
type weftCall struct {
	ctx     context.Context
	timeout time.Duration
	// bound is when the running callback's guest call is stopped: the
	// call's deadline, or without one the callback's start plus the
	// filter's timeout (taken just before instance.call arms its timer,
	// so never after it).
	bound time.Time
}

// weftTrack records the call in serves for http_call, when the filter has
// clusters; nil otherwise. Invoke calls it before weft_on_request, and
// weftUntrack when the call is over.
func (f *Filter) weftTrack(in *instance, ctx context.Context) *weftCall {
	if f.weft.clusters == nil {
		return nil
	}
	wc := &weftCall{ctx: ctx, timeout: f.timeout}
	wc.rebound()
	f.weft.calls.Store(in, wc)
	return wc
}

// weftUntrack forgets wc, unless in serves another call already.
func (f *Filter) weftUntrack(in *instance, wc *weftCall) { f.weft.calls.CompareAndDelete(in, wc) }

// rebound takes the bound of the next callback: Invoke calls it before
// weft_on_response (a call without deadline gives each callback the
// filter's timeout afresh).
func (wc *weftCall) rebound() {
	if wc == nil {
		return
	}
	if d, ok := wc.ctx.Deadline(); ok {
		wc.bound = d
		return
	}
	wc.bound = time.Now().Add(wc.timeout)
}

// hHTTPCall is http_call(cluster_ptr, cluster_len, method_ptr, method_len,
// path_ptr, path_len, headers_ptr, headers_len, body_ptr, body_len,
// timeout_ms, ret_status_ptr, ret_headers_ptr_ptr, ret_headers_len_ptr,
// ret_body_ptr_ptr, ret_body_len_ptr).
func (in *instance) hHTTPCall(ctx context.Context, s []uint64) {
	if in == nil || in.inv == nil || in.phase == phaseIdle {
		// Outside a call's callback (_initialize, weft_on_tick,
		// weft_on_queue_ready) there is no call to pause.
		s[0] = statusNotFound
		return
	}
	f := in.f
	cluster, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	method, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	path, ok3 := in.read(uint32(s[4]), uint32(s[5]))
	hj, ok4 := in.read(uint32(s[6]), uint32(s[7]))
	body, ok5 := in.read(uint32(s[8]), uint32(s[9]))
	size := uint64(in.mem.Size())
	outsOK := true
	for _, p := range s[11:16] {
		if uint64(uint32(p))+4 > size {
			outsOK = false
		}
	}
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !outsOK {
		s[0] = statusBadArgument
		return
	}
	base, known := f.weft.clusters[string(cluster)]
	if !known {
		f.warn(warnUnimplemented, "weft: wasm filter called out to a cluster its config does not name (wasm.filters.<name>.clusters)",
			"cluster", clip(string(cluster)))
		s[0] = statusBadArgument
		return
	}
	hdrs, ok := parseHeaderJSON(hj)
	if !ok {
		s[0] = statusBadArgument
		return
	}
	m, p := "GET", "/"
	if len(method) > 0 {
		m = string(method)
	}
	if len(path) > 0 {
		p = string(path)
	}
	hdrs = append(hdrs, hdr{":method", m}, hdr{":path", p})
	if !f.takeCallout(f.weft.maxCallouts) {
		f.warn(warnUnimplemented, "weft: wasm filter has max_callouts callouts in flight; one more was refused (LIMIT)", "max_callouts", f.weft.maxCallouts)
		s[0] = statusLimit
		return
	}
	do, err := f.calloutFunc(base, hdrs, bytes.Clone(body))
	if err != nil {
		f.callouts.Add(-1)
		s[0] = statusBadArgument
		return
	}
	a, st := in.weftAwait(ctx, do, time.Duration(int32(s[10]))*time.Millisecond)
	if st != statusOK {
		s[0] = st
		return
	}
	retStatus := uint32(s[11])
	if st := in.returnBytes(ctx, uint32(s[12]), uint32(s[13]), headersJSON(a.hdrs)); st != statusOK {
		s[0] = uint64(st)
		return
	}
	if st := in.returnBytes(ctx, uint32(s[14]), uint32(s[15]), a.body); st != statusOK {
		s[0] = uint64(st)
		return
	}
	in.mem.WriteUint32Le(retStatus, uint32(a.status))
	s[0] = statusOK
}

// calloutAnswer is what a callout's upstream answered, or why not.
type calloutAnswer struct {
	status int
	hdrs   []hdr
	body   []byte
	err    error
}

// weftAwait makes the callout (counted in f.callouts, given back when it
// ends) and waits for its answer: OK with it, TIMEOUT when timeout (when
// above 0 and before the bound) passed first, UNAVAILABLE when it failed or
// the filter is closing. When the callback's bound comes first it does not
// return: it stops the guest (stopAtBound).
func (in *instance) weftAwait(ctx context.Context, do func(context.Context) (int, []hdr, []byte, error), timeout time.Duration) (calloutAnswer, uint64) {
	f := in.f
	// The callback's bound, and on the fast path what else stops it: a
	// cancellable call without deadline being cancelled. (On the slow
	// path ctx is the context wazero watches, done exactly when the guest
	// is stopped.)
	var bound time.Time
	var cancelled, stop <-chan struct{}
	if v, ok := f.weft.calls.Load(in); ok {
		wc := v.(*weftCall)
		bound = wc.bound
		if _, ok := wc.ctx.Deadline(); !ok {
			cancelled = wc.ctx.Done()
		}
	} else if d, ok := ctx.Deadline(); ok {
		bound = d
	} else {
		bound = time.Now().Add(f.timeout)
	}
	if !in.fast {
		stop = ctx.Done()
	}
	// Not the call's context: a deadline's Done is made only on demand
	// (as pwHTTPCall).
	d, own := bound, false
	if timeout > 0 {
		if t := time.Now().Add(timeout); t.Before(d) {
			d, own = t, true
		}
	}
	cctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	ch := make(chan calloutAnswer, 1)
	go func() {
		var a calloutAnswer
		a.status, a.hdrs, a.body, a.err = do(cctx)
		f.callouts.Add(-1)
		ch <- a
	}()
	t := time.NewTimer(time.Until(bound))
	defer t.Stop()
	select {
	case a := <-ch:
		switch {
		case a.err == nil:
			return a, statusOK
		case errors.Is(a.err, context.DeadlineExceeded) && !own:
			// Its deadline was the callback's bound.
		case errors.Is(a.err, context.DeadlineExceeded):
			return a, statusTimeout
		default:
			f.warn(warnCallout, "weft: wasm filter's callout failed; it got UNAVAILABLE", "error", a.err.Error())
			return a, statusUnavailable
		}
	case <-t.C:
	case <-cancelled:
	case <-stop:
	case <-f.tickStop: // Close: the App is stopping
		return calloutAnswer{}, statusUnavailable
	}
	cancel()
	in.stopAtBound(ctx)
	panic("unreachable")
}

// stopAtBound ends a host function whose callback reached its bound (the
// call's deadline, the filter's timeout, the call's cancellation): it waits
// for the host's own stop of the guest call, which marks the module (fast
// path) or ends wazero's watched context (slow path), so that
// instance.call reports the right cause, then aborts the guest at once
// (its next instruction would fail anyway): the call fails as any
// callback still running at that moment does, and the instance goes.
func (in *instance) stopAtBound(ctx context.Context) {
	limit := time.Now().Add(time.Second)
	code := uint32(sys.ExitCodeDeadlineExceeded)
	if in.fast {
		for in.closed.Load() == 0 && time.Now().Before(limit) {
			time.Sleep(50 * time.Microsecond)
		}
	} else if done := ctx.Done(); done != nil {
		select {
		case <-done:
		case <-time.After(time.Until(limit)):
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			code = sys.ExitCodeContextCanceled
		}
	}
	panic(sys.NewExitError(code))
}

// parseHeaderJSON reads http_call's headers: a JSON object of strings (or
// lists of strings, one header each), bounded as proxy-wasm's header maps
// are. Empty is none. Names must be HTTP tokens (":authority" is taken, as
// the Host), values without CR, LF or NUL.
func parseHeaderJSON(b []byte) ([]hdr, bool) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, true
	}
	if len(b) > pwMaxPairsBytes {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var kv []hdr
	add := func(k string, v any) bool {
		s, ok := v.(string)
		if !ok || strings.ContainsAny(s, "\r\n\x00") || len(kv) >= pwMaxPairs {
			return false
		}
		kv = append(kv, hdr{k, s})
		return true
	}
	for _, k := range keys {
		if k != ":authority" && !isToken(k) {
			return nil, false
		}
		switch v := m[k].(type) {
		case []any:
			for _, e := range v {
				if !add(k, e) {
					return nil, false
				}
			}
		default:
			if !add(k, v) {
				return nil, false
			}
		}
	}
	return kv, true
}

// isToken says whether s is an HTTP token (RFC 9110), as a header name is.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// headersJSON is an answer's headers as http_call returns them: a JSON
// object, names in lower case, values joined by ", " when a name repeats;
// pseudo-headers (:status) left out.
func headersJSON(hdrs []hdr) []byte {
	m := make(map[string]string, len(hdrs))
	for _, h := range hdrs {
		if strings.HasPrefix(h.k, ":") {
			continue
		}
		k := strings.ToLower(h.k)
		if v, ok := m[k]; ok {
			m[k] = v + ", " + h.v
		} else {
			m[k] = h.v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(m)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
