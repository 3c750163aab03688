package idl

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/proxy"
)

// maxMessageDepth bounds how deeply a message built from a generic value,
// or read into one, nests: protobuf's own decoder stops at 10,000, which a
// recursive walk here must not reach.
const maxMessageDepth = 100

// toMessage puts an argument in md's type: bytes as a protocol read them
// (kernel.Encoded), a message (of md's type, or another whose bytes are
// md's), or a value in generic form (a hessian2 call's map, a generic
// call's, a JSON array's element), whose keys are the fields' JSON or proto
// names ("class", a Java POJO's class, is not a field).
func toMessage(v any, md protoreflect.MessageDescriptor) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(md)
	switch a := v.(type) {
	case nil:
		return m, nil
	case kernel.Encoded:
		var err error
		switch a.Encoding() {
		case "proto":
			err = proto.UnmarshalOptions{RecursionLimit: maxMessageDepth}.Unmarshal(a.Bytes(), m)
		case "json":
			err = protojson.UnmarshalOptions{RecursionLimit: maxMessageDepth}.Unmarshal(a.Bytes(), m)
		default:
			err = fmt.Errorf("an argument encoded as %q", view.Cut(a.Encoding(), 32))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", md.FullName(), err)
		}
		return m, nil
	case *dynamicpb.Message:
		if a.Descriptor() == md {
			return a, nil
		}
	}
	if pm, ok := v.(proto.Message); ok {
		if pm.ProtoReflect().Descriptor().FullName() != md.FullName() {
			return nil, fmt.Errorf("a %s where %s is declared", pm.ProtoReflect().Descriptor().FullName(), md.FullName())
		}
		b, err := proto.Marshal(pm)
		if err == nil {
			err = proto.Unmarshal(b, m)
		}
		return m, err
	}
	b := view.NewBudget(view.GenericLimits)
	if err := fillMessage(m, view.Generic(v), b, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", md.FullName(), err)
	}
	return m, nil
}

// fillMessage sets m's fields from a map in generic form.
func fillMessage(m protoreflect.Message, v any, b *view.Budget, depth int) error {
	if err := b.Visit(depth); err != nil {
		return err
	}
	if depth > maxMessageDepth {
		return fmt.Errorf("nested deeper than %d messages", maxMessageDepth)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("a %s where a message (an object of its fields) is declared", kindOf(v))
	}
	fields := m.Descriptor().Fields()
	for k, fv := range obj {
		if k == "class" {
			continue // a Java POJO's class: no field of the message
		}
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(k))
		}
		if fd == nil {
			return fmt.Errorf("no field %q (fields: %s)", view.Cut(k, 64), fieldNames(fields))
		}
		if fv == nil {
			continue
		}
		if err := setField(m, fd, fv, b, depth); err != nil {
			return fmt.Errorf("%s: %w", fd.JSONName(), err)
		}
	}
	return nil
}

func setField(m protoreflect.Message, fd protoreflect.FieldDescriptor, v any, b *view.Budget, depth int) error {
	switch {
	case fd.IsList():
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("a %s where a list is declared", kindOf(v))
		}
		l := m.Mutable(fd).List()
		for i, it := range items {
			if err := b.Visit(depth + 1); err != nil {
				return err
			}
			if fd.Message() != nil {
				e := l.NewElement()
				if err := fillMessage(e.Message(), it, b, depth+1); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
				l.Append(e)
				continue
			}
			sv, err := scalar(fd, it)
			if err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
			l.Append(sv)
		}
		return nil
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a %s where a map is declared", kindOf(v))
		}
		mp := m.Mutable(fd).Map()
		for k, it := range obj {
			if err := b.Visit(depth + 1); err != nil {
				return err
			}
			kv, err := scalar(fd.MapKey(), k)
			if err != nil {
				return fmt.Errorf("key %q: %w", view.Cut(k, 64), err)
			}
			if fd.MapValue().Message() != nil {
				e := mp.NewValue()
				if err := fillMessage(e.Message(), it, b, depth+1); err != nil {
					return fmt.Errorf("[%q]: %w", view.Cut(k, 64), err)
				}
				mp.Set(kv.MapKey(), e)
				continue
			}
			sv, err := scalar(fd.MapValue(), it)
			if err != nil {
				return fmt.Errorf("[%q]: %w", view.Cut(k, 64), err)
			}
			mp.Set(kv.MapKey(), sv)
		}
		return nil
	case fd.Message() != nil:
		return fillMessage(m.Mutable(fd).Message(), v, b, depth+1)
	}
	sv, err := scalar(fd, v)
	if err != nil {
		return err
	}
	m.Set(fd, sv)
	return nil
}

