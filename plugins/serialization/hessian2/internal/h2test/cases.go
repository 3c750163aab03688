package h2test

import (
	"fmt"
	"strings"
	"time"
)

// User is a POJO both sides register (the core with its RegisterPOJO, the
// oracle with the library's as well).
type User struct {
	Name string
	Age  int32
	Tags []string
}

// JavaClassName is org.weft.test.User.
func (User) JavaClassName() string { return "org.weft.test.User" }

// Side gives the values whose Go types differ between the core and the
// library: each side has its own enum and exception types.
type Side struct {
	// Color is constant i (0 RED, 1 GREEN) of enum org.weft.test.Color.
	Color func(i int) any
	// Throwable is a java.lang.Throwable with message msg, as the
	// library's java_exception.NewThrowable makes it.
	Throwable func(msg string) any
}

// Case is a stream of values, or hand-made data to decode.
type Case struct {
	Name   string
	Values []any
	Data   []byte // to decode as it is; nil: the encoding of Values
}

// MarshalCases are the streams whose bytes must be the library's exactly:
// golden "bytes".
func MarshalCases(s Side) []Case {
	var cs []Case
	var all []any
	add := func(vs ...any) { all = append(all, vs...) }
	add(nil, true, false)
	for _, v := range IntEdges {
		add(v, int8(v), int16(v), uint8(v), uint16(v))
	}
	for _, v := range LongEdges {
		add(v, int(v), uint64(v), uint32(v), uint(v))
	}
	for _, v := range DoubleEdges {
		add(v)
	}
	for _, v := range Float32Edges {
		add(v, -v)
	}
	for _, v := range EdgeStrings() {
		add(v)
	}
	for _, v := range EdgeBinaries() {
		add(v)
	}
	add(time.Time{}, time.UnixMilli(1700000000123), time.Unix(0, 0).UTC(), time.Time{}.Local(),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Millisecond))
	add([]string(nil), []string{}, []string{"a", "", "中"}, []any(nil), []any{},
		[]any{nil, []any{int32(1)}, []string{"x"}}, map[string]string(nil), map[string]string{},
		map[string]string{"k": "v"}, map[string]any(nil), map[string]any{}, map[string]any{"k": []any{}},
		map[any]any(nil), map[any]any{}, map[any]any{"k": int64(1)})
	for i, v := range all {
		cs = append(cs, Case{Name: fmt.Sprintf("marshal/edge/%03d", i), Values: []any{v}})
	}
	cs = append(cs, Case{Name: "marshal/edges", Values: all})

	for i, vs := range referenceCases() {
		cs = append(cs, Case{Name: fmt.Sprintf("marshal/ref/%02d", i), Values: vs})
	}
	g := NewGen(1, false)
	for i := range 300 {
		cs = append(cs, Case{Name: fmt.Sprintf("marshal/prop/%03d", i), Values: g.Values()})
	}
	u := &User{Name: "n", Age: 3, Tags: []string{"t"}}
	sh := []string{"shared"}
	for i, vs := range [][]any{
		{"a", u, u, &User{Name: "m"}},
		{sh, u, sh},
		{[]any{"x", u}, u},
		{map[string]any{"u": u}},
		{map[string]any{"_class": "org.weft.test.User", "name": "n", "age": int32(1), "tags": nil}},
		{map[int32]string{1: "a"}},
		{[]int32{1, 2}, []int64{3}, []float64{1.5}, []bool{true}},
		{s.Color(1), s.Color(0)},
		{s.Throwable("boom")},
		{"a", int64(1)},
		{"a", s.Throwable("x")},
		// A provider's answer to a plain Go error: flag
		// RESPONSE_WITH_EXCEPTION (0) and a java.lang.Throwable.
		{int32(0), s.Throwable("boom: ünïcode 😀")},
	} {
		cs = append(cs, Case{Name: fmt.Sprintf("marshal/object/%02d", i), Values: vs})
	}
	return cs
}

