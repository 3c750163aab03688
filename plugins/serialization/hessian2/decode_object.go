package hessian2

import (
	"math/bits"
	"reflect"
)

// This file decodes what the fast types do not cover: class definitions,
// objects, back references, and the conversions that put decoded values
// into the fields of registered POJOs, as dubbo-go-hessian2 does.

type classDef struct {
	name   string
	fields []string
	typ    reflect.Type // what its objects decode into; nil: a map
	enum   bool
	except bool // an exception class nobody registered: *UnknownException
}

// References past the inline ones are kept in chunks that never move: a
// slice grown by append would copy itself at each growth, leaving ~4 times
// its final size as garbage (16 bytes a container, and a body of empty maps
// is two bytes a container). Chunk k holds refChunk0<<k references, up to
// refChunkMax each; the first chunks are small, for the common body of a
// few containers.
const (
	refChunk0    = 8
	refChunkMax  = 1024
	refGeometric = 8 // chunks of refChunk0<<k, k < refGeometric (8 to 1024)
	// refGeometricLen is how many references the geometric chunks hold.
	refGeometricLen = refChunk0 * (1<<refGeometric - 1)
)

// refAt is the chunk and offset of reference i (i >= len(refInline)).
func refAt(i int) (chunk, off int) {
	j := i - len(Decoder{}.refInline)
	if j < refGeometricLen {
		u := j + refChunk0
		k := bits.Len(uint(u)) - bits.Len(uint(refChunk0))
		return k, u - refChunk0<<k
	}
	j -= refGeometricLen
	return refGeometric + j/refChunkMax, j % refChunkMax
}

// addRef records a list, map or object for back references and returns its
// index.
func (d *Decoder) addRef(v any) int {
	i := d.nrefs
	if i < len(d.refInline) {
		d.refInline[i] = v
	} else {
		k, off := refAt(i)
		if k == len(d.refMore) {
			n := min(refChunk0<<min(k, refGeometric), refChunkMax)
			// Charged a chunk at a time; addRef cannot fail, so the chunk
			// may overdraw the budget by at most 16 KiB, and the next
			// value fails.
			d.budget -= int64(n) * costSlot
			d.refMore = append(d.refMore, make([]any, n))
		}
		d.refMore[k][off] = v
	}
	d.nrefs++
	return i
}

// setRef replaces reference i: a container whose value is known only when
// it is complete (a variable-length list, an enum constant).
func (d *Decoder) setRef(i int, v any) {
	if i < len(d.refInline) {
		d.refInline[i] = v
	} else {
		k, off := refAt(i)
		d.refMore[k][off] = v
	}
}

// ref is reference i, 0 <= i < d.nrefs.
func (d *Decoder) ref(i int) any {
	if i < len(d.refInline) {
		return d.refInline[i]
	}
	k, off := refAt(i)
	return d.refMore[k][off]
}

// truncRefs forgets the references from n on (DecodeStringMap's retry). The
// chunks stay, for the references made next.
func (d *Decoder) truncRefs(n int) {
	for i := n; i < d.nrefs; i++ {
		d.setRef(i, nil)
	}
	d.nrefs = n
}

// backRef decodes 'Q' int: the n-th list, map or object so far, itself (so
// a value may contain itself, as Java graphs do).
func (d *Decoder) backRef() (any, error) {
	at := d.pos
	d.pos++
	i, err := d.int32(false)
	if err != nil {
		return nil, err
	}
	if i < 0 || int(i) >= d.nrefs {
		return nil, errAt(at, "reference %d to one of %d lists, maps and objects", i, d.nrefs)
	}
	if err := d.spend(costSlot); err != nil {
		return nil, err
	}
	return d.ref(int(i)), nil
}

// classDef decodes 'C' name int field-name*, and the value after it, which
// the library reads as part of it.
func (d *Decoder) classDef(depth int) (any, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	d.pos++
	name, err := d.defString("class name")
	if err != nil {
		return nil, err
	}
	n32, err := d.int32(true)
	if err != nil {
		return nil, err
	}
	n, err := d.count(n32, "class definition")
	if err != nil {
		return nil, err
	}
	if err := d.spend(int64(n)*costSlot + costObject); err != nil {
		return nil, err
	}
	c := classDef{name: name, fields: make([]string, n)}
	for i := range c.fields {
		if c.fields[i], err = d.defString("field name"); err != nil {
			return nil, err
		}
	}
	c.typ = classType(name)
	switch {
	case c.typ != nil && isEnum(c.typ):
		c.enum = true
	case c.typ != nil && c.typ.Kind() != reflect.Struct:
		c.typ = nil
	case c.typ == nil && isException(c.fields):
		c.typ, c.except = unknownExceptionType, true
	}
	d.classes = append(d.classes, c)
	if d.pos >= len(d.data) {
		return nil, d.truncated("a class definition: its object is missing")
	}
	return d.value(depth + 1)
}

