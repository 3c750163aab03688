package hessian2

import (
	"fmt"
	"github.com/weftrpc/weft/kernel/view"
	"sync"
)

// AppendString appends the encoding of s. Strings take no part in Hessian's
// back references, so the bytes are the same wherever in a stream they go:
// a codec can write a body's leading strings without boxing them into an
// interface.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// AppendInt appends the Hessian encoding of an int (a Java Integer).
func AppendInt(dst []byte, v int32) []byte { return appendInt(dst, v) }

// AppendStringMap appends an untyped map ('H') holding the entries of base
// overlaid by those of over, without building the merged map: Dubbo's
// attachments, the invoker's fixed ones plus the call's own. It handles
// scalar values only (string, integers, bool, floats, nil) — values that
// cannot hold back references, so the map may be appended to a stream other
// encoders wrote — and reports false, with dst unchanged, for anything else.
func AppendStringMap(dst []byte, base, over map[string]any) ([]byte, bool) {
	e := encoder{b: append(dst, tagUMap)}
	var buf [16]string
	for _, k := range sortedKeys(buf[:0], base) {
		if _, dup := over[k]; dup {
			continue
		}
		if !e.scalar(k, base[k]) {
			return dst, false
		}
	}
	buf2 := buf[:0]
	for _, k := range sortedKeys(buf2, over) {
		if !e.scalar(k, over[k]) {
			return dst, false
		}
	}
	return append(e.b, tagEnd), true
}

func (e *encoder) scalar(k string, v any) bool {
	switch v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint8, uint16, uint32, float32, float64:
	default:
		return false
	}
	e.b = appendString(e.b, k)
	return e.value(v)
}

// DecodeString reads the next value as a string; null reads as "".
func (d *Decoder) DecodeString() (string, error) {
	if d.err == nil && d.pos < len(d.data) && isStringTag(d.data[d.pos]) {
		s, err := d.str()
		if err != nil {
			d.err = err
			return "", err
		}
		d.n++
		return s, nil
	}
	v, err := d.Decode()
	if err != nil {
		return "", err
	}
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		return s, nil
	}
	return "", fmt.Errorf("hessian2: want a string, got %T", v)
}

// DecodeStringMap reads the next value as a map with string keys, built
// directly (no map[any]any first) when it is an untyped map of fast types.
// null, and an empty untyped map, read as a nil map; io.EOF at the end of
// the data.
func (d *Decoder) DecodeStringMap() (map[string]any, error) {
	if d.err == nil && d.pos < len(d.data) && d.data[d.pos] == tagUMap {
		start, refs, classes, types := d.pos, d.nrefs, len(d.classes), len(d.types)
		m, err := d.stringMap()
		if err == nil {
			d.n++
			return m, nil
		}
		if err != errUnsupported {
			d.err = err
			return nil, err
		}
		d.pos, d.classes, d.types = start, d.classes[:classes], d.types[:types]
		d.truncRefs(refs)
	}
	v, err := d.Decode()
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, val := range m {
			s, ok := k.(string)
			if !ok {
				s = view.Text(k)
			}
			out[s] = val
		}
		return out, nil
	}
	return nil, fmt.Errorf("hessian2: want a map, got %T", v)
}

func (d *Decoder) stringMap() (map[string]any, error) {
	if err := d.enter(0); err != nil {
		return nil, err
	}
	d.pos++
	slot := d.addRef(nil)
	var m map[string]any // made at the first entry: an empty map reads as nil, for free
	for {
		if d.pos >= len(d.data) {
			return nil, d.truncated("a map")
		}
		tag := d.data[d.pos]
		if tag == tagEnd {
			d.pos++
			if m != nil {
				d.setRef(slot, m)
			}
			return m, nil
		}
		if m == nil {
			m = make(map[string]any, 8)
		}
		if !isStringTag(tag) {
			return nil, errUnsupported
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		v, err := d.value(1)
		if err != nil {
			return nil, err
		}
		n := len(m)
		m[k] = v
		if len(m) > n {
			if err := d.spendEntry(n); err != nil {
				return nil, err
			}
		}
	}
}

// maxInternerLen bounds the strings an Interner keeps.
const maxInternerLen = 96

// Interner shares short strings that recur across bodies — a service's
// interface name arrives three times in every request — so decoding them
// allocates once per process rather than once per call. It is bounded: once
// full it stops learning, so hostile input cannot grow it. Safe for
// concurrent use.
type Interner struct {
	mu  sync.RWMutex
	m   map[string]string
	max int
}

// NewInterner keeps at most max strings.
func NewInterner(max int) *Interner { return &Interner{m: make(map[string]string), max: max} }

func (in *Interner) get(b []byte) string {
	in.mu.RLock()
	s, ok := in.m[string(b)]
	in.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	in.mu.Lock()
	if len(in.m) < in.max {
		in.m[s] = s
	}
	in.mu.Unlock()
	return s
}

// NewInterningDecoder is NewDecoder with an Interner for short strings.
func NewInterningDecoder(data []byte, in *Interner) *Decoder {
	d := NewDecoder(data)
	d.intern = in
	return d
}
