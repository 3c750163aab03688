package wasmfilter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/weftrpc/weft/kernel"
)

// version is one compiled build of the module file and its pool of instances.
// A reload makes a new version current and retires the old one: its idle
// instances are closed at once, its busy ones when their call ends, and its
// compiled code with the last of them.
type version struct {
	f   *Filter
	cm  wazero.CompiledModule
	seq int // 1 for the module loaded at New, then +1 per reload
	// config is get_config's JSON for this version's instances: a new
	// config makes a new version, as guests may keep what they read.
	config []byte
	// fast: wazero's per-call watch is off for cm and the host bounds the
	// guest calls itself (see instance.call); decided by load once the
	// first instance has started, before any other exists. slow says why
	// not.
	fast bool
	slow string
	// pwABI is the proxy-wasm ABI version the module declares ("" for a
	// weft-ABI module).
	pwABI string

	mu       sync.Mutex
	idle     []*instance // LIFO
	live     int         // idle + busy + being created
	creating int         // of live, instances being created
	filling  bool        // a spare is being created in the background
	retired  bool
	released sync.Once
	// waiters are the calls waiting for an instance because max_instances
	// are live, first come first served: a returned instance, or room for a
	// new one, goes to waiters[0] before the idle stack or a spare.
	waiters []*waiter
}

// waiter is one call waiting for an instance. ch is buffered and sent to
// under mu, once, after the waiter left waiters: the sender never blocks,
// and a waiter that gives up finds a grant made just before it in ch.
type waiter struct{ ch chan grant }

// grant is what a waiter gets: an instance, room to make one (already
// counted in live and creating), or word that the version was retired.
type grant struct {
	in      *instance
	room    bool
	retired bool
}

// errRetired is get's answer when a reload retired v between the caller's
// load of the current version and its get: the caller retries on the new one.
var errRetired = errors.New("module version retired")

// errStarting is get's answer when the call's context was done before the
// instance it waited for had started; that instance joins the pool.
var errStarting = errors.New("a new instance was still starting")

// get takes an idle instance or makes one. A new instance's start-up is
// bounded by the filter's start-up limit, not by the call's budget (see
// instantiate), and the call waits for it only while its context allows:
// when ctx is done first, get returns errStarting at once and the instance,
// once started, is kept for a later call. Whenever get leaves no instance
// idle, a spare is made in the background. When max_instances are live
// (the spare included), the call waits for one to come back or to be
// discarded (see wait).
func (v *version) get(ctx context.Context) (*instance, error) {
	v.mu.Lock()
	if v.retired {
		v.mu.Unlock()
		return nil, errRetired
	}
	if n := len(v.idle); n > 0 {
		in := v.idle[n-1]
		v.idle[n-1] = nil
		v.idle = v.idle[:n-1]
		v.spareLocked()
		v.mu.Unlock()
		return in, nil
	}
	if !v.roomLocked() {
		w := &waiter{ch: make(chan grant, 1)}
		v.waiters = append(v.waiters, w)
		v.mu.Unlock()
		g, err := v.wait(ctx, w)
		switch {
		case err != nil:
			return nil, err
		case g.retired:
			return nil, errRetired
		case g.in != nil:
			return g.in, nil
		}
		return v.start(ctx) // g.room: counted for this call
	}
	v.live++
	v.creating++
	v.spareLocked()
	v.mu.Unlock()
	return v.start(ctx)
}

