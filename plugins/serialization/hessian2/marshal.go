package hessian2

import (
	"fmt"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// Marshal appends to dst the Hessian encodings of values, as one stream:
// what one library hessian.Encoder writes encoding them one after another,
// so class definitions and back references are shared across the values.
// An *UnknownException is written as an object of its class (see
// ExceptionValue). On error dst is returned unchanged; a panic in the
// library is an error of this call.
func (*Serialization) Marshal(dst []byte, values ...any) (out []byte, err error) {
	var e *hessian.Encoder
	i, b := 0, dst
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("hessian2: value %d (%T): the encoder failed (%v)", i, values[i], r)
		}
	}()
	for ; i < len(values); i++ {
		v := values[i]
		// Scalars and strings are written here (see fastencode.go); they
		// take no part in the library's class definitions and references,
		// so the library's state stays right around them.
		var ok bool
		if b, ok = appendScalar(b, v); ok {
			continue
		}
		// A map of scalars written last (a body's attachments) after
		// scalars only is written here too: nothing before it can be the
		// same map, nothing after it can refer back, so the peer's count
		// of references is the library's.
		if m, isMap := v.(map[string]any); isMap && e == nil && i == len(values)-1 && m != nil {
			if _, isClass := m[classKey]; !isClass {
				if b, ok = AppendStringMap(b, nil, m); ok {
					continue
				}
			}
		}
		if u, isU := v.(*UnknownException); isU && u != nil {
			v = u.asMap()
		}
		if err := encodable(v); err != nil {
			return dst, fmt.Errorf("hessian2: value %d (%T): %w", i, values[i], err)
		}
		if e == nil {
			e = hessian.NewEncoder()
		}
		n := len(e.Buffer())
		if err := e.Encode(v); err != nil {
			return dst, fmt.Errorf("hessian2: value %d (%T): %w", i, values[i], err)
		}
		b = append(b, e.Buffer()[n:]...)
	}
	return b, nil
}

// asMap is the exception as the library writes an object of any class: a
// map with the class under "_class" and Throwable's fields. Written as a
// POJO instead, every class would share the first's definition: the library
// keys its registry by Go type, one class per type.
func (e *UnknownException) asMap() map[string]any {
	st := e.StackTrace
	if st == nil {
		// Java's Throwable reads a null stack trace as "unassigned" and
		// its printStackTrace fails on it.
		st = []StackTraceElement{}
	}
	var cause any
	if e.Cause != nil {
		cause = e.Cause
		if u, ok := e.Cause.(*UnknownException); ok {
			cause = u.asMap()
		}
	}
	return map[string]any{
		classKey:               e.JavaClassName(),
		"serialVersionUID":     e.SerialVersionUID,
		"detailMessage":        e.DetailMessage,
		"suppressedExceptions": suppressed(e.SuppressedExceptions),
		"stackTrace":           st,
		"cause":                cause,
	}
}

func suppressed[T any](l []T) any {
	if l == nil {
		return nil
	}
	out := make([]any, len(l))
	for i, x := range l {
		var v any = x
		if u, ok := v.(*UnknownException); ok {
			v = u.asMap()
		}
		out[i] = v
	}
	return out
}
