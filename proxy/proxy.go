// Package proxy is Dubbo's Proxy layer: it turns a Go service implementation
// into a kernel.Invoker on the provider side, and fills a consumer's stub (a
// struct of func fields) with functions that call an invoker.
//
// Method names follow the Java convention on the wire: Go's SayHello is
// "sayHello". The provider accepts both spellings, as dubbo-go does.
package proxy

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"unsafe"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

var (
	ctxType = reflect.TypeOf((*context.Context)(nil)).Elem()
	errType = reflect.TypeOf((*error)(nil)).Elem()
)

// WireName is the name a Go method goes by on the wire: the first rune
// lowered, as Java methods are named.
func WireName(goName string) string { return view.WireName(goName) }

type method struct {
	// fast calls the method without reflection for the commonest
	// signatures; nil for the others.
	fast    func(ctx context.Context, args []any) (any, error, bool)
	name    string // wire name
	fn      reflect.Value
	withCtx bool
	in      []reflect.Type // without ctx
	hasVal  bool
	hasErr  bool
	stream  kernel.StreamKind
}

// ServiceInvoker calls the methods of one Go value. Its method table is built
// once, in NewServiceInvoker.
type ServiceInvoker struct {
	url     *kernel.URL
	methods map[string]*method
	names   []string
}

// NewServiceInvoker builds the invoker of impl, whose exported methods become
// the service's methods. A method may take a context.Context first and may
// return a value, an error, both (value first) or nothing.
func NewServiceInvoker(url *kernel.URL, impl any) (*ServiceInvoker, error) {
	v := reflect.ValueOf(impl)
	if !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, fmt.Errorf("weft: service %s: nil implementation", url.ServiceKey())
	}
	t := v.Type()
	s := &ServiceInvoker{url: url, methods: map[string]*method{}}
	for i := 0; i < t.NumMethod(); i++ {
		m := t.Method(i)
		if !m.IsExported() {
			continue
		}
		fn := v.Method(i)
		ft := fn.Type()
		md := &method{name: WireName(m.Name), fn: fn}
		start := 0
		if ft.NumIn() > 0 && ft.In(0) == ctxType {
			md.withCtx, start = true, 1
		}
		if ft.IsVariadic() {
			continue
		}
		for j := start; j < ft.NumIn(); j++ {
			md.in = append(md.in, ft.In(j))
		}
		switch ft.NumOut() {
		case 0:
		case 1:
			if ft.Out(0) == errType {
				md.hasErr = true
			} else {
				md.hasVal = true
			}
		case 2:
			if ft.Out(1) != errType {
				continue
			}
			md.hasVal, md.hasErr = true, true
		default:
			continue
		}
		if kind, at := streamKindOf(md.in); at >= 0 {
			// A stream parameter: server streaming takes its one request
			// before it; the others take the stream alone.
			want := map[kernel.StreamKind]string{
				kernel.ServerStreaming: "func([ctx,] in, *proxy.ServerStream[Out]) error",
				kernel.ClientStreaming: "func([ctx,] *proxy.ClientStream[In]) (Out, error)",
				kernel.BidiStreaming:   "func([ctx,] *proxy.BidiStream[In, Out]) error",
			}[kind]
			ok := md.hasErr && md.hasVal == (kind == kernel.ClientStreaming)
			if kind == kernel.ServerStreaming {
				ok = ok && at == 1 && len(md.in) == 2
			} else {
				ok = ok && at == 0 && len(md.in) == 1
			}
			if !ok {
				return nil, fmt.Errorf("weft: service %s: method %s takes a stream: a %s-streaming method is %s", url.ServiceKey(), m.Name, kind, want)
			}
			md.stream = kind
		} else {
			md.fast = fastPathOf(v, m, fn)
		}
		s.methods[md.name] = md
		s.methods[m.Name] = md
		s.names = append(s.names, md.name)
	}
	if len(s.names) == 0 {
		return nil, fmt.Errorf("weft: service %s: %T has no exported method of the form [ctx,] args... -> [value][, error]", url.ServiceKey(), impl)
	}
	sort.Strings(s.names)
	return s, nil
}

// URL describes the service.
func (s *ServiceInvoker) URL() *kernel.URL { return s.url }

// WithURL returns an invoker of the same implementation and method table
// under another URL (one per exported protocol).
func (s *ServiceInvoker) WithURL(u *kernel.URL) *ServiceInvoker {
	c := *s
	c.url = u
	return &c
}

// IsAvailable is always true.
func (s *ServiceInvoker) IsAvailable() bool { return true }

// Destroy does nothing: the implementation belongs to the user.
func (s *ServiceInvoker) Destroy() {}