// start makes an instance already counted in live and creating for a call,
// waiting for it while ctx allows (see get).
func (v *version) start(ctx context.Context) (*instance, error) {
	if ctx.Done() == nil {
		// Nothing can end the wait: start the instance on this goroutine.
		return v.create()
	}
	v.mu.Lock()
	if v.retired {
		// Retired since the room was counted (a grant raced with a
		// reload or Close): Close may be past its Wait, so no background
		// work may start now.
		v.unroomLocked()
		last := v.live == 0
		v.mu.Unlock()
		if last {
			v.release()
		}
		return nil, errRetired
	}
	v.f.bg.Add(1) // under mu with v not retired: before Close's Wait
	v.mu.Unlock()
	type made struct {
		in  *instance
		err error
	}
	ch := make(chan made, 1)
	var claimed atomic.Bool // by the first of the creator and the caller giving up
	go func() {
		defer v.f.bg.Done()
		in, err := v.create()
		if claimed.CompareAndSwap(false, true) {
			ch <- made{in, err}
			return
		}
		if err != nil {
			v.createFailed(err)
			return
		}
		v.put(in) // the caller has gone: the instance serves a later call
	}()
	var m made
	select {
	case m = <-ch:
	case <-ctx.Done():
		if claimed.CompareAndSwap(false, true) {
			return nil, errStarting
		}
		m = <-ch // made just as ctx was done
	}
	if m.err == nil && ctx.Err() != nil {
		v.put(m.in) // unused: it serves a later call
		return nil, errStarting
	}
	return m.in, m.err
}

// roomLocked says whether another instance may be made: max_instances
// counts every live one, idle, busy or starting (the spare too).
func (v *version) roomLocked() bool {
	return v.f.maxInstances <= 0 || v.live < v.f.maxInstances
}

// unroomLocked takes back room counted for an instance that will not be
// made, and offers it to the next waiter.
func (v *version) unroomLocked() {
	v.live--
	v.creating--
	v.grantLocked()
}

// grantLocked gives the room that max_instances leaves to waiting calls, in
// order; each makes its own instance, under its own deadline. v.mu is held.
func (v *version) grantLocked() {
	for len(v.waiters) > 0 && !v.retired && v.roomLocked() {
		w := v.waiters[0]
		v.waiters[0] = nil
		v.waiters = v.waiters[1:]
		v.live++
		v.creating++
		w.ch <- grant{room: true}
	}
}

// errFull is wait's answer when the call's wait for an instance ended
// before one was free; Invoke turns it into the call's error.
type errFull struct{ waited time.Duration }

func (e *errFull) Error() string { return "every instance was busy (max_instances)" }

// wait waits for a returned instance, or room for a new one, until ctx is
// done; a call without deadline waits at most the filter's timeout, the
// bound its guest calls would have (a call never waits without end behind
// calls that hold every instance). A grant that arrives as the wait ends
// is used if ctx still allows, else passed on.
func (v *version) wait(ctx context.Context, w *waiter) (grant, error) {
	start := time.Now()
	wctx := ctx
	_, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, v.f.timeout)
		defer cancel()
	}
	select {
	case g := <-w.ch:
		return g, nil
	case <-wctx.Done():
	}
	v.mu.Lock()
	if i := slices.Index(v.waiters, w); i >= 0 {
		v.waiters = slices.Delete(v.waiters, i, i+1)
		v.mu.Unlock()
		return grant{}, &errFull{waited: time.Since(start)}
	}
	v.mu.Unlock()
	g := <-w.ch // granted just before the wait ended
	if ctx.Err() == nil || g.retired {
		return g, nil
	}
	switch {
	case g.in != nil:
		v.put(g.in)
	case g.room:
		v.mu.Lock()
		v.unroomLocked()
		last := v.retired && v.live == 0
		v.mu.Unlock()
		if last {
			v.release()
		}
	}
	return grant{}, &errFull{waited: time.Since(start)}
}

// spareLocked starts making a spare instance in the background when none is
// idle and none is being made already, so that the next call, and the one
// after a failure cost an instance, rarely waits for a start-up. v.mu is
// held.
func (v *version) spareLocked() {
	if v.retired || v.filling || len(v.idle) > 0 || v.f.vmClosed.Load() || !v.roomLocked() {
		return
	}
	v.filling = true
	v.live++
	v.creating++
	v.f.bg.Add(1)
	go func() {
		defer v.f.bg.Done()
		in, err := v.create()
		v.mu.Lock()
		v.filling = false
		v.mu.Unlock()
		if err != nil {
			v.createFailed(err)
			return
		}
		v.put(in)
	}()
}

