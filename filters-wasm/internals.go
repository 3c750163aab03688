package wasmfilter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The fast call path (see the package doc, "Limits") reaches two fields
// inside wazero that its API does not expose. Both are found by reflection,
// and every step checks the name and type of what it reaches, so a wazero
// whose layout differs is detected and never written to blindly; a
// behavioural self-test then checks, once per process, that a guest is still
// stopped with the per-call watch off. When anything fails the filter keeps
// wazero's own per-call watch (slower, but bounded the same way) and logs why
// once.
//
// Checked against wazero v1.12.0:
//
//   - compiledModule.ensureTermination (internal/engine/wazevo) is set at
//     compile time from RuntimeConfig.WithCloseOnContextDone. The compiler
//     reads it once, to emit a check of ModuleInstance.Closed on every loop
//     back-edge (frontend/lower.go); the module keeps those checks whatever
//     the field holds afterwards. At run time one place reads it:
//     callEngine.callWithStack, on every call, to fail a call whose context
//     is already done and to start CloseModuleOnCanceledOrTimeout, a
//     goroutine and a channel per call, even for a context that can never
//     be done. Turning the field off after compilation removes exactly those
//     two; the host does both itself, cheaper (instance.call). The other
//     writers (engine_cache.go, at compilation) run before; the interpreter
//     has a field of the same name but is never used here (the layout check
//     would refuse its types anyway).
//   - ModuleInstance.Closed (internal/wasm) is what the back-edge checks read
//     (FailIfClosed): non-zero fails the running call with a sys.ExitError
//     carrying the high 32 bits as exit code. The host stops a guest by
//     setting it with a compare-and-swap, as wazero's own watch does, and
//     does not close the module's resources from the timer's goroutine:
//     api.Module.CloseWithExitCode would, racing with a WASI function the
//     guest may be running at that moment (wazero fixed that race for its
//     own watch, #1314/#1336, by deferring the resources to the call's
//     goroutine). The low bits, wazero's own flags, are left zero, so
//     FailIfClosed touches no resource either; the instance is closed for
//     real (Closed reset, then Close) once its call has returned.

const (
	wazevoPkg = "github.com/tetratelabs/wazero/internal/engine/wazevo"
	wasmPkg   = "github.com/tetratelabs/wazero/internal/wasm"
)

// errLayout is the error of a layout check: the wazero in use is not laid
// out as the fast path expects.
type errLayout struct{ msg string }

func (e *errLayout) Error() string {
	return "wazero's internals differ from v1.12.0's: " + e.msg
}

func layoutErr(format string, args ...any) error { return &errLayout{fmt.Sprintf(format, args...)} }

// isPtrToStruct reports whether t is *pkg.name, a struct.
func isPtrToStruct(t reflect.Type, pkg, name string) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct &&
		t.Elem().PkgPath() == pkg && t.Elem().Name() == name
}

// field returns field name of the struct p points to, after checking that p
// is a non-nil *pkg.typ and that the field is declared there (not promoted)
// with a type that ok accepts (want describes it in errors). The value is
// addressable: its UnsafeAddr is the field's address.
func field(p reflect.Value, pkg, typ, name string, ok func(reflect.Type) bool, want string) (reflect.Value, error) {
	if !isPtrToStruct(p.Type(), pkg, typ) {
		return reflect.Value{}, layoutErr("%v is not *%s.%s", p.Type(), pkg, typ)
	}
	if p.IsNil() {
		return reflect.Value{}, layoutErr("the *%s is nil", typ)
	}
	sf, found := p.Type().Elem().FieldByName(name)
	if !found || len(sf.Index) != 1 {
		return reflect.Value{}, layoutErr("%s.%s has no field %s", pkg, typ, name)
	}
	if !ok(sf.Type) {
		return reflect.Value{}, layoutErr("%s.%s is %v, not %s", typ, name, sf.Type, want)
	}
	return p.Elem().Field(sf.Index[0]), nil
}

func ptrTo(pkg, name string) func(reflect.Type) bool {
	return func(t reflect.Type) bool { return isPtrToStruct(t, pkg, name) }
}

func is(want reflect.Type) func(reflect.Type) bool {
	return func(t reflect.Type) bool { return t == want }
}

// callWatchFlag finds the ensureTermination field of the compiled module fn
// belongs to: fn is a *wazevo.callEngine, whose parent is the instance's
// *moduleEngine, whose parent is the *compiledModule shared by every
// instance of the module.
func callWatchFlag(fn api.Function) (*bool, error) {
	if fn == nil {
		return nil, layoutErr("no function")
	}
	me, err := field(reflect.ValueOf(fn), wazevoPkg, "callEngine", "parent", ptrTo(wazevoPkg, "moduleEngine"), "*moduleEngine")
	if err != nil {
		return nil, err
	}
	cm, err := field(me, wazevoPkg, "moduleEngine", "parent", ptrTo(wazevoPkg, "compiledModule"), "*compiledModule")
	if err != nil {
		return nil, err
	}
	et, err := field(cm, wazevoPkg, "compiledModule", "ensureTermination", is(reflect.TypeFor[bool]()), "bool")
	if err != nil {
		return nil, err
	}
	return (*bool)(unsafe.Pointer(et.UnsafeAddr())), nil
}

