package hessian2

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"

	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

// The validator's tests run the library itself (dubbo-go-hessian2 v1.12.5):
// what check accepts, the library decodes without failing or panicking,
// into as many values as check counted, allocating no more than check
// charged.

// vColor is an enum registered with the library.
type vColor int32

func (vColor) JavaClassName() string { return "org.weft.validate.Color" }
func (c vColor) String() string      { return [...]string{"RED", "GREEN"}[c&1] }
func (vColor) EnumValue(s string) hessian.JavaEnum {
	if s == "GREEN" {
		return 1
	}
	return 0
}

// vRich is a registered POJO with a field of each kind the library sets by
// reflection.
type vRich struct {
	Name    string
	Age     int32
	Big     int64
	Score   float64
	OK      bool
	When    time.Time
	PName   *string
	PAge    *int32
	PInt    *int
	Tags    []string
	Nums    []int32
	Longs   []int
	Blob    []byte
	Any     any
	Obj     hessian.Object
	List    []any
	Users   []*h2test.User
	UserV   []h2test.User
	User    *h2test.User
	UserS   h2test.User
	Attrs   map[string]string
	Props   map[string]any
	Gen     map[any]any
	Color   vColor
	PColor  *vColor
	Err     java_exception.Throwabler
	U8      uint8
	F32     float32
	private int
}

func (vRich) JavaClassName() string { return "org.weft.validate.Rich" }

// vArrays has array fields, which the library's Encoder cannot write (it
// panics) but its Decoder fills from lists.
type vArrays struct {
	Arr [2]int32
	B   [4]byte
}

func (vArrays) JavaClassName() string { return "org.weft.validate.Arrays" }

func init() {
	hessian.RegisterPOJO(&h2test.User{})
	hessian.RegisterPOJO(&vRich{})
	hessian.RegisterPOJO(&vArrays{})
	hessian.RegisterJavaEnum(vColor(0))
}

// libDecodeAll decodes data with one library Decoder until io.EOF, and
// reports a panic apart from an error.
func libDecodeAll(data []byte) (vals []any, err error, panicked any) {
	d := hessian.NewDecoder(data)
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	for {
		v, err := d.Decode()
		if err == io.EOF {
			return vals, nil, nil
		}
		if err != nil {
			return vals, err, nil
		}
		vals = append(vals, v)
	}
}

// libEncodeAll encodes values with one library Encoder, in sequence.
func libEncodeAll(t testing.TB, values ...any) []byte {
	t.Helper()
	e := hessian.NewEncoder()
	for i, v := range values {
		if err := e.Encode(v); err != nil {
			t.Fatalf("library cannot encode value %d (%T): %v", i, v, err)
		}
	}
	return append([]byte(nil), e.Buffer()...)
}

// charged is what check charges data, and its ends.
func charged(data []byte) (int64, []int, error) {
	const big = 1 << 50
	c := &validator{data: data, left: big, budget: big}
	ends, err := c.run()
	return big - c.left, ends, err
}

