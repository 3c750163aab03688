package hessian2

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"
)

func TestIdentity(t *testing.T) {
	s := New()
	if s.ID() != 2 || ID != 2 || Name != "hessian2" {
		t.Fatalf("ID %d, Name %q", s.ID(), Name)
	}
}

// TestMarshalEdgesMatchLibrary checks every compact form's boundaries, one
// value at a time and all in one stream.
func TestMarshalEdgesMatchLibrary(t *testing.T) {
	var all []any
	add := func(vs ...any) { all = append(all, vs...) }
	add(nil, true, false)
	for _, v := range intEdges {
		add(v, int8(v), int16(v), uint8(v), uint16(v))
	}
	for _, v := range longEdges {
		add(v, int(v), uint64(v), uint32(v), uint(v))
	}
	for _, v := range doubleEdges {
		add(v)
	}
	for _, v := range float32Edges {
		add(v, -v)
	}
	for _, v := range edgeStrings() {
		add(v)
	}
	for _, v := range edgeBinaries() {
		add(v)
	}
	add(time.Time{}, time.UnixMilli(1700000000123), time.Unix(0, 0).UTC(), time.Time{}.Local(),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Millisecond))
	add([]string(nil), []string{}, []string{"a", "", "中"}, []any(nil), []any{},
		[]any{nil, []any{int32(1)}, []string{"x"}}, map[string]string(nil), map[string]string{},
		map[string]string{"k": "v"}, map[string]any(nil), map[string]any{}, map[string]any{"k": []any{}},
		map[any]any(nil), map[any]any{}, map[any]any{"k": int64(1)})
	for _, v := range all {
		mustEqualBytes(t, fmt.Sprintf("%T %.40v", v, v), marshal(t, v), libEncode(t, v))
	}
	mustEqualBytes(t, "all in one stream", marshal(t, all...), libEncode(t, all...))
}

// TestMarshalReferences checks the library's back references: a slice or map
// written twice is written once and referenced, by index in write order.
func TestMarshalReferences(t *testing.T) {
	s := []string{"a", "b"}
	capped := make([]string, 0, 4)
	l := []any{"x"}
	m := map[string]any{"k": "v"}
	ms := map[string]string{"k": "v"}
	ma := map[any]any{"k": "v"}
	cyc := []any{nil, "y"}
	cyc[0] = cyc
	cm := map[string]any{}
	cm["self"] = cm
	cases := [][]any{
		{s, s},
		{s, s[:1]}, // same array: the library references even a shorter slice
		{capped, capped},
		{[]string{}, []string{}},
		{[]any(nil), []any(nil)},
		{l, []any{l, s, m}, s, l, m},
		{m, ms, ma, m, ms, ma},
		{[]any{s, s}, map[string]any{"a": s}},
		{cyc},
		{cm},
		{map[string]any(nil), map[string]any(nil), map[string]string(nil)},
	}
	for i, vs := range cases {
		mustEqualBytes(t, fmt.Sprint("case ", i), marshal(t, vs...), libEncode(t, vs...))
	}
	// More containers than the inline reference table holds.
	var many []any
	for i := range 40 {
		many = append(many, []any{int32(i)})
	}
	many = append(many, many...)
	mustEqualBytes(t, "many references", marshal(t, many...), libEncode(t, many...))
}

// TestMarshalPropertyMatchesLibrary: for random nested fast values (maps of
// at most one key, whose order cannot differ), Marshal writes the library's
// bytes.
func TestMarshalPropertyMatchesLibrary(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	g := newGen(1, false)
	for i := range n {
		vs := g.values()
		mustEqualBytes(t, fmt.Sprint("iteration ", i), marshal(t, vs...), libEncode(t, vs...))
	}
}