// create makes an instance already counted in live and creating, and
// uncounts it if that fails.
func (v *version) create() (*instance, error) {
	var in *instance
	var err error
	if left := v.f.crash.backingOff(time.Now()); left > 0 {
		err = v.f.backoffError(left)
	} else if in, err = v.instantiate(); err != nil && !v.f.vmClosed.Load() {
		v.f.stats.startFailures.Add(1)
		if v.f.crash.note(time.Now()) {
			v.f.stats.backoffs.Add(1)
		}
	}
	v.mu.Lock()
	v.creating--
	if err != nil {
		v.live--
		v.grantLocked()
		last := v.retired && v.live == 0
		v.mu.Unlock()
		if last {
			v.release()
		}
		return nil, err
	}
	v.mu.Unlock()
	v.f.stats.created.Add(1)
	return in, nil
}

// createFailed logs the failure of an instance made in the background: no
// call is there to report it (the next call to need one will).
func (v *version) createFailed(err error) {
	if !v.f.vmClosed.Load() {
		v.f.warn(warnStart, "weft: wasm filter could not start an instance", "module_version", v.seq, "error", err.Error())
	}
}

// put returns a healthy instance after its call.
func (v *version) put(in *instance) {
	// The guest may have grown its memory during the call; the instance
	// is not running now, so its size can be read.
	if n := int64(in.mem.Size()); n != in.memSeen {
		v.f.stats.memBytes.Add(n - in.memSeen)
		in.memSeen = n
	}
	v.mu.Lock()
	if !v.retired && len(v.waiters) > 0 {
		w := v.waiters[0]
		v.waiters[0] = nil
		v.waiters = v.waiters[1:]
		// The instance goes from one call to the next without becoming
		// idle: a spare is due as when a call takes the last idle one.
		v.spareLocked()
		v.mu.Unlock()
		w.ch <- grant{in: in}
		return
	}
	if !v.retired && len(v.idle) < v.f.maxIdle {
		v.idle = append(v.idle, in)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	v.discard(in)
}

// discard closes an instance: after a failure (its state is suspect), on
// surplus, or because its version is retired. An instance lost to a failure
// is replaced in the background when none is left idle.
func (v *version) discard(in *instance) {
	in.close()
	v.f.stats.discarded.Add(1)
	v.mu.Lock()
	v.live--
	last := v.retired && v.live == 0
	v.grantLocked()
	v.spareLocked()
	v.mu.Unlock()
	if last {
		v.release()
	}
}

// retire stops v from serving new calls.
func (v *version) retire() {
	v.mu.Lock()
	v.retired = true
	idle := v.idle
	v.idle = nil
	none := v.live == 0
	// Waiting calls go on to the new version (or learn that the filter
	// is closed).
	for _, w := range v.waiters {
		w.ch <- grant{retired: true}
	}
	v.waiters = nil
	v.mu.Unlock()
	for _, in := range idle {
		v.discard(in)
	}
	if none {
		v.release()
	}
}

func (v *version) release() {
	v.released.Do(func() { v.cm.Close(context.Background()) })
}

// instance is one module instance and the state of the call it serves.
type instance struct {
	v   *version
	f   *Filter
	mod api.Module
	mem api.Memory
	// memSeen is the memory size last added to the filter's memBytes.
	memSeen int64

	alloc, onRequest, onResponse api.Function
	onCall                       api.Function // weft_on_call (v1.2): a service's handler
	onTick                       api.Function // weft_on_tick (v1.1)

	// stack is the parameter/result stack of callbacks (proxy-wasm's take
	// up to five), alloc's of the guest's allocator (called from inside host
	// functions while a callback's stack is in use): reused, so calls do not
	// allocate.
	stack      [5]uint64
	allocStack [1]uint64

	// How a guest call is bounded (see call). fast: wazero's per-call watch
	// is off for this module (internals.go) and timer, reset for each guest
	// call to its deadline or the filter's timeout, stops the guest by
	// marking the module closed (closed is wazero's ModuleInstance.Closed;
	// nil if not found). Otherwise the call's context goes to wazero, whose
	// watch stops the guest, and timer cancels ictx, the context of the
	// calls without deadline or cancellation: created once per instance, so
	// that they cost a timer Reset and Stop, not a new context.
	fast    bool
	closed  *atomic.Uint64
	timer   *time.Timer
	ictx    context.Context
	icancel context.CancelCauseFunc
	// onCancel marks the module closed as cancelled: the context.AfterFunc
	// of a cancellable call without deadline (made once per instance).
	onCancel func()
	// markMu orders marking the module closed (a timer's goroutine) with
	// closing it (closeModule); marked is the exit code it was marked with,
	// 0 when not marked.
	markMu sync.Mutex
	marked uint32
	// seq is stopDeadline while in.timer bounds a sequence of guest calls
	// (see arm), stopNone otherwise.
	seq stopReason

	busy atomic.Int32

	// The call being served.
	next     kernel.Invoker
	inv      *kernel.Invocation
	phase    int
	res      kernel.Result
	callErr  error
	rejected bool
	rejCode  kernel.Code
	rejMsg   string
	abiErr   error  // the first ABI violation a host function saw
	scratch  []byte // arguments/result JSON, reused
	// answer is what a service's weft_on_call answered (set_result: JSON),
	// nil when it set none; deadline the call's, Unix ms (0: none).
	answer   []byte
	deadline int64
	args     func() ([]byte, error) // a service's arguments as JSON, given by Serve
	values   []any                  // and as values (get_argument_string)
	// answerString: answer is a string set by set_result_string, not JSON.
	answerString bool
	keys         map[string]string

	// pw is the proxy-wasm side of an instance of a proxy-wasm filter.
	pw *pwInstance
}

const maxScratch = 64 << 10

const (
	phaseIdle = iota
	phaseRequest
	phaseResponse
	phaseServe // weft_on_call: set_result answers, attachments set go back with the result
)

var errGuestTimeout = errors.New("guest ran past the filter's timeout")

// guestCtx is the context of guest calls on the fast path: no Done channel,
// so wazero watches nothing (the host bounds the call, see call), and no
// values, which no host function reads.
var guestCtx = context.Background()

// stopReason is why the host stopped a guest call, if it did.
type stopReason int

const (
	stopNone      stopReason = iota
	stopTimeout              // the filter's timeout (a call without deadline)
	stopDeadline             // the call's deadline
	stopCancelled            // the call's cancellation
)

// notRun is call's error when the call's context was done before the guest
// could run: the instance is untouched and goes back to the pool.
type notRun struct{ err error }

func (e *notRun) Error() string { return e.err.Error() }

// instantiate makes a new instance. Instantiation runs the module's start
// function when it has one (a WebAssembly start section: wazero runs it
// whatever the config's start functions, which name exports such as
// _start), then _initialize and the version check run; all of it under the
// filter's start-up limit, from the moment it starts. None of it is charged
// to a call: the call's own budget starts with its first callback.
func (v *version) instantiate() (*instance, error) {
	f := v.f
	if f.vmClosed.Load() {
		return nil, errors.New("instantiate: the filter is closed")
	}
	ctx, cancel := context.WithTimeout(f.starting, f.initTimeout)
	defer cancel()
	mod, err := f.rt.InstantiateModule(ctx, v.cm, f.modCfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate (the module's start function): %w", guestErr(explainCtx(ctx, err, f.initTimeout)))
	}
	in := &instance{v: v, f: f, mod: mod, mem: mod.Memory()}
	if f.pw != nil {
		in.alloc, in.pw = pwAllocator(mod), newPWInstance(mod, v.pwABI, f.pw, uint32(len(f.members)))
		if in.mem == nil || in.alloc == nil {
			mod.Close(context.Background())
			return nil, errors.New("instantiate: memory, or proxy_on_memory_allocate and malloc, missing")
		}
	} else {
		in.alloc = mod.ExportedFunction(exportAlloc)
		in.onRequest = mod.ExportedFunction(exportOnRequest)
		in.onResponse = mod.ExportedFunction(exportOnResponse)
		in.onTick = mod.ExportedFunction(exportOnTick)
		in.onCall = mod.ExportedFunction(exportOnCall)
		if in.mem == nil || in.alloc == nil || (in.onRequest == nil && in.onCall == nil) {
			mod.Close(context.Background())
			return nil, errors.New("instantiate: memory, weft_alloc, or weft_on_request and weft_on_call missing")
		}
	}
	in.closed, _ = closedWord(mod) // load reports the error, if any, when it decides on the fast path
	in.fast = v.fast && in.closed != nil
	f.byMod.Store(mod, in)
	fail := func(err error) (*instance, error) {
		f.byMod.Delete(mod)
		in.closeModule()
		return nil, err
	}
	// The start-up limit, and Close through f.starting, stop the guest by
	// marking the module closed: wazero's watch may be off for this compiled
	// module even before v decides on the fast path (a reload of the same
	// bytes shares the compiled module of the version it replaces). While
	// the watch is on it stops the guest too; the first to mark it wins.
	stopped := func() bool { return true }
	if in.closed != nil {
		stopped = context.AfterFunc(ctx, func() {
			code := sys.ExitCodeContextCanceled
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				code = sys.ExitCodeDeadlineExceeded
			}
			in.markClosed(code)
		})
	}
	if f.pw != nil {
		if err := in.pwStartup(ctx); err != nil {
			stopped()
			return fail(err)
		}
		if !stopped() {
			return fail(fmt.Errorf("start-up still running after the start-up limit of %v", f.initTimeout))
		}
	} else {
		if init := mod.ExportedFunction(exportInitialize); init != nil {
			if err := init.CallWithStack(ctx, in.stack[:]); err != nil {
				stopped()
				return fail(fmt.Errorf("_initialize failed: %w", guestErr(explainCtx(ctx, err, f.initTimeout))))
			}
		}
		if in.abiErr != nil {
			stopped()
			return fail(fmt.Errorf("_initialize broke the ABI: %w", in.abiErr))
		}
		if err := mod.ExportedFunction(exportVersion).CallWithStack(ctx, in.stack[:]); err != nil {
			stopped()
			return fail(fmt.Errorf("weft_abi_version failed: %w", guestErr(explainCtx(ctx, err, f.initTimeout))))
		}
		if !stopped() {
			// Marked closed (or about to be) as weft_abi_version returned.
			return fail(fmt.Errorf("weft_abi_version failed: still running after the start-up limit of %v", f.initTimeout))
		}
		if got := int32(in.stack[0]); got != ABIVersion {
			return fail(&versionError{got})
		}
	}
	in.memSeen = int64(in.mem.Size())
	f.stats.memBytes.Add(in.memSeen)
	in.ictx, in.icancel = context.WithCancelCause(context.Background())
	in.onCancel = func() { in.markClosed(sys.ExitCodeContextCanceled) }
	in.timer = time.AfterFunc(time.Hour, in.expire)
	in.timer.Stop()
	return in, nil
}

// expire is in.timer's function: the guest call it was reset for ran to its
// bound (the call's deadline or the filter's timeout).
func (in *instance) expire() {
	if in.fast {
		in.markClosed(sys.ExitCodeDeadlineExceeded)
		return
	}
	in.icancel(errGuestTimeout) // wazero's watch sees ictx done
}

// markClosed stops the guest running in the instance at its next loop
// back-edge, from another goroutine (a timer's), without touching the
// module's resources (see internals.go); closeModule closes it for real.
func (in *instance) markClosed(code uint32) {
	in.markMu.Lock()
	if markModuleClosed(in.closed, code) {
		in.marked = code
	}
	in.markMu.Unlock()
}

// closeModule closes the instance's module, once no guest call runs in it. A
// module the host marked closed is handed back to wazero first (its Closed
// word reset), so that Close removes it from the runtime and releases its
// resources as for any module; under markMu, so that a timer firing late
// cannot mark it in between.
func (in *instance) closeModule() {
	in.markMu.Lock()
	defer in.markMu.Unlock()
	if in.marked != 0 {
		in.closed.Store(0)
		in.marked = 0
	}
	in.mod.Close(context.Background())
}

// versionError is a module's weft_abi_version returning another version
// than ABIVersion (Check reports the version it got).
type versionError struct{ got int32 }

func (e *versionError) Error() string {
	return fmt.Sprintf("weft_abi_version returned %d; this host implements ABI version %d", e.got, ABIVersion)
}

func explainCtx(ctx context.Context, err error, limit time.Duration) error {
	if ctx.Err() != nil {
		return fmt.Errorf("still running after the start-up limit of %v: %w", limit, err)
	}
	return err
}

func (in *instance) close() {
	in.v.f.stats.memBytes.Add(-in.memSeen)
	in.memSeen = 0
	in.v.f.byMod.Delete(in.mod)
	if in.timer != nil {
		in.timer.Stop()
		in.icancel(nil)
	}
	in.closeModule()
}

func (in *instance) begin(next kernel.Invoker, inv *kernel.Invocation) {
	if n := in.busy.Add(1); n > 1 {
		// Never expected: recorded so tests (and Stats) can prove it.
		for {
			m := in.f.stats.maxBusy.Load()
			if n <= m || in.f.stats.maxBusy.CompareAndSwap(m, n) {
				break
			}
		}
	} else if in.f.stats.maxBusy.Load() == 0 {
		in.f.stats.maxBusy.CompareAndSwap(0, 1)
	}
	in.next, in.inv, in.phase = next, inv, phaseRequest
	in.rejected, in.rejMsg, in.abiErr = false, "", nil
}

func (in *instance) respond(res kernel.Result, err error) {
	in.res, in.callErr, in.phase = res, err, phaseResponse
	in.rejected, in.rejMsg, in.abiErr = false, "", nil
}

func (in *instance) end() {
	in.next, in.inv, in.phase = nil, nil, phaseIdle
	in.res, in.callErr = kernel.Result{}, nil
	in.answer, in.deadline, in.args, in.values, in.answerString = nil, 0, nil, nil, false
	if cap(in.scratch) > maxScratch {
		in.scratch = nil // one call's large arguments are not kept for the instance's life
	}
	in.busy.Add(-1)
}

// call runs one guest callback under the invocation's deadline, or the
// filter's timeout when it has none. Any failure leaves the instance unfit for
// reuse; the caller discards it, except after a *notRun: a call whose
// context is done before the guest runs fails without running it.
//
// On the fast path in.timer is the bound: reset to the time left until the
// deadline (or to the filter's timeout), it marks the module closed when it
// fires, which stops the guest at its next loop back-edge, and the call fails
// whether or not the guest returned just in time (it fired: the module is
// marked, or about to be). The deadline's context is not watched: its Done
// channel is never asked for (kernel.WithDeadline, the provider's, makes one
// only on demand, with a timer of its own), so a call with a deadline that
// is cancelled earlier stops its guest at the deadline at the latest, and
// its next callback does not run. A cancellable call without deadline is
// watched (context.AfterFunc: rare, and no other bound is that close).
func (in *instance) call(ctx context.Context, fn api.Function, what string) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, &notRun{err}
	}
	if !in.fast {
		return in.callWatched(ctx, fn, what)
	}
	if in.seq != stopNone {
		// Armed for the sequence: the timer runs; it fired if it marked
		// the module. Marked already, the deadline passed before this
		// callback (the timer can fire before the context's own, a
		// callout's or the caller's wait notices): the guest did not
		// fail, its callback is not run.
		if in.closed.Load() != 0 {
			return 0, &notRun{context.DeadlineExceeded}
		}
		err := fn.CallWithStack(guestCtx, in.stack[:])
		if in.closed.Load() != 0 {
			return 0, in.failure(what, err, in.stopReason(in.seq, false))
		}
		return in.result(what, err)
	}
	bound, why := in.f.timeout, stopTimeout
	var stopCancel func() bool
	if d, ok := ctx.Deadline(); ok {
		if bound, why = time.Until(d), stopDeadline; bound <= 0 {
			return 0, &notRun{context.DeadlineExceeded}
		}
	} else if ctx.Done() != nil {
		stopCancel = context.AfterFunc(ctx, in.onCancel)
	}
	in.timer.Reset(bound)
	err := fn.CallWithStack(guestCtx, in.stack[:])
	timedOut := !in.timer.Stop()
	cancelled := stopCancel != nil && !stopCancel()
	if timedOut || cancelled {
		return 0, in.failure(what, err, in.stopReason(why, cancelled))
	}
	return in.result(what, err)
}