// goldenBodies are the inline bodies of testdata/golden.txt (the library's
// own bytes) and the hand-made bodies of the golden decode cases.
func goldenBodies(t testing.TB) map[string][]byte {
	g, err := h2test.ReadGolden(filepath.Join("testdata", h2test.GoldenFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for name, kinds := range g {
		p, ok := kinds["bytes"]
		if !ok || strings.HasPrefix(p, "sha256:") {
			continue
		}
		b, err := hex.DecodeString(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	for _, c := range h2test.DecodeCases(h2test.Side{Color: func(i int) any { return vColor(i) }, Throwable: func(msg string) any { return java_exception.NewThrowable(msg) }}) {
		if c.Data != nil {
			out[c.Name] = c.Data
		}
	}
	return out
}

// libBodies are streams the library's Encoder writes: every construct it
// has, POJOs and enums registered with it, references shared across
// values.
func libBodies(t testing.TB) map[string][]byte {
	s := "shared"
	age := int32(7)
	green := vColor(1)
	u := &h2test.User{Name: "n", Age: 3, Tags: []string{"t"}}
	list := []any{"x", int32(1)}
	m := map[string]any{"k": "v", "n": int64(1)}
	rich := &vRich{
		Name: "rich", Age: -5, Big: 1 << 40, Score: 2.5, OK: true, When: time.UnixMilli(1700000000123),
		PName: &s, PAge: &age, Tags: []string{"a", "b"}, Nums: []int32{1, 2, 300}, Longs: []int{4, 5},
		Blob: []byte{1, 2, 3}, Any: "any", Obj: int32(9), List: []any{int32(1), "two", nil},
		Users: []*h2test.User{u, u}, UserV: []h2test.User{*u}, User: u, UserS: *u,
		Attrs: map[string]string{"a": "b"}, Props: map[string]any{"p": int32(1)}, Gen: map[any]any{"g": true},
		Color: 1, PColor: &green, Err: java_exception.NewThrowable("boom"), U8: 200, F32: 1.5,
	}
	nested := []any{[]any{[]any{"deep", map[string]any{"in": []string{"z"}}}}, map[any]any{int32(1): []int64{1, 2}}}
	cases := map[string][]any{
		"scalars":       {nil, true, false, int32(-1), int32(1 << 20), int64(-1 << 40), 3.25, 0.0, 1.0, "", "héllo", strings.Repeat("x", 70000), []byte("bin"), make([]byte, 70000), time.UnixMilli(-1)},
		"lists":         {[]string{"a", ""}, []int32{1, -1 << 20}, []int64{1, 1 << 40}, []float64{0.5, 7}, []bool{true, false}, []any{}, list, list},
		"maps":          {map[string]string{"a": "b"}, m, m, map[any]any{int32(1): "one", "two": int64(2)}, map[string]any{}},
		"pojos":         {u, u, "between", u, []*h2test.User{u}, rich},
		"enum":          {vColor(0), vColor(1), green},
		"nested":        {nested, nested},
		"time":          {time.Unix(0, 0), time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)},
		"exception":     {java_exception.NewThrowable("msg"), java_exception.NewException("exc")},
		"many objects":  manyUsers(200),
		"strings table": {"a", "b", "a", "b"},
	}
	out := map[string][]byte{}
	for name, vals := range cases {
		out["lib/"+name] = libEncodeAll(t, vals...)
	}
	return out
}

func manyRich(n int) []any {
	out := make([]any, n)
	for i := range out {
		s, a, k := strconv.Itoa(i), int32(i), i
		c := vColor(i & 1)
		u := &h2test.User{Name: s, Age: a, Tags: []string{s}}
		out[i] = &vRich{Name: s, Age: a, Big: int64(i) << 33, Score: float64(i) / 3, When: time.UnixMilli(int64(i)), PName: &s, PAge: &a,
			Tags: []string{s, "t"}, Nums: []int32{a}, Longs: []int{k}, Blob: []byte(s), Any: s, Obj: a, List: []any{a, s},
			Users: []*h2test.User{u}, UserV: []h2test.User{*u}, User: u, UserS: *u, Attrs: map[string]string{s: s},
			Props: map[string]any{s: a}, Gen: map[any]any{s: true}, Color: c, PColor: &c, U8: uint8(i), F32: 0.5}
	}
	return out
}

func manyExceptions(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = java_exception.NewRuntimeException("boom " + strconv.Itoa(i))
	}
	return out
}

func manyUsers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = &h2test.User{Name: strconv.Itoa(i), Age: int32(i), Tags: []string{"t", strconv.Itoa(i)}}
	}
	return out
}