// scalar converts a generic value to a scalar field's type: numbers of any
// Go kind that fit, numbers in strings (protobuf's JSON writes 64-bit ones
// so), enums by name or number, bytes as they are or in base64.
func scalar(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s, ok := v.(string); ok {
			return protoreflect.ValueOfString(s), nil
		}
	case protoreflect.BytesKind:
		switch x := v.(type) {
		case []byte:
			return protoreflect.ValueOfBytes(x), nil
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil {
				return protoreflect.ValueOfBytes(d), nil
			}
			if d, err := base64.URLEncoding.DecodeString(x); err == nil {
				return protoreflect.ValueOfBytes(d), nil
			}
			return protoreflect.Value{}, fmt.Errorf("bytes in a string that is not base64")
		}
	case protoreflect.BoolKind:
		if x, ok := v.(bool); ok {
			return protoreflect.ValueOfBool(x), nil
		}
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), nil
			}
			return protoreflect.Value{}, fmt.Errorf("%q is no value of %s", view.Cut(s, 64), fd.Enum().FullName())
		}
		if n, ok := integer(v, math.MinInt32, math.MaxInt32); ok {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if n, ok := integer(v, math.MinInt32, math.MaxInt32); ok {
			return protoreflect.ValueOfInt32(int32(n)), nil
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if n, ok := integer(v, math.MinInt64, math.MaxInt64); ok {
			return protoreflect.ValueOfInt64(n), nil
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if n, ok := integer(v, 0, math.MaxUint32); ok {
			return protoreflect.ValueOfUint32(uint32(n)), nil
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if n, ok := integer(v, 0, math.MaxInt64); ok {
			return protoreflect.ValueOfUint64(uint64(n)), nil
		}
		if u, ok := v.(uint64); ok {
			return protoreflect.ValueOfUint64(u), nil
		}
	case protoreflect.FloatKind:
		if f, ok := float(v); ok {
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
	case protoreflect.DoubleKind:
		if f, ok := float(v); ok {
			return protoreflect.ValueOfFloat64(f), nil
		}
	}
	return protoreflect.Value{}, fmt.Errorf("a %s where %s is declared", kindOf(v), fd.Kind())
}

// integer reads a whole number of any Go kind, or in a string, within
// [lo, hi].
func integer(v any, lo, hi int64) (int64, bool) {
	var n int64
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return 0, false
		}
		n = int64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, false
		}
		n = int64(f)
	case reflect.String:
		var err error
		if n, err = strconv.ParseInt(rv.String(), 10, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n >= lo && n <= hi
}

func float(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.String:
		switch rv.String() {
		case "NaN":
			return math.NaN(), true
		case "Infinity":
			return math.Inf(1), true
		case "-Infinity":
			return math.Inf(-1), true
		}
		f, err := strconv.ParseFloat(rv.String(), 64)
		return f, err == nil
	}
	return 0, false
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func fieldNames(fs protoreflect.FieldDescriptors) string {
	names := make([]string, fs.Len())
	for i := range fs.Len() {
		names[i] = fs.Get(i).JSONName()
	}
	return strings.Join(names, ", ")
}

// messageValue is m in generic form, as a hessian2 peer takes a POJO: a map
// of its fields (set ones) by JSON name, 64-bit numbers as Go's, enums by
// name, nested messages as maps; class, when given, is the POJO's Java
// class.
func messageValue(m protoreflect.Message, class string, depth int) map[string]any {
	out := map[string]any{}
	if class != "" {
		out["class"] = class
	}
	if depth > maxMessageDepth {
		return out // protobuf's decoder read it; nothing deeper is kept
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[fd.JSONName()] = fieldValue(fd, v, depth)
		return true
	})
	return out
}

func fieldValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) any {
	switch {
	case fd.IsList():
		l := v.List()
		items := make([]any, l.Len())
		for i := range items {
			items[i] = singular(fd, l.Get(i), depth)
		}
		return items
	case fd.IsMap():
		out := map[string]any{}
		v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
			out[k.String()] = singular(fd.MapValue(), e, depth)
			return true
		})
		return out
	}
	return singular(fd, v, depth)
}

func singular(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageValue(v.Message(), "", depth+1)
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int32(v.Enum())
	}
	return v.Interface() // string, []byte, bool, int32, int64, uint32, uint64, float32, float64
}

// javaValue puts a generic value in a declared Java type where Go has one
// that hessian2 writes as that type (a JSON number becomes an int for
// "int"); other types (POJOs, collections) take the value as it is.
func javaValue(v any, typ string) (any, error) {
	if v == nil {
		if isPrimitive(typ) {
			return nil, fmt.Errorf("null where %s is declared", typ)
		}
		return nil, nil
	}
	if e, ok := v.(kernel.Encoded); ok {
		if e.Encoding() != "json" {
			return nil, fmt.Errorf("a %s message where %s is declared: this method is declared with Java types; call it with hessian2 or JSON", e.Encoding(), typ)
		}
		// One reader of JSON values for every caller: whole numbers as
		// int64, others as float64.
		args, err := proxy.JSONArgs("[" + string(e.Bytes()) + "]")
		if err != nil {
			return nil, err
		}
		if len(args) != 1 {
			return nil, fmt.Errorf("%d JSON values where one is declared", len(args))
		}
		v = args[0]
	}
	bad := func() (any, error) { return nil, fmt.Errorf("a %s where %s is declared", kindOf(v), typ) }
	switch typ {
	case "java.lang.String", "String", "char", "java.lang.Character":
		if s, ok := v.(string); ok {
			return s, nil
		}
		return bad()
	case "boolean", "java.lang.Boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return bad()
	case "int", "java.lang.Integer":
		if n, ok := integer(v, math.MinInt32, math.MaxInt32); ok {
			return int32(n), nil
		}
		return bad()
	case "long", "java.lang.Long":
		if n, ok := integer(v, math.MinInt64, math.MaxInt64); ok {
			return n, nil
		}
		return bad()
	case "short", "java.lang.Short":
		if n, ok := integer(v, math.MinInt16, math.MaxInt16); ok {
			return int16(n), nil
		}
		return bad()
	case "byte", "java.lang.Byte":
		if n, ok := integer(v, math.MinInt8, math.MaxInt8); ok {
			return int8(n), nil
		}
		return bad()
	case "double", "java.lang.Double":
		if f, ok := float(v); ok {
			return f, nil
		}
		return bad()
	case "float", "java.lang.Float":
		if f, ok := float(v); ok {
			return float32(f), nil
		}
		return bad()
	case "byte[]", "[B":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil {
				return d, nil
			}
		}
		return bad()
	}
	return v, nil
}

func isPrimitive(t string) bool {
	switch t {
	case "int", "long", "short", "byte", "double", "float", "boolean", "char":
		return true
	}
	return false
}
