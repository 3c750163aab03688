package hessian2

import (
	"reflect"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"
)

// POJO is a Go type that stands for a Java class: the library's
// hessian.POJO. Registered with RegisterPOJO, objects of its class decode
// into it; unregistered, it still encodes as its class.
type POJO = hessian.POJO

// Param is a POJO that names the Java type of the parameter it is passed
// as, when that differs from its own class (an implementation passed for an
// interface): Descriptor uses JavaParamName. The library's hessian.Param.
type Param = hessian.Param

// Object is Java's Object as an element type: a "[object" list (Java's
// Object[]) decodes into []Object, and []Object encodes as one, so that an
// Object[] goes back to Java as the array it came as. The library's
// hessian.Object.
type Object = hessian.Object

// Throwable is what Java exceptions are on this side: the library's
// java_exception types (whose Throwabler has this shape, plus a method),
// registered POJOs of exception classes, GenericException and
// UnknownException.
type Throwable interface {
	error
	JavaClassName() string
}

// StackTraceElement is java.lang.StackTraceElement, the library's type.
type StackTraceElement = java_exception.StackTraceElement

// GenericException is Dubbo's com.alibaba.dubbo.rpc.service.GenericException,
// which carries another exception's class and message to generic callers
// that do not have the class: the library's type.
type GenericException = java_exception.DubboGenericException

// NewGenericException returns a GenericException for an exception of class
// with message msg (Java's GenericException(exceptionClass,
// exceptionMessage), which is also its detailMessage).
func NewGenericException(class, msg string) *GenericException {
	return &GenericException{ExceptionClass: class, ExceptionMessage: msg, DetailMessage: msg, StackTrace: []StackTraceElement{}}
}

const (
	throwableClass        = "java.lang.Throwable"
	genericExceptionClass = "com.alibaba.dubbo.rpc.service.GenericException"
	classKey              = hessian.ClassKey
)

// UnknownException is an exception of a class nobody registered. The
// library decodes one into its own hessian.UnknownException, but loses the
// class (v1.12.5 registers a type per class and then makes a zero value of
// it, whose unexported name stays empty; TestUnknownExceptionKeepsClass),
// so the decoder gives this type instead, with the class in Class. As a
// value to encode it stands for an exception of any class with Throwable's
// fields (ExceptionValue writes it so), which is how a provider raises an
// exception of a class it has no type for.
type UnknownException struct {
	SerialVersionUID     int64
	DetailMessage        string
	SuppressedExceptions []java_exception.Throwabler
	StackTrace           []StackTraceElement
	Cause                java_exception.Throwabler
	// Class is the Java class. Not a field of the object: it is the class.
	Class string `hessian:"-"`
}

// JavaClassName is Class, or java.lang.Throwable if Class is empty.
func (e *UnknownException) JavaClassName() string {
	if e.Class == "" {
		return throwableClass
	}
	return e.Class
}

// Error is Java's Throwable.toString: the class, and the message if any.
func (e *UnknownException) Error() string {
	if e.DetailMessage == "" {
		return e.JavaClassName()
	}
	return e.JavaClassName() + ": " + e.DetailMessage
}

// GetStackTrace makes UnknownException a java_exception.Throwabler, so it
// can be another exception's cause.
func (e *UnknownException) GetStackTrace() []StackTraceElement { return e.StackTrace }

// RegisterPOJO makes objects of p's Java class (p.JavaClassName()) decode
// into p's Go type, in the library's registry (hessian.RegisterPOJO, or
// hessian.RegisterJavaEnum for an enum): the one dubbo-go reads too, so a
// program running both registers once. The library keeps its first
// registration of a class. Register before decoding starts.
func RegisterPOJO(p POJO) {
	if p == nil || reflect.TypeOf(p) == nil {
		return
	}
	allowException(p.JavaClassName())
	if e, ok := p.(hessian.POJOEnum); ok {
		hessian.RegisterJavaEnum(e)
		return
	}
	hessian.RegisterPOJO(p)
}

// fixUnknownException puts back the class the library loses (see
// UnknownException) for a value that is one: the class is the one the value
// starts by defining, when it does (an exception's first object is itself).
func fixUnknownException(data []byte, start int, v any) any {
	var lib *hessian.UnknownException
	switch x := v.(type) {
	case *hessian.UnknownException:
		lib = x
	case hessian.UnknownException:
		lib = &x
	default:
		return v
	}
	if lib == nil {
		return v
	}
	class := lib.JavaClassName()
	if class == "" {
		class = definedClass(data, start)
	}
	return &UnknownException{
		SerialVersionUID:     lib.SerialVersionUID,
		DetailMessage:        lib.DetailMessage,
		SuppressedExceptions: lib.SuppressedExceptions,
		StackTrace:           lib.StackTrace,
		Cause:                lib.Cause,
		Class:                class,
	}
}

// definedClass is the class a value at p defines first ('C' and its name),
// or "" if it does not start with a class definition.
func definedClass(data []byte, p int) string {
	if p >= len(data) || data[p] != 'C' || p+1 >= len(data) || !isStringTag(data[p+1]) {
		return ""
	}
	end, _, plain, _, err := skipString(data, p+1)
	if err != nil || !plain {
		return ""
	}
	_, hdr, _, _ := stringHeader(data, p+1)
	return string(data[p+1+hdr : end])
}