func referenceCases() [][]any {
	sl := []string{"a", "b"}
	capped := make([]string, 0, 4)
	l := []any{"x"}
	m := map[string]any{"k": "v"}
	ms := map[string]string{"k": "v"}
	ma := map[any]any{"k": "v"}
	cyc := []any{nil, "y"}
	cyc[0] = cyc
	cm := map[string]any{}
	cm["self"] = cm
	var many []any
	for i := range 40 {
		many = append(many, []any{int32(i)})
	}
	many = append(many, many...)
	return [][]any{
		{sl, sl},
		{sl, sl[:1]}, // same array: the library references even a shorter slice
		{capped, capped},
		{[]string{}, []string{}},
		{[]any(nil), []any(nil)},
		{l, []any{l, sl, m}, sl, l, m},
		{m, ms, ma, m, ms, ma},
		{[]any{sl, sl}, map[string]any{"a": sl}},
		{cyc},
		{cm},
		{map[string]any(nil), map[string]any(nil), map[string]string(nil)},
		many, // more containers than the inline reference table holds
	}
}

// DecodeCases are the streams whose decoded values must be the library's:
// golden "dump" (Dump of what the library decodes). A case with Values is
// the encoding of its values (the library's for the golden, Marshal's in the
// core, which the bytes goldens show to be the same but for the order of
// multi-key maps, which decoding does not see).
func DecodeCases(s Side) []Case {
	var cs []Case
	var all []any
	for _, v := range IntEdges {
		all = append(all, v, int8(v), uint16(v))
	}
	for _, v := range LongEdges {
		all = append(all, v)
	}
	for _, v := range DoubleEdges {
		all = append(all, v)
	}
	for _, v := range Float32Edges {
		all = append(all, v, -v)
	}
	for _, v := range EdgeStrings() {
		all = append(all, v)
	}
	for _, v := range EdgeBinaries() {
		all = append(all, v)
	}
	all = append(all, nil, true, false, time.UnixMilli(1700000000123), time.UnixMilli(-1),
		[]int32{1, -1 << 20}, []int64{1, 1 << 40}, []float64{0.5, 7}, []bool{true, false},
		[]string{"a", ""}, []any{[]string{"y"}, map[string]any{"k": nil}})
	for i, v := range all {
		cs = append(cs, Case{Name: fmt.Sprintf("decode/edge/%03d", i), Values: []any{v}})
	}
	cs = append(cs, Case{Name: "decode/edges", Values: all})
	g := NewGen(3, true)
	for i := range 200 {
		cs = append(cs, Case{Name: fmt.Sprintf("decode/prop/%03d", i), Values: g.Values()})
	}
	for _, h := range handcrafted() {
		cs = append(cs, Case{Name: "decode/hand/" + strings.ReplaceAll(h.name, " ", "_"), Data: h.data})
	}
	u := &User{Name: "n", Age: 3, Tags: []string{"t"}}
	l := []any{"x"}
	for _, c := range []struct {
		name   string
		values []any
	}{
		{"object after strings", []any{"a", "b", u, "c", int64(1)}},
		{"object first", []any{u, "a"}},
		{"reference to an earlier list", []any{"a", l, u, l, "z"}},
		{"type name used later", []any{"a", []string{"s"}, []any{u}, []string{"t"}}},
		{"nested object", []any{int32(1), map[string]any{"u": u}}},
		{"enum", []any{"a", s.Color(1), s.Color(0)}},
	} {
		cs = append(cs, Case{Name: "decode/object/" + strings.ReplaceAll(c.name, " ", "_"), Values: c.values})
	}
	return cs
}

// Str is a compact string (at most 31 bytes) as hand-made data has it.
func Str(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// Cat concatenates bytes, byte-sized ints and runes, and strings (as Str).
func Cat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch x := p.(type) {
		case byte:
			b = append(b, x)
		case int:
			b = append(b, byte(x))
		case rune:
			b = append(b, byte(x))
		case []byte:
			b = append(b, x...)
		case string:
			b = append(b, Str(x)...)
		default:
			panic(fmt.Sprintf("Cat: %T", p))
		}
	}
	return b
}

