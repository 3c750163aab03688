package hessian2

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// This file is the encoder of everything that is not a fast type: objects
// (POJOs, enums, exceptions), typed lists, maps of other types, pointers.
// It writes what dubbo-go-hessian2's Encoder writes for the same values,
// with its back references and class definitions, so that the bytes of a
// body do not depend on which path wrote which value.

// maxEncodeDepth bounds the nesting Marshal follows: a value that contains
// itself through something that is not a reference (a struct value holding a
// map holding it...) would otherwise overflow the stack.
const maxEncodeDepth = MaxDepth

func (e *encoder) fail(format string, args ...any) bool {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
	return false
}

// other encodes a value that the fast switch does not know.
func (e *encoder) other(v any) bool {
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxEncodeDepth {
		return e.fail("nesting deeper than %d", maxEncodeDepth)
	}
	rv := reflect.ValueOf(v)
	t := rv.Type()
	if isEnum(t) {
		e.refs.phantom()
		return e.enum(rv)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return e.pointer(rv)
	case reflect.Struct:
		if t == timeType {
			e.b = appendDate(e.b, v.(time.Time))
			return true
		}
		// The library copies a struct value behind a new pointer, which
		// takes a reference slot that nothing can refer to.
		e.refs.phantom()
		return e.object(rv)
	case reflect.Slice, reflect.Array:
		return e.reflectList(rv)
	case reflect.Map:
		return e.typedMap(rv)
	case reflect.Int32:
		// The library encodes any int32 kind (a named one too) as an int.
		e.b = appendInt(e.b, int32(rv.Int()))
		return true
	}
	// The library writes nothing at all for named types of other basic
	// kinds, which would shift the rest of the body.
	return e.fail("cannot encode %s", t)
}

var timeType = reflect.TypeFor[time.Time]()

func appendDate(b []byte, t time.Time) []byte {
	if t == (time.Time{}) {
		return append(b, tagNull)
	}
	ms := t.UnixMilli()
	return append(b, tagDate, byte(ms>>56), byte(ms>>48), byte(ms>>40), byte(ms>>32),
		byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms))
}

// pointer encodes what p points to: null for nil, an object (with a back
// reference to its address) for a struct, the value itself for the rest.
func (e *encoder) pointer(p reflect.Value) bool {
	for p.Kind() == reflect.Pointer && p.Elem().Kind() == reflect.Pointer {
		p = p.Elem()
	}
	if p.IsNil() {
		e.b = append(e.b, tagNull)
		return true
	}
	elem := p.Elem()
	switch elem.Kind() {
	case reflect.Struct:
		if elem.Type() == timeType {
			e.b = appendDate(e.b, elem.Interface().(time.Time))
			return true
		}
		if i, ok := e.refs.checkTyped(p.UnsafePointer(), refStruct, elem.Type()); ok {
			e.b = appendInt(append(e.b, tagRef), int32(i))
			return true
		}
		return e.object(elem)
	case reflect.Map:
		return e.typedMap(elem)
	case reflect.Slice, reflect.Array:
		// The library panics on these.
		return e.fail("cannot encode a pointer to %s", elem.Type())
	}
	return e.value(elem.Interface())
}

// classEnc is a class definition a Marshal call has written.
type classEnc struct {
	name   string
	fields []string
}

// classIndex returns the index of class in this body's class definitions,
// writing the definition first if it is new.
func (e *encoder) classIndex(class string, names func() []string) int {
	for i, c := range e.classes {
		if c.name == class {
			return i
		}
	}
	fields := names()
	e.classes = append(e.classes, classEnc{class, fields})
	e.b = classDefBytes(e.b, class, fields)
	return len(e.classes) - 1
}

func (e *encoder) objectHeader(idx int) {
	if idx <= 0xf {
		e.b = append(e.b, byte(0x60+idx))
	} else {
		e.b = appendInt(append(e.b, tagObject), int32(idx))
	}
}

// object writes a struct as an object of its POJO class: the library's class
// definition (its fields, see planOf) the first time the class appears in
// the body, then the field values.
func (e *encoder) object(s reflect.Value) bool {
	class, ok := javaClass(s)
	if !ok {
		return e.fail("cannot encode %s: a struct is encoded as a Java object and must implement POJO (JavaClassName)", s.Type())
	}
	plan := planOf(s.Type())
	e.objectHeader(e.classIndex(class, func() []string { return plan.names }))
	for i, path := range plan.paths {
		if !e.value(s.FieldByIndex(path).Interface()) {
			if e.err != nil && !strings.HasPrefix(e.err.Error(), "field ") {
				e.err = fmt.Errorf("field %s of %s: %w", plan.names[i], s.Type(), e.err)
			}
			return false
		}
	}
	return true
}