// TestMarshalMultiKeyMaps: with several keys the library's order is random;
// Marshal's (sorted) must decode to the same values and be as long.
func TestMarshalMultiKeyMaps(t *testing.T) {
	g := newGen(2, true)
	for i := range 1000 {
		vs := g.values()
		got, want := marshal(t, vs...), libEncode(t, vs...)
		if len(got) != len(want) {
			t.Fatalf("iteration %d: %d bytes, library %d", i, len(got), len(want))
		}
		gv, gerr := libDecodeAll(got)
		wv, werr := libDecodeAll(want)
		if gerr != nil || werr != nil || !equal(gv, wv) {
			t.Fatalf("iteration %d: errors %v, %v; decoded differ: %s", i, gerr, werr, diff(gv, wv))
		}
		if !bytes.Equal(got, marshal(t, vs...)) {
			t.Fatalf("iteration %d: Marshal is not deterministic", i)
		}
	}
}

func TestMarshalAppends(t *testing.T) {
	dst := []byte("head")
	got, err := New().Marshal(dst, "a", int64(1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("head"), libEncode(t, "a", int64(1))...)) {
		t.Fatalf("got % x", got)
	}
	// Slow path too.
	p := &java_exception.Throwable{DetailMessage: "x"}
	got, err = New().Marshal([]byte("head"), "a", p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("head"), libEncode(t, "a", p)...)) {
		t.Fatalf("got % x", got)
	}
}

type user struct {
	Name string
	Age  int32
	Tags []string
}

func (user) JavaClassName() string { return "org.weft.test.User" }

type color int32

func (c color) JavaClassName() string { return "org.weft.test.Color" }
func (c color) String() string        { return [...]string{"RED", "GREEN"}[c] }
func (color) EnumValue(s string) hessian.JavaEnum {
	if s == "GREEN" {
		return 1
	}
	return 0
}

func init() {
	RegisterPOJO(&user{})
	RegisterPOJO(color(0))
	hessian.RegisterPOJO(&user{})
	hessian.RegisterJavaEnum(color(0))
}

// TestMarshalFallsBack: any non-fast value, at any depth, makes the library
// encode the whole call, so class definitions and references are shared as
// the library shares them.
func TestMarshalFallsBack(t *testing.T) {
	u := &user{Name: "n", Age: 3, Tags: []string{"t"}}
	s := []string{"shared"}
	cases := [][]any{
		{"a", u, u, &user{Name: "m"}},
		{s, u, s},
		{[]any{"x", u}, u},
		{map[string]any{"u": u}},
		{map[string]any{"_class": "org.weft.test.User", "name": "n", "age": int32(1), "tags": nil}},
		{map[int32]string{1: "a"}},
		{[]int32{1, 2}, []int64{3}, []float64{1.5}, []bool{true}},
		{color(1), color(0)},
		{java_exception.NewThrowable("boom")},
	}
	for i, vs := range cases {
		mustEqualBytes(t, fmt.Sprint("case ", i), marshal(t, vs...), libEncode(t, vs...))
	}
}

type named string

func TestMarshalErrors(t *testing.T) {
	// The library writes nothing for a named string type, which would shift
	// the rest of the body; Marshal reports it.
	dst := []byte("x")
	out, err := New().Marshal(dst, "a", named("b"))
	if err == nil || !strings.Contains(err.Error(), "named") {
		t.Fatalf("err %v", err)
	}
	if string(out) != "x" {
		t.Fatalf("dst changed: %q", out)
	}
	if _, err := New().Marshal(nil, make(chan int)); err == nil {
		t.Fatal("chan encoded")
	}
	// The library panics on a pointer to a slice; Marshal reports it.
	s := []string{"a"}
	if _, err := New().Marshal(nil, &s); err == nil || !strings.Contains(err.Error(), "pointer to []string") {
		t.Fatalf("err %v", err)
	}
}

func TestMarshalZeroAllocs(t *testing.T) {
	body := benchBody()
	buf := make([]byte, 0, 4096)
	s := New()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Marshal(buf[:0], body...); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