// StreamKinds returns the streaming methods' kinds by wire name and by Go
// name (unary methods are not in it).
func (s *ServiceInvoker) StreamKinds() map[string]kernel.StreamKind {
	kinds := map[string]kernel.StreamKind{}
	for n, md := range s.methods { // wire and Go names both
		if md.stream != kernel.Unary {
			kinds[n] = md.stream
		}
	}
	return kinds
}

// MethodNames lists the wire names of the service's methods, sorted.
func (s *ServiceInvoker) MethodNames() []string { return append([]string(nil), s.names...) }

// Invoke calls the method. An error the method returns, or a panic in it,
// becomes a business error.
func (s *ServiceInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (res kernel.Result, err error) {
	md := s.methods[inv.Method]
	if md == nil {
		return res, kernel.Errorf(kernel.CodeMethodNotFound, "service %s has no method %q (methods: %s)",
			s.url.ServiceKey(), view.Cut(inv.Method, 200), strings.Join(s.names, ", "))
	}
	if len(inv.Args) != len(md.in) {
		return res, kernel.Errorf(kernel.CodeSerialization, "method %s.%s takes %d arguments, got %d",
			s.url.ServiceKey(), md.name, len(md.in), len(inv.Args))
	}
	if md.fast != nil {
		if cur, ok := kernel.InvocationFrom(ctx); !ok || cur != inv {
			ctx = kernel.WithInvocation(ctx, inv)
		}
		if v, err, ok := callFast(md.fast, ctx, inv.Args, s.url.ServiceKey(), md.name); ok {
			if err != nil {
				return kernel.Result{Attachments: inv.ReplyAttachments()}, kernel.BizError(err)
			}
			return kernel.Result{Value: v, Attachments: inv.ReplyAttachments()}, nil
		}
	}
	n := len(md.in)
	if md.withCtx {
		n++
	}
	var buf [4]reflect.Value
	in := buf[:0]
	if n > len(buf) {
		in = make([]reflect.Value, 0, n)
	}
	if md.withCtx {
		// A copy: taking ctx's own address would move it to the heap on
		// every call, the fast path's included.
		cctx := ctx
		if cur, ok := kernel.InvocationFrom(cctx); !ok || cur != inv {
			cctx = kernel.WithInvocation(cctx, inv)
		}
		in = append(in, reflect.ValueOf(&cctx).Elem())
	}
	for i, a := range inv.Args {
		if st, ok := a.(kernel.Stream); ok && md.stream != kernel.Unary && md.in[i].Implements(streamEndType) {
			in = append(in, bindStream(st, md.in[i]))
			continue
		}
		v, cerr := convert(a, md.in[i])
		if cerr != nil {
			return res, kernel.Wrap(kernel.CodeSerialization, cerr, "method %s.%s argument %d", s.url.ServiceKey(), md.name, i)
		}
		in = append(in, v)
	}
	defer func() {
		if p := recover(); p != nil {
			res, err = kernel.Result{}, kernel.BizError(newPanic(s.url.ServiceKey(), md.name, p))
		}
	}()
	out := md.fn.Call(in)
	if md.hasErr {
		if e := out[len(out)-1]; !e.IsNil() {
			return kernel.Result{Attachments: inv.ReplyAttachments()}, kernel.BizError(e.Interface().(error))
		}
	}
	if md.hasVal {
		res.Value = out[0].Interface()
	}
	res.Attachments = inv.ReplyAttachments()
	return res, nil
}

// fastPathOf returns the reflection-free caller of method m of recv. With a
// pointer receiver it calls the method's code directly, the receiver passed
// as the pointer it is: a method value taken through reflect (fn) is a
// closure that calls back into reflect on every call, which costs an
// allocation and a signature lookup each time. Other receivers take fn.
func fastPathOf(recv reflect.Value, m reflect.Method, fn reflect.Value) func(ctx context.Context, args []any) (any, error, bool) {
	if recv.Kind() != reflect.Pointer || m.Func.Type().NumIn() != fn.Type().NumIn()+1 || m.Func.Type().In(0) != recv.Type() {
		return fastPath(fn.Interface())
	}
	self := recv.UnsafePointer()
	code := m.Func.Interface()
	switch fn.Interface().(type) {
	case func(context.Context, string) (string, error):
		f := asFunc[func(unsafe.Pointer, context.Context, string) (string, error)](code)
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].(string)
			if !ok {
				return nil, nil, false
			}
			v, err := f(self, ctx, a)
			return v, err, true
		}
	case func(context.Context, string) error:
		f := asFunc[func(unsafe.Pointer, context.Context, string) error](code)
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].(string)
			if !ok {
				return nil, nil, false
			}
			return nil, f(self, ctx, a), true
		}
	case func(context.Context, []byte) ([]byte, error):
		f := asFunc[func(unsafe.Pointer, context.Context, []byte) ([]byte, error)](code)
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].([]byte)
			if !ok {
				return nil, nil, false
			}
			v, err := f(self, ctx, a)
			return v, err, true
		}
	}
	return fastPath(fn.Interface())
}