// Golden and library-written bodies pass check, which counts the values
// the library decodes; bodies the library fails or panics on fail check.
func TestCheckAcceptsWhatTheLibraryDecodes(t *testing.T) {
	bodies := goldenBodies(t)
	for name, b := range libBodies(t) {
		bodies[name] = b
	}
	// What weft's own encoder writes.
	for _, c := range h2test.MarshalCases(side) {
		bodies["weft/"+c.Name] = marshal(t, c.Values...)
	}
	passed := 0
	for name, data := range bodies {
		vals, libErr, panicked := libDecodeAll(data)
		// The library allocates up to ~10× these bodies (long strings
		// 5×, its 3× buffer and copy; objects and maps more): a budget
		// that fits it.
		ends, err := check(data, BudgetFactorFor(len(data), 16))
		if panicked != nil || libErr != nil {
			if err == nil {
				t.Errorf("%s: check passes what the library fails on (%v, panic %v)", name, libErr, panicked)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(ends) != len(vals) {
			t.Errorf("%s: check counts %d values, the library decodes %d", name, len(ends), len(vals))
		}
		if len(ends) > 0 && ends[len(ends)-1] != len(data) && data[ends[len(ends)-1]] != tagEnd {
			t.Errorf("%s: the last value ends at %d of %d", name, ends[len(ends)-1], len(data))
		}
		passed++
	}
	t.Logf("%d bodies checked, %d decoded by the library", len(bodies), passed)
	if passed < 500 {
		t.Errorf("only %d bodies the library decodes", passed)
	}
}

// vExceptionBody is an object of an unregistered class with Throwable's
// four fields, which the library registers by itself.
func vExceptionBody(name string) []byte {
	b := []byte{tagClassDef}
	b = AppendString(b, name)
	b = append(b, 0x94)
	for _, f := range []string{"detailMessage", "suppressedExceptions", "stackTrace", "cause"} {
		b = AppendString(b, f)
	}
	return append(b, 0x60, 'N', 'N', 'N', 'N')
}

// vHostile are bodies check refuses, with what its error says.
func vHostile() []struct {
	name, want string
	data       []byte
} {
	deep := append(bytes.Repeat([]byte{tagUListVar}, 200_000), bytes.Repeat([]byte{tagEnd}, 200_000)...)
	nulls := append([]byte{tagUListFixed, tagInt}, binary.BigEndian.AppendUint32(nil, 8<<20)...)
	nulls = append(nulls, bytes.Repeat([]byte{tagNull}, 8<<20)...)
	return []struct {
		name, want string
		data       []byte
	}{
		{"list of 10 M elements in 6 bytes", "list of 10000000 elements, only 0 bytes remain", []byte{tagUListFixed, tagInt, 0x00, 0x98, 0x96, 0x80}},
		{"typed list of 10 M elements", "list of 10000000 elements", append(append([]byte{tagListFixed}, AppendString(nil, "[int")...), tagInt, 0x00, 0x98, 0x96, 0x80)},
		{"negative list length", "negative length", []byte{tagUListFixed, tagInt, 0xff, 0xff, 0xff, 0xff}},
		{"negative typed list length", "negative length", append(append([]byte{tagListFixed}, AppendString(nil, "[string")...), 0x8f)},
		{"200,000-deep nesting", "nesting deeper than 1000", deep},
		{"reference to nothing", "reference 5 to one of 1", []byte{0x79, tagRef, 0x95}},
		{"negative reference", "reference -1", []byte{0x79, tagRef, 0x8f}},
		{"object of an undefined class", "undefined class 0", []byte{0x60}},
		{"class of a negative field count", "negative length", append(append([]byte{tagClassDef}, AppendString(nil, "a.B")...), 0x8f)},
		{"class of 1 M fields", "class definition of 1048576 elements", append(append([]byte{tagClassDef}, AppendString(nil, "a.B")...), tagInt, 0, 0x10, 0, 0)},
		{"string of more characters than bytes", "string chunk of 5 characters, only 1 bytes remain", []byte{0x05, 'a'}},
		{"string chunk ending in a surrogate", "surrogate pair", []byte{0x01, 0xed, 0xa0, 0x80, 'a', 'b', 'c'}},
		{"list typed by a map's type", "list typed by a map's type", append(append([]byte{tagMap}, AppendString(nil, "java.util.HashMap")...), tagEnd, 0x71, 0x90, 'N')},
		{"negative map type reference", "map type reference -1", []byte{tagMap, 0x8f, tagEnd}},
		{"list type of 40 dimensions", "list type of 40 dimensions", append([]byte{0x70}, AppendString(nil, strings.Repeat("[", 40)+"int")...)},
		{"unhashable map key", "unhashable", []byte{tagUMap, 0x78, 'N', tagEnd}},
		{"truncated map", "data ends inside", []byte{tagUMap, 0x91}},
		{"end marker in a fixed list", "unexpected end marker", []byte{0x79, tagEnd}},
		{"8 MiB of nulls in a fixed list", "memory budget", nulls},
	}
}

func TestCheckRefusesHostileBodies(t *testing.T) {
	for _, c := range vHostile() {
		_, err := check(c.data, BudgetFor(len(c.data)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
			continue
		}
		if len(err.Error()) > 400 {
			t.Errorf("%s: error of %d bytes", c.name, len(err.Error()))
		}
	}
}

// An object whose field is set by reflection to a value of the wrong type
// makes the library panic: check refuses it.
func TestCheckRefusesWhatPanicsInReflection(t *testing.T) {
	user := func(fields []string, values ...byte) []byte {
		b := []byte{tagClassDef}
		b = AppendString(b, "org.weft.test.User")
		b = append(b, byte(0x90+len(fields)))
		for _, f := range fields {
			b = AppendString(b, f)
		}
		return append(append(b, 0x60), values...)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"int for a string field", user([]string{"name"}, 0x91)},
		{"string for an int32 field", user([]string{"age"}, 0x01, 'x')},
		{"map for a slice field", user([]string{"tags"}, 'H', 'Z')},
		{"ints for a []string field", user([]string{"tags"}, 0x79, 0x91)},
		{"variable [int list of a string", append(append([]byte{tagListVar}, AppendString(nil, "[int")...), 0x01, 'x', 'Z')},
		{"variable [long list of an int", append(append([]byte{tagListVar}, AppendString(nil, "[long")...), 0x91, 'Z')},
		{"fixed [double list of an int", append(append([]byte{0x71}, AppendString(nil, "[double")...), 0x91)},
		{"typed map, null key", append(append([]byte{tagMap}, AppendString(nil, "java.util.TreeMap")...), 'N', 0x91, 'Z')},
	} {
		_, libErr, panicked := libDecodeAll(c.data)
		if panicked == nil && libErr == nil {
			t.Errorf("%s: the library decodes it (the test is wrong)", c.name)
		}
		if _, err := check(c.data, BudgetFor(len(c.data))); err == nil {
			t.Errorf("%s: check passes it (library: %v, panic %v)", c.name, libErr, panicked)
		}
	}
}

// The library registers each unregistered exception-shaped class for
// good: check lets it do so for maxLibExceptions names, process-wide, and
// refuses the next until they are registered.
func TestCheckBoundsExceptionRegistrations(t *testing.T) {
	// The bound is process-wide: the test leaves it as it found it.
	libExceptions.Lock()
	names, counted := maps.Clone(libExceptions.names), libExceptions.counted
	libExceptions.Unlock()
	t.Cleanup(func() {
		libExceptions.Lock()
		libExceptions.names, libExceptions.counted = names, counted
		libExceptions.Unlock()
	})
	refused := 0
	for i := range 2000 {
		data := vExceptionBody(fmt.Sprintf("org.hostile.E%d", i))
		_, err := check(data, BudgetFor(len(data)))
		if err != nil {
			if !strings.Contains(err.Error(), "hessian.RegisterPOJO") {
				t.Fatalf("name %d: %v", i, err)
			}
			refused++
		}
	}
	if refused < 2000-maxLibExceptions {
		t.Errorf("refused %d of 2,000 names; at most %d may pass", refused, maxLibExceptions)
	}
	libExceptions.Lock()
	now := libExceptions.counted
	libExceptions.Unlock()
	if now > maxLibExceptions {
		t.Errorf("%d names counted, over %d", now, maxLibExceptions)
	}
	// A name weft registers itself passes whatever the count.
	allowException("org.weft.Known")
	data := vExceptionBody("org.weft.Known")
	if _, err := check(data, BudgetFor(len(data))); err != nil {
		t.Errorf("allowed name: %v", err)
	}
	// A registered class passes too.
	data = vExceptionBody("java.lang.RuntimeException")
	if _, err := check(data, BudgetFor(len(data))); err != nil {
		t.Errorf("registered exception: %v", err)
	}
}

// The library caches every field name it looks up in a registered type,
// for good: check bounds the names the types lack, process-wide.
func TestCheckBoundsFieldNames(t *testing.T) {
	libFieldNames.Lock()
	seen, n := maps.Clone(libFieldNames.seen), libFieldNames.bytes
	libFieldNames.Unlock()
	t.Cleanup(func() {
		libFieldNames.Lock()
		libFieldNames.seen, libFieldNames.bytes = seen, n
		libFieldNames.Unlock()
	})
	var err error
	for i := 0; i < 2*maxLibFieldNames && err == nil; i += 100 {
		b := append([]byte{tagClassDef}, AppendString(nil, "org.weft.test.User")...)
		b = append(b, 0xc8, 100) // 100 fields
		for j := range 100 {
			b = AppendString(b, fmt.Sprintf("unknown%d", i+j))
		}
		b = append(b, 0x60)
		b = append(b, bytes.Repeat([]byte{tagNull}, 100)...)
		_, err = check(b, BudgetFor(len(b)))
	}
	if err == nil || !strings.Contains(err.Error(), "add the field") {
		t.Fatalf("err %v, want the field names' bound", err)
	}
	libFieldNames.Lock()
	defer libFieldNames.Unlock()
	if len(libFieldNames.seen) > maxLibFieldNames {
		t.Errorf("%d names, over %d", len(libFieldNames.seen), maxLibFieldNames)
	}
}

// vWeighed are bodies whose decoding by the library is weighed.
func vWeighed(t testing.TB) []struct {
	name string
	data []byte
} {
	fixed := func(n int, elem []byte) []byte {
		b := append([]byte{tagUListFixed, tagInt}, binary.BigEndian.AppendUint32(nil, uint32(n))...)
		return append(b, bytes.Repeat(elem, n)...)
	}
	typedFixed := func(typ string, n int, elem []byte) []byte {
		b := append([]byte{tagListFixed}, AppendString(nil, typ)...)
		b = append(append(b, tagInt), binary.BigEndian.AppendUint32(nil, uint32(n))...)
		return append(b, bytes.Repeat(elem, n)...)
	}
	var obj []byte
	obj = append(obj, tagUListFixed, tagInt, 0, 0, 0x0f, 0xa0, tagClassDef)
	obj = AppendString(obj, "com.Example")
	obj = append(obj, 0xa4)
	for i := range 20 {
		obj = AppendString(obj, "f"+string(rune('a'+i)))
	}
	for range 4000 {
		obj = append(append(obj, 0x60), bytes.Repeat([]byte{0x91}, 20)...)
	}
	long := AppendString(nil, strings.Repeat("y", 200_000))
	var chunked []byte
	for range 20 {
		chunked = append(chunked, tagStringChunk, 0x04, 0x00)
		chunked = append(chunked, bytes.Repeat([]byte("z"), 1024)...)
	}
	chunked = append(chunked, 0x01, 'z')
	utf := AppendString(nil, strings.Repeat("é€", 20_000))
	bin := libEncodeAll(t, make([]byte, 300_000))
	var edges []byte
	for _, c := range h2test.MarshalCases(side) {
		if c.Name == "marshal/edges" {
			edges = marshal(t, c.Values...)
		}
	}
	return []struct {
		name string
		data []byte
	}{
		{"list of 500,000 nulls", fixed(500_000, []byte{tagNull})},
		{"list of 300,000 small ints", fixed(300_000, []byte{0x91})},
		{"list of 200,000 ints", fixed(200_000, []byte{tagInt, 0, 1, 0, 0})},
		{"list of 200,000 longs", fixed(200_000, []byte{0x3c, 1, 0})},
		{"list of 200,000 doubles", fixed(200_000, []byte{tagDoubleByte, 7})},
		{"list of 300,000 1-char strings", fixed(300_000, []byte{0x01, 'a'})},
		{"list of 100,000 dates", fixed(100_000, []byte{tagDateMinute, 0, 0, 1, 0})},
		{"list of 100,000 empty binaries", fixed(100_000, []byte{0x20})},
		{"variable list of 300,000 nulls", varList(300_000, "N")},
		{"map of 200,000 int keys", intKeyMap(200_000)},
		{"map of 897 int keys", intKeyMap(897)},
		{"list of 300,000 empty maps", varList(300_000, "HZ")},
		{"list of 100,000 nine-entry maps", varList(100_000, "H\x90N\x91N\x92N\x93N\x94N\x95N\x96N\x97N\x98NZ")},
		{"list of 200,000 empty lists", fixed(200_000, []byte{0x78})},
		{"4,000 objects of an unregistered 20-field class", obj},
		{"string of 200,000 chars", long},
		{"chunked string of 20 KiB", chunked},
		{"string of 40,000 multi-byte chars", utf},
		{"binary of 300,000 bytes", bin},
		{"weft's edge values", edges},
		{"[int list of 300,000", typedFixed("[int", 300_000, []byte{0x91})},
		{"[string list of 200,000", typedFixed("[string", 200_000, []byte{0x01, 'a'})},
		{"[long list of 200,000", typedFixed("[long", 200_000, []byte{0xe1})},
		{"[object list of 200,000", typedFixed("[object", 200_000, []byte{0x91})},
		{"unknown typed list of 200,000", typedFixed("com.foo.Bar", 200_000, []byte{tagNull})},
		{"[[int list of 50,000", typedFixed("[[int", 50_000, append(AppendString([]byte{0x71}, "[int"), 0x91))},
		{"2,000 users", libEncodeAll(t, manyUsers(2000)...)},
		{"list of 2,000 users", libEncodeAll(t, manyUsers(2000))},
		{"500 rich objects", libEncodeAll(t, manyRich(500)...)},
		{"1,000 exceptions", libEncodeAll(t, manyExceptions(1000)...)},
	}
}

// check charges what the library allocates: its heap growth while
// decoding (TotalAlloc, garbage included) and what the decoded values hold
// after a GC (HeapAlloc) are both within the charge.
func TestCheckChargesWhatTheLibraryAllocates(t *testing.T) {
	skipUnderRace(t)
	for _, c := range vWeighed(t) {
		cost, ends, err := charged(c.data)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		vals, libErr, panicked := libDecodeAll(c.data)
		runtime.ReadMemStats(&after)
		if libErr != nil || panicked != nil {
			t.Errorf("%s: library: %v, panic %v", c.name, libErr, panicked)
			continue
		}
		total := int64(after.TotalAlloc - before.TotalAlloc)
		runtime.GC()
		runtime.ReadMemStats(&after)
		live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(vals)
		if len(vals) != len(ends) {
			t.Errorf("%s: %d values, check counted %d", c.name, len(vals), len(ends))
		}
		n := float64(len(c.data))
		t.Logf("%-48s %8d bytes: charged %6.2f×, allocated %6.2f× (%6.2f× held after GC), charge/alloc %.2f",
			c.name, len(c.data), float64(cost)/n, float64(total)/n, float64(live)/n, float64(cost)/float64(total))
		// 32 KiB for the runtime's own allocations meanwhile and for
		// TotalAlloc's granularity (a span refill counts the span's free
		// slots as allocated until the span is flushed).
		if total > cost+32<<10 {
			t.Errorf("%s: the library allocated %d bytes, %.2f× the %d charged", c.name, total, float64(total)/float64(cost), cost)
		}
		if live > cost {
			t.Errorf("%s: the library's values hold %d bytes, more than the %d charged", c.name, live, cost)
		}
		if cost > 3*total {
			t.Errorf("%s: charged %d bytes, over three times the %d allocated", c.name, cost, total)
		}
	}
}

// A body the budget refuses is refused by check before the library sees it:
// 8 MiB of nulls in a fixed list would have the library allocate 128 MiB.
func TestCheckBudget(t *testing.T) {
	n := 8 << 20
	data := append([]byte{tagUListFixed, tagInt}, binary.BigEndian.AppendUint32(nil, uint32(n))...)
	data = append(data, bytes.Repeat([]byte{tagNull}, n)...)
	_, err := check(data, BudgetFor(len(data)))
	if err == nil || !strings.Contains(err.Error(), "memory budget") {
		t.Fatalf("err %v, want the memory budget's", err)
	}
	// A small one fits.
	data = libEncodeAll(t, []any{nil, int32(1), "x"})
	if _, err := check(data, BudgetFor(len(data))); err != nil {
		t.Fatal(err)
	}
}

// The library's patching after each Decode is quadratic: check bounds it.
func TestCheckBoundsNotifyWork(t *testing.T) {
	var b []byte
	b = append(b, tagUListFixed, tagInt, 0, 0x01, 0x86, 0xa0) // 100,000 empty lists
	b = append(b, bytes.Repeat([]byte{0x78}, 100_000)...)
	b = append(b, tagUMap)
	for range 100_000 {
		b = append(b, 0x90, 'N')
	}
	b = append(b, tagEnd)
	_, err := check(b, 1<<40)
	if err == nil || !strings.Contains(err.Error(), "list references") {
		t.Fatalf("err %v, want the patching bound's", err)
	}
}

// vSeeds are the fuzz seeds: hostile, golden and library-written bodies.
func vSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, c := range vHostile() {
		if len(c.data) < 1<<16 {
			seeds = append(seeds, c.data)
		}
	}
	for _, b := range goldenBodies(t) {
		seeds = append(seeds, b)
	}
	for _, b := range libBodies(t) {
		if len(b) < 1<<16 {
			seeds = append(seeds, b)
		}
	}
	for _, b := range vFieldBodies() {
		seeds = append(seeds, b.data)
	}
	for _, b := range vContainerBodies() {
		seeds = append(seeds, b.data)
	}
	return seeds
}

// FuzzCheckThenLibrary: what check accepts, the library decodes without a
// panic or an error, into as many values as check counted, allocating no
// more than the budget check was given.
//
//	go test -run '^$' -fuzz FuzzCheckThenLibrary -fuzztime 120s ./plugins/serialization/hessian2/
func FuzzCheckThenLibrary(f *testing.F) {
	for _, s := range vSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		budget := BudgetFor(len(data))
		ends, err := check(data, budget)
		if err != nil {
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		var before, after runtime.MemStats
		if !raceEnabled {
			runtime.ReadMemStats(&before)
		}
		vals, libErr, panicked := libDecodeAll(data)
		if !raceEnabled {
			runtime.ReadMemStats(&after)
		}
		if panicked != nil {
			t.Fatalf("check passed, the library panics: %v", panicked)
		}
		if libErr != nil && !vValueError(libErr) {
			t.Fatalf("check passed, the library fails: %v", libErr)
		}
		if libErr == nil && len(vals) != len(ends) {
			t.Fatalf("check counted %d values, the library decodes %d", len(ends), len(vals))
		}
		if !raceEnabled {
			if total := int64(after.TotalAlloc - before.TotalAlloc); total > budget {
				t.Fatalf("the library allocated %d bytes, over the budget of %d", total, budget)
			}
		}
	})
}

