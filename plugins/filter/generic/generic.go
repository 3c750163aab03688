// Package generic is Dubbo's provider GenericFilter: it serves
// `$invoke(method, parameterTypes, args)` calls from consumers that have no
// types of the service (gateways, test tools, `weft invoke`), by turning them
// into the real call — maps standing for POJOs are converted to the method's
// Go types — and by returning the result in generic form as Java's
// PojoUtils.generalize does (POJOs as maps with a "class" entry, lists as
// untyped lists, which Java reads as ArrayList: see proxy.ToGeneric).
//
// An App resolves generic calls with Wrap, around the whole provider chain,
// so that every filter — native or WASM, whatever its order — sees the real
// method and arguments: a guard that checks the method name cannot be
// skipped by calling through $invoke. The filter form (New) remains for
// chains built by hand and for filter lists that name "generic"; on a call
// Wrap has resolved already it does nothing.
package generic

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
)

// Name is the filter's extension name.
const Name = "generic"

// Generic method names and the descriptor of $invoke's arguments.
const (
	MethodInvoke      = "$invoke"
	MethodInvokeAsync = "$invokeAsync"
	Descriptor        = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;"
	// KeyGeneric is the attachment a generic consumer sends ("true").
	KeyGeneric = "generic"
)

// Activation: every provider call, before the context filter.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Order: -20000}
}

// New returns the filter.
func New() extension.Filter { return filter{} }

type filter struct{}

func (filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	return invoke(ctx, next, inv)
}

// Wrap returns an invoker that resolves generic calls before it calls
// chain, and returns their results in generic form; other calls go through
// as they are. URL, IsAvailable and Destroy are chain's.
func Wrap(chain kernel.Invoker) kernel.Invoker { return resolver{chain} }

type resolver struct{ kernel.Invoker }

func (r resolver) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	return invoke(ctx, r.Invoker, inv)
}

// WhyUnavailable forwards to the chain (kernel.WhyUnavailable).
func (r resolver) WhyUnavailable() error {
	if w, ok := r.Invoker.(kernel.WhyUnavailable); ok {
		return w.WhyUnavailable()
	}
	return nil
}

func invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	if (inv.Method != MethodInvoke && inv.Method != MethodInvokeAsync) || len(inv.Args) != 3 {
		return next.Invoke(ctx, inv)
	}
	method, ok := inv.Args[0].(string)
	if !ok || method == "" {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "generic call: first argument must be the method name, got %T", inv.Args[0])
	}
	args, err := asList(inv.Args[2])
	if err != nil {
		return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "generic call of %s: arguments", method)
	}
	types, err := asList(inv.Args[1])
	if err != nil {
		return kernel.Result{}, kernel.Wrap(kernel.CodeSerialization, err, "generic call of %s: parameter types", method)
	}
	if len(types) != 0 && len(types) != len(args) {
		return kernel.Result{}, kernel.Errorf(kernel.CodeSerialization, "generic call of %s: %d parameter types for %d arguments", method, len(types), len(args))
	}
	real := inv.Clone()
	real.Method, real.Args, real.ParamTypes = method, args, ""
	res, err := next.Invoke(ctx, real)
	if err != nil {
		return res, genericException(err)
	}
	res.Value = proxy.ToGeneric(res.Value)
	return res, nil
}

// genericException wraps a generic call's business error as Dubbo's
// GenericFilter does: com.alibaba.dubbo.rpc.service.GenericException with
// the original class and message (exceptionClass, exceptionMessage), which a
// Java GenericService caller catches whether or not it has the class. A Go
// error has no class of its own; it goes as java.lang.Throwable, as a
// non-generic call's does. Framework errors keep their codes.
func genericException(err error) error {
	if !kernel.IsBiz(err) {
		return err
	}
	// One already (this package's, or dubbo-go's type, which has the
	// same class) is not wrapped again.
	var already hessian2.Throwable
	if errors.As(err, &already) && already.JavaClassName() == genericExceptionClass {
		return err
	}
	class, msg := "java.lang.Throwable", err.Error()
	var ke *kernel.Error
	if errors.As(err, &ke) && ke.Class != "" {
		class, msg = ke.Class, ke.Msg
	} else if errors.As(err, &ke) && ke.Cause != nil {
		msg = ke.Cause.Error()
	}
	ge := hessian2.NewGenericException(class, msg)
	ge.DetailMessage = class + ": " + msg
	return &kernel.Error{Code: kernel.CodeBiz, Class: ge.JavaClassName(), Msg: msg, Cause: ge}
}

// genericExceptionClass is Dubbo's GenericException, which the generic
// filter raises.
var genericExceptionClass = hessian2.NewGenericException("", "").JavaClassName()

// asList reads $invoke's parameter types or arguments: a list in any of the
// forms consumers send — Java's Object[] as a typed list "[object" (decoded
// as []hessian2.Object: Java's GenericService, dubbo-go's generic reference,
// weft's generic consumer), String[], any other typed array, or an untyped
// list (weft before it sent Object[], other Hessian peers).
func asList(v any) ([]any, error) {
	switch l := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return l, nil
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list, got %T", v)
}
