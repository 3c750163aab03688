package hessian2

import (
	"errors"
	"reflect"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// ExceptionValue returns what a provider writes in a RESPONSE_WITH_EXCEPTION
// body for err, so that a Java consumer rethrows an exception and a dubbo-go
// one gets an error:
//
//   - a Throwable found in err's chain (this package's exception types, a
//     registered POJO of an exception class, dubbo-go's java_exception
//     types), as it is (what dubbo-go does), so Go code can raise any Java
//     exception type it models;
//   - for a business error (kernel.CodeBiz) that names a Java class, an
//     exception of that class carrying the message: an UnknownException,
//     which writes java.lang.Throwable's fields under that class, so it
//     works for any class (Java consumers that know the class rethrow it as
//     such);
//   - anything else as java.lang.Throwable with err's message (what dubbo-go
//     does for a plain error).
func ExceptionValue(err error) any {
	if err == nil {
		return nil
	}
	var ke *kernel.Error
	isClassed := errors.As(err, &ke) && ke.Code == kernel.CodeBiz && ke.Class != ""
	var t Throwable
	// A Throwable without a class (dubbo-go's UnknownException loses it)
	// cannot be written as itself.
	if errors.As(err, &t) && !isNil(t) && t.JavaClassName() != "" {
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
	return classedException(throwableClass, err.Error())
}

// classedException is an exception of any class with Throwable's fields.
func classedException(class, msg string) *UnknownException {
	return &UnknownException{Class: class, DetailMessage: msg, StackTrace: []StackTraceElement{}}
}

// ExceptionError turns the decoded body of a RESPONSE_WITH_EXCEPTION into the
// business error the consumer returns: a *kernel.Error with CodeBiz, the Java
// class in Class and the exception's message, unprefixed, in Msg. A
// Throwable stays reachable as the Cause. It accepts this package's
// exception types, registered exception POJOs, the maps objects of unknown
// classes decode into, and a plain string (what some peers send).
func ExceptionError(v any) error {
	e := &kernel.Error{Code: kernel.CodeBiz}
	switch x := v.(type) {
	case nil:
		e.Msg = "exception response without an exception"
	case *GenericException:
		if x == nil {
			e.Msg = "exception response without an exception"
			break
		}
		e.Class, e.Msg, e.Cause = genericClass(x), genericMessage(x), x
	case Throwable:
		if isNil(x) {
			e.Msg = "exception response without an exception"
			break
		}
		e.Class, e.Msg, e.Cause = x.JavaClassName(), detailMessage(x), x
		if e.Class == genericExceptionClass {
			// Another GenericException type (dubbo-go's): the same fields.
			if c := stringField(x, "ExceptionClass"); c != "" {
				e.Class = c
			}
			if m := stringField(x, "ExceptionMessage"); m != "" {
				e.Msg = m
			}
		}
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
func genericClass(x *GenericException) string {
	if x.ExceptionClass != "" {
		return x.ExceptionClass
	}
	return x.JavaClassName()
}

func genericMessage(x *GenericException) string {
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

// detailMessage is the Java message of t. Exception types keep it in
// DetailMessage (this package's, dubbo-go's, Throwable-shaped POJOs);
// Error() may decorate it (UnknownException's does).
func detailMessage(t Throwable) string {
	if s, ok := stringFieldOK(t, "DetailMessage"); ok {
		return s
	}
	return t.Error()
}

func stringField(v any, name string) string {
	s, _ := stringFieldOK(v, name)
	return s
}

// stringFieldOK reads a string field of a struct or pointer to one.
func stringFieldOK(v any, name string) (string, bool) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Struct {
		if f := rv.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
			return f.String(), true
		}
	}
	return "", false
}

// isNil tells a nil pointer in an interface, whose value-receiver methods
// would panic.
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	return !rv.IsValid() || rv.Kind() == reflect.Pointer && rv.IsNil()
}