// vValueError tells the library's errors that depend on values check does
// not build: a BigDecimal's digits.
func vValueError(err error) bool {
	var num *strconv.NumError
	return errors.As(err, &num) || strings.Contains(err.Error(), "decimal") || strings.Contains(err.Error(), "syntax")
}

// The fuzz corpus of the weft decoder is hostile data too: whatever of it
// check accepts, the library decodes.
func TestCheckFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skip(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, ok := vCorpusBytes(raw)
		if !ok {
			continue
		}
		ends, err := check(data, BudgetFor(len(data)))
		if err != nil {
			continue
		}
		vals, libErr, panicked := libDecodeAll(data)
		if panicked != nil || libErr != nil || len(vals) != len(ends) {
			t.Errorf("%s: check passed; the library: %d values (check %d), %v, panic %v", e.Name(), len(vals), len(ends), libErr, panicked)
		}
	}
}

// vCorpusBytes reads a "go test fuzz v1" file of one []byte.
func vCorpusBytes(raw []byte) ([]byte, bool) {
	lines := strings.SplitN(string(raw), "\n", 3)
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")"))
	if err != nil {
		return nil, false
	}
	return []byte(s), true
}

// vValues are values of each kind, some of which refer to the lists,
// maps and objects of prefix, or define class 2 (a body defines class 0,
// User, in prefix and class 1 after it).
func vValues() (map[string][]byte, []byte) {
	str := func(s string) []byte { return AppendString(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	user := cat([]byte{tagClassDef}, str("org.weft.test.User"), []byte{0x93}, str("name"), str("age"), str("tags"), []byte{0x60}, str("u"), []byte{0x93}, []byte{tagNull})
	values := map[string][]byte{
		"null": {tagNull}, "true": {tagTrue}, "int": {0x95}, "big int": {tagInt, 0, 1, 0, 0}, "long": {0xe5},
		"double": {tagDoubleByte, 3}, "double one": {tagDoubleOne}, "string": str("s"), "empty string": str(""),
		"binary": {0x22, 1, 2}, "empty binary": {0x20}, "date": {tagDateMinute, 0, 0, 0, 1},
		"untyped ints": {0x7a, 0x91, 0x92}, "untyped strings": cat([]byte{0x79}, str("a")), "untyped empty": {0x78},
		"untyped mixed": cat([]byte{0x7a, 0x91}, str("a")), "untyped null": {0x79, tagNull},
		"variable untyped": {tagUListVar, 0x91, tagEnd},
		"[string":          cat([]byte{0x71}, str("[string"), str("a")), "[int": cat([]byte{0x71}, str("[int"), []byte{0x91}),
		"[long": cat([]byte{0x71}, str("[long"), []byte{0xe1}), "[object": cat([]byte{0x71}, str("[object"), []byte{0x91}),
		"[double": cat([]byte{0x71}, str("[double"), []byte{tagDoubleOne}), "[empty int": cat([]byte{0x70}, str("[int")),
		"users list": cat([]byte{0x79}, user), "[user": cat([]byte{0x71}, str("[org.weft.test.User"), user),
		"[user null": cat([]byte{0x71}, str("[org.weft.test.User"), []byte{tagNull}),
		"map str":    cat([]byte{tagUMap}, str("k"), str("v"), []byte{tagEnd}), "map int": {tagUMap, 0x91, 0x92, tagEnd},
		"map null value": cat([]byte{tagUMap}, str("k"), []byte{tagNull, tagEnd}), "map null key": {tagUMap, tagNull, 0x91, tagEnd},
		"map empty": {tagUMap, tagEnd}, "decimal digits": str("12.5"), "typed map": cat([]byte{tagMap}, str("java.util.TreeMap"), str("k"), str("v"), []byte{tagEnd}),
		"user": user, "unregistered object": cat([]byte{tagClassDef}, str("x.Y"), []byte{0x91}, str("f"), []byte{0x62, 0x91}),
		"enum":      cat([]byte{tagClassDef}, str("org.weft.validate.Color"), []byte{0x91}, str("name"), []byte{0x62}, str("GREEN")),
		"exception": cat([]byte{tagClassDef}, str("java.lang.RuntimeException"), []byte{0x91}, str("detailMessage"), []byte{0x62}, str("m")),
		"decimal":   cat([]byte{tagClassDef}, str("java.math.BigDecimal"), []byte{0x91}, str("value"), []byte{0x62}, str("1.5")),
		"integer":   cat([]byte{tagClassDef}, str("java.math.BigInteger"), []byte{0x92}, str("signum"), str("mag"), []byte{0x62, 0x91, 0x71}, str("[int"), []byte{0x91}),
		"sql date":  cat([]byte{tagClassDef}, str("java.sql.Date"), []byte{0x90, 0x62, tagDateMinute, 0, 0, 0, 1}),
		"ref list":  {tagRef, 0x90}, "ref map": {tagRef, 0x91}, "ref object": {tagRef, 0x92}, "ref empty list": {tagRef, 0x93},
	}
	// The references' targets, before the object: a list of a string, a
	// map, a user, an empty list.
	prefix := cat([]byte{0x79}, str("p"), []byte{tagUMap}, str("k"), str("v"), []byte{tagEnd}, user, []byte{0x78})
	return values, prefix
}

type vNamedBody struct {
	name string
	data []byte
}

// vFieldBodies are objects of registered classes, each with one field of
// one kind of value, after the lists, maps and objects references name.
func vFieldBodies() []vNamedBody {
	values, prefix := vValues()
	str := func(s string) []byte { return AppendString(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	classes := map[string][]string{
		"org.weft.validate.Rich": {"name", "age", "big", "score", "oK", "when", "pName", "pAge", "pInt", "tags", "nums", "longs", "blob",
			"any", "obj", "list", "users", "userV", "user", "userS", "attrs", "props", "gen", "color", "pColor", "err", "u8", "f32", "private", "nope"},
		"org.weft.validate.Arrays":    {"arr", "b"},
		"java.lang.Exception":         {"detailMessage", "suppressedExceptions", "stackTrace", "cause", "serialVersionUID"},
		"java.time.LocalDateTime":     {"date", "time"},
		"java.math.BigInteger":        {"signum", "mag"},
		"java.math.BigDecimal":        {"value"},
		"java.lang.StackTraceElement": {"declaringClass", "lineNumber"},
		"java.sql.Date":               {"x"},
	}
	var out []vNamedBody
	for cls, fields := range classes {
		for _, f := range fields {
			for vname, v := range values {
				out = append(out, vNamedBody{cls + "." + f + ", " + vname, cat(prefix, []byte{tagClassDef}, str(cls), []byte{0x91}, str(f), []byte{0x61}, v)})
			}
		}
	}
	return out
}

// Each field of a registered POJO, given a value of each kind: check passes
// exactly what the library sets without failing or panicking (where it
// refuses more, the test logs it; where it passes what fails, the test
// fails).
func TestCheckAgreesOnFields(t *testing.T) {
	strict, agreed := 0, 0
	for _, b := range vFieldBodies() {
		vals, libErr, panicked := libDecodeAll(b.data)
		ends, err := check(b.data, BudgetFor(len(b.data)))
		libOK := libErr == nil && panicked == nil
		switch {
		case err == nil && !libOK:
			t.Errorf("%s: check passes; the library: %v, panic %v", b.name, libErr, panicked)
		case err == nil && len(ends) != len(vals):
			t.Errorf("%s: check counts %d values, the library %d", b.name, len(ends), len(vals))
		case err != nil && libOK:
			strict++
			t.Logf("%s: check refuses what the library decodes: %v", b.name, err)
		default:
			agreed++
		}
	}
	t.Logf("%d agreed, %d refused by check only", agreed, strict)
	if agreed < 1500 {
		t.Errorf("only %d bodies", agreed)
	}
}

// vContainerBodies put each kind of value in each kind of list and map.
func vContainerBodies() []vNamedBody {
	values, prefix := vValues()
	str := func(s string) []byte { return AppendString(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	prefix = cat(prefix, []byte{tagClassDef}, str("x.Pad"), []byte{0x90, tagNull})
	var out []vNamedBody
	add := func(name string, b []byte) { out = append(out, vNamedBody{name, cat(prefix, b)}) }
	for vname, v := range values {
		for _, typ := range []string{"[string", "[int", "[long", "[double", "[boolean", "[date", "[object", "[org.weft.test.User",
			"[[int", "[[string", "com.foo.Bar", "[java.lang.StackTraceElement", "int", "string", "org.weft.validate.Color", "0", "1", "-1", "3"} {
			add("fixed "+typ+" of "+vname, cat([]byte{0x71}, str(typ), v))
			add("variable "+typ+" of "+vname, cat([]byte{tagListVar}, str(typ), v, []byte{tagEnd}))
		}
		add("untyped of "+vname, cat([]byte{0x79}, v))
		add("variable untyped of "+vname, cat([]byte{tagUListVar}, v, []byte{tagEnd}))
		add("map key "+vname, cat([]byte{tagUMap}, v, []byte{0x91, tagEnd}))
		add("map value "+vname, cat([]byte{tagUMap}, []byte{0x91}, v, []byte{tagEnd}))
		for _, typ := range []string{"java.util.TreeMap", "org.weft.test.User", "org.weft.validate.Color", "x.Pad"} {
			add("typed map "+typ+" key "+vname, cat([]byte{tagMap}, str(typ), v, []byte{0x91, tagEnd}))
			add("typed map "+typ+" value "+vname, cat([]byte{tagMap}, str(typ), str("name"), v, []byte{tagEnd}))
		}
		add("map by type reference key "+vname, cat([]byte{tagMap, 0x90}, v, []byte{0x91, tagEnd}))
		add("top level "+vname, v)
	}
	return out
}

// Each kind of value in each kind of list and map: check passes exactly
// what the library decodes without failing or panicking.
func TestCheckAgreesOnContainers(t *testing.T) {
	strict, agreed := 0, 0
	for _, b := range vContainerBodies() {
		vals, libErr, panicked := libDecodeAll(b.data)
		ends, err := check(b.data, BudgetFor(len(b.data)))
		libOK := libErr == nil && panicked == nil
		switch {
		case err == nil && !libOK:
			t.Errorf("%s: check passes; the library: %v, panic %v", b.name, libErr, panicked)
		case err == nil && len(ends) != len(vals):
			t.Errorf("%s: check counts %d values, the library %d", b.name, len(ends), len(vals))
		case err != nil && libOK:
			strict++
			t.Logf("%s: check refuses what the library decodes: %v", b.name, err)
		default:
			agreed++
		}
	}
	t.Logf("%d agreed, %d refused by check only", agreed, strict)
}
