// Package h2test holds what the hessian2 package's tests and those of its
// oracle module (which compare it with dubbo-go-hessian2) share: edge values,
// the random value generator, a shape-wise comparison and dump of decoded
// values, and the golden files that carry the library's bytes to the core's
// tests (see golden.go). It is internal so that only those two use it, and
// imports nothing but the standard library, so the core does not require the
// library through it.
package h2test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"
)

// Equal is reflect.DeepEqual, except that NaNs are equal to each other.
func Equal(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) && strings.Contains(fmt.Sprint(a), "NaN")
}

// Edge values of every compact form.
var (
	IntEdges = []int32{0, 1, -1, -0x11, -0x10, 0x2f, 0x30, -0x801, -0x800, 0x7ff, 0x800,
		-0x40001, -0x40000, 0x3ffff, 0x40000, math.MinInt32, math.MaxInt32, 0x90, -0x90, 255, 256}
	LongEdges = []int64{0, 1, -1, -9, -8, 15, 16, -0x801, -0x800, 0x7ff, 0x800, -0x40001,
		-0x40000, 0x3ffff, 0x40000, math.MinInt32 - 1, math.MinInt32, math.MaxInt32,
		math.MaxInt32 + 1, math.MinInt64, math.MaxInt64, 1 << 40, -1 << 40}
	DoubleEdges = []float64{0, math.Copysign(0, -1), 1, -1, 2, 127, 128, -128, -129, 32767,
		32768, -32768, -32769, 0.5, -0.5, 0.001, 0.1, 1.5, 1e9, 1e18, 1e19, -1e19,
		-9.223372036854775808e18, 9.223372036854775807e18, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), 65535.5, 2147483647, 2147483648}
	Float32Edges = []float32{0, 1, -1, 127, 128, -129, 32767, 32768, 0.5, 0.001, 0.1, 1.5,
		1e6, 3.4e38, -2.5e-3, float32(math.Inf(1)), 12345.678}
)

// EdgeStrings covers every string form and the chunking boundaries, with
// multi-byte and supplementary characters (two UTF-16 units) on them, and
// invalid UTF-8.
func EdgeStrings() []string {
	a := func(n int) string { return strings.Repeat("a", n) }
	ss := []string{"", "a", "\x00", a(31), a(32), a(1023), a(1024), a(4095), a(4096),
		a(4097), a(8192), a(8193), a(65535), a(65536), a(70000),
		"é", "中文", "😀", "a😀b", strings.Repeat("é", 4096), strings.Repeat("中", 5000),
		strings.Repeat("😀", 2048), strings.Repeat("😀", 2049), strings.Repeat("😀", 40000),
		a(4095) + "😀", a(4094) + "😀" + "x", a(4095) + "😀" + a(5000), a(4096) + "😀",
		"\xff", "a\xffb", "\xed\xa0\x80", "\xef\xbf\xbd", "\xc3", "\xe4\xb8", "x\xf0\x9f\x98",
		"\U0010ffff", "\U00010000", "\u07ff\u0800\uffff", strings.Repeat("\xff", 5000),
	}
	for _, n := range []int{30, 31, 32, 1022, 1023, 1024} {
		ss = append(ss, a(n-1)+"😀", strings.Repeat("é", n), strings.Repeat("中", n))
	}
	return ss
}

func EdgeBinaries() [][]byte {
	var bs [][]byte
	for _, n := range []int{0, 1, 15, 16, 1023, 1024, 4095, 4096, 4097, 8192, 8193, 70000} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		bs = append(bs, b)
	}
	return append(bs, nil)
}

// Gen makes random fast-path values; maps have at most one key unless
// multiKey, so that the library's random key order cannot differ.
type Gen struct {
	r        *rand.Rand
	multiKey bool
	strs     []string
}

func NewGen(seed uint64, multiKey bool) *Gen {
	return &Gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), multiKey: multiKey, strs: EdgeStrings()}
}

