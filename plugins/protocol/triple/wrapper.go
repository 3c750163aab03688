package triple

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// Non-IDL calls: Go services of plain types (hessian2 POJOs, strings,
// maps), carried over Triple as Dubbo 3 and dubbo-go 3 carry them. The
// gRPC message is a TripleRequestWrapper
//
//	message TripleRequestWrapper {
//	  string serializeType = 1;      // "hessian2" (dubbo-go; Java says "hessian4" for the same)
//	  repeated bytes args = 2;       // each argument serialized on its own
//	  repeated string argTypes = 3;  // Java type names: "java.lang.String", "long"
//	}
//
// and the answer a TripleResponseWrapper {serializeType = 1; bytes data = 2;
// string type = 3}, which has the same encoding for one value (dubbo-go
// sends and reads a request wrapper both ways). The content type names the
// serialization: application/grpc+hessian2.

// wrapped reports whether a content type carries wrapped hessian2 calls.
func wrapped(contentType string) bool { return isHessian(subtype(contentType)) }

// subtype is the serialization a gRPC content type names:
// application/grpc+hessian2 says hessian2, application/grpc (or +proto)
// says protobuf.
func subtype(contentType string) string {
	i := strings.LastIndexByte(contentType, '+')
	if i < 0 {
		return ""
	}
	sub := contentType[i+1:]
	if i := strings.IndexByte(sub, ';'); i >= 0 {
		sub = sub[:i]
	}
	return sub
}

// isHessian: the names Dubbo 3 (hessian4), dubbo-go (hessian2) and others
// give hessian2.
func isHessian(sub string) bool { return sub == "hessian2" || sub == "hessian4" || sub == "hessian" }

// isIDL: the subtypes of protobuf messages as they are (gRPC's own).
func isIDL(sub string) bool { return sub == "" || sub == "proto" || sub == "json" }

// wireSer is the serialization of a wrapped call and the name it goes by
// in serializeType and the content type.
type wireSer struct {
	ser  extension.Serialization
	name string
}

var hessianWire = wireSer{hessian2.New(), hessian2.Name}

// wrappedSer is the serialization a content type's subtype names for
// wrapped calls: hessian2 by any of its names, else one of sers (a
// plugin's); ok false for protobuf's subtypes.
func wrappedSer(sers extension.Serializations, sub string) (w wireSer, ok bool, err error) {
	switch {
	case isIDL(sub):
		return wireSer{}, false, nil
	case isHessian(sub):
		return hessianWire, true, nil
	case sers == nil:
		return wireSer{}, true, fmt.Errorf("content type +%s: this provider reads hessian2 and protobuf only", cut(sub))
	}
	ser, err := sers.Serialization(sub)
	if err != nil {
		return wireSer{}, true, fmt.Errorf("content type +%s: %w", cut(sub), err)
	}
	return wireSer{ser, sub}, true, nil
}

// wrapper is a decoded TripleRequestWrapper.
type wrapper struct {
	serializeType string
	args          [][]byte
	argTypes      []string
}

// decodeWrapper reads a wrapper, bounded: at most hessian2.MaxArgs
// arguments, as a Dubbo request has.
func decodeWrapper(b []byte) (*wrapper, error) {
	w := &wrapper{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
		switch num {
		case 1:
			w.serializeType = string(v)
		case 2:
			if len(w.args) == hessian2.MaxArgs {
				return nil, fmt.Errorf("more than %d arguments", hessian2.MaxArgs)
			}
			w.args = append(w.args, v)
		case 3:
			if len(w.argTypes) == hessian2.MaxArgs {
				return nil, fmt.Errorf("more than %d argument types", hessian2.MaxArgs)
			}
			w.argTypes = append(w.argTypes, string(v))
		}
	}
	return w, nil
}

// appendWrapper appends a wrapper's encoding.
func appendWrapper(dst []byte, serializeType string, args [][]byte, argTypes []string) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, serializeType)
	for _, a := range args {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, a)
	}
	for _, t := range argTypes {
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendString(dst, t)
	}
	return dst
}

// sameSer: a wrapper's serializeType agrees with the content type's
// serialization (empty, as some peers send it, agrees with any).
func sameSer(serializeType string, w wireSer) bool {
	return serializeType == "" || serializeType == w.name || isHessian(serializeType) && isHessian(w.name)
}

// unwrapArgs decodes a wrapped request: its arguments, each in w's
// serialization, and their JVM descriptor.
func unwrapArgs(msg []byte, ws wireSer) ([]any, string, error) {
	w, err := decodeWrapper(msg)
	if err != nil {
		return nil, "", fmt.Errorf("TripleRequestWrapper: %w", err)
	}
	if !sameSer(w.serializeType, ws) {
		return nil, "", fmt.Errorf("TripleRequestWrapper: serializeType %q, but the content type says %s", cut(w.serializeType), ws.name)
	}
	args := make([]any, len(w.args))
	for i, b := range w.args {
		v, err := ws.ser.NewDecoder(b).Decode()
		if err != nil {
			return nil, "", fmt.Errorf("argument %d: %w", i, err)
		}
		args[i] = v
	}
	var desc strings.Builder
	for _, t := range w.argTypes {
		desc.WriteString(hessian2.TypeDescriptor(t))
	}
	return args, desc.String(), nil
}

// wrapResult appends a result as a wrapper in w's serialization, with its
// Java type.
func wrapResult(dst []byte, v any, w wireSer) ([]byte, error) {
	data, err := w.ser.Marshal(nil, v)
	if err != nil {
		return dst, err
	}
	return appendWrapper(dst, w.name, [][]byte{data}, []string{hessian2.JavaName(hessian2.Descriptor([]any{v}))}), nil
}

// wrapArgs is the consumer's side of unwrapArgs.
func wrapArgs(dst []byte, args []any, desc string, w wireSer) ([]byte, error) {
	if desc == "" {
		desc = hessian2.Descriptor(args)
	}
	descs := hessian2.SplitDescriptor(desc)
	data := make([][]byte, len(args))
	types := make([]string, len(args))
	for i, a := range args {
		b, err := w.ser.Marshal(nil, a)
		if err != nil {
			return dst, fmt.Errorf("argument %d: %w", i, err)
		}
		data[i] = b
		if i < len(descs) {
			types[i] = hessian2.JavaName(descs[i])
		} else {
			types[i] = hessian2.JavaName(hessian2.Descriptor([]any{a}))
		}
	}
	return appendWrapper(dst, w.name, data, types), nil
}

// unwrapResult is the consumer's side of wrapResult.
func unwrapResult(msg []byte, ws wireSer) (any, error) {
	w, err := decodeWrapper(msg)
	if err != nil {
		return nil, fmt.Errorf("TripleResponseWrapper: %w", err)
	}
	if len(w.args) == 0 {
		return nil, nil
	}
	return ws.ser.NewDecoder(w.args[0]).Decode()
}
