package hessian2

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// POJO is a Go type that stands for a Java class: it encodes as an object of
// the class JavaClassName names, and, once registered with RegisterPOJO,
// objects of that class decode into it. It has the shape of dubbo-go-hessian2's
// hessian.POJO, so types written for dubbo-go satisfy it as they are.
type POJO interface {
	JavaClassName() string
}

// Param is a POJO that names the Java type of the parameter it is passed
// as, when that differs from its own class (an implementation passed for an
// interface): Descriptor uses JavaParamName. The shape of hessian.Param.
type Param interface {
	POJO
	JavaParamName() string
}

// Object is Java's Object as an element type: a "[object" list (Java's
// Object[]) decodes into []Object, and []Object encodes as one, so that an
// Object[] goes back to Java as the array it came as. It is a defined type,
// not an alias of any, for that reason: []any is an untyped list (a Java
// List). Elements of []Object may be of any type.
type Object any

// Throwable is what Java exceptions are on this side: the exception types of
// this package, registered POJOs of exception classes, and dubbo-go's
// java_exception types (whose Throwabler has this shape, plus a method).
type Throwable interface {
	error
	JavaClassName() string
}

// StackTraceElement is java.lang.StackTraceElement, the elements of an
// exception's stack trace.
type StackTraceElement struct {
	DeclaringClass string
	MethodName     string
	FileName       string
	LineNumber     int32
}

// JavaClassName is java.lang.StackTraceElement.
func (StackTraceElement) JavaClassName() string { return "java.lang.StackTraceElement" }

// UnknownException is an exception of a class nobody registered: any object
// whose class has Throwable's fields (detailMessage, suppressedExceptions,
// stackTrace and cause) decodes into one, keeping the class in Class. It
// encodes as an object of Class with Throwable's fields, which is how a
// provider raises an exception of any class: Java consumers that know the
// class rethrow it as such. The fields are Throwable's, in the order
// java.lang.Throwable serializes them; the class's other fields are dropped
// when decoding, as dubbo-go-hessian2 drops them.
type UnknownException struct {
	SerialVersionUID     int64
	DetailMessage        string
	SuppressedExceptions []Throwable
	StackTrace           []StackTraceElement
	Cause                Throwable
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

const throwableClass = "java.lang.Throwable"

// GenericException is Dubbo's com.alibaba.dubbo.rpc.service.GenericException,
// which carries another exception's class and message to generic callers
// that do not have the class.
type GenericException struct {
	SerialVersionUID     int64
	DetailMessage        string
	SuppressedExceptions []Throwable
	StackTrace           []StackTraceElement
	Cause                Throwable
	ExceptionClass       string
	ExceptionMessage     string
}

// NewGenericException returns a GenericException for an exception of class
// with message msg.
func NewGenericException(class, msg string) *GenericException {
	return &GenericException{ExceptionClass: class, ExceptionMessage: msg, StackTrace: []StackTraceElement{}}
}

// JavaClassName is Dubbo's GenericException.
func (*GenericException) JavaClassName() string { return genericExceptionClass }

// Error is the exception's message.
func (e *GenericException) Error() string { return e.DetailMessage }

const genericExceptionClass = "com.alibaba.dubbo.rpc.service.GenericException"

// builtinClasses are the classes this package knows without registration:
// the exception shapes it writes and reads itself. A fixed table, not a
// registry: RegisterPOJO of the same class wins.
var builtinClasses = map[string]reflect.Type{
	"java.lang.StackTraceElement": reflect.TypeFor[StackTraceElement](),
	genericExceptionClass:         reflect.TypeFor[GenericException](),
}

var unknownExceptionType = reflect.TypeFor[UnknownException]()

// registry is this package's POJO registry: Java class name → Go type.
// Process-wide; safe for concurrent use.
var registry struct {
	mu      sync.RWMutex
	byClass map[string]reflect.Type
}

// RegisterPOJO makes objects of p's Java class (p.JavaClassName()) decode
// into p's Go type (the pointed-to struct if p is a pointer); the last
// registration of a class wins. Encoding needs no registration: any POJO
// encodes as its class.
//
// The registry is process-wide and starts empty (nothing fills it at init);
// register before decoding starts. Safe for concurrent use. It is this
// package's own: a program that also runs dubbo-go registers its types with
// dubbo-go-hessian2's hessian.RegisterPOJO as well, for dubbo-go's decoder.
func RegisterPOJO(p POJO) {
	t := reflect.TypeOf(p)
	if t == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := p.JavaClassName()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.byClass == nil {
		registry.byClass = make(map[string]reflect.Type)
	}
	registry.byClass[name] = t
}

// classType is the Go type objects of class decode into, or nil.
func classType(class string) reflect.Type {
	registry.mu.RLock()
	t := registry.byClass[class]
	registry.mu.RUnlock()
	if t != nil {
		return t
	}
	return builtinClasses[class]
}

// structPlan is how a struct type encodes as an object: its field names (the
// class definition) and where each value comes from, in the library's order
// (exported fields in declaration order, then those of embedded structs,
// breadth first), and how decoded field names find their fields.
type structPlan struct {
	names []string
	paths [][]int
	mu    sync.Mutex
	find  map[string][]int // decoded field name → path, nil if none
}

var plans sync.Map // reflect.Type → *structPlan

const tagName = "hessian"

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{find: map[string][]int{}}
	type level struct {
		t    reflect.Type
		path []int
	}
	queue := []level{{t, nil}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for i := range cur.t.NumField() {
			f := cur.t.Field(i)
			if f.PkgPath != "" {
				continue
			}
			tag, hasTag := f.Tag.Lookup(tagName)
			if tag == "-" {
				continue
			}
			path := append(append([]int(nil), cur.path...), i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				queue = append(queue, level{f.Type, path})
				continue
			}
			name := tag
			if !hasTag {
				name = lowerFirst(f.Name)
			}
			p.names = append(p.names, name)
			p.paths = append(p.paths, path)
		}
	}
	v, _ := plans.LoadOrStore(t, p)
	return v.(*structPlan)
}

