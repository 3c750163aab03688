package proxy

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"unsafe"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// GenericClient calls any method of a referred service without a stub.
type GenericClient struct {
	invoker func() (kernel.Invoker, error)
}

// NewGenericClient calls through the invoker invoker returns at each call.
func NewGenericClient(invoker func() (kernel.Invoker, error)) *GenericClient {
	return &GenericClient{invoker: invoker}
}

// Invoke calls method (its wire name, "sayHello") with args as they are.
func (g *GenericClient) Invoke(ctx context.Context, method string, args ...any) (any, error) {
	iv, err := g.invoker()
	if err != nil {
		return nil, err
	}
	res, err := iv.Invoke(ctx, kernel.NewInvocation(method, args...))
	return res.Value, err
}

// GenericInvoke makes Dubbo's generic call `$invoke(method, types, args)`:
// types are Java type names ("java.lang.String", "long"), POJO arguments are
// maps of their fields, and a POJO result comes back as a map with a "class"
// entry. The provider needs its generic filter (weft's and Dubbo's have it).
func (g *GenericClient) GenericInvoke(ctx context.Context, method string, types []string, args []any) (any, error) {
	iv, err := g.invoker()
	if err != nil {
		return nil, err
	}
	res, err := iv.Invoke(ctx, GenericInvocation(method, types, args))
	return res.Value, err
}

// GenericInvocation is the invocation of Dubbo's generic call
// `$invoke(method, types, args)`, for callers that set attachments of their
// own or read the result's.
//
// Its arguments are what Java's GenericService sends for its signature
// (String, String[], Object[]): the types as a "[string" list and the
// arguments as an Object[] — a Hessian list typed "[object", not an untyped
// one (a java.util.List). Java reads either, but dubbo-go's provider takes
// the arguments as []hessian.Object only: an untyped list made its generic
// filter panic and the call time out.
func GenericInvocation(method string, types []string, args []any) *kernel.Invocation {
	if types == nil {
		types = []string{}
	}
	objects := make([]hessian2.Object, len(args))
	for i, a := range args {
		objects[i] = a
	}
	inv := kernel.NewInvocation("$invoke", method, types, objects)
	inv.ParamTypes = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;"
	inv.SetAttachment("generic", "true")
	return inv
}

// javaLists turns the typed lists of a value in generic form (view.Generic
// keeps []string, []int32, arrays... as they are, and Hessian writes them as
// typed lists "[string", which Java reads as String[]) into untyped lists
// ([]any, written as Java writes an ArrayList). A Go slice does not say
// whether it stands for a Java List or an array; Java's
// PojoUtils.generalize returns a List field as an ArrayList, and POJOs'
// collections are Lists far more often than arrays, so a Java generic caller
// gets the ArrayList it would get from a Java provider (dubbo-go's
// generalizer does the same: every slice becomes []any). []byte stays
// binary (Java's byte[], which generalize keeps too).
//
// It walks only what view.Generic made: the []any and map[string]any it
// allocated (changed in place, each once: shared ones stay shared, cycles
// end) and the scalar lists it kept (each copied once, so a list that
// appeared twice is still one list). view's limits bounded that graph.
func javaLists(v any) any {
	var l lister
	return l.value(v)
}

type lister struct {
	seen   map[unsafe.Pointer]bool // []any (first element) and maps done
	copies map[listKey][]any       // scalar lists converted, by identity
}

type listKey struct {
	p unsafe.Pointer
	n int
	t reflect.Type
}

func (l *lister) value(v any) any {
	switch x := v.(type) {
	case nil, []byte, string:
		return v
	case []any:
		if len(x) == 0 || !l.first(unsafe.Pointer(&x[0])) {
			return x
		}
		for i := range x {
			x[i] = l.value(x[i])
		}
		return x
	case map[string]any:
		if x == nil || !l.first(reflect.ValueOf(x).UnsafePointer()) {
			return x
		}
		for k, e := range x {
			x[k] = l.value(e)
		}
		return x
	}
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array || rv.Type().Elem().Kind() == reflect.Uint8 {
		return v
	}
	if rv.Kind() == reflect.Slice && rv.IsNil() {
		return nil // null, as Hessian wrote the nil typed list
	}
	var key listKey
	if rv.Kind() == reflect.Slice && rv.Len() > 0 {
		key = listKey{rv.UnsafePointer(), rv.Len(), rv.Type()}
		if out, ok := l.copies[key]; ok {
			return out
		}
	}
	out := make([]any, rv.Len())
	for i := range out {
		// view.Generic keeps only lists of scalars (leaves): nothing
		// below them to walk.
		out[i] = rv.Index(i).Interface()
	}
	if key.p != nil {
		if l.copies == nil {
			l.copies = make(map[listKey][]any)
		}
		l.copies[key] = out
	}
	return out
}

// first reports whether the container at p is met for the first time.
func (l *lister) first(p unsafe.Pointer) bool {
	if l.seen[p] {
		return false
	}
	if l.seen == nil {
		l.seen = make(map[unsafe.Pointer]bool)
	}
	l.seen[p] = true
	return true
}

// JSONArgs reads a generic call's arguments from a JSON array, as a tool
// that takes them from a person sends them (weft invoke and bench, QoS
// invoke): whole numbers as int64, others as float64, objects as maps (a
// POJO's Java class under "class"); the provider's generic filter turns them
// into the method's types.
func JSONArgs(s string) ([]any, error) {
	var args []any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&args); err != nil {
		return nil, err
	}
	for i := range args {
		args[i] = jsonNumbers(args[i])
	}
	return args, nil
}

func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jsonNumbers(x[k])
		}
	}
	return v
}