// result is a guest call's answer once it is known not to have been
// stopped by the host.
func (in *instance) result(what string, err error) (uint32, error) {
	if err != nil {
		return 0, in.failure(what, err, stopNone)
	}
	if in.abiErr != nil {
		return 0, in.failure(what, in.abiErr, stopNone)
	}
	return uint32(in.stack[0]), nil
}

// arm bounds the guest calls of one proxy-wasm call (its six callbacks)
// by the call's deadline with one Reset of in.timer, instead of a Reset and
// a Stop around each: call then only checks that the timer has not marked
// the module. A call without deadline
// keeps a bound per callback (the filter's timeout bounds each guest call),
// and so does the slow path (wazero watches each call).
func (in *instance) arm(ctx context.Context) {
	if !in.fast || in.seq != stopNone {
		return
	}
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	bound := time.Until(d)
	if bound <= 0 {
		return // call answers notRun
	}
	in.timer.Reset(bound)
	in.seq = stopDeadline
}

// disarm ends arm's sequence. It reports whether the timer fired: the
// deadline passed, and the instance, marked, is unfit for reuse.
func (in *instance) disarm() (fired bool) {
	if in.seq == stopNone {
		return false
	}
	in.seq = stopNone
	return !in.timer.Stop()
}

// stopReason tells which of the timer (bound) and the cancellation stopped a
// guest call, by the exit code the first of them marked the module with, or,
// when neither has yet, by which fired.
func (in *instance) stopReason(bound stopReason, cancelled bool) stopReason {
	in.markMu.Lock()
	code := in.marked
	in.markMu.Unlock()
	switch {
	case code == sys.ExitCodeDeadlineExceeded:
		return bound
	case code == sys.ExitCodeContextCanceled, cancelled:
		return stopCancelled
	}
	return bound
}

