package hessian2

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// chunkSize is where the library splits strings (in UTF-16 units) and binary
// data (in bytes) into chunks. Hessian allows 65535, but byte-identical output
// means splitting where the library splits.
const chunkSize = 4096

// Hessian 2.0 tags used by the fast path.
const (
	tagNull        = 'N'
	tagTrue        = 'T'
	tagFalse       = 'F'
	tagInt         = 'I'
	tagLong        = 'L'
	tagLongInt     = 0x59
	tagDouble      = 'D'
	tagDoubleZero  = 0x5b
	tagDoubleOne   = 0x5c
	tagDoubleByte  = 0x5d
	tagDoubleShort = 0x5e
	tagDoubleMill  = 0x5f
	tagDate        = 0x4a
	tagDateMinute  = 0x4b
	tagString      = 'S'
	tagStringChunk = 'R'
	tagBinary      = 'B'
	tagBinaryChunk = 'A'
	tagListVar     = 0x55
	tagListFixed   = 'V'
	tagUListVar    = 0x57
	tagUListFixed  = 0x58
	tagMap         = 'M'
	tagUMap        = 'H'
	tagEnd         = 'Z'
	tagRef         = 0x51
	tagClassDef    = 'C'
	tagObject      = 'O'
)

// classKey is the library's marker for a map that is to be written as an
// object of the class it names (hessian.ClassKey).
const classKey = "_class"

// emptySliceAddr is the address every zero-sized allocation shares. The
// library never records slices at that address (nor nil ones) for back
// references, so neither does the fast path; it is computed the way the
// library computes it.
var emptySliceAddr = unsafe.Pointer(reflect.ValueOf([]interface{}{}).Pointer())

// refKind tells a slice from a map at one address, as the library does.
type refKind uint8

const (
	refSlice refKind = iota + 1
	refMap
	refStruct
)

// refEntry is 16 bytes: the inline table is zeroed by every Marshal, so a
// struct's type (see checkTyped) is kept aside, in refTable.types.
type refEntry struct {
	addr unsafe.Pointer
	kind refKind
}

type refSlot struct {
	kind  refKind
	index int
}

// refTable mirrors hessian.Encoder's back-reference map for the values the
// fast path writes (slices and maps): the first eight live inline, so that
// a call with few containers allocates nothing.
type refTable struct {
	inline [8]refEntry
	n      int
	more   map[unsafe.Pointer]refSlot
	// types are the struct types of the refStruct entries, by index:
	// objects only, which the fast path never writes.
	types map[int]reflect.Type
}

// check returns the index of the container at addr if it was written before
// with the same kind, else records it (as the library's checkRefMap does).
func (t *refTable) check(addr unsafe.Pointer, kind refKind) (int, bool) {
	if addr == nil || addr == emptySliceAddr {
		return 0, false
	}
	for i := 0; i < t.n && i < len(t.inline); i++ {
		if t.inline[i].addr == addr {
			return i, t.inline[i].kind == kind
		}
	}
	if t.more != nil {
		if s, ok := t.more[addr]; ok {
			return s.index, s.kind == kind
		}
	}
	t.add(addr, kind, nil)
	return 0, false
}

func (t *refTable) add(addr unsafe.Pointer, kind refKind, typ reflect.Type) {
	if t.n < len(t.inline) {
		t.inline[t.n] = refEntry{addr, kind}
	} else {
		if t.more == nil {
			t.more = make(map[unsafe.Pointer]refSlot)
		}
		t.more[addr] = refSlot{kind, t.n}
	}
	if typ != nil {
		if t.types == nil {
			t.types = make(map[int]reflect.Type)
		}
		t.types[t.n] = typ
	}
	t.n++
}

// encoder is the state of one Marshal call.
type encoder struct {
	b    []byte
	refs refTable
	// classes are the class definitions written so far (objects only).
	classes []classEnc
	depth   int
	err     error
}