func (g *Gen) Str() string {
	switch g.r.IntN(12) {
	case 0:
		return g.strs[g.r.IntN(len(g.strs))]
	case 1, 2:
		var b strings.Builder
		runes := []rune("aZ0 é中😀\u0800\uffff\U0010ffff\u00ff\ufffd")
		for range g.r.IntN(40) {
			b.WriteRune(runes[g.r.IntN(len(runes))])
		}
		return b.String()
	default:
		return fmt.Sprint("s", g.r.IntN(1000))
	}
}

func (g *Gen) Scalar() any {
	switch g.r.IntN(14) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return IntEdges[g.r.IntN(len(IntEdges))]
	case 3:
		return int32(g.r.Uint32())
	case 4:
		return LongEdges[g.r.IntN(len(LongEdges))]
	case 5:
		return int64(g.r.Uint64() >> g.r.IntN(64))
	case 6:
		return int(g.r.Int64N(1<<20) - 1<<19)
	case 7:
		return DoubleEdges[g.r.IntN(len(DoubleEdges))]
	case 8:
		return float64(g.r.IntN(70000)-35000) / float64([]int{1, 2, 1000, 3}[g.r.IntN(4)])
	case 9:
		bs := EdgeBinaries()
		return bs[g.r.IntN(len(bs))]
	case 10:
		return time.UnixMilli(g.r.Int64N(1 << 42))
	default:
		return g.Str()
	}
}

func (g *Gen) Value(depth int) any {
	if depth > 3 || g.r.IntN(3) > 0 {
		return g.Scalar()
	}
	n := g.r.IntN(6)
	if depth == 0 && g.r.IntN(10) == 0 {
		n = 7 + g.r.IntN(30)
	}
	switch g.r.IntN(5) {
	case 0:
		l := make([]any, n)
		for i := range l {
			l[i] = g.Value(depth + 1)
		}
		return l
	case 1:
		l := make([]string, n)
		for i := range l {
			l[i] = g.Str()
		}
		return l
	case 2:
		if !g.multiKey {
			n = min(n, 1)
		}
		m := map[string]any{}
		for range n {
			m[g.Key()] = g.Value(depth + 1)
		}
		return m
	case 3:
		if !g.multiKey {
			n = min(n, 1)
		}
		m := map[string]string{}
		for range n {
			m[g.Key()] = g.Str()
		}
		return m
	default:
		if !g.multiKey {
			n = min(n, 1)
		}
		m := map[any]any{}
		for range n {
			m[g.Key()] = g.Value(depth + 1)
		}
		return m
	}
}

// key is a map key. Invalid UTF-8 encodes as U+FFFD, so two keys differing
// only there would collide on the wire, and which one wins would depend on
// the order: keys are valid UTF-8.
func (g *Gen) Key() string {
	return strings.ToValidUTF8(g.Str(), "\ufffd")
}

func (g *Gen) Values() []any {
	vs := make([]any, 1+g.r.IntN(6))
	for i := range vs {
		vs[i] = g.Value(0)
	}
	return vs
}

// Diff describes the first difference between a and b, briefly.
func Diff(a, b any) string {
	return diffAt("", reflect.ValueOf(a), reflect.ValueOf(b))
}

func short(v reflect.Value) string {
	if !v.IsValid() {
		return "<invalid>"
	}
	s := fmt.Sprintf("%T %#v", v.Interface(), v.Interface())
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func diffAt(path string, a, b reflect.Value) string {
	if !a.IsValid() || !b.IsValid() {
		if a.IsValid() != b.IsValid() {
			return fmt.Sprintf("%s: %s vs %s", path, short(a), short(b))
		}
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: type %s vs %s", path, a.Type(), b.Type())
	}
	switch a.Kind() {
	case reflect.Interface, reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: %s vs %s", path, short(a), short(b))
			}
			return ""
		}
		return diffAt(path, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v vs %v", path, a.IsNil(), b.IsNil())
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d vs %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diffAt(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d vs %d", path, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s: key %s missing", path, short(k))
			}
			if d := diffAt(fmt.Sprintf("%s[%.20v]", path, k), a.MapIndex(k), bv); d != "" {
				return d
			}
		}
		return ""
	}
	if !Equal(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: %s vs %s", path, short(a), short(b))
	}
	return ""
}
