package hessian2

// The byte-level grammar shared by the validator (validate.go) and the fast
// paths (fastdecode.go, fastencode.go): tags, string and binary chunk
// headers, and the writers of the forms the fast paths write, byte for byte
// as the library writes them.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is how deeply lists, maps and objects (and the class definitions
// that precede objects) may nest in decoded data. Java's own stack gives out
// long before it; the limit keeps hostile input from exhausting Go's stack,
// which, unlike most failures, cannot be recovered.
const MaxDepth = 1000

// A body decodes into at most BudgetFactor times its size of Go memory, plus
// BudgetSlack, as check (validate.go) counts what the library allocates for
// it, garbage included. The library is costly: measured on v1.12.5, a list
// of strings takes 8 times its wire size, long[] 3.6, a list of small maps
// 23, and a list of nulls 16, one of empty maps 117. 12 takes lists of
// strings and numbers of any size, and refuses every shape that a peer
// would send to make each wire byte cost 16 or more; bodies of many small
// maps or objects need the protocol's decode.factor raised (24 for lists of
// three-entry maps). Decoding bodies at once is bounded apart (Pool).
const (
	BudgetFactor = 12
	BudgetSlack  = 1 << 20
)

// BudgetFor is the memory budget of decoding a body of n bytes.
func BudgetFor(n int) int64 { return BudgetFactorFor(n, BudgetFactor) }

// BudgetFactorFor is the budget of a body of n bytes with another factor
// (a protocol's `decode.factor`): factor × n + BudgetSlack.
func BudgetFactorFor(n, factor int) int64 { return int64(factor)*int64(n) + BudgetSlack }

// Sizes charged to the budget: what Go allocates for a decoded value, and
// when it allocates it (a growing slice or map is charged its new backing
// array or tables when it grows, so the budget also counts the arrays a
// growth leaves behind as garbage, which hold memory until the next GC as
// surely as the value does). decode_cost_test.go measures them against the
// heap.
const (
	costSlot   = 16 // an interface or a string header
	costBoxed  = 8  // an int32, int64 or float64 put in an interface
	costTime   = 24
	costObject = 48 // a decoded object's own header
	// costBoxedSlice is a list put in an interface: its slice header.
	costBoxedSlice = 24
	// costMapHeader is a Go map's own header (runtime/maps.Map), allocated
	// by make even for a map that stays empty.
	costMapHeader = 48
	// costMapSlot is one slot of a map[any]any or map[string]any table: the
	// key and value (32 bytes), its control byte, and the rounding of the
	// table to Go's size classes and pages (264-byte groups of eight slots
	// make tables of 288, 576, ... 18,432 bytes, ~36 a slot, and the
	// 1,024-slot tables of large maps 40,960 bytes, 40 a slot).
	costMapSlot = 40
	// costMapTable is a table's own header and its directory entry, which
	// each table past the first group comes with.
	costMapTable = 48
	// costMapGroup is the group of eight slots a map gets with its first
	// entry: 264 bytes in the 288-byte size class.
	costMapGroup = 288
)

// The layout of Go's maps since Go 1.24 (Swiss tables, runtime/maps): a map
// gets one group of mapGroup slots at its first entry; past mapGroup
// entries, tables of powers of two slots, filled to 7/8 before they double
// (a table past 1,024 slots splits in two instead, the same memory).
const mapGroup = 8

// mapSlotsFor is how many slots make(map[K]V, hint) allocates (NewMap):
// none for a hint of up to eight (the group comes with the first entry,
// see mapSlots), else hint/mapLoad slots spread over a power of two of
// tables of at most 1,024 slots, each a power of two.
func mapSlotsFor(hint int) int {
	if hint <= mapGroup {
		return 0
	}
	target := hint * 8 / 7
	tables := 1
	for tables*1024 < target {
		tables *= 2
	}
	per := mapGroup
	for per < target/tables {
		per *= 2
	}
	return tables * per
}

// presizedMapCost is what make(map[K]V, hint) allocates once it holds up to
// hint entries, slot bytes a slot: its header, and its tables (see
// mapSlotsFor), or for a hint of up to eight the group its first entry gets.
func presizedMapCost(hint int, slot int64) int64 {
	slots := mapSlotsFor(hint)
	if hint > 0 && slots == 0 {
		return costMapHeader + mapGroup*slot
	}
	return costMapHeader + int64(slots)*slot
}