// handcrafted are forms the library's encoder never writes but Java's (or
// another peer's) may.
func handcrafted() []struct {
	name string
	data []byte
} {
	cat := Cat
	return []struct {
		name string
		data []byte
	}{
		{"compact typed list of objects", cat(0x72, "[object", 0x79, "a", 'H', "k", "v", 'Z')},
		{"typed list, null elements", cat(0x72, "[string", "a", 'N')},
		{"typed list without [", cat(0x71, "string", "x")},
		{"typed list java.lang.String", cat(0x71, "[java.lang.String", "x")},
		{"variable typed list", cat(0x55, "[string", "a", 'N', 'Z')},
		{"variable typed int list", cat(0x55, "[int", 0x91, 'N', 'Z')},
		{"variable untyped list", cat(0x57, "a", 'N', 0x57, 'Z', 'Z')},
		{"fixed untyped, null length", cat(0x58, 'N')},
		{"fixed typed, int length", cat('V', "[long", 0x92, 0xe1, 0xe2)},
		{"typed list by type reference", cat(0x72, "[string", "a", 'N', 0x71, 0x90, "b")},
		{"typed list by long type reference", cat(0x71, "[int", 0x91, 0x71, 0xe0, 0x92)},
		{"[date list", cat(0x72, "[date", 'N', 0x4b, 0, 0, 0, 1)},
		{"[short, [float, [boolean, [char", cat(0x71, "[short", 0x91, 0x71, "[float", 0x5c, 0x71, "[boolean", 'T', 0x71, "[char", "c")},
		{"typed map HashMap", cat('M', "java.util.HashMap", "k", 'N', "j", 0x91, 'N', 'T', 'Z')},
		{"typed map by type reference", cat('M', "java.util.TreeMap", 'Z', 'M', 0x90, "a", 0x91, 'Z')},
		{"untyped map, null key and value", cat('H', "k", 'N', 'N', 0x91, 'Z')},
		{"untyped map, non-string keys", cat('H', 0x91, "a", 0xe1, "b", 'T', "c", 0x5c, "d", 'Z')},
		{"double mill", cat(0x5f, 0, 0, 0, 7, 0x5f, 0xff, 0xff, 0xff, 0xf9)},
		{"long as int", cat(0x59, 0x80, 0, 0, 0)},
		{"minute date", cat(0x4b, 0x01, 0x02, 0x03, 0x04)},
		{"top-level end marker", cat('Z', 0x91)},
		{"surrogate pair", cat(0x02, 0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80)},
		{"high surrogate then ASCII", cat(0x02, 0xed, 0xa0, 0x80, 'a', 'b', 'c', 0x01, 'x')},
		{"lone low surrogate", cat(0x01, 0xed, 0xb0, 0x80)},
		{"unchecked two-byte sequence", cat(0x01, 0xc3, 0x00)},
		{"string chunks with compact final", cat('R', 0x00, 0x02, "ab"[0], "ab"[1], 0x01, 'c')},
		{"string chunk of 0", cat('R', 0x00, 0x00, 0x30, 0x01, 'x')},
		{"binary chunks with compact final", cat('A', 0x00, 0x02, 1, 2, 0x21, 3, 0x34, 0x02, 9, 9)},
		{"empty binary", cat(0x20)},
		{"string of ints", cat(0x71, "[string", 0x91)},
		{"typed list of unknown type", cat(0x71, "com.foo.Bar", "x")},
		{"collection", cat(0x71, "java.util.HashSet", "x")},
		{"[int of long", cat(0x71, "[int", 0xe1)},
		{"typed map of unknown type", cat('M', "com.foo.Map", "k", "v", 'Z')},
		{"list typed by a map's type", cat('M', "java.util.HashMap", 'Z', 0x71, 0x90, 'N')},
		{"reference", cat(0x79, 0x91, 0x51, 0x90)},
		{"typed list by null type", cat(0x71, 'N', "x")},
		{"bad utf-8", cat(0x01, 0xf0, 0x9f, 0x98, 0x80)},
		{"truncated string", cat(0x05, 'a')},
	}
}

// DecodeDiffers are the decode cases where this package, by design, does not
// decode as the library, with what it decodes instead (a Dump), and why.
// None since the package decodes with the library: where the library
// panics (a list whose type names a map class: reflect.MakeSlice of a
// non-slice type), check refuses the body, and both give an error.
var DecodeDiffers = map[string]struct{ Dump, Why string }{}
