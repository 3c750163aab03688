package hessian2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"reflect"
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
// BudgetSlack. Length fields are checked against the bytes that remain, but
// one wire byte (a null, a small int, an empty string) becomes a 16-byte
// interface slot or string header: without a budget an 8 MiB frame of nulls
// decodes into 134 MiB. The accounting is an estimate of what the decoded
// values hold (slots, headers, map entries, string and binary bytes), not of
// the garbage made on the way.
const (
	BudgetFactor = 2
	BudgetSlack  = 1 << 20
)

// BudgetFor is the memory budget of decoding a body of n bytes.
func BudgetFor(n int) int64 { return BudgetFactorFor(n, BudgetFactor) }

// BudgetFactorFor is the budget of a body of n bytes with another factor
// (a protocol's `decode.factor`): factor × n + BudgetSlack.
func BudgetFactorFor(n, factor int) int64 { return int64(factor)*int64(n) + BudgetSlack }

// SetBudgetFactor gives the decoder the budget of another factor (a
// protocol's `decode.factor`, see BudgetFactorFor); call it before the
// first Decode.
func (d *Decoder) SetBudgetFactor(factor int) {
	d.budget, d.factor = BudgetFactorFor(d.size, factor), factor
}

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

// errUnsupported makes DecodeStringMap's direct path give the value to
// Decode. It never reaches a caller.
var errUnsupported = errors.New("hessian2: value needs the general decoder")

// Decoder reads the values of one Hessian stream in order.
type Decoder struct {
	data []byte
	pos  int
	n    int // top-level values consumed so far
	// The lists, maps and objects decoded so far, which a back reference
	// ('Q') names by index: the first len(refInline) in refInline, the rest
	// in refMore's chunks (see addRef). Not a slice of refInline: a Decoder pointing
	// into itself escapes to the heap, one more allocation per body.
	nrefs     int
	refInline [4]any
	refMore   [][]any
	classes   []classDef // class definitions so far
	types     []string   // type names so far, in the library's type-reference order
	slab      []string   // backing store of boxed strings, see box
	// intern, when set, shares short strings across bodies (see Interner).
	intern *Interner
	err    error
	// budget is the Go memory decoding may still allocate (BudgetFor).
	budget int64
	size   int // len(data) when the budget was set, for the error
	factor int // for the error
}

// NewDecoder returns a decoder of the values in data. data must not change
// while the decoder is in use; decoded values never alias it.
// Decoding allocates at most BudgetFor(len(data)) bytes; past it, Decode
// fails.
func NewDecoder(data []byte) *Decoder {
	return &Decoder{data: data, budget: BudgetFor(len(data)), size: len(data), factor: BudgetFactor}
}

// grow charges an append to a slice of length n and capacity c whose
// elements take size bytes: nothing while it fits, the new array (double)
// when it grows, so a list without a declared length is charged what its
// growth allocates.
func (d *Decoder) grow(n, c int, size int64) error {
	if n < c {
		return nil
	}
	return d.spend(int64(max(2*c, 4)) * size)
}

// spendEntry charges a new entry in a map[string]any or map[any]any made
// without a size hint (or a hint of up to eight) that held n entries
// before it: the tables the map allocates for it, if it grows (mapGrowth).
func (d *Decoder) spendEntry(n int) error {
	if c := mapGrowth(n); c > 0 {
		return d.spend(c)
	}
	return nil
}

// spend charges n bytes of decoded values to the budget.
func (d *Decoder) spend(n int64) error {
	d.budget -= n
	if d.budget < 0 {
		return errAt(d.pos, "decoding needs more than %d bytes of memory for a %d-byte body (the limit is %d× its size plus %d KiB); send typed arrays (String[], int[]) or smaller calls, or raise the protocol's decode.factor",
			BudgetFactorFor(d.size, d.factor), d.size, d.factor, BudgetSlack>>10)
	}
	return nil
}

// Decode returns the next value, of the types the package documentation
// lists, and io.EOF after the last. A 'Z' end marker at
// the top level also reads as io.EOF, as it does with the library. Any other
// error is final: later calls return it again.
func (d *Decoder) Decode() (any, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.pos >= len(d.data) {
		return nil, io.EOF
	}
	if d.data[d.pos] == tagEnd {
		d.pos++
		d.n++
		return nil, io.EOF
	}
	v, err := d.value(0)
	if err != nil {
		d.err = err
		return nil, err
	}
	d.n++
	return v, nil
}

