package hessian2

import "slices"

// The fast paths of encoding: a Dubbo body's leading strings and its
// attachments, which every call writes, written as the library would write
// them but without its per-call Encoder, its reflection and its copy of the
// buffer (the package documentation gives the measured difference).
// Strings and scalars take no part in Hessian's class definitions and back
// references, so their bytes are the same wherever in a stream they go.

// AppendString appends the encoding of s, as the library writes it.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// AppendInt appends the Hessian encoding of an int (a Java Integer).
func AppendInt(dst []byte, v int32) []byte { return appendInt(dst, v) }

// AppendStringMap appends an untyped map ('H') holding the entries of base
// overlaid by those of over, without building the merged map: Dubbo's
// attachments, the invoker's fixed ones plus the call's own. It handles
// scalar values only (string, integers, bool, floats, nil) — values that
// cannot hold back references, so the map may be appended to a stream the
// library wrote — and reports false, with dst unchanged, for anything else.
// Keys go in sorted order (the library's is Go's map order, random).
func AppendStringMap(dst []byte, base, over map[string]any) ([]byte, bool) {
	b := append(dst, tagUMap)
	var buf [16]string
	var ok bool
	for _, k := range sortedKeys(buf[:0], base) {
		if _, dup := over[k]; dup {
			continue
		}
		if b, ok = appendScalarEntry(b, k, base[k]); !ok {
			return dst, false
		}
	}
	for _, k := range sortedKeys(buf[:0], over) {
		if b, ok = appendScalarEntry(b, k, over[k]); !ok {
			return dst, false
		}
	}
	return append(b, tagEnd), true
}

// appendScalarEntry appends key k and the scalar v, or reports false.
func appendScalarEntry(b []byte, k string, v any) ([]byte, bool) {
	return appendScalar(appendString(b, k), v)
}

// appendScalar appends the string or scalar v as the library encodes it
// (Go's 8- and 16-bit integers as Hessian ints, the wider ones as longs), or
// reports false, b unchanged in length, for any other type.
func appendScalar(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, tagNull), true
	case string:
		return appendString(b, x), true
	case bool:
		if x {
			return append(b, tagTrue), true
		}
		return append(b, tagFalse), true
	case int32:
		return appendInt(b, x), true
	case int8:
		return appendInt(b, int32(x)), true
	case int16:
		return appendInt(b, int32(x)), true
	case uint8:
		return appendInt(b, int32(x)), true
	case uint16:
		return appendInt(b, int32(x)), true
	case int:
		return appendLong(b, int64(x)), true
	case int64:
		return appendLong(b, x), true
	case uint:
		return appendLong(b, int64(x)), true
	case uint32:
		return appendLong(b, int64(x)), true
	case uint64:
		return appendLong(b, int64(x)), true
	case float64:
		return appendDouble(b, x), true
	case float32:
		return appendFloat32(b, x), true
	}
	return b, false
}

// sortedKeys returns m's keys in order, in dst's array while they fit.
func sortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}
