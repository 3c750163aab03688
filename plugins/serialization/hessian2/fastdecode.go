package hessian2

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/weftrpc/weft/kernel/view"
)

// The fast paths of decoding: a Dubbo body's leading strings and its
// attachments, read without the library when they are plain. Every request
// has six of these values and most have nothing else but one argument, so
// they are most of the work; the library reads a string through a 4 KiB
// bufio.Reader made per body and a []byte of three times its length, and an
// attachments map as a map[any]any that the codec must copy into a
// map[string]any. The package documentation gives the measured difference.
// Each fast path reads only what it recognises and leaves anything else to
// the library, so the values are the library's either way.

// DecodeString reads the next value as a string; null reads as "".
func (d *Decoder) DecodeString() (string, error) {
	if d.err == nil && d.pos < len(d.data) && isStringTag(d.data[d.pos]) {
		s, end, err := d.str(d.pos)
		if err != nil {
			d.err = err
			return "", err
		}
		d.passed(end)
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
// directly (no map[any]any first) when it is an untyped map of strings,
// ints, booleans and nulls. null, and an empty untyped map, read as a nil
// map; io.EOF at the end of the data.
func (d *Decoder) DecodeStringMap() (map[string]any, error) {
	if d.err == nil && d.pos < len(d.data) && d.data[d.pos] == tagUMap && d.skip == 0 {
		// Read here, bounded by the budget as it goes (stringMap), or
		// left to check and the library if it holds anything else.
		m, end, ok, err := d.stringMap(d.pos)
		if err != nil {
			d.err = err
			return nil, err
		}
		if ok {
			d.passed(end)
			return m, nil
		}
	}
	v, err := d.Decode()
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[any]any:
		return view.StringKeys(m), nil
	}
	return nil, fmt.Errorf("hessian2: want a map, got %T", v)
}

// stringMap reads the untyped map at p if every key is a string and every
// value a scalar (ok false, nothing read, otherwise). It charges what it
// builds to the decoder's budget as it goes, as check would: a map's slots,
// its boxed values, its strings.
func (d *Decoder) stringMap(p int) (m map[string]any, end int, ok bool, err error) {
	start := p
	p++ // 'H'
	var cost int64
	for {
		if p >= len(d.data) {
			return nil, 0, false, errAt(p, "data ends inside a map")
		}
		if d.data[p] == tagEnd {
			return m, p + 1, true, nil
		}
		if !isStringTag(d.data[p]) {
			return nil, 0, false, nil
		}
		k, e, err := d.str(p)
		if err != nil {
			return nil, 0, false, err
		}
		v, e2, ok := scalarAt(d.data, e)
		if !ok {
			return nil, 0, false, nil
		}
		// A slot (key and value headers, its share of the table and its
		// growth) and the bytes of the key and of a string value.
		cost += costMapEntry + int64(len(k))
		if s, isStr := v.(string); isStr {
			cost += int64(len(s)) + costSlot
		}
		if cost > d.budget {
			return nil, 0, false, errAt(start, "an attachments map of more than the memory budget of %d bytes for this %d-byte body; send fewer attachments, or raise the protocol's decode.factor", d.budget, d.size)
		}
		if m == nil {
			m = make(map[string]any, 8)
		}
		m[k] = v
		p = e2
	}
}

// costMapEntry is what stringMap charges a map entry: the slot of a
// map[string]any (32 bytes of key and value, its control byte, its share of
// the table's rounding, ~40) and the table it grows into when it doubles,
// as much again.
const costMapEntry = 2 * 40

// scalarAt reads the string, int, boolean or null at p; ok is false for
// anything else (left to the library).
func scalarAt(data []byte, p int) (v any, end int, ok bool) {
	if p >= len(data) {
		return nil, 0, false
	}
	switch tag := data[p]; {
	case tag == 'N':
		return nil, p + 1, true
	case tag == 'T':
		return true, p + 1, true
	case tag == 'F':
		return false, p + 1, true
	case tag >= 0x80 && tag <= 0xbf:
		return int32(tag) - 0x90, p + 1, true
	case tag >= 0xc0 && tag <= 0xcf && p+2 <= len(data):
		return (int32(tag)-0xc8)<<8 | int32(data[p+1]), p + 2, true
	case tag >= 0xd0 && tag <= 0xd7 && p+3 <= len(data):
		return (int32(tag)-0xd4)<<16 | int32(data[p+1])<<8 | int32(data[p+2]), p + 3, true
	case tag == 'I' && p+5 <= len(data):
		return int32(binary.BigEndian.Uint32(data[p+1:])), p + 5, true
	case isStringTag(tag):
		end, outLen, plain, _, err := skipString(data, p)
		if err != nil || !plain {
			return nil, 0, false
		}
		_, hdr, _, _ := stringHeader(data, p)
		_ = outLen
		return makeString(data[p+hdr : end]), end, true
	}
	return nil, 0, false
}

// str decodes the string at p with one allocation, or none for the empty
// string and the interned ones, and returns its end.
func (d *Decoder) str(p int) (string, int, error) {
	end, outLen, plain, ascii, err := skipString(d.data, p)
	if err != nil {
		return "", 0, err
	}
	if plain {
		_, hdr, _, _ := stringHeader(d.data, p)
		b := d.data[p+hdr : end]
		if d.intern != nil && len(b) > 0 && len(b) <= maxInternerLen {
			if s, ok := interned[string(b)]; ok {
				return s, end, nil
			}
			return d.intern.get(b), end, nil
		}
		return makeString(b), end, nil
	}
	// A Builder's buffer is not zeroed first (a plain make would clear
	// outLen bytes only to overwrite them) and becomes the string as it is.
	var sb strings.Builder
	sb.Grow(outLen)
	var buf []byte
	for {
		units, hdr, final, _ := stringHeader(d.data, p)
		if ascii {
			// The common long string: chunks of ASCII, checked and
			// measured by skipString already, copied as they are.
			sb.Write(d.data[p+hdr : p+hdr+units])
			p += hdr + units
		} else if e, _, pl, _ := scanChars(d.data, p+hdr, units); pl {
			// A chunk of plain text (no surrogate pair to re-encode).
			sb.Write(d.data[p+hdr : e])
			p = e
		} else {
			buf, p = appendChars(buf[:0], d.data, p+hdr, units)
			sb.Write(buf)
		}
		if final {
			return sb.String(), end, nil
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

// SetInterner makes d share short strings through in, as a decoder from
// NewInterningDecoder does.
func (d *Decoder) SetInterner(in *Interner) { d.intern = in }