func errAt(off int, format string, args ...any) error {
	return fmt.Errorf("hessian2: "+format+" (offset %d)", append(args, off)...)
}

func (d *Decoder) truncated(what string) error {
	return errAt(d.pos, "data ends inside %s", what)
}

// value decodes the value at d.pos.
func (d *Decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.truncated("a container: a value is missing")
	}
	tag := d.data[d.pos]
	switch {
	case tag < 0x20 || tag >= 0x30 && tag <= 0x33 || tag == tagString || tag == tagStringChunk:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.box(s), nil
	case tag >= 0x80 && tag <= 0xd7 || tag == tagInt:
		i, err := d.int32(false)
		if err != nil {
			return nil, err
		}
		if i < 0 || i > 255 { // Go boxes 0-255 without allocating
			if err := d.spend(costBoxed); err != nil {
				return nil, err
			}
		}
		return i, nil
	case tag >= 0xd8 || tag >= 0x38 && tag <= 0x3f || tag == tagLongInt || tag == tagLong:
		if err := d.spend(costBoxed); err != nil {
			return nil, err
		}
		return d.int64()
	case tag == tagNull:
		d.pos++
		return nil, nil
	case tag == tagTrue:
		d.pos++
		return true, nil
	case tag == tagFalse:
		d.pos++
		return false, nil
	case tag >= tagDoubleZero && tag <= tagDoubleMill || tag == tagDouble:
		if err := d.spend(costBoxed); err != nil {
			return nil, err
		}
		return d.double()
	case tag >= 0x20 && tag <= 0x2f || tag >= 0x34 && tag <= 0x37 || tag == tagBinary || tag == tagBinaryChunk:
		return d.binary()
	case tag == tagDate || tag == tagDateMinute:
		if err := d.spend(costTime); err != nil {
			return nil, err
		}
		return d.date()
	case tag == tagUListVar || tag == tagUListFixed || tag >= 0x78 && tag <= 0x7f:
		return d.untypedList(depth)
	case tag == tagListVar || tag == tagListFixed || tag >= 0x70 && tag <= 0x77:
		return d.typedList(depth)
	case tag == tagUMap || tag == tagMap:
		return d.mapValue(depth)
	case tag == tagClassDef:
		return d.classDef(depth)
	case tag == tagObject || tag >= 0x60 && tag <= 0x6f:
		return d.object(depth)
	case tag == tagRef:
		return d.backRef()
	case tag == tagEnd:
		return nil, errAt(d.pos, "unexpected end marker 'Z'")
	}
	return nil, errAt(d.pos, "invalid tag 0x%02x", tag)
}

// need makes sure n bytes remain at d.pos.
func (d *Decoder) need(n int, what string) error {
	if len(d.data)-d.pos < n {
		return d.truncated(what)
	}
	return nil
}

// int32 decodes an int in any of its forms; with null, 'N' reads as 0, as
// it does where the library reads a length or a class index.
func (d *Decoder) int32(null bool) (int32, error) {
	if err := d.need(1, "an int"); err != nil {
		return 0, err
	}
	b := d.data[d.pos:]
	switch tag := b[0]; {
	case tag >= 0x80 && tag <= 0xbf:
		d.pos++
		return int32(tag) - 0x90, nil
	case tag >= 0xc0 && tag <= 0xcf:
		if err := d.need(2, "an int"); err != nil {
			return 0, err
		}
		d.pos += 2
		return (int32(tag)-0xc8)<<8 + int32(b[1]), nil
	case tag >= 0xd0 && tag <= 0xd7:
		if err := d.need(3, "an int"); err != nil {
			return 0, err
		}
		d.pos += 3
		return (int32(tag)-0xd4)<<16 + int32(b[1])<<8 + int32(b[2]), nil
	case tag == tagInt:
		if err := d.need(5, "an int"); err != nil {
			return 0, err
		}
		d.pos += 5
		return int32(binary.BigEndian.Uint32(b[1:])), nil
	case tag == tagNull && null:
		d.pos++
		return 0, nil
	default:
		return 0, errAt(d.pos, "expected an int, found tag 0x%02x", tag)
	}
}