// lowerFirst is the library's lowerCamelCase: the first letter lowered.
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// field finds the struct field a decoded field name goes to, as the library
// does: the first field, in declaration order, whose hessian tag, name,
// lowerFirst(name) or lower-cased name is it, looking into embedded structs
// where a field does not match. Unexported fields match but are not set.
func (p *structPlan) field(t reflect.Type, name string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if path, ok := p.find[name]; ok {
		return path
	}
	path := findField(t, name, 0)
	if len(p.find) < 1024 { // names come off the wire: bounded
		p.find[name] = path
	}
	return path
}

func findField(t reflect.Type, name string, depth int) []int {
	if depth > 32 {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup(tagName)
		if hasTag && tag == name || f.Name == name || lowerFirst(f.Name) == name || strings.ToLower(f.Name) == name {
			if f.PkgPath != "" {
				return nil
			}
			return []int{i}
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if next := findField(f.Type, name, depth+1); next != nil {
				return append([]int{i}, next...)
			}
		}
	}
	return nil
}

// classDefBytes is the class definition the library writes for a class.
func classDefBytes(b []byte, class string, names []string) []byte {
	b = appendString(append(b, tagClassDef), class)
	b = appendInt(b, int32(len(names)))
	for _, n := range names {
		b = appendString(b, n)
	}
	return b
}

// enumValue is the method by which a registered enum type (a POJO of an
// integer kind, with the shape of dubbo-go's POJOEnum) turns a constant's
// name into its value.
func enumValue(t reflect.Type, name string) (reflect.Value, error) {
	m, ok := t.MethodByName("EnumValue")
	if !ok || m.Type.NumIn() != 2 || m.Type.In(1).Kind() != reflect.String || m.Type.NumOut() != 1 {
		return reflect.Value{}, fmt.Errorf("%s has no EnumValue(string) method", t)
	}
	out := m.Func.Call([]reflect.Value{reflect.Zero(t), reflect.ValueOf(name).Convert(m.Type.In(1))})[0]
	if !out.CanConvert(t) {
		return reflect.Value{}, fmt.Errorf("%s.EnumValue returns %s", t, out.Type())
	}
	return out.Convert(t), nil
}

// isEnum tells a POJO type that encodes as a Java enum: an integer kind with
// String and EnumValue methods, as dubbo-go's POJOEnum.
func isEnum(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return false
	}
	_, hasEnumValue := t.MethodByName("EnumValue")
	_, hasString := t.MethodByName("String")
	return hasEnumValue && hasString && t.Implements(pojoType)
}

var pojoType = reflect.TypeFor[POJO]()
