package triple

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

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
func wrapped(contentType string) bool {
	sub := contentType[strings.LastIndexByte(contentType, '+')+1:]
	if i := strings.IndexByte(sub, ';'); i >= 0 {
		sub = sub[:i]
	}
	return sub == "hessian2" || sub == "hessian4" || sub == "hessian"
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
	if w.serializeType != "" && !wrapped("+"+w.serializeType) {
		return nil, fmt.Errorf("serializeType %q: this provider reads hessian2", cut(w.serializeType))
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

var serialization = hessian2.New()

// unwrapArgs decodes a wrapped request: its arguments, hessian2 each, and
// their JVM descriptor.
func unwrapArgs(msg []byte) ([]any, string, error) {
	w, err := decodeWrapper(msg)
	if err != nil {
		return nil, "", fmt.Errorf("TripleRequestWrapper: %w", err)
	}
	args := make([]any, len(w.args))
	for i, b := range w.args {
		v, err := serialization.NewDecoder(b).Decode()
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

// wrapResult appends a result as a wrapper: hessian2, with its Java type.
func wrapResult(dst []byte, v any) ([]byte, error) {
	data, err := serialization.Marshal(nil, v)
	if err != nil {
		return dst, err
	}
	return appendWrapper(dst, hessian2.Name, [][]byte{data}, []string{hessian2.JavaName(hessian2.Descriptor([]any{v}))}), nil
}

// wrapArgs is the consumer's side of unwrapArgs.
func wrapArgs(dst []byte, args []any, desc string) ([]byte, error) {
	if desc == "" {
		desc = hessian2.Descriptor(args)
	}
	descs := hessian2.SplitDescriptor(desc)
	data := make([][]byte, len(args))
	types := make([]string, len(args))
	for i, a := range args {
		b, err := serialization.Marshal(nil, a)
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
	return appendWrapper(dst, hessian2.Name, data, types), nil
}

// unwrapResult is the consumer's side of wrapResult.
func unwrapResult(msg []byte) (any, error) {
	w, err := decodeWrapper(msg)
	if err != nil {
		return nil, fmt.Errorf("TripleResponseWrapper: %w", err)
	}
	if len(w.args) == 0 {
		return nil, nil
	}
	return serialization.NewDecoder(w.args[0]).Decode()
}