// mapGrowth is what Go allocates when a map made without a size hint (or a
// hint of up to eight) and holding n entries gets one more: the group at the
// first entry, a table of 16 slots at the ninth, a table twice the size
// whenever the one table of 2^k slots holds 7/8 of that (7·2^(k-3)
// entries), up to one of 1,024 slots that splits in two at 896; else
// nothing. Past that, the map's tables split one by one, each as its own
// share of the keys reaches 896, and the first split well before the
// average table is that full (by ~3 standard deviations of a table's
// share, 90 keys, with a few hundred tables): the budget charges the
// doubling of all of them at 7/8 of the average, 784 keys a table, before
// Go makes the first. Charged before the entry goes in, so that a map
// refused by the budget never makes the tables it was refused for.
func mapGrowth(n int) int64 {
	switch {
	case n == 0:
		return costMapGroup
	case n == mapGroup:
		return 2*mapGroup*costMapSlot + costMapTable
	case n >= 14 && n <= 896 && n%7 == 0 && bits.OnesCount(uint(n/7)) == 1:
		// One table, 16 to 1,024 slots, 7/8 full: twice the slots.
		return int64(n/7)*16*costMapSlot + costMapTable
	case n >= 1568 && n%1568 == 0 && bits.OnesCount(uint(n/1568)) == 1:
		// n/1568 × 2 tables of 1,024 slots, 784 keys each: all split.
		tables := int64(n / 1568 * 2)
		return tables * 2 * (1024*costMapSlot + costMapTable)
	}
	return 0
}

func errAt(off int, format string, args ...any) error {
	return fmt.Errorf("hessian2: "+format+" (offset %d)", append(args, off)...)
}

// binaryHeader parses the binary chunk header at p.
func binaryHeader(data []byte, p int) (n, hdr int, final bool, err error) {
	if p >= len(data) {
		return 0, 0, false, errAt(p, "data ends inside binary data")
	}
	switch tag := data[p]; {
	case tag >= 0x20 && tag <= 0x2f:
		return int(tag - 0x20), 1, true, nil
	case tag >= 0x34 && tag <= 0x37:
		if p+2 > len(data) {
			return 0, 0, false, errAt(p, "data ends inside a binary header")
		}
		return int(tag-0x34)<<8 | int(data[p+1]), 2, true, nil
	case tag == tagBinary || tag == tagBinaryChunk:
		if p+3 > len(data) {
			return 0, 0, false, errAt(p, "data ends inside a binary header")
		}
		return int(binary.BigEndian.Uint16(data[p+1:])), 3, tag == tagBinary, nil
	default:
		return 0, 0, false, errAt(p, "expected a binary chunk, found tag 0x%02x", tag)
	}
}

// skipBinary checks the binary value at p and returns its end and length.
func skipBinary(data []byte, p int) (end, total int, err error) {
	for {
		n, hdr, final, err := binaryHeader(data, p)
		if err != nil {
			return 0, 0, err
		}
		if n > len(data)-p-hdr {
			return 0, 0, errAt(p, "binary chunk of %d bytes, only %d remain", n, len(data)-p-hdr)
		}
		p += hdr + n
		total += n
		if final {
			return p, total, nil
		}
	}
}

// stringHeader parses the string chunk header at p: the chunk's length in
// UTF-16 units, the header's size, and whether it is the last chunk.
func stringHeader(data []byte, p int) (units, hdr int, final bool, err error) {
	if p >= len(data) {
		return 0, 0, false, errAt(p, "data ends inside a string")
	}
	switch tag := data[p]; {
	case tag <= 0x1f:
		return int(tag), 1, true, nil
	case tag >= 0x30 && tag <= 0x33:
		if p+2 > len(data) {
			return 0, 0, false, errAt(p, "data ends inside a string header")
		}
		return int(tag-0x30)<<8 | int(data[p+1]), 2, true, nil
	case tag == tagString || tag == tagStringChunk:
		if p+3 > len(data) {
			return 0, 0, false, errAt(p, "data ends inside a string header")
		}
		return int(binary.BigEndian.Uint16(data[p+1:])), 3, tag == tagString, nil
	default:
		return 0, 0, false, errAt(p, "expected a string chunk, found tag 0x%02x", tag)
	}
}