// asFunc reinterprets fn, a func(*T, args...) results... held in an
// interface, as F, the same signature with the receiver as unsafe.Pointer.
// Both pass the receiver as one pointer word in the same place, so the call
// is the method's own; the caller has checked the shape (F's tail is fn's
// method signature, *T a pointer type).
func asFunc[F any](fn any) F {
	var f F
	// A func value is one pointer, stored as the interface's data word.
	*(*unsafe.Pointer)(unsafe.Pointer(&f)) = (*[2]unsafe.Pointer)(unsafe.Pointer(&fn))[1]
	return f
}

// fastPath returns a reflection-free caller for the commonest method
// shapes. It reports ok=false when an argument is not of the exact type, and
// the general path (with conversions) takes over.
func fastPath(fn any) func(ctx context.Context, args []any) (any, error, bool) {
	switch f := fn.(type) {
	case func(context.Context, string) (string, error):
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].(string)
			if !ok {
				return nil, nil, false
			}
			v, err := f(ctx, a)
			return v, err, true
		}
	case func(context.Context, string) error:
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].(string)
			if !ok {
				return nil, nil, false
			}
			return nil, f(ctx, a), true
		}
	case func(context.Context, []byte) ([]byte, error):
		return func(ctx context.Context, args []any) (any, error, bool) {
			a, ok := args[0].([]byte)
			if !ok {
				return nil, nil, false
			}
			v, err := f(ctx, a)
			return v, err, true
		}
	}
	return nil
}

// PanicError is a panic in a service method, recovered: the Go form of
// Java's unchecked, undeclared exception (a fault in the provider, not an
// answer the method meant to give). It travels as a business error; the
// exception filter logs it with Stack and sends it as
// java.lang.RuntimeException.
type PanicError struct {
	Service, Method string
	// Value is what the method panicked with.
	Value any
	// Stack is the panicking goroutine's stack, for the provider's log only.
	Stack []byte
}

func newPanic(svc, method string, p any) *PanicError {
	return &PanicError{Service: svc, Method: method, Value: p, Stack: debug.Stack()}
}

func (e *PanicError) Error() string {
	var v string
	switch p := e.Value.(type) {
	case error:
		v = p.Error()
	case string:
		v = p
	default:
		// A panic value may hold what a caller sent: bounded, as every
		// walk of such a value.
		v = view.Text(p)
	}
	return "panic in " + e.Service + "." + e.Method + ": " + view.Cut(v, 4096)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// callFast runs a fast caller, turning a panic into a business error as the
// general path does.
func callFast(fast func(context.Context, []any) (any, error, bool), ctx context.Context, args []any, svc, name string) (v any, err error, ok bool) {
	if len(args) != 1 {
		return nil, nil, false
	}
	defer func() {
		if p := recover(); p != nil {
			v, err, ok = nil, newPanic(svc, name, p), true
		}
	}()
	return fast(ctx, args)
}

// convert makes v a value of type t: as it is when assignable; numbers
// converted when they fit; pointers taken or followed; lists, maps and
// structs converted element by element, a struct from a map of its fields
// (what generic calls and some hessian decodings deliver); nil as the zero
// value.
//
// A decoded value may share containers many times over (a small frame can
// describe a list with 2^64 leaves), so the conversion counts every value it
// visits against convertLimits, as every walker of decoded values does.
func convert(v any, t reflect.Type) (reflect.Value, error) {
	if v == nil {
		return reflect.Zero(t), nil
	}
	if d, ok := v.(kernel.Decodable); ok {
		return d.DecodeAs(t)
	}
	return converter{view.NewBudget(convertLimits)}.value(reflect.ValueOf(v), t, 0)
}

// convertLimits bound the conversion of one argument or result: deeper than
// any Go type a service declares, and as many values as a payload-limited
// frame decodes.
var convertLimits = view.Limits{MaxDepth: 256, MaxNodes: 1 << 21}

type converter struct{ b *view.Budget }

func (c converter) value(rv reflect.Value, t reflect.Type, depth int) (reflect.Value, error) {
	if err := c.b.Visit(depth); err != nil {
		return reflect.Value{}, fmt.Errorf("converting to %s: %w", t, err)
	}
	for rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return reflect.Zero(t), nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return reflect.Zero(t), nil
	}
	rt := rv.Type()
	if rt.AssignableTo(t) {
		return rv, nil
	}
	switch {
	case isNumber(rv.Kind()) && isNumber(t.Kind()):
		return convertNumber(rv, t)
	case rv.Kind() == reflect.Pointer:
		if rv.IsNil() {
			return reflect.Zero(t), nil
		}
		return c.value(rv.Elem(), t, depth+1)
	case t.Kind() == reflect.Pointer:
		e, err := c.value(rv, t.Elem(), depth+1)
		if err != nil {
			return reflect.Value{}, err
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(e)
		return p, nil
	case t.Kind() == reflect.Slice && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array):
		out := reflect.MakeSlice(t, rv.Len(), rv.Len())
		for i := 0; i < rv.Len(); i++ {
			e, err := c.value(rv.Index(i), t.Elem(), depth+1)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("element %d: %w", i, err)
			}
			out.Index(i).Set(e)
		}
		return out, nil
	case t.Kind() == reflect.Map && rv.Kind() == reflect.Map:
		out := reflect.MakeMapWithSize(t, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k, err := c.value(it.Key(), t.Key(), depth+1)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("map key %s: %w", view.Cut(fmt.Sprint(it.Key()), 64), err)
			}
			e, err := c.value(it.Value(), t.Elem(), depth+1)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("map value of %s: %w", view.Cut(fmt.Sprint(it.Key()), 64), err)
			}
			out.SetMapIndex(k, e)
		}
		return out, nil
	case t.Kind() == reflect.Struct && rv.Kind() == reflect.Map:
		return c.structFromMap(rv, t, depth)
	case t.Kind() == reflect.Struct && rv.Kind() == reflect.Struct:
		// Same fields under another type (a POJO decoded into a registered
		// Go type that differs from the method's).
		m := reflect.ValueOf(view.GenericWith(rv.Interface(), convertLimits))
		if m.Kind() != reflect.Map {
			// A value kept as it is (a date): no fields to take.
			return reflect.Value{}, fmt.Errorf("want %s, got %s", t, rt)
		}
		return c.structFromMap(m, t, depth)
	}
	return reflect.Value{}, fmt.Errorf("want %s, got %s", t, rt)
}

