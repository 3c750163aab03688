package hessian2

import (
	"errors"
	"reflect"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// ExceptionValue returns what a provider writes in a RESPONSE_WITH_EXCEPTION
// body for err, so that a Java consumer rethrows an exception and a dubbo-go
// one gets an error:
//
//   - a java_exception.Throwabler found in err's chain, as it is (what
//     dubbo-go does), so Go code can raise any Java exception type the library
//     models;
//   - for a business error (kernel.CodeBiz) that names a Java class, an
//     exception of that class carrying the message: the fields of
//     java.lang.Throwable, under the library's "_class" map form, so it works
//     for classes the library does not know (Java consumers that know the
//     class rethrow it as such);
//   - anything else as java.lang.Throwable with err's message (what dubbo-go
//     does for a plain error).
func ExceptionValue(err error) any {
	if err == nil {
		return nil
	}
	var ke *kernel.Error
	isClassed := errors.As(err, &ke) && ke.Code == kernel.CodeBiz && ke.Class != ""
	var t java_exception.Throwabler
	if errors.As(err, &t) && !isNil(t) {
		if u, ok := t.(*hessian.UnknownException); ok {
			// The library writes it as whichever unknown class it decoded
			// last, so it is rebuilt from its class and message.
			return classedException(u.JavaClassName(), u.DetailMessage)
		}
		if !isClassed || t.JavaClassName() == ke.Class {
			return t
		}
	}
	if isClassed {
		msg := ke.Msg
		if msg == "" && ke.Cause != nil {
			msg = ke.Cause.Error()
		}
		return classedException(ke.Class, msg)
	}
	return java_exception.NewThrowable(err.Error())
}

// classedException is an exception of any class as the library writes maps
// with a "_class" key: an object of that class, here with Throwable's fields.
func classedException(class, msg string) any {
	if class == "" {
		return java_exception.NewThrowable(msg)
	}
	return map[string]any{
		classKey:               class,
		"serialVersionUID":     int64(0),
		"detailMessage":        msg,
		"stackTrace":           []java_exception.StackTraceElement{},
		"suppressedExceptions": nil,
		"cause":                nil,
	}
}

// ExceptionError turns the decoded body of a RESPONSE_WITH_EXCEPTION into the
// business error the consumer returns: a *kernel.Error with CodeBiz, the Java
// class in Class and the exception's message, unprefixed, in Msg. A
// Throwabler stays reachable as the Cause. It accepts the library's exception
// types, the maps it decodes objects of unknown classes into, and a plain
// string (what some peers send).
func ExceptionError(v any) error {
	e := &kernel.Error{Code: kernel.CodeBiz}
	switch x := v.(type) {
	case nil:
		e.Msg = "exception response without an exception"
	case *java_exception.DubboGenericException:
		if x == nil {
			e.Msg = "exception response without an exception"
			break
		}
		e.Class, e.Msg, e.Cause = genericClass(x), genericMessage(x), x
	case java_exception.DubboGenericException:
		e.Class, e.Msg, e.Cause = genericClass(&x), genericMessage(&x), x
	case java_exception.Throwabler:
		if isNil(x) {
			e.Msg = "exception response without an exception"
			break
		}
		e.Class, e.Msg, e.Cause = x.JavaClassName(), detailMessage(x), x
	case map[string]any:
		e.Class, e.Msg = mapException(func(k string) any { return x[k] })
	case map[any]any:
		e.Class, e.Msg = mapException(func(k string) any { return x[k] })
	case string:
		e.Msg = x
	case error:
		e.Msg, e.Cause = x.Error(), x
	default:
		// A value that crossed the wire: bounded, never %v (which follows
		// a value that contains itself until the stack overflows).
		e.Msg = view.Text(x)
	}
	return e
}

// genericClass reads Dubbo's GenericException, which wraps the original
// exception's class and message for consumers without that class.
func genericClass(x *java_exception.DubboGenericException) string {
	if x.ExceptionClass != "" {
		return x.ExceptionClass
	}
	return x.JavaClassName()
}

func genericMessage(x *java_exception.DubboGenericException) string {
	if x.ExceptionMessage != "" {
		return x.ExceptionMessage
	}
	return x.DetailMessage
}

func mapException(get func(string) any) (class, msg string) {
	class, _ = get(classKey).(string)
	for _, k := range []string{"detailMessage", "message", "exceptionMessage"} {
		if s, ok := get(k).(string); ok && s != "" {
			return class, s
		}
	}
	return class, ""
}

// detailMessage is the Java message of t. The library's exception types all
// keep it in DetailMessage; Error() may decorate it (UnknownException's does).
func detailMessage(t java_exception.Throwabler) string {
	rv := reflect.ValueOf(t)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Struct {
		if f := rv.FieldByName("DetailMessage"); f.IsValid() && f.Kind() == reflect.String {
			return f.String()
		}
	}
	return t.Error()
}

// isNil tells a nil pointer in an interface, whose value-receiver methods
// would panic.
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	return !rv.IsValid() || rv.Kind() == reflect.Pointer && rv.IsNil()
}
