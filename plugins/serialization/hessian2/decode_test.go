package hessian2

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestDecodeEdgesMatchLibrary: every compact form, decoded by the fast path
// alone, gives what the library gives.
func TestDecodeEdgesMatchLibrary(t *testing.T) {
	var all []any
	for _, v := range intEdges {
		all = append(all, v, int8(v), uint16(v))
	}
	for _, v := range longEdges {
		all = append(all, v)
	}
	for _, v := range doubleEdges {
		all = append(all, v)
	}
	for _, v := range float32Edges {
		all = append(all, v, -v)
	}
	for _, v := range edgeStrings() {
		all = append(all, v)
	}
	for _, v := range edgeBinaries() {
		all = append(all, v)
	}
	all = append(all, nil, true, false, time.UnixMilli(1700000000123), time.UnixMilli(-1),
		[]int32{1, -1 << 20}, []int64{1, 1 << 40}, []float64{0.5, 7}, []bool{true, false},
		[]string{"a", ""}, []any{[]string{"y"}, map[string]any{"k": nil}})
	for _, v := range all {
		if !assertSameDecode(t, libEncode(t, v)) {
			t.Errorf("%T %.30v: the library decoded it", v, v)
		}
	}
	if !assertSameDecode(t, libEncode(t, all...)) {
		t.Error("the library decoded the edge stream")
	}
}

// TestDecodePropertyMatchesLibrary: for random nested fast values, the fast
// decoder, alone, decodes the library's bytes exactly as the library does,
// and round-trips Marshal's.
func TestDecodePropertyMatchesLibrary(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	g := newGen(3, true)
	for i := range n {
		vs := g.values()
		fast, want := assertSameDecodeValues(t, libEncode(t, vs...))
		if !fast {
			t.Fatalf("iteration %d: the library decoded it", i)
		}
		got, _, err := decodeAll(marshal(t, vs...))
		if err != nil {
			t.Fatalf("iteration %d: round trip: %v", i, err)
		}
		if d := diff(got, want); d != "" {
			t.Fatalf("iteration %d: round trip differs: %s", i, d)
		}
	}
}

func str(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func cat(parts ...any) []byte {
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
			b = append(b, str(x)...)
		default:
			panic(fmt.Sprintf("cat: %T", p))
		}
	}
	return b
}

// TestDecodeHandcrafted covers forms the library's encoder never writes but
// Java's (or another peer's) may, and the fast path's take on each.
func TestDecodeHandcrafted(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		fast bool
	}{
		{"compact typed list of objects", cat(0x72, "[object", 0x79, "a", 'H', "k", "v", 'Z'), true},
		{"typed list, null elements", cat(0x72, "[string", "a", 'N'), true},
		{"typed list without [", cat(0x71, "string", "x"), true},
		{"typed list java.lang.String", cat(0x71, "[java.lang.String", "x"), true},
		{"variable typed list", cat(0x55, "[string", "a", 'N', 'Z'), true},
		{"variable typed int list", cat(0x55, "[int", 0x91, 'N', 'Z'), true},
		{"variable untyped list", cat(0x57, "a", 'N', 0x57, 'Z', 'Z'), true},
		{"fixed untyped, null length", cat(0x58, 'N'), true},
		{"fixed typed, int length", cat('V', "[long", 0x92, 0xe1, 0xe2), true},
		{"typed list by type reference", cat(0x72, "[string", "a", 'N', 0x71, 0x90, "b"), true},
		{"typed list by long type reference", cat(0x71, "[int", 0x91, 0x71, 0xe0, 0x92), true},
		{"[date list", cat(0x72, "[date", 'N', 0x4b, 0, 0, 0, 1), true},
		{"[short, [float, [boolean, [char", cat(0x71, "[short", 0x91, 0x71, "[float", 0x5c, 0x71, "[boolean", 'T', 0x71, "[char", "c"), true},
		{"typed map HashMap", cat('M', "java.util.HashMap", "k", 'N', "j", 0x91, 'N', 'T', 'Z'), true},
		{"typed map by type reference", cat('M', "java.util.TreeMap", 'Z', 'M', 0x90, "a", 0x91, 'Z'), true},
		{"untyped map, null key and value", cat('H', "k", 'N', 'N', 0x91, 'Z'), true},
		{"untyped map, non-string keys", cat('H', 0x91, "a", 0xe1, "b", 'T', "c", 0x5c, "d", 'Z'), true},
		{"double mill", cat(0x5f, 0, 0, 0, 7, 0x5f, 0xff, 0xff, 0xff, 0xf9), true},
		{"long as int", cat(0x59, 0x80, 0, 0, 0), true},
		{"minute date", cat(0x4b, 0x01, 0x02, 0x03, 0x04), true},
		{"top-level end marker", cat('Z', 0x91), true},
		{"surrogate pair", cat(0x02, 0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80), true},
		{"high surrogate then ASCII", cat(0x02, 0xed, 0xa0, 0x80, 'a', 'b', 'c', 0x01, 'x'), true},
		{"lone low surrogate", cat(0x01, 0xed, 0xb0, 0x80), true},
		{"unchecked two-byte sequence", cat(0x01, 0xc3, 0x00), true},
		{"string chunks with compact final", cat('R', 0x00, 0x02, "ab"[0], "ab"[1], 0x01, 'c'), true},
		{"string chunk of 0", cat('R', 0x00, 0x00, 0x30, 0x01, 'x'), true},
		{"binary chunks with compact final", cat('A', 0x00, 0x02, 1, 2, 0x21, 3, 0x34, 0x02, 9, 9), true},
		{"empty binary", cat(0x20), true},
		{"string of ints", cat(0x71, "[string", 0x91), false},
		{"typed list of unknown type", cat(0x71, "com.foo.Bar", "x"), false},
		{"collection", cat(0x71, "java.util.HashSet", "x"), false},
		{"[int of long", cat(0x71, "[int", 0xe1), false},
		{"typed map of unknown type", cat('M', "com.foo.Map", "k", "v", 'Z'), false},
		{"list typed by a map's type", cat('M', "java.util.HashMap", 'Z', 0x71, 0x90, 'N'), false},
		{"reference", cat(0x79, 0x91, 0x51, 0x90), false},
		{"typed list by null type", cat(0x71, 'N', "x"), false},
		{"bad utf-8", cat(0x01, 0xf0, 0x9f, 0x98, 0x80), true},
		{"truncated string", cat(0x05, 'a'), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if fast := assertSameDecode(t, c.data); fast != c.fast {
				t.Fatalf("fast path: %v, want %v", fast, c.fast)
			}
		})
	}
}