// value appends v and reports whether it could; after false, err says why
// and the bytes appended are garbage. The fast types are handled inline, the
// rest by other.
func (e *encoder) value(v any) bool {
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, tagNull)
	case string:
		e.b = appendString(e.b, x)
	case int64:
		e.b = appendLong(e.b, x)
	case int32:
		e.b = appendInt(e.b, x)
	case int:
		e.b = appendLong(e.b, int64(x))
	case bool:
		if x {
			e.b = append(e.b, tagTrue)
		} else {
			e.b = append(e.b, tagFalse)
		}
	case float64:
		e.b = appendDouble(e.b, x)
	case []byte:
		if x == nil {
			e.b = append(e.b, tagNull)
		} else {
			e.b = appendBinary(e.b, x)
		}
	case map[string]any:
		return e.mapStringAny(x)
	case map[string]string:
		e.mapStringString(x)
	case []any:
		return e.list(x)
	case []string:
		e.stringList(x)
	case map[any]any:
		return e.mapAnyAny(x)
	case time.Time:
		e.b = appendDate(e.b, x)
	case int8:
		e.b = appendInt(e.b, int32(x))
	case int16:
		e.b = appendInt(e.b, int32(x))
	case uint8:
		e.b = appendInt(e.b, int32(x))
	case uint16:
		e.b = appendInt(e.b, int32(x))
	case uint32:
		e.b = appendLong(e.b, int64(x))
	case uint:
		e.b = appendLong(e.b, int64(x))
	case uint64:
		e.b = appendLong(e.b, int64(x))
	case float32:
		e.b = appendFloat32(e.b, x)
	default:
		return e.other(v)
	}
	return true
}

func (e *encoder) ref(addr unsafe.Pointer, kind refKind) bool {
	if i, ok := e.refs.check(addr, kind); ok {
		e.b = appendInt(append(e.b, tagRef), int32(i))
		return true
	}
	return false
}

// list writes []any as the library does: always the x58 form with an int
// length, even for nil (which the library writes as an empty list).
func (e *encoder) list(l []any) bool {
	if e.ref(unsafe.Pointer(unsafe.SliceData(l)), refSlice) {
		return true
	}
	e.b = appendInt(append(e.b, tagUListFixed), int32(len(l)))
	for _, v := range l {
		if !e.value(v) {
			return false
		}
	}
	return true
}

// stringList writes []string as the library does: 'V' "[string" length.
func (e *encoder) stringList(l []string) {
	if l == nil {
		e.b = append(e.b, tagNull)
		return
	}
	if e.ref(unsafe.Pointer(unsafe.SliceData(l)), refSlice) {
		return
	}
	e.b = append(e.b, tagListFixed, 7, '[', 's', 't', 'r', 'i', 'n', 'g')
	e.b = appendInt(e.b, int32(len(l)))
	for _, s := range l {
		e.b = appendString(e.b, s)
	}
}

func mapAddr[M any](m M) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m)) }

// sortedKeys returns m's keys in order, in dst's array while they fit.
func sortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

func (e *encoder) mapStringAny(m map[string]any) bool {
	if _, ok := m[classKey]; ok {
		return e.classMap(m) // the library writes it as an object of that class
	}
	if e.ref(mapAddr(m), refMap) {
		return true
	}
	if m == nil {
		e.b = append(e.b, tagNull)
		return true
	}
	e.b = append(e.b, tagUMap)
	var buf [16]string
	for _, k := range sortedKeys(buf[:0], m) {
		e.b = appendString(e.b, k)
		if !e.value(m[k]) {
			return false
		}
	}
	e.b = append(e.b, tagEnd)
	return true
}

func (e *encoder) mapStringString(m map[string]string) {
	if e.ref(mapAddr(m), refMap) {
		return
	}
	if m == nil {
		e.b = append(e.b, tagNull)
		return
	}
	e.b = append(e.b, tagUMap)
	var buf [16]string
	for _, k := range sortedKeys(buf[:0], m) {
		e.b = appendString(e.b, k)
		e.b = appendString(e.b, m[k])
	}
	e.b = append(e.b, tagEnd)
}