// disableCallWatch turns off wazero's per-call watch for the compiled module
// fn belongs to, and every instance of it, present and future. The module
// must have been compiled by a runtime WithCloseOnContextDone(true) (so that
// its code checks ModuleInstance.Closed), and no instance of it may be
// running a call while the flag is written: it is written only when still
// set, so calling this again for a module already done (a reload of the same
// bytes shares the compiled module in use) only reads it.
func disableCallWatch(fn api.Function) error {
	p, err := callWatchFlag(fn)
	if err != nil {
		return err
	}
	if *p {
		*p = false
	}
	return nil
}

// closedWord finds the ModuleInstance.Closed word of mod.
func closedWord(mod api.Module) (*atomic.Uint64, error) {
	if mod == nil {
		return nil, layoutErr("no module")
	}
	c, err := field(reflect.ValueOf(mod), wasmPkg, "ModuleInstance", "Closed", is(reflect.TypeFor[atomic.Uint64]()), "atomic.Uint64")
	if err != nil {
		return nil, err
	}
	return (*atomic.Uint64)(unsafe.Pointer(c.UnsafeAddr())), nil
}

// markModuleClosed stops the guest running in the module whose Closed word is w at
// its next loop back-edge (or return), failing its call with a sys.ExitError
// of code; it reports false when the module was closed already.
func markModuleClosed(w *atomic.Uint64, code uint32) bool {
	return w.CompareAndSwap(0, uint64(code)<<32)
}

// spinWasm is the self-test's module (wat2wasm of):
//
//	(module
//	  (global $n (export "n") (mut i32) (i32.const 0))
//	  (func (export "spin") (param $iters i32)
//	    (loop $l
//	      (global.set $n (i32.add (global.get $n) (i32.const 1)))
//	      (br_if $l (i32.lt_u (global.get $n) (local.get $iters))))))
var spinWasm = []byte("\x00asm\x01\x00\x00\x00\x01\x05\x01`\x01\x7f\x00\x03\x02\x01\x00\x06\x06\x01\x7f\x01A\x00\x0b" +
	"\x07\x0c\x02\x01n\x03\x00\x04spin\x00\x00\n\x15\x01\x13\x00\x03@#\x00A\x01j$\x00#\x00 \x00I\r\x00\x0b\x0b")

var fastPath struct {
	once sync.Once
	err  error
}

// fastPathError says why the fast path cannot be used with the wazero this
// program is built with (nil: it can). It runs the self-test once per
// process.
func fastPathError() error {
	fastPath.once.Do(func() { fastPath.err = selfTest() })
	return fastPath.err
}

// selfTest checks on a module of its own, in a runtime configured as a
// filter's, what the fast path relies on: with the per-call watch off a call
// still runs and returns, and a module marked closed stops its guest at the
// first loop back-edge (a loop of 16M iterations that ran to its end would
// mean that the compiled code no longer checks), with the exit code marked.
func selfTest() (err error) {
	ctx := context.Background()
	rt := newRuntime(ctx, 1)
	defer rt.Close(ctx)
	mod, err := rt.InstantiateWithConfig(ctx, spinWasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return fmt.Errorf("self-test module: %w", err)
	}
	spin, n := mod.ExportedFunction("spin"), mod.ExportedGlobal("n")
	w, err := closedWord(mod)
	if err != nil {
		return err
	}
	if err := disableCallWatch(spin); err != nil {
		return err
	}
	if p, _ := callWatchFlag(spin); *p {
		return errors.New("self-test: the per-call watch is still on")
	}
	stack := []uint64{1000}
	if err := spin.CallWithStack(ctx, stack); err != nil || n.Get() != 1000 {
		return fmt.Errorf("self-test: a call with the watch off returned %v after %d iterations, want nil after 1000", err, n.Get())
	}
	if !markModuleClosed(w, sys.ExitCodeDeadlineExceeded) {
		return errors.New("self-test: the module was closed already")
	}
	stack[0] = 1 << 24
	err = spin.CallWithStack(ctx, stack)
	var exit *sys.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded || n.Get() > 1002 {
		return fmt.Errorf("self-test: a guest marked closed returned %v after %d iterations, want exit code %d at once", err, n.Get()-1000, sys.ExitCodeDeadlineExceeded)
	}
	// As instance.closeModule does: hand the module back to wazero, which
	// then closes it and its resources as for any module.
	w.Store(0)
	if err := mod.Close(ctx); err != nil || !mod.IsClosed() {
		return fmt.Errorf("self-test: closing the stopped module: %v (closed %v)", err, mod.IsClosed())
	}
	return nil
}

// hasStartSection reports whether the WebAssembly binary b (already compiled,
// so well-formed) has a start section, or could not be read far enough to
// tell. wazero runs a start function inside InstantiateModule, before the
// host has the instance it could stop: such a module keeps wazero's per-call
// watch, which bounds it.
func hasStartSection(b []byte) bool {
	const startSection = 8
	if len(b) < 8 {
		return true
	}
	for i := 8; i < len(b); {
		id := b[i]
		i++
		var size uint64
		for shift := 0; ; shift += 7 {
			if i >= len(b) || shift > 28 {
				return true
			}
			c := b[i]
			i++
			size |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		if id == startSection {
			return true
		}
		if size > uint64(len(b)-i) {
			return true
		}
		i += int(size)
	}
	return false
}