// TestDecodeFallback: from the first value it cannot decode, the library
// takes over, from that value when nothing before it matters, else from the
// start; values are neither repeated nor lost.
func TestDecodeFallback(t *testing.T) {
	u := &user{Name: "n", Age: 3, Tags: []string{"t"}}
	l := []any{"x"}
	cases := []struct {
		name    string
		values  []any
		restart bool
	}{
		{"object after strings", []any{"a", "b", u, "c", int64(1)}, false},
		{"object first", []any{u, "a"}, false},
		{"reference to an earlier list", []any{"a", l, u, l, "z"}, true},
		{"type name used later", []any{"a", []string{"s"}, []any{u}, []string{"t"}}, true},
		{"nested object", []any{int32(1), map[string]any{"u": u}}, false},
		{"enum", []any{"a", color(1), color(0)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := libEncode(t, c.values...)
			want, err := libDecodeAll(data)
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder(data)
			var got []any
			for {
				v, err := d.Decode()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, v)
			}
			if dd := diff(got, want); dd != "" {
				t.Fatalf("differs from the library: %s", dd)
			}
			_ = c.restart
			if _, err := d.Decode(); err != io.EOF {
				t.Fatalf("after the end: %v", err)
			}
		})
	}
}

func TestDecodeEOFAndStickyErrors(t *testing.T) {
	d := NewDecoder(nil)
	for range 2 {
		if _, err := d.Decode(); err != io.EOF {
			t.Fatalf("empty: %v", err)
		}
	}
	d = NewDecoder(cat("a", 0x05, 'b'))
	if v, err := d.Decode(); v != "a" || err != nil {
		t.Fatalf("%v %v", v, err)
	}
	_, err1 := d.Decode()
	_, err2 := d.Decode()
	if err1 == nil || err1 != err2 || errors.Is(err1, io.EOF) {
		t.Fatalf("errors %v, %v", err1, err2)
	}
}

func TestSerializationDecoder(t *testing.T) {
	s := New()
	data, err := s.Marshal(nil, benchBody()...)
	if err != nil {
		t.Fatal(err)
	}
	dec := s.NewDecoder(data)
	for i, want := range benchBody() {
		v, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := want.(map[string]any); ok {
			mm := map[any]any{}
			for k, v := range m {
				mm[k] = v
			}
			want = mm
		}
		if d := diff(v, want); d != "" {
			t.Fatalf("value %d: %s", i, d)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestDecodeDoesNotAlias: decoded strings and binaries survive the input
// buffer's reuse.
func TestDecodeDoesNotAlias(t *testing.T) {
	data := marshal(t, "hello", []byte{1, 2, 3}, []string{"x"}, map[string]any{"k": "v"})
	vals, _, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 0
	}
	want := []any{"hello", []byte{1, 2, 3}, []string{"x"}, map[any]any{"k": "v"}}
	if d := diff(vals, want); d != "" {
		t.Fatal(d)
	}
}

func TestDecodeAllocs(t *testing.T) {
	data := libEncode(t, benchBody()...)
	allocs := testing.AllocsPerRun(100, func() {
		d := NewDecoder(data)
		for {
			if _, err := d.Decode(); err != nil {
				break
			}
		}
	})
	// Decoder, string slab, the 1 KiB and the path strings, the map and
	// its storage.
	if allocs > 8 {
		t.Fatalf("%v allocations", allocs)
	}
	t.Logf("%v allocations", allocs)
}
