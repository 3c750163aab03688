// Package protobuf is the `protobuf` serialization (Dubbo's id 22): the
// values of a call as Java Dubbo's GenericProtobufSerialization writes them,
// each a length-delimited protobuf message. Messages go as themselves;
// strings, integers, floats, booleans and bytes as Google's wrapper types
// (StringValue, Int32Value, Int64Value, FloatValue, DoubleValue, BoolValue,
// BytesValue); attachments as Dubbo's MapValue.Map {map<string,string>
// attachments = 1}. The bytes do not say which message they hold, so a
// decoded value is a kernel.Decodable: the reader that knows the type (the
// method's parameter, the codec's header string) asks for it. The same
// messages, one per gRPC frame, are what Triple's IDL calls carry.
package protobuf

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the serialization's name (`serialization: protobuf`).
const Name = "protobuf"

// ID is Dubbo's id of the protobuf serialization, in the frame's flag byte.
const ID = 22

// Serialization is the protobuf serialization.
type Serialization struct{}

// New returns the protobuf serialization.
func New() Serialization { return Serialization{} }

var _ extension.Serialization = Serialization{}

// ID is Dubbo's id, 22.
func (Serialization) ID() byte { return ID }

// Marshal appends each value, length-delimited: a protobuf message as
// itself, a scalar as its wrapper, a map of strings as Dubbo's MapValue.Map.
// Anything else (nil included, as Java refuses it) is an error naming its
// type.
func (Serialization) Marshal(dst []byte, values ...any) ([]byte, error) {
	for i, v := range values {
		if s, ok, err := stringMap(v); ok || err != nil {
			if err != nil {
				return dst, kernel.Errorf(kernel.CodeSerialization, "protobuf: value %d: %v", i, err)
			}
			dst = protowire.AppendBytes(dst, appendAttachments(nil, s))
			continue
		}
		m, err := message(v)
		if err != nil {
			return dst, kernel.Errorf(kernel.CodeSerialization, "protobuf: value %d: %v", i, err)
		}
		dst = protowire.AppendVarint(dst, uint64(proto.Size(m)))
		if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, m); err != nil {
			return dst, kernel.Errorf(kernel.CodeSerialization, "protobuf: value %d (%T): %v", i, v, err)
		}
	}
	return dst, nil
}

// message is the protobuf message v goes as.
func message(v any) (proto.Message, error) {
	switch x := v.(type) {
	case proto.Message:
		if rv := reflect.ValueOf(x); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil, errors.New("a nil message: send an empty one (google.protobuf.Empty) instead")
		}
		return x, nil
	case string:
		return wrapperspb.String(x), nil
	case bool:
		return wrapperspb.Bool(x), nil
	case int8:
		return wrapperspb.Int32(int32(x)), nil
	case int16:
		return wrapperspb.Int32(int32(x)), nil
	case int32:
		return wrapperspb.Int32(x), nil
	case int64:
		return wrapperspb.Int64(x), nil
	case int:
		return wrapperspb.Int64(int64(x)), nil
	case float32:
		return wrapperspb.Float(x), nil
	case float64:
		return wrapperspb.Double(x), nil
	case []byte:
		return wrapperspb.Bytes(x), nil
	case nil:
		return nil, errors.New("nil: protobuf carries messages only; send an empty one (google.protobuf.Empty) instead")
	}
	return nil, fmt.Errorf("%T is not a protobuf message (nor a string, number, bool, []byte or map of strings): use hessian2 for Go values", v)
}

// NewDecoder reads the values of data one after another. Its values decode
// later, when their reader names the type, and data is the transport's
// buffer, reused once the frame is handed on: the decoder keeps a copy.
func (Serialization) NewDecoder(data []byte) extension.Decoder {
	return &decoder{data: bytes.Clone(data)}
}

type decoder struct{ data []byte }

// Decode returns the next value, not decoded yet: a *Value. Its length is
// checked against the bytes left, so a frame cannot claim more than it has.
func (d *decoder) Decode() (any, error) {
	if len(d.data) == 0 {
		return nil, kernel.Errorf(kernel.CodeSerialization, "protobuf: no more values")
	}
	n, k := protowire.ConsumeVarint(d.data)
	if k < 0 || n > uint64(len(d.data)-k) {
		return nil, kernel.Errorf(kernel.CodeSerialization, "protobuf: a value's length (%d) is more than the %d bytes left", n, len(d.data)-max(k, 0))
	}
	v := &Value{data: d.data[k : k+int(n)]}
	d.data = d.data[k+int(n):]
	return v, nil
}

// Value is one message whose type its reader names (kernel.Decodable).
type Value struct{ data []byte }

// NewValue is the message data, not decoded yet: what a Triple frame
// carries for an IDL call.
func NewValue(data []byte) *Value { return &Value{data: data} }

// Bytes are the message's encoding.
func (v *Value) Bytes() []byte { return v.data }

// Encoding says that Bytes are a protobuf message (kernel.Encoded).
func (v *Value) Encoding() string { return "proto" }