// javaClass is the class of a struct value: its JavaClassName, called on
// the value or, for a pointer receiver, on its address.
func javaClass(s reflect.Value) (string, bool) {
	if p, ok := s.Interface().(POJO); ok {
		return p.JavaClassName(), true
	}
	ptr := reflect.New(s.Type())
	ptr.Elem().Set(s)
	if p, ok := ptr.Interface().(POJO); ok {
		return p.JavaClassName(), true
	}
	return "", false
}

// enum writes a Java enum constant as the library does: an object of the
// enum's class with one field, "name", the constant's String().
func (e *encoder) enum(v reflect.Value) bool {
	class := v.Interface().(POJO).JavaClassName()
	e.objectHeader(e.classIndex(class, func() []string { return []string{"name"} }))
	e.b = appendString(e.b, v.Interface().(fmt.Stringer).String())
	return true
}

// classMap writes a map with the "_class" key as an object of that class:
// the fields of the class's registered type if there is one, else the map's
// other keys, sorted (the library takes them in Go's random map order).
func (e *encoder) classMap(m map[string]any) bool {
	if e.ref(mapAddr(m), refMap) {
		return true
	}
	class, ok := m[classKey].(string)
	if !ok {
		return e.fail("map with a %q key of type %T: want the class name", classKey, m[classKey])
	}
	// A class this body has defined already keeps its fields.
	idx := e.classIndex(class, func() []string {
		if t := classType(class); t != nil && t.Kind() == reflect.Struct {
			return planOf(t).names
		}
		var names []string
		for k := range m {
			if k != classKey {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		return names
	})
	e.objectHeader(idx)
	names := e.classes[idx].fields
	for _, n := range names {
		if !e.value(m[n]) {
			return false
		}
	}
	return true
}

// list writes a slice or array: untyped (x58) when its element type is an
// unnamed interface, as the library writes []any and [][]any-like types
// whose names contain "interface {}", else typed ('V') with the library's
// Java type name for the element type.
func (e *encoder) reflectList(v reflect.Value) bool {
	t := v.Type()
	if strings.Contains(t.String(), "interface {}") {
		if v.Kind() == reflect.Slice {
			if e.ref(v.UnsafePointer(), refSlice) {
				return true
			}
		} else {
			e.refs.phantom()
		}
		e.b = appendInt(append(e.b, tagUListFixed), int32(v.Len()))
		return e.elems(v)
	}
	if v.Kind() == reflect.Array {
		return e.fail("cannot encode %s: arrays encode as untyped lists only", t) // the library panics
	}
	if v.IsNil() {
		e.b = append(e.b, tagNull)
		return true
	}
	if e.ref(v.UnsafePointer(), refSlice) {
		return true
	}
	name, ok := listTypeName(t)
	if !ok {
		return e.fail("cannot encode %s: no Java array type for its elements", t)
	}
	e.b = appendString(append(e.b, tagListFixed), name)
	e.b = appendInt(e.b, int32(v.Len()))
	return e.elems(v)
}

func (e *encoder) elems(v reflect.Value) bool {
	for i := range v.Len() {
		if !e.value(v.Index(i).Interface()) {
			return false
		}
	}
	return true
}

// listTypeNames are the library's Java names of Go element types.
var listTypeNames = map[reflect.Kind]string{
	reflect.String: "[string", reflect.Int8: "[short", reflect.Int16: "[short", reflect.Uint16: "[short",
	reflect.Int32: "[int", reflect.Uint32: "[int", reflect.Int: "[long", reflect.Uint: "[long",
	reflect.Int64: "[long", reflect.Uint64: "[long", reflect.Float32: "[float", reflect.Float64: "[double",
	reflect.Bool: "[boolean",
}

// listTypeName is the library's type name for a slice type: one '[' per
// dimension, then the element's name ("[[string" for [][]string). Pointers
// to elements have their elements' names.
func listTypeName(t reflect.Type) (string, bool) {
	dims := 0
	for t.Kind() == reflect.Slice {
		t = t.Elem()
		dims++
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	prefix := strings.Repeat("[", dims-1)
	switch {
	case t == timeType:
		return prefix + "[date", true
	case t.Kind() == reflect.Interface:
		switch {
		case t == objectType || t.Name() == "Object" && strings.HasSuffix(t.PkgPath(), "dubbo-go-hessian2"):
			return prefix + "[object", true
		case t == throwableType || t.Name() == "Throwabler" && strings.HasSuffix(t.PkgPath(), "java_exception"):
			return prefix + "[java.lang.Throwable", true
		}
		return "", false
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map || isEnum(t):
		if p, ok := reflect.New(t).Interface().(POJO); ok {
			return prefix + "[" + p.JavaClassName(), true
		}
		return "", false
	case t.PkgPath() == "":
		// Basic types only: the library looks named ones up by name, and
		// has none for them.
		if n, ok := listTypeNames[t.Kind()]; ok {
			return prefix + n, true
		}
	}
	return "", false
}

var (
	objectType    = reflect.TypeFor[Object]()
	throwableType = reflect.TypeFor[Throwable]()
)

// typedMap writes a map of any Go type as the library does: 'H' with its
// entries ('M' and the class name if the map type is a POJO), keys sorted
// where the library takes Go's random order.
func (e *encoder) typedMap(m reflect.Value) bool {
	if m.Kind() == reflect.Map && e.ref(m.UnsafePointer(), refMap) {
		return true
	}
	if mm, ok := m.Interface().(map[string]any); ok {
		if _, ok := mm[classKey]; ok {
			return e.classMap(mm)
		}
	}
	if m.IsNil() {
		e.b = append(e.b, tagNull)
		return true
	}
	if p, ok := m.Interface().(POJO); ok {
		e.b = appendString(append(e.b, tagMap), p.JavaClassName())
	} else {
		e.b = append(e.b, tagUMap)
	}
	keys := m.MapKeys()
	if !sortKeys(keys) {
		return e.fail("cannot encode %s: keys of kind %s", m.Type(), m.Type().Key().Kind())
	}
	for _, k := range keys {
		if !e.value(k.Interface()) || !e.value(m.MapIndex(k).Interface()) {
			return false
		}
	}
	e.b = append(e.b, tagEnd)
	return true
}

// anyMap is typedMap for map[any]any with keys that are not all strings.
func (e *encoder) anyMap(m map[any]any) bool {
	if e.ref(mapAddr(m), refMap) {
		return true
	}
	keys := reflect.ValueOf(m).MapKeys()
	if !sortKeys(keys) {
		return e.fail("cannot encode map[any]any: a key of an unordered type")
	}
	e.b = append(e.b, tagUMap)
	for _, k := range keys {
		if !e.value(k.Interface()) || !e.value(m[k.Interface()]) {
			return false
		}
	}
	e.b = append(e.b, tagEnd)
	return true
}

// sortKeys orders map keys (the output must not depend on Go's map order):
// by kind, then value. It reports false for keys of kinds the library
// cannot encode either (structs, pointers...).
func sortKeys(keys []reflect.Value) bool {
	rank := func(v reflect.Value) (int, bool) {
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Interface: // nil
			return 0, true
		case reflect.Bool:
			return 1, true
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return 2, true
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return 3, true
		case reflect.Float32, reflect.Float64:
			return 4, true
		case reflect.String:
			return 5, true
		}
		return 0, false
	}
	for _, k := range keys {
		if _, ok := rank(k); !ok {
			return false
		}
	}
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		for a.Kind() == reflect.Interface && !a.IsNil() {
			a = a.Elem()
		}
		for b.Kind() == reflect.Interface && !b.IsNil() {
			b = b.Elem()
		}
		ra, _ := rank(a)
		rb, _ := rank(b)
		if ra != rb {
			return cmp.Compare(ra, rb)
		}
		switch ra {
		case 1:
			return cmp.Compare(b2i(a.Bool()), b2i(b.Bool()))
		case 2:
			return cmp.Compare(a.Int(), b.Int())
		case 3:
			return cmp.Compare(a.Uint(), b.Uint())
		case 4:
			return cmp.Compare(a.Float(), b.Float())
		case 5:
			return strings.Compare(a.String(), b.String())
		}
		return 0
	})
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// phantom takes a reference slot that nothing can refer to, as the library's
// table takes one for each struct value it copies behind a new pointer.
func (t *refTable) phantom() {
	if t.n < len(t.inline) {
		t.inline[t.n] = refEntry{}
	}
	t.n++
}

// checkTyped is check for a pointer to a struct: the library compares the
// struct types too, as distinct empty structs may share an address.
func (t *refTable) checkTyped(addr unsafe.Pointer, kind refKind, typ reflect.Type) (int, bool) {
	if addr == nil || addr == emptySliceAddr {
		return 0, false
	}
	for i := 0; i < t.n && i < len(t.inline); i++ {
		if t.inline[i].addr == addr {
			return i, t.inline[i].kind == kind && t.types[i] == typ
		}
	}
	if s, ok := t.more[addr]; ok {
		return s.index, s.kind == kind && t.types[s.index] == typ
	}
	t.add(addr, kind, typ)
	return 0, false
}