func (d *Decoder) defString(what string) (string, error) {
	if d.pos >= len(d.data) {
		return "", d.truncated(what)
	}
	if !isStringTag(d.data[d.pos]) {
		return "", errAt(d.pos, "invalid %s, tag 0x%02x", what, d.data[d.pos])
	}
	return d.str()
}

// isException is the library's test for an exception class it does not
// know: one with Throwable's four fields.
func isException(fields []string) bool {
	count := 0
	for _, f := range fields {
		switch f {
		case "detailMessage", "suppressedExceptions", "stackTrace", "cause":
			count++
		}
	}
	return count == 4
}

// object decodes 'O' int value* and x60-x6f value*: into a new value of the
// registered type of its class (a pointer to it), a constant of a
// registered enum, an *UnknownException for an exception nobody registered,
// and a map[string]any with the class under "_class" for anything else.
func (d *Decoder) object(depth int) (any, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	at := d.pos
	tag := d.data[d.pos]
	d.pos++
	idx := int32(tag) - 0x60
	if tag == tagObject {
		var err error
		if idx, err = d.int32(true); err != nil {
			return nil, err
		}
	}
	if idx < 0 || int(idx) >= len(d.classes) {
		return nil, errAt(at, "object of undefined class %d (%d defined)", idx, len(d.classes))
	}
	c := &d.classes[idx]
	if err := d.spend(costObject + int64(len(c.fields))*costSlot); err != nil {
		return nil, err
	}
	switch {
	case c.enum:
		return d.enumConst(c, depth)
	case c.typ == nil:
		// Made at its final size: its tables are allocated now, and
		// never grow (a repeated field name only makes it smaller).
		hint := len(c.fields) + 1
		if err := d.spend(presizedMapCost(hint, costMapSlot)); err != nil {
			return nil, err
		}
		m := make(map[string]any, hint)
		m[classKey] = c.name
		d.addRef(m)
		for _, f := range c.fields {
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[f] = v
		}
		return m, nil
	}
	if err := d.spend(int64(c.typ.Size())); err != nil {
		return nil, err
	}
	p := reflect.New(c.typ)
	if c.except {
		p.Interface().(*UnknownException).Class = c.name
	}
	out := p.Interface()
	d.addRef(out) // before the fields, which may refer to it
	plan := planOf(c.typ)
	s := p.Elem()
	for _, f := range c.fields {
		fat := d.pos
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		path := plan.field(c.typ, f)
		if path == nil || v == nil {
			continue // a field the Go type does not have is skipped
		}
		if err := d.assign(s.FieldByIndex(path), v, depth+1); err != nil {
			return nil, errAt(fat, "field %s of %s: %v", quote(f), quote(c.name), err)
		}
	}
	return out, nil
}

// enumConst decodes an enum constant: its one field is the name, which the
// type's EnumValue turns into the value; the library returns a pointer to it.
func (d *Decoder) enumConst(c *classDef, depth int) (any, error) {
	slot := d.addRef(nil)
	v, err := d.value(depth + 1)
	if err != nil {
		return nil, err
	}
	for range len(c.fields) - 1 {
		if _, err := d.value(depth + 1); err != nil {
			return nil, err
		}
	}
	name, _ := v.(string)
	ev, err := enumValue(c.typ, name)
	if err != nil {
		return nil, errAt(d.pos, "enum %s: %v", quote(c.name), err)
	}
	p := reflect.New(c.typ)
	p.Elem().Set(ev)
	out := p.Interface()
	d.setRef(slot, out)
	return out, nil
}

