package proxy

import (
	"context"
	"fmt"
	"reflect"

	"github.com/weftrpc/weft/kernel"
)

// Fill sets every func field of the struct stub points to with a function
// that calls invoker:
//
//	type GreeterClient struct {
//		SayHello func(ctx context.Context, name string) (string, error)
//		Ping     func(ctx context.Context) error `weft:"$echo"`
//	}
//
// The wire name is the `weft` tag or the field name with its first rune
// lowered. A func may omit the context; it must return an error last. An
// invoker function is resolved on every call, so a stub filled before start
// follows what invoker points to.
func Fill(stub any, invoker func() (kernel.Invoker, error)) error {
	v := reflect.ValueOf(stub)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("weft: stub must be a pointer to a struct of func fields, got %T", stub)
	}
	v = v.Elem()
	t := v.Type()
	filled := 0
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Type.Kind() != reflect.Func {
			continue
		}
		name := f.Tag.Get("weft")
		if name == "-" {
			continue
		}
		if name == "" {
			name = WireName(f.Name)
		}
		fn, err := makeFunc(t.Name()+"."+f.Name, name, f.Type, invoker)
		if err != nil {
			return err
		}
		v.Field(i).Set(fn)
		filled++
	}
	if filled == 0 {
		return fmt.Errorf("weft: stub %T has no exported func field", stub)
	}
	return nil
}

func makeFunc(field, method string, ft reflect.Type, invoker func() (kernel.Invoker, error)) (reflect.Value, error) {
	nout := ft.NumOut()
	if nout == 0 || nout > 2 || ft.Out(nout-1) != errType || ft.IsVariadic() {
		return reflect.Value{}, fmt.Errorf("weft: stub field %s: want func([ctx,] args...) ([value,] error), got %s", field, ft)
	}
	withCtx := ft.NumIn() > 0 && ft.In(0) == ctxType
	var valType reflect.Type
	if nout == 2 {
		valType = ft.Out(0)
	}
	kind := kernel.Unary
	if valType != nil && valType.Kind() == reflect.Pointer && valType.Implements(clientEndType) {
		kind = reflect.New(valType.Elem()).Interface().(clientEnd).clientKind()
		nargs := ft.NumIn()
		if withCtx {
			nargs--
		}
		if want := map[bool]int{true: 1, false: 0}[kind == kernel.ServerStreaming]; nargs != want {
			return reflect.Value{}, fmt.Errorf("weft: stub field %s: a %s-streaming call takes (ctx%s), got %s",
				field, kind, map[bool]string{true: ", request", false: ""}[kind == kernel.ServerStreaming], ft)
		}
	}
	fail := func(err error) []reflect.Value {
		out := make([]reflect.Value, nout)
		if valType != nil {
			out[0] = reflect.Zero(valType)
		}
		out[nout-1] = reflect.ValueOf(&err).Elem()
		return out
	}
	return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
		ctx := context.Background()
		if withCtx {
			if c, ok := in[0].Interface().(context.Context); ok && c != nil {
				ctx = c
			}
			in = in[1:]
		}
		args := make([]any, len(in))
		for i, a := range in {
			args[i] = a.Interface()
		}
		ivk, err := invoker()
		if err != nil {
			return fail(err)
		}
		inv := kernel.NewInvocation(method, args...)
		if kind != kernel.Unary {
			inv.SetAttribute(kernel.AttrStream, kind)
		}
		res, err := ivk.Invoke(ctx, inv)
		if err != nil {
			return fail(err)
		}
		out := make([]reflect.Value, nout)
		if kind != kernel.Unary {
			st, ok := res.Value.(kernel.ClientStream)
			if !ok {
				return fail(kernel.Errorf(kernel.CodeSerialization, "%s: the protocol opened no stream (got %T); streams need tri://", method, res.Value))
			}
			v := reflect.New(valType.Elem())
			v.Interface().(clientEnd).bindClient(st)
			out[0] = v
			out[nout-1] = reflect.Zero(errType)
			return out
		}
		if valType != nil {
			rv, cerr := convert(res.Value, valType)
			if cerr != nil {
				return fail(kernel.Wrap(kernel.CodeSerialization, cerr, "result of %s", method))
			}
			out[0] = rv
		}
		out[nout-1] = reflect.Zero(errType)
		return out
	}), nil
}