// scanChars walks a chunk of units UTF-16 units at p the way the library
// reads it: one byte for ASCII, two for a 0xc0-0xdf lead, three for a
// 0xe0-0xef lead, and six (two units) for a high surrogate and whatever three
// bytes follow it, which become one UTF-8 rune (U+FFFD if invalid). It returns
// the chunk's end, the length of its decoded text, and whether that text is
// the chunk's bytes unchanged. Other lead bytes are errors, as in the library;
// so is a high surrogate in a chunk's last unit, where the library reads past
// the chunk (and may panic).
func scanChars(data []byte, p, units int) (end, outLen int, plain bool, err error) {
	if units > len(data)-p {
		return 0, 0, false, errAt(p, "string chunk of %d characters, only %d bytes remain", units, len(data)-p)
	}
	start, extra := p, 0
	plain = true
	for units > 0 {
		// ASCII, many bytes at a time while they fit in the chunk.
		if k := asciiRun(data[p:min(len(data), p+units)]); k > 0 {
			p += k
			units -= k
		}
		if units == 0 {
			break
		}
		if p >= len(data) {
			return 0, 0, false, errAt(p, "data ends inside a string")
		}
		c := data[p]
		switch {
		case c < utf8.RuneSelf:
			p++
			units--
		case c&0xe0 == 0xc0:
			if p+2 > len(data) {
				return 0, 0, false, errAt(p, "data ends inside a string")
			}
			p += 2
			units--
		case c&0xf0 == 0xe0:
			if p+3 > len(data) {
				return 0, 0, false, errAt(p, "data ends inside a string")
			}
			c1 := utf16Unit(data[p:])
			if c1 < 0xd800 || c1 > 0xdbff {
				p += 3
				units--
				continue
			}
			if units < 2 {
				return 0, 0, false, errAt(p, "string chunk ends inside a surrogate pair")
			}
			if p+6 > len(data) {
				return 0, 0, false, errAt(p, "data ends inside a string")
			}
			n := utf8.RuneLen(pairRune(c1, data[p+3:]))
			if n < 0 {
				n = 3 // U+FFFD
			}
			extra += n - 6
			plain = false
			p += 6
			units -= 2
		default:
			return 0, 0, false, errAt(p, "bad UTF-8 lead byte 0x%02x in a string", c)
		}
	}
	return p, p - start + extra, plain, nil
}

// utf16Unit reads the 16-bit value of a three-byte sequence as the library
// does, without checking the continuation bytes.
func utf16Unit(b []byte) uint32 {
	return uint32(b[0]&0x0f)<<12 | uint32(b[1]&0x3f)<<6 | uint32(b[2]&0x3f)
}

// pairRune combines a high surrogate with the unit in the next three bytes,
// with the library's unchecked (wrapping) arithmetic.
func pairRune(hi uint32, b []byte) rune {
	return rune((hi-0xd800)<<10 + (utf16Unit(b) - 0xdc00) + 0x10000)
}

// asciiRun is the length of b's ASCII prefix, found eight bytes per load.
func asciiRun(b []byte) int {
	return asciiPrefix(unsafe.String(unsafe.SliceData(b), len(b)))
}

// appendChars appends the decoded text of a chunk that scanChars accepted
// and returns the chunk's end.
func appendChars(dst, data []byte, p, units int) ([]byte, int) {
	for units > 0 {
		c := data[p]
		switch {
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			p++
			units--
		case c&0xe0 == 0xc0:
			dst = append(dst, data[p:p+2]...)
			p += 2
			units--
		default:
			c1 := utf16Unit(data[p:])
			if c1 < 0xd800 || c1 > 0xdbff {
				dst = append(dst, data[p:p+3]...)
				p += 3
				units--
				continue
			}
			dst = utf8.AppendRune(dst, pairRune(c1, data[p+3:]))
			p += 6
			units -= 2
		}
	}
	return dst, p
}

// skipString checks the string at p and returns its end, the length of its
// text, whether the text is its only chunk's bytes unchanged, and whether
// every chunk is ASCII (so that its bytes, as many as its units, are its
// text).
func skipString(data []byte, p int) (end, outLen int, plain, ascii bool, err error) {
	plain, units := true, 0
	for chunks := 0; ; chunks++ {
		n, hdr, final, err := stringHeader(data, p)
		if err != nil {
			return 0, 0, false, false, err
		}
		e, k, pl, err := scanChars(data, p+hdr, n)
		if err != nil {
			return 0, 0, false, false, err
		}
		p, outLen, units, plain = e, outLen+k, units+n, plain && pl && (chunks == 0 && final)
		if final {
			return p, outLen, plain, outLen == units, nil
		}
	}
}

// maxInterned bounds the strings looked up in interned.
const maxInterned = 32