func (d *Decoder) int64() (any, error) {
	b := d.data[d.pos:]
	var v int64
	switch tag := b[0]; {
	case tag >= 0xd8 && tag <= 0xef:
		d.pos++
		return int64(tag) - 0xe0, nil
	case tag >= 0xf0:
		if err := d.need(2, "a long"); err != nil {
			return nil, err
		}
		v = (int64(tag)-0xf8)<<8 + int64(b[1])
		d.pos += 2
	case tag >= 0x38 && tag <= 0x3f:
		if err := d.need(3, "a long"); err != nil {
			return nil, err
		}
		v = (int64(tag)-0x3c)<<16 + int64(b[1])<<8 + int64(b[2])
		d.pos += 3
	case tag == tagLongInt:
		if err := d.need(5, "a long"); err != nil {
			return nil, err
		}
		v = int64(int32(binary.BigEndian.Uint32(b[1:])))
		d.pos += 5
	default: // 'L'
		if err := d.need(9, "a long"); err != nil {
			return nil, err
		}
		v = int64(binary.BigEndian.Uint64(b[1:]))
		d.pos += 9
	}
	return v, nil
}

func (d *Decoder) double() (any, error) {
	b := d.data[d.pos:]
	var v float64
	switch b[0] {
	case tagDoubleZero:
		d.pos++
		return 0.0, nil
	case tagDoubleOne:
		v, d.pos = 1, d.pos+1
	case tagDoubleByte:
		if err := d.need(2, "a double"); err != nil {
			return nil, err
		}
		v, d.pos = float64(int8(b[1])), d.pos+2
	case tagDoubleShort:
		if err := d.need(3, "a double"); err != nil {
			return nil, err
		}
		v, d.pos = float64(int16(binary.BigEndian.Uint16(b[1:]))), d.pos+3
	case tagDoubleMill:
		if err := d.need(5, "a double"); err != nil {
			return nil, err
		}
		// The library divides; Java multiplies by 0.001, which can differ
		// in the last bit. Decoding matches the library.
		v, d.pos = float64(int32(binary.BigEndian.Uint32(b[1:])))/1000, d.pos+5
	default: // 'D'
		if err := d.need(9, "a double"); err != nil {
			return nil, err
		}
		v, d.pos = math.Float64frombits(binary.BigEndian.Uint64(b[1:])), d.pos+9
	}
	return v, nil
}