// mapAnyAny handles map[any]any whose keys are all strings (the shape decoded
// attachments have); the library writes even a nil one as an empty 'H' map.
func (e *encoder) mapAnyAny(m map[any]any) bool {
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		s, ok := k.(string)
		if !ok {
			return e.anyMap(m)
		}
		keys = append(keys, s)
	}
	slices.Sort(keys)
	if e.ref(mapAddr(m), refMap) {
		return true
	}
	e.b = append(e.b, tagUMap)
	for _, k := range keys {
		e.b = appendString(e.b, k)
		if !e.value(m[k]) {
			return false
		}
	}
	e.b = append(e.b, tagEnd)
	return true
}

// appendInt is the library's encInt32: the shortest of the four int forms.
func appendInt(b []byte, v int32) []byte {
	switch {
	case -0x10 <= v && v <= 0x2f:
		return append(b, byte(v+0x90))
	case -0x800 <= v && v <= 0x7ff:
		return append(b, byte(0xc8+v>>8), byte(v))
	case -0x40000 <= v && v <= 0x3ffff:
		return append(b, byte(v>>16+0xd4), byte(v>>8), byte(v))
	}
	return append(b, tagInt, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendLong is the library's encInt64: the shortest of the five long forms.
func appendLong(b []byte, v int64) []byte {
	switch {
	case -0x08 <= v && v <= 0x0f:
		return append(b, byte(v+0xe0))
	case -0x800 <= v && v <= 0x7ff:
		return append(b, byte(0xf8+v>>8), byte(v))
	case -0x40000 <= v && v <= 0x3ffff:
		return append(b, byte(0x3c+v>>16), byte(v>>8), byte(v))
	case -0x80000000 <= v && v <= 0x7fffffff:
		return append(b, tagLongInt, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(b, tagLong, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32),
		byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendDouble is the library's encFloat. It never uses the 0x5f form, and
// like the library it writes -0.0 as 0.0. The int64 conversion of an
// out-of-range value is platform-defined in Go; using the library's very
// expression keeps the two byte-identical on every platform.
func appendDouble(b []byte, v float64) []byte {
	if float64(int64(v)) == v {
		iv := int64(v)
		switch {
		case iv == 0:
			return append(b, tagDoubleZero)
		case iv == 1:
			return append(b, tagDoubleOne)
		case iv >= -0x80 && iv < 0x80:
			return append(b, tagDoubleByte, byte(iv))
		case iv >= -0x8000 && iv < 0x8000:
			return append(b, tagDoubleShort, byte(iv>>8), byte(iv))
		}
	}
	return appendDoubleBits(b, math.Float64bits(v))
}

func appendDoubleBits(b []byte, bits uint64) []byte {
	return append(b, tagDouble, byte(bits>>56), byte(bits>>48), byte(bits>>40),
		byte(bits>>32), byte(bits>>24), byte(bits>>16), byte(bits>>8), byte(bits))
}

// appendFloat32 is the library's encFloat32, quirks included: a float32 that
// is a whole number of thousandths goes out in the 0x5f form, and any other
// goes through its shortest decimal form so that 0.1f reads as 0.1 in Java.
func appendFloat32(b []byte, v float32) []byte {
	if float32(int32(v)) == v {
		iv := int32(v)
		switch {
		case iv == 0:
			return append(b, tagDoubleZero)
		case iv == 1:
			return append(b, tagDoubleOne)
		case iv >= -0x80 && iv < 0x80:
			return append(b, tagDoubleByte, byte(iv))
		case iv >= -0x8000 && iv < 0x8000:
			return append(b, tagDoubleShort, byte(iv>>8), byte(iv))
		}
	}
	if float32(int32(v*1000)) == v*1000 {
		iv := int32(v * 1000)
		return append(b, tagDoubleMill, byte(iv>>24), byte(iv>>16), byte(iv>>8), byte(iv))
	}
	var buf [32]byte
	d, _ := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], float64(v), 'f', -1, 32)), 64)
	return appendDoubleBits(b, math.Float64bits(d))
}

// appendBinary is the library's encBinary: 4096-byte 'A' chunks, then the
// shortest final form.
func appendBinary(b, v []byte) []byte {
	for len(v) > chunkSize {
		b = append(b, tagBinaryChunk, chunkSize>>8, chunkSize&0xff)
		b = append(b, v[:chunkSize]...)
		v = v[chunkSize:]
	}
	switch n := len(v); {
	case n <= 0x0f:
		b = append(b, byte(0x20+n))
	case n <= 0x3ff:
		b = append(b, byte(0x34+n>>8), byte(n))
	default:
		b = append(b, tagBinary, byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// appendString is the library's encString. Hessian counts string lengths in
// UTF-16 units and sends UTF-8 in which a supplementary character is written
// as its two surrogates, three bytes each (as Java does); invalid UTF-8 bytes
// become U+FFFD. Chunks end at the first character that reaches 4096 units,
// so a chunk may hold 4097 when it ends in a surrogate pair.
func appendString(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	for len(s) > 0 {
		n, units, plain := scanChunk(s)
		switch {
		case n < len(s):
			b = append(b, tagStringChunk, byte(units>>8), byte(units))
		case units <= 0x1f:
			b = append(b, byte(units))
		case units <= 0x3ff:
			b = append(b, byte(0x30+units>>8), byte(units))
		default:
			b = append(b, tagString, byte(units>>8), byte(units))
		}
		if plain {
			b = append(b, s[:n]...)
		} else {
			b = appendJavaUTF8(b, s[:n])
		}
		s = s[n:]
	}
	return b
}

// scanChunk measures the next chunk of s: its length n in bytes of s, in
// UTF-16 units, and whether its encoding is s[:n] unchanged.
func scanChunk(s string) (n, units int, plain bool) {
	n = asciiPrefix(s[:min(len(s), chunkSize)])
	units, plain = n, true
	for n < len(s) && units < chunkSize {
		if s[n] < utf8.RuneSelf {
			n++
			units++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[n:])
		switch {
		case r >= 0x10000:
			units += 2
			plain = false
		case r == utf8.RuneError && size == 1:
			units++
			plain = false
		default:
			units++
		}
		n += size
	}
	return n, units, plain
}

// asciiPrefix returns how many leading bytes of s are ASCII.
func asciiPrefix(s string) int {
	i := 0
	// Eight bytes per load: reading the words straight from the string's
	// bytes (unaligned loads, which every Go target allows) is several times
	// faster than assembling them byte by byte.
	p := unsafe.Pointer(unsafe.StringData(s))
	for ; i+32 <= len(s); i += 32 {
		w := *(*uint64)(unsafe.Add(p, i)) | *(*uint64)(unsafe.Add(p, i+8)) |
			*(*uint64)(unsafe.Add(p, i+16)) | *(*uint64)(unsafe.Add(p, i+24))
		if w&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if *(*uint64)(unsafe.Add(p, i))&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	return i
}

// appendJavaUTF8 appends s re-encoded as the library (and Java) send it.
func appendJavaUTF8(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r >= 0x10000:
			t := uint32(r) - 0x10000
			b = appendSurrogate(b, t>>10+0xd800)
			b = appendSurrogate(b, t&0x3ff+0xdc00)
		case r == utf8.RuneError && size == 1:
			b = append(b, 0xef, 0xbf, 0xbd)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

func appendSurrogate(b []byte, ch uint32) []byte {
	return append(b, byte(0xe0+(ch>>12)&0x0f), byte(0x80+(ch>>6)&0x3f), byte(0x80+ch&0x3f))
}