// callWatched is call when wazero's per-call watch is on (the fast path is
// unavailable, see internals.go): wazero stops the guest when the context it
// is given is done. A call without deadline gets the filter's timeout:
// through ictx and in.timer when its context cannot be cancelled, through a
// context of its own when it can.
func (in *instance) callWatched(ctx context.Context, fn api.Function, what string) (uint32, error) {
	cctx := ctx
	timed := false
	if _, ok := ctx.Deadline(); !ok {
		if ctx.Done() == nil {
			cctx, timed = in.ictx, true
			in.timer.Reset(in.f.timeout)
		} else {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeoutCause(ctx, in.f.timeout, errGuestTimeout)
			defer cancel()
		}
	}
	err := fn.CallWithStack(cctx, in.stack[:])
	if timed && !in.timer.Stop() {
		// The timer fired: the instance is (or is about to be) closed,
		// even if the guest returned just in time.
		return 0, in.failure(what, err, stopTimeout)
	}
	if err != nil {
		return 0, in.failure(what, err, watchedReason(cctx, err))
	}
	if in.abiErr != nil {
		return 0, in.failure(what, in.abiErr, stopNone)
	}
	return uint32(in.stack[0]), nil
}

// watchedReason tells from the error of a call that wazero watched whether
// its watch stopped the guest, and why.
func watchedReason(cctx context.Context, err error) stopReason {
	var exit *sys.ExitError
	if !errors.As(err, &exit) {
		return stopNone
	}
	switch code := exit.ExitCode(); {
	case code != sys.ExitCodeDeadlineExceeded && code != sys.ExitCodeContextCanceled:
		return stopNone
	case errors.Is(context.Cause(cctx), errGuestTimeout):
		return stopTimeout
	case code == sys.ExitCodeDeadlineExceeded:
		return stopDeadline
	}
	return stopCancelled
}