func (d *Decoder) date() (any, error) {
	b := d.data[d.pos:]
	if b[0] == tagDate {
		if err := d.need(9, "a date"); err != nil {
			return nil, err
		}
		d.pos += 9
		ms := int64(binary.BigEndian.Uint64(b[1:]))
		return time.Unix(ms/1000, ms%1000*1e6), nil
	}
	if err := d.need(5, "a date"); err != nil {
		return nil, err
	}
	d.pos += 5
	return time.Unix(int64(int32(binary.BigEndian.Uint32(b[1:])))*60, 0), nil
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

func (d *Decoder) binary() (any, error) {
	end, total, err := skipBinary(d.data, d.pos)
	if err != nil {
		return nil, err
	}
	if err := d.spend(int64(total) + costSlot); err != nil {
		return nil, err
	}
	out := make([]byte, total)
	for o, p := 0, d.pos; o < total || p < end; {
		n, hdr, _, _ := binaryHeader(d.data, p)
		o += copy(out[o:], d.data[p+hdr:p+hdr+n])
		p += hdr + n
	}
	d.pos = end
	return out, nil
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

// str decodes the string at d.pos with one allocation, or none for the empty
// string and the interned ones.
func (d *Decoder) str() (string, error) {
	start := d.pos
	end, outLen, plain, ascii, err := skipString(d.data, start)
	if err != nil {
		return "", err
	}
	d.pos = end
	if err := d.spend(int64(outLen)); err != nil {
		return "", err
	}
	if plain {
		_, hdr, _, _ := stringHeader(d.data, start)
		b := d.data[start+hdr : end]
		if d.intern != nil && len(b) > 0 && len(b) <= maxInternerLen {
			if s, ok := interned[string(b)]; ok {
				return s, nil
			}
			return d.intern.get(b), nil
		}
		return makeString(b), nil
	}
	// A Builder's buffer is not zeroed first (a plain make would clear
	// outLen bytes only to overwrite them) and becomes the string as it is.
	var sb strings.Builder
	sb.Grow(outLen)
	var buf []byte
	for p := start; ; {
		units, hdr, final, _ := stringHeader(d.data, p)
		if ascii {
			// The common long string: chunks of ASCII, checked and
			// measured by skipString already, copied as they are.
			sb.Write(d.data[p+hdr : p+hdr+units])
			p += hdr + units
			if final {
				break
			}
			continue
		}
		// A chunk of plain text (no surrogate pair to re-encode, the
		// common case of a long string split into chunks) is copied as
		// it is; skipString has checked every chunk already.
		if e, _, pl, _ := scanChars(d.data, p+hdr, units); pl {
			sb.Write(d.data[p+hdr : e])
			p = e
		} else {
			buf, p = appendChars(buf[:0], d.data, p+hdr, units)
			sb.Write(buf)
		}
		if final {
			break
		}
	}
	return sb.String(), nil
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

// eface is the layout of an any.
type eface struct {
	typ, data unsafe.Pointer
}

var stringType = func() unsafe.Pointer {
	var s any = ""
	return (*eface)(unsafe.Pointer(&s)).typ
}()

// slabSize is how many boxed string headers share one allocation.
const slabSize = 16

// box returns s as an any. Converting a string to an interface allocates its
// 16-byte header; box instead stores the header in a slab shared by the
// decoder's next strings and points the interface at it. Slab entries are
// written once and never changed, so this is the value an ordinary conversion
// would give, at a sixteenth of the allocations.
func (d *Decoder) box(s string) any {
	if s == "" {
		return ""
	}
	if len(d.slab) == cap(d.slab) {
		// Charged a slab at a time; box cannot fail, so the slab may
		// overdraw the budget by one, and the next value fails.
		d.budget -= slabSize * costSlot
		d.slab = make([]string, 0, slabSize)
	}
	d.slab = append(d.slab, s)
	e := eface{typ: stringType, data: unsafe.Pointer(&d.slab[len(d.slab)-1])}
	return *(*any)(unsafe.Pointer(&e))
}

// count checks a declared element count against the bytes that remain, each
// element taking at least one.
func (d *Decoder) count(n int32, what string) (int, error) {
	if n < 0 {
		return 0, errAt(d.pos, "%s of negative length %d", what, n)
	}
	if int(n) > len(d.data)-d.pos {
		return 0, errAt(d.pos, "%s of %d elements, only %d bytes remain", what, n, len(d.data)-d.pos)
	}
	return int(n), nil
}

func (d *Decoder) enter(depth int) error {
	if depth >= MaxDepth {
		return errAt(d.pos, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

// untypedList decodes x57 (to 'Z'), x58 (int length) and x78-x7f lists.
func (d *Decoder) untypedList(depth int) (any, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	tag := d.data[d.pos]
	d.pos++
	// The list will be an interface: its slice header is allocated.
	if err := d.spend(costBoxedSlice); err != nil {
		return nil, err
	}
	if tag == tagUListVar {
		// The list is not made yet: a reference to it from inside reads
		// as null.
		slot := d.addRef(nil)
		out := []any{}
		for {
			if d.pos >= len(d.data) {
				return nil, d.truncated("a list")
			}
			if d.data[d.pos] == tagEnd {
				d.pos++
				var v any = out
				d.setRef(slot, v)
				return v, nil
			}
			if err := d.grow(len(out), cap(out), costSlot); err != nil {
				return nil, err
			}
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	n32 := int32(tag) - 0x78
	if tag == tagUListFixed {
		var err error
		if n32, err = d.int32(true); err != nil {
			return nil, err
		}
	}
	n, err := d.count(n32, "list")
	if err != nil {
		return nil, err
	}
	if err := d.spend(int64(n) * costSlot); err != nil {
		return nil, err
	}
	out := make([]any, n)
	var boxed any = out // the same list for a reference from inside it
	d.addRef(boxed)
	for i := range out {
		if out[i], err = d.value(depth + 1); err != nil {
			return nil, err
		}
	}
	return boxed, nil
}

// listKind is a typed list the fast decoder builds itself.
type listKind uint8

const (
	listNone listKind = iota
	listString
	listInt
	listLong
	listDouble
	listBool
	listObject
	listDate
	listOther // any other name: []any, or a registered class's []*T
)

// listKinds are the type names that the library resolves from its fixed
// table (getListType), whatever the registry holds. Any other name is a
// registered class's list or []any (see typedList).
var listKinds = map[string]listKind{
	"string": listString, "java.lang.String": listString, "char": listString,
	"short": listInt, "int": listInt,
	"long":  listLong,
	"float": listDouble, "double": listDouble,
	"boolean": listBool,
	"object":  listObject, "java.lang.Object": listObject,
	"date": listDate, "java.util.Date": listDate,
	"[string": listString, "[java.lang.String": listString, "[char": listString,
	"[short": listInt, "[int": listInt,
	"[long":  listLong,
	"[float": listDouble, "[double": listDouble,
	"[boolean": listBool,
	"[object":  listObject, "[java.lang.Object": listObject,
	"[date": listDate, "[java.util.Date": listDate,
}

// addType records a type name the way the library's TypeRefs does.
func (d *Decoder) addType(name string) {
	for _, t := range d.types {
		if t == name {
			return
		}
	}
	d.types = append(d.types, name)
}

// typeRef resolves a type reference.
func (d *Decoder) typeRef(i int64) (string, error) {
	if i < 0 || i >= int64(len(d.types)) {
		return "", errAt(d.pos, "type reference %d out of range", i)
	}
	return d.types[i], nil
}

func isStringTag(tag byte) bool {
	return tag <= 0x1f || tag >= 0x30 && tag <= 0x33 || tag == tagString || tag == tagStringChunk
}

// listType reads a typed list's type: a name, or (as the library reads any
// integer there) a reference to an earlier one.
func (d *Decoder) listType() (listKind, string, error) {
	if d.pos >= len(d.data) {
		return listNone, "", d.truncated("a list type")
	}
	tag := d.data[d.pos]
	var name string
	switch {
	case isStringTag(tag):
		s, err := d.str()
		if err != nil {
			return listNone, "", err
		}
		d.addType(s)
		name = s
	case tag >= 0x80 && tag <= 0xd7 || tag == tagInt:
		i, err := d.int32(false)
		if err != nil {
			return listNone, "", err
		}
		if name, err = d.typeRef(int64(i)); err != nil {
			return listNone, "", err
		}
	case tag >= 0xd8 || tag >= 0x38 && tag <= 0x3f || tag == tagLongInt || tag == tagLong:
		v, err := d.int64()
		if err != nil {
			return listNone, "", err
		}
		if name, err = d.typeRef(v.(int64)); err != nil {
			return listNone, "", err
		}
	case tag == tagNull:
		d.pos++ // the library reads it as the empty name
	default:
		return listNone, "", errAt(d.pos, "invalid list type, tag 0x%02x", tag)
	}
	if k := listKinds[name]; k != listNone {
		return k, name, nil
	}
	return listOther, name, nil
}

// typedList decodes x55 (to 'Z'), 'V' (int length) and x70-x77 lists.
func (d *Decoder) typedList(depth int) (any, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	tag := d.data[d.pos]
	d.pos++
	// The list will be an interface: its slice header is allocated.
	if err := d.spend(costBoxedSlice); err != nil {
		return nil, err
	}
	kind, name, err := d.listType()
	if err != nil {
		return nil, err
	}
	n, variable := 0, tag == tagListVar
	if !variable {
		n32 := int32(tag) - 0x70
		if tag == tagListFixed {
			if n32, err = d.int32(true); err != nil {
				return nil, err
			}
		}
		if n, err = d.count(n32, "list"); err != nil {
			return nil, err
		}
	}
	switch kind {
	case listString:
		return d.stringList(n, variable, depth)
	case listInt:
		return typedElems[int32](d, n, variable, depth)
	case listLong:
		return typedElems[int64](d, n, variable, depth)
	case listDouble:
		return typedElems[float64](d, n, variable, depth)
	case listBool:
		return typedElems[bool](d, n, variable, depth)
	case listObject:
		return typedElems[Object](d, n, variable, depth)
	case listDate:
		return typedElems[time.Time](d, n, variable, depth)
	}
	// The library's rule (getListType): a leading '[' and a registered
	// class is a slice of pointers to its type; any other name is []any.
	if cls, ok := strings.CutPrefix(name, "["); ok && !strings.HasPrefix(cls, "[") {
		if t := classType(cls); t != nil && t.Kind() == reflect.Struct {
			return d.classList(reflect.PointerTo(t), n, variable, depth)
		}
	}
	return typedElems[any](d, n, variable, depth)
}

// next reports whether a list has another element: always for a fixed one
// (i < n), up to the 'Z' for a variable one.
func (d *Decoder) next(i, n int, variable bool) (bool, error) {
	if !variable && i >= n {
		return false, nil
	}
	if d.pos >= len(d.data) {
		return false, d.truncated("a list")
	}
	if variable && d.data[d.pos] == tagEnd {
		d.pos++
		return false, nil
	}
	return true, nil
}

// typedElems decodes the elements of a typed list into []T; null elements are
// T's zero value, an element of another type is converted as the library
// converts it (an int into a long list) or is an error.
func typedElems[T any](d *Decoder, n int, variable bool, depth int) (any, error) {
	size := int64(unsafe.Sizeof(*new(T)))
	if err := d.spend(int64(n) * size); err != nil {
		return nil, err
	}
	out := make([]T, n)
	var boxed any = out
	slot := d.addRef(boxed)
	for i := 0; ; i++ {
		more, err := d.next(i, n, variable)
		if err != nil {
			return nil, err
		}
		if !more {
			if variable {
				boxed = out
				d.setRef(slot, boxed)
			}
			return boxed, nil
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		var x T
		if v != nil {
			t, ok := v.(T)
			if !ok {
				// Converted as the library converts (an int into a
				// long list), or an error.
				if err := d.assign(reflect.ValueOf(&x).Elem(), v, depth+1); err != nil {
					return nil, err
				}
			} else {
				x = t
			}
		}
		if variable {
			if err := d.grow(len(out), cap(out), size); err != nil {
				return nil, err
			}
			out = append(out, x)
		} else {
			out[i] = x
		}
	}
}

// stringList is typedElems[string] without boxing each element.
func (d *Decoder) stringList(n int, variable bool, depth int) (any, error) {
	if err := d.spend(int64(n) * costSlot); err != nil {
		return nil, err
	}
	out := make([]string, n)
	var boxed any = out
	slot := d.addRef(boxed)
	for i := 0; ; i++ {
		more, err := d.next(i, n, variable)
		if err != nil {
			return nil, err
		}
		if !more {
			if variable {
				boxed = out
				d.setRef(slot, boxed)
			}
			return boxed, nil
		}
		var s string
		switch tag := d.data[d.pos]; {
		case isStringTag(tag):
			if s, err = d.str(); err != nil {
				return nil, err
			}
		case tag == tagNull:
			d.pos++
		default:
			at := d.pos
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			var ok bool
			if s, ok = v.(string); !ok {
				// The library sets elements through reflection,
				// which takes only strings here.
				return nil, errAt(at, "element of type %T in a string list", v)
			}
		}
		if variable {
			if err := d.grow(len(out), cap(out), costSlot); err != nil {
				return nil, err
			}
			out = append(out, s)
		} else {
			out[i] = s
		}
	}
}

// mapType reads an 'M' map's type: a name, or an int (or null, read as 0)
// referring to an earlier one. Whatever the type, the map decodes into
// map[any]any: Java's maps are the maps 'M' carries in practice.
func (d *Decoder) mapType() error {
	if d.pos >= len(d.data) {
		return d.truncated("a map type")
	}
	if isStringTag(d.data[d.pos]) {
		s, err := d.str()
		if err != nil {
			return err
		}
		d.addType(s)
		return nil
	}
	i, err := d.int32(true)
	if err != nil {
		return err
	}
	_, err = d.typeRef(int64(i))
	return err
}

// mapValue decodes 'H' and 'M' maps into map[any]any.
func (d *Decoder) mapValue(depth int) (any, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	typed := d.data[d.pos] == tagMap
	d.pos++
	if typed {
		if err := d.mapType(); err != nil {
			return nil, err
		}
	}
	if err := d.spend(costMapHeader); err != nil {
		return nil, err
	}
	m := make(map[any]any)
	d.addRef(m)
	for {
		if d.pos >= len(d.data) {
			return nil, d.truncated("a map")
		}
		if d.data[d.pos] == tagEnd {
			d.pos++
			return m, nil
		}
		at := d.pos
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if !hashable(k) {
			return nil, errAt(at, "map key of type %T", k)
		}
		if typed {
			// The library sets entries through reflection, which panics on a
			// null key and deletes on a null value.
			if k == nil {
				return nil, errAt(at, "null key in a typed map")
			}
			if v == nil {
				delete(m, k)
				continue
			}
		}
		// Charged before the entry goes in (see mapGrowth); a repeated key
		// costs nothing more, and only where the map would grow is it
		// worth a lookup to tell.
		if c := mapGrowth(len(m)); c > 0 {
			if _, dup := m[k]; !dup {
				if err := d.spend(c); err != nil {
					return nil, err
				}
			}
		}
		m[k] = v
	}
}

// hashable tells the decoded values that can be map keys.
func hashable(k any) bool {
	switch k.(type) {
	case nil, string, int32, int64, bool, float64, time.Time:
		return true
	case []any, []string, []byte, []int32, []int64, []float64, []bool,
		[]Object, []time.Time, map[any]any, map[string]any:
		return false
	}
	return reflect.TypeOf(k).Comparable()
}