// interned holds strings that recur in nearly every Dubbo body (attachment
// keys, the protocol version, common descriptors): decoding them allocates
// nothing.
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"2.0.2", "path", "interface", "version", "group", "timeout", "dubbo",
		"input", "output", "token", "generic", "async", "id", "side", "consumer",
		"provider", "application", "remote.application", "true", "false", "0",
		"1000", "3000", "0.0.0", "1.0.0", "$echo", "$invoke", "$invokeAsync",
		"Ljava/lang/String;", "Ljava/lang/Object;", "J", "I", "Z", "D",
		"traceId", "spanId", "tag", "serialization", "hessian2",
	} {
		m[s] = s
	}
	return m
}()

func makeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) <= maxInterned {
		if s, ok := interned[string(b)]; ok {
			return s
		}
	}
	return string(b)
}

func isStringTag(tag byte) bool {
	return tag <= 0x1f || tag >= 0x30 && tag <= 0x33 || tag == tagString || tag == tagStringChunk
}

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

// refKind tells a slice from a map at one address, as the library does.
type refKind uint8

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

// encoder is the state of one Marshal call.
type encoder struct {
	b    []byte
	refs refTable
	// classes are the class definitions written so far (objects only).
	classes []classEnc
	depth   int
	err     error
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
		if out, ok := appendWholeDouble(b, int64(v)); ok {
			return out
		}
	}
	return appendDoubleBits(b, math.Float64bits(v))
}

// appendWholeDouble writes a whole-number double in the shortest of the
// compact forms (zero, one, byte, short), as the library does for both
// float64 and float32; false when iv needs more than a short.
func appendWholeDouble(b []byte, iv int64) ([]byte, bool) {
	switch {
	case iv == 0:
		return append(b, tagDoubleZero), true
	case iv == 1:
		return append(b, tagDoubleOne), true
	case iv >= -0x80 && iv < 0x80:
		return append(b, tagDoubleByte, byte(iv)), true
	case iv >= -0x8000 && iv < 0x8000:
		return append(b, tagDoubleShort, byte(iv>>8), byte(iv)), true
	}
	return b, false
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
		if out, ok := appendWholeDouble(b, int64(int32(v))); ok {
			return out
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

var timeType = reflect.TypeFor[time.Time]()

// classEnc is a class definition a Marshal call has written.
type classEnc struct {
	name   string
	fields []string
}

// listTypeNames are the library's Java names of Go element types.
var listTypeNames = map[reflect.Kind]string{
	reflect.String: "[string", reflect.Int8: "[short", reflect.Int16: "[short", reflect.Uint16: "[short",
	reflect.Int32: "[int", reflect.Uint32: "[int", reflect.Int: "[long", reflect.Uint: "[long",
	reflect.Int64: "[long", reflect.Uint64: "[long", reflect.Float32: "[float", reflect.Float64: "[double",
	reflect.Bool: "[boolean",
}

// listTypeName is the library's type name for a slice type: one '[' per
// dimension, then the element's name ("[[string" for [][]string). Pointers
// to elements have their elements' names.
func listTypeName(t reflect.Type) (string, bool) {
	dims := 0
	for t.Kind() == reflect.Slice {
		t = t.Elem()
		dims++
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	prefix := strings.Repeat("[", dims-1)
	switch {
	case t == timeType:
		return prefix + "[date", true
	case t.Kind() == reflect.Interface:
		switch {
		case t == objectType || t.Name() == "Object" && strings.HasSuffix(t.PkgPath(), "dubbo-go-hessian2"):
			return prefix + "[object", true
		case t == throwableType || t.Name() == "Throwabler" && strings.HasSuffix(t.PkgPath(), "java_exception"):
			return prefix + "[java.lang.Throwable", true
		}
		return "", false
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map || isEnum(t):
		if p, ok := reflect.New(t).Interface().(POJO); ok {
			return prefix + "[" + p.JavaClassName(), true
		}
		return "", false
	case t.PkgPath() == "":
		// Basic types only: the library looks named ones up by name, and
		// has none for them.
		if n, ok := listTypeNames[t.Kind()]; ok {
			return prefix + n, true
		}
	}
	return "", false
}

var (
	objectType    = reflect.TypeFor[Object]()
	throwableType = reflect.TypeFor[Throwable]()
)

// isEnum tells a POJO type that encodes as a Java enum: an integer kind with
// String and EnumValue methods, as dubbo-go's POJOEnum.
func isEnum(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return false
	}
	_, hasEnumValue := t.MethodByName("EnumValue")
	_, hasString := t.MethodByName("String")
	return hasEnumValue && hasString && t.Implements(pojoType)
}

var pojoType = reflect.TypeFor[POJO]()