// failure turns a failed guest call into the call's error and logs it with
// the guest's stack trace. why is what stopped the guest, if the host did.
func (in *instance) failure(what string, err error, why stopReason) error {
	f := in.f
	var ke *kernel.Error
	var exit *sys.ExitError
	var abi *abiError
	detail := "stopped by the host"
	if err != nil {
		detail = err.Error()
	}
	switch {
	case f.closed.Load():
		ke = kernel.Errorf(kernel.CodeUnknown, "wasm filter %q was closed while %s ran (its App is stopping)", f.name, what)
	case why == stopTimeout:
		ke = kernel.Errorf(kernel.CodeTimeout, "wasm filter %q: %s ran past the filter's timeout of %v; the instance was stopped and discarded",
			f.name, what, f.timeout)
	case why == stopDeadline:
		ke = kernel.Errorf(kernel.CodeTimeout, "wasm filter %q: %s was still running at the call's deadline; the instance was stopped and discarded",
			f.name, what)
	case why == stopCancelled:
		ke = kernel.Wrap(kernel.CodeUnknown, context.Canceled, "wasm filter %q: the call was cancelled while %s ran; the instance was stopped and discarded",
			f.name, what)
	case errors.As(err, &abi):
		ke = kernel.Wrap(kernel.CodeUnknown, abi, "wasm filter %q: %s broke the ABI; the instance was discarded", f.name, what)
	case errors.As(err, &exit):
		ke = kernel.Errorf(kernel.CodeUnknown, "wasm filter %q: %s exited (proc_exit) with code %d; the instance was discarded",
			f.name, what, exit.ExitCode())
	default:
		// A failed memory.grow is invisible to the host (the guest sees -1
		// and usually traps later), so the memory in use is reported with
		// every trap: "51 of 64 pages" points at the cap.
		ke = kernel.Wrap(kernel.CodeUnknown, guestErr(err), "wasm filter %q: %s trapped (memory: %d of max_memory_pages %d); the instance was discarded",
			f.name, what, in.mem.Size()/65536, f.maxPages)
	}
	f.stats.failures.Add(1)
	kind := warnTrap
	if ke.Code == kernel.CodeTimeout || errors.Is(ke, context.Canceled) {
		kind = warnTimeout
		f.stats.timeouts.Add(1)
	} else {
		f.stats.traps.Add(1)
	}
	f.warn(kind, "weft: wasm filter call failed", "module_version", in.v.seq, "error", ke.Msg, "detail", detail)
	return ke
}

// rejection is the error of a callback that did not return CONTINUE.
func (in *instance) rejection(act uint32, what string) error {
	f := in.f
	if act != actionReject {
		return kernel.Errorf(kernel.CodeUnknown, "wasm filter %q: %s returned %d, which is neither CONTINUE (0) nor REJECT (1)",
			f.name, what, int32(act))
	}
	if !in.rejected {
		return kernel.Errorf(kernel.CodeForbidden, "wasm filter %q rejected the call", f.name)
	}
	return kernel.Errorf(in.rejCode, "wasm filter %q rejected the call: %s", f.name, in.rejMsg)
}

// guestError shows the first line of a wazero error (the wasm stack trace
// that follows goes to the log, not into the call's error message).
type guestError struct{ err error }

func guestErr(err error) error { return &guestError{err} }

func (g *guestError) Error() string {
	s := g.err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (g *guestError) Unwrap() error { return g.err }

// abiError is a guest's misuse of a host function that has no status to
// report it with (counter_add with a key outside memory, say), or a
// weft_alloc that trapped: the call fails and the instance is discarded.
type abiError struct{ msg string }

func (e *abiError) Error() string { return e.msg }
