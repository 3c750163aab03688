package hessian2

import (
	"fmt"
	"reflect"
	"sync"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// encodable reports what dubbo-go-hessian2 v1.12.5 would get wrong in v,
// before the library writes any of it: it writes nothing at all for a value
// of a named type of a basic kind other than int32 (a `type Status string`
// field, say), which shifts the rest of the body and makes the peer read
// garbage; it panics on a named bool, on a pointer to a slice or array, and
// on arrays. Marshal returns the error instead (TestMarshalErrors). The walk
// is bounded: MaxDepth deep, each pointer, map and slice visited once; types
// that cannot hold such a value (no interface inside, no named basic kind)
// are not walked at all.
func encodable(v any) error {
	w := walker{seen: map[uintptr]bool{}}
	return w.check(reflect.ValueOf(v), 0)
}

// tagName is the struct tag the library reads field names and "-" from.
const tagName = "hessian"

var enumType = reflect.TypeFor[hessian.POJOEnum]()

type walker struct {
	seen map[uintptr]bool
}

// plainTypes caches, per type, whether every value of it is encodable
// without looking at the value (no interface, no named basic kind, no
// pointer to a slice, no array anywhere inside).
var plainTypes sync.Map // reflect.Type → bool

func plainType(t reflect.Type) bool {
	if v, ok := plainTypes.Load(t); ok {
		return v.(bool)
	}
	ok := typeOK(t, map[reflect.Type]bool{})
	plainTypes.Store(t, ok)
	return ok
}

func typeOK(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if visiting[t] {
		return true // a recursive type: judged by its other parts
	}
	visiting[t] = true
	switch t.Kind() {
	case reflect.Interface, reflect.Array:
		return false
	case reflect.Pointer:
		if k := t.Elem().Kind(); k == reflect.Slice || k == reflect.Array {
			return false
		}
		return typeOK(t.Elem(), visiting)
	case reflect.Slice:
		return typeOK(t.Elem(), visiting)
	case reflect.Map:
		return typeOK(t.Key(), visiting) && typeOK(t.Elem(), visiting)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.PkgPath != "" || f.Tag.Get(tagName) == "-" {
				continue
			}
			if !typeOK(f.Type, visiting) {
				return false
			}
		}
		return true
	case reflect.Int32:
		return true // the library writes any int32 kind as an int
	}
	if t.Implements(enumType) {
		return true // a Java enum: the library's own case
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return t.PkgPath() == "" // unnamed: the library's type switch has it
	}
	return true // chan, func...: the library returns its own error
}

func (w *walker) check(v reflect.Value, depth int) error {
	if !v.IsValid() {
		return nil
	}
	if depth > MaxDepth {
		return fmt.Errorf("nesting deeper than %d", MaxDepth)
	}
	t := v.Type()
	if plainType(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return w.check(v.Elem(), depth)
	case reflect.Array:
		return fmt.Errorf("cannot encode %s: dubbo-go-hessian2 v1.12.5 panics on arrays; use a slice", t)
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		if k := t.Elem().Kind(); k == reflect.Slice || k == reflect.Array {
			return fmt.Errorf("cannot encode a pointer to %s: dubbo-go-hessian2 v1.12.5 panics on it; pass the %s itself", t.Elem(), t.Elem())
		}
		if w.seen[v.Pointer()] {
			return nil
		}
		w.seen[v.Pointer()] = true
		return w.check(v.Elem(), depth+1)
	case reflect.Slice:
		if v.IsNil() || v.Len() == 0 {
			return nil
		}
		if p := v.Pointer(); w.seen[p] {
			return nil
		} else {
			w.seen[p] = true
		}
		for i := range v.Len() {
			if err := w.check(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		if p := v.Pointer(); w.seen[p] {
			return nil
		} else {
			w.seen[p] = true
		}
		it := v.MapRange()
		for it.Next() {
			if err := w.check(it.Key(), depth+1); err != nil {
				return err
			}
			if err := w.check(it.Value(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.PkgPath != "" || f.Tag.Get(tagName) == "-" {
				continue
			}
			if err := w.check(v.Field(i), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name, err)
			}
		}
	case reflect.Int32:
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if t.PkgPath() != "" && !t.Implements(enumType) {
			return fmt.Errorf("cannot encode %s: dubbo-go-hessian2 v1.12.5 writes nothing for a named %s type (which shifts the rest of the body); convert it to %s", t, t.Kind(), t.Kind())
		}
	}
	return nil
}