var _ kernel.Decodable = (*Value)(nil)

// DecodeAs decodes the message as t: a protobuf message type (a pointer to
// a generated struct), or the Go type of a wrapper (string, bool, the
// integers, the floats, []byte) or of the attachments (map[string]string,
// map[string]any). protobuf-go bounds what the bytes make it allocate by
// their length and nests at most 10,000 deep.
func (v *Value) DecodeAs(t reflect.Type) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer {
		if m, ok := reflect.New(t.Elem()).Interface().(proto.Message); ok {
			if err := proto.Unmarshal(v.data, m); err != nil {
				return reflect.Value{}, fmt.Errorf("protobuf %s: %w", t.Elem(), err)
			}
			return reflect.ValueOf(m), nil
		}
	}
	var w proto.Message
	var get func() any
	switch t.Kind() {
	case reflect.String:
		m := &wrapperspb.StringValue{}
		w, get = m, func() any { return m.Value }
	case reflect.Bool:
		m := &wrapperspb.BoolValue{}
		w, get = m, func() any { return m.Value }
	case reflect.Int8, reflect.Int16, reflect.Int32:
		m := &wrapperspb.Int32Value{}
		w, get = m, func() any { return m.Value }
	case reflect.Int, reflect.Int64:
		m := &wrapperspb.Int64Value{}
		w, get = m, func() any { return m.Value }
	case reflect.Float32:
		m := &wrapperspb.FloatValue{}
		w, get = m, func() any { return m.Value }
	case reflect.Float64:
		m := &wrapperspb.DoubleValue{}
		w, get = m, func() any { return m.Value }
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			m := &wrapperspb.BytesValue{}
			w, get = m, func() any { return m.Value }
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && (t.Elem().Kind() == reflect.String || t.Elem().Kind() == reflect.Interface) {
			m, err := parseAttachments(v.data)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("protobuf attachments: %w", err)
			}
			if t.Elem().Kind() == reflect.String {
				return reflect.ValueOf(m).Convert(t), nil
			}
			out := reflect.MakeMapWithSize(t, len(m))
			for k, val := range m {
				out.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(val))
			}
			return out, nil
		}
	}
	if w == nil {
		return reflect.Value{}, fmt.Errorf("protobuf cannot decode into %s: the serialization carries protobuf messages, scalars and string maps", t)
	}
	if err := proto.Unmarshal(v.data, w); err != nil {
		return reflect.Value{}, fmt.Errorf("protobuf %s: %w", t, err)
	}
	out := reflect.ValueOf(get())
	if !out.Type().ConvertibleTo(t) {
		return reflect.Value{}, fmt.Errorf("protobuf cannot decode into %s", t)
	}
	return out.Convert(t), nil
}

// stringMap is v as attachments: a map[string]string, or a map[string]any
// of strings, numbers and booleans (which go as their text, as Java's
// String-only attachments need; weft reads `_TO` and `timeout` from text
// too); false for anything else, an error for a map with other values.
func stringMap(v any) (map[string]string, bool, error) {
	switch x := v.(type) {
	case map[string]string:
		return x, true, nil
	case map[string]any:
		s := make(map[string]string, len(x))
		for k, val := range x {
			switch t := val.(type) {
			case string:
				s[k] = t
			case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
				s[k] = fmt.Sprint(t)
			default:
				return nil, false, fmt.Errorf("attachment %q is %T: protobuf carries text attachments only (Dubbo's MapValue.Map)", k, val)
			}
		}
		return s, true, nil
	}
	return nil, false, nil
}

// appendAttachments writes Dubbo's MapValue.Map {map<string, string>
// attachments = 1}: one entry message {key = 1; value = 2} per pair, in
// key order so that the bytes are the same every time.
func appendAttachments(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var entry []byte
	for _, k := range keys {
		entry = protowire.AppendTag(entry[:0], 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendString(entry, m[k])
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, entry)
	}
	return dst
}

// MaxAttachments bounds the entries of decoded attachments: a frame of
// tiny entries would otherwise make a map far larger than itself.
const MaxAttachments = 1 << 16

// parseAttachments reads MapValue.Map. Unknown fields are skipped, as
// protobuf readers do; every length is checked against the bytes left, so
// the map holds at most as many entries as the bytes can describe.
func parseAttachments(b []byte) (map[string]string, error) {
	m := map[string]string{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		entry, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var k, v string
		for len(entry) > 0 {
			num, typ, n := protowire.ConsumeTag(entry)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			entry = entry[n:]
			if typ != protowire.BytesType || num != 1 && num != 2 {
				if n = protowire.ConsumeFieldValue(num, typ, entry); n < 0 {
					return nil, protowire.ParseError(n)
				}
				entry = entry[n:]
				continue
			}
			s, n := protowire.ConsumeString(entry)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			entry = entry[n:]
			if num == 1 {
				k = s
			} else {
				v = s
			}
		}
		if len(m) >= MaxAttachments {
			return nil, fmt.Errorf("more than %d attachments", MaxAttachments)
		}
		m[k] = v
	}
	return m, nil
}