// FieldName is the name a struct field has on the wire: its `hessian` tag,
// else its name with the first rune lowered (Java's bean convention).
func FieldName(f reflect.StructField) string { return view.FieldName(f) }

func (c converter) structFromMap(m reflect.Value, t reflect.Type, depth int) (reflect.Value, error) {
	out := reflect.New(t).Elem()
	byName := make(map[string]reflect.Value, m.Len())
	it := m.MapRange()
	for it.Next() {
		k := it.Key()
		for k.Kind() == reflect.Interface {
			k = k.Elem()
		}
		if k.Kind() == reflect.String {
			byName[k.String()] = it.Value()
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		v, ok := byName[FieldName(f)]
		if !ok {
			v, ok = byName[f.Name]
		}
		if !ok {
			continue
		}
		e, err := c.value(v, f.Type, depth+1)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("field %s: %w", FieldName(f), err)
		}
		out.Field(i).Set(e)
	}
	return out, nil
}

// ToGeneric turns a value into the form of Dubbo's generic calls, as Java's
// PojoUtils.generalize does: structs become map[string]any keyed by wire
// field names, plus "class" when the struct names its Java class; lists
// become untyped lists ([]any, an ArrayList to Java; []byte stays binary)
// and maps map[string]any, converted element by element; other values are
// returned as they are. It walks through view.Generic, so a hostile (cyclic,
// shared, deep) value is bounded; shared containers stay shared and cycles
// stay cycles.
func ToGeneric(v any) any { return javaLists(view.Generic(v)) }

// convertNumber converts between numeric kinds only when the value survives:
// Java's long 1<<40 is no Go int32, and 1.5 is no integer.
func convertNumber(rv reflect.Value, t reflect.Type) (reflect.Value, error) {
	out := rv.Convert(t)
	var same bool
	switch {
	case rv.CanInt():
		same = out.CanInt() && out.Int() == rv.Int() || out.CanUint() && rv.Int() >= 0 && out.Uint() == uint64(rv.Int()) || out.CanFloat() && int64(out.Float()) == rv.Int()
	case rv.CanUint():
		same = out.CanUint() && out.Uint() == rv.Uint() || out.CanInt() && out.Int() >= 0 && uint64(out.Int()) == rv.Uint() || out.CanFloat() && uint64(out.Float()) == rv.Uint()
	default:
		f := rv.Float()
		same = out.CanFloat() && (out.Float() == f || f != f) || out.CanInt() && float64(out.Int()) == f || out.CanUint() && float64(out.Uint()) == f
	}
	if !same {
		return reflect.Value{}, fmt.Errorf("%v (%s) does not fit in %s", rv.Interface(), rv.Type(), t)
	}
	return out, nil
}

func isNumber(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Float64
}