// classList decodes a typed list of a registered class into []*T.
func (d *Decoder) classList(elem reflect.Type, n int, variable bool, depth int) (any, error) {
	if err := d.spend(int64(n) * int64(elem.Size())); err != nil {
		return nil, err
	}
	out := reflect.MakeSlice(reflect.SliceOf(elem), n, n)
	boxed := out.Interface()
	slot := d.addRef(boxed)
	for i := 0; ; i++ {
		more, err := d.next(i, n, variable)
		if err != nil {
			return nil, err
		}
		if !more {
			if variable {
				boxed = out.Interface()
				d.setRef(slot, boxed)
			}
			return boxed, nil
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if variable {
			if err := d.grow(out.Len(), out.Cap(), int64(elem.Size())); err != nil {
				return nil, err
			}
			out = reflect.Append(out, reflect.Zero(elem))
		}
		if v != nil {
			if err := d.assign(out.Index(i), v, depth+1); err != nil {
				return nil, err
			}
		}
	}
}

// assign stores a decoded value v into dst, converting as the library does
// for the fields of POJOs: numbers to the field's kind, lists to the
// field's slice type element by element, maps to its map type, values to
// pointers and pointers to structs to struct values. The conversions are
// charged to the budget; depth bounds them on values that contain
// themselves.
func (d *Decoder) assign(dst reflect.Value, v any, depth int) error {
	if v == nil {
		return nil
	}
	if depth >= MaxDepth {
		return errAt(d.pos, "nesting deeper than %d", MaxDepth)
	}
	rv := reflect.ValueOf(v)
	dt := dst.Type()
	if rv.Type().AssignableTo(dt) {
		dst.Set(rv)
		return nil
	}
	switch dt.Kind() {
	case reflect.Interface:
		// Not assignable: an interface the value does not implement.
	case reflect.Pointer:
		if rv.Kind() == reflect.Pointer && rv.Elem().Type().AssignableTo(dt.Elem()) {
			e := reflect.New(dt.Elem())
			e.Elem().Set(rv.Elem())
			dst.Set(e)
			return nil
		}
		if err := d.spend(int64(dt.Elem().Size())); err != nil {
			return err
		}
		e := reflect.New(dt.Elem())
		if err := d.assign(e.Elem(), v, depth+1); err != nil {
			return err
		}
		dst.Set(e)
		return nil
	case reflect.Struct:
		if rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Type().AssignableTo(dt) {
			dst.Set(rv.Elem())
			return nil
		}
		if rv.Type() == timeType && dt.ConvertibleTo(timeType) {
			dst.Set(rv.Convert(dt))
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch x := v.(type) {
		case int32:
			dst.SetInt(int64(x))
			return nil
		case int64:
			dst.SetInt(x)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		switch x := v.(type) {
		case int32:
			dst.SetUint(uint64(x))
			return nil
		case int64:
			dst.SetUint(uint64(x))
			return nil
		}
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case float64:
			dst.SetFloat(x)
			return nil
		case int32:
			dst.SetFloat(float64(x))
			return nil
		case int64:
			dst.SetFloat(float64(x))
			return nil
		}
	case reflect.String:
		if s, ok := v.(string); ok {
			dst.SetString(s)
			return nil
		}
	case reflect.Bool:
		if b, ok := v.(bool); ok {
			dst.SetBool(b)
			return nil
		}
	case reflect.Slice:
		if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			n := rv.Len()
			if err := d.spend(int64(n) * int64(dt.Elem().Size())); err != nil {
				return err
			}
			out := reflect.MakeSlice(dt, n, n)
			for i := range n {
				if err := d.assign(out.Index(i), rv.Index(i).Interface(), depth+1); err != nil {
					return err
				}
			}
			dst.Set(out)
			return nil
		}
	case reflect.Array:
		if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			for i := range min(rv.Len(), dst.Len()) {
				if err := d.assign(dst.Index(i), rv.Index(i).Interface(), depth+1); err != nil {
					return err
				}
			}
			return nil
		}
	case reflect.Map:
		if rv.Kind() == reflect.Map {
			// Made at its final size: charged its tables at once, each
			// slot its key, value and control byte, rounded as
			// costMapSlot is.
			slot := (int64(dt.Key().Size()+dt.Elem().Size()) + 1) * 9 / 8
			if err := d.spend(presizedMapCost(rv.Len(), slot)); err != nil {
				return err
			}
			out := reflect.MakeMapWithSize(dt, rv.Len())
			it := rv.MapRange()
			for it.Next() {
				k := reflect.New(dt.Key()).Elem()
				if err := d.assign(k, it.Key().Interface(), depth+1); err != nil {
					return err
				}
				val := reflect.New(dt.Elem()).Elem()
				if err := d.assign(val, it.Value().Interface(), depth+1); err != nil {
					return err
				}
				out.SetMapIndex(k, val)
			}
			dst.Set(out)
			return nil
		}
	}
	return errAt(d.pos, "cannot set %s from a decoded %T", dt, v)
}
