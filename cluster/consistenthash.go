package cluster

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Parameters of the consistent hash balancer, method-level first, as Dubbo
// names them.
const (
	// KeyHashNodes is the number of virtual nodes per provider on the ring
	// (default 160): more nodes spread keys more evenly, at the cost of a
	// larger ring.
	KeyHashNodes = "hash.nodes"
	// KeyHashArguments lists the indexes of the arguments that make the key,
	// comma-separated (default "0": the first argument).
	KeyHashArguments = "hash.arguments"
)

const defaultHashNodes = 160

// NewConsistentHash returns Dubbo's ConsistentHashLoadBalance: calls with the
// same key arguments go to the same provider, and when a provider leaves only
// its keys move (about 1/n of them), which keeps per-provider caches warm.
// The ring uses Dubbo's MD5 points of "host:port" + i and its formatting of
// the arguments, so a Dubbo consumer and a weft consumer send a key to the
// same provider.
//
// The ring is built once per service and method and rebuilt only when the
// invoker list changes (other invokers, or another order); a Select with an
// unchanged list compares the list and does a binary search.
func NewConsistentHash() extension.LoadBalance { return &consistentHash{} }

type consistentHash struct {
	rings keyed[atomic.Pointer[hashRing]]
	// builds counts ring constructions, for tests.
	builds atomic.Int64
}

// hashRing is immutable once published.
type hashRing struct {
	// list is the invoker list the ring was built from: Dubbo compares the
	// list's hash code, which is the elements' identities; comparing the
	// elements themselves cannot collide.
	list   []kernel.Invoker
	hashes []uint32 // sorted
	nodes  []kernel.Invoker
	args   []int
}

func (lb *consistentHash) Select(invokers []kernel.Invoker, _ *kernel.URL, inv *kernel.Invocation) kernel.Invoker {
	switch len(invokers) {
	case 0:
		return nil
	case 1:
		return invokers[0]
	}
	method, args := hashCall(inv)
	slot := lb.rings.get(lbKey{invokers[0].URL().ServiceKey(), method})
	r := slot.Load()
	if r == nil || !r.builtFrom(invokers) {
		r = lb.build(invokers, method)
		slot.Store(r)
	}
	return r.pick(args)
}

// hashCall is the method and arguments that make the key: those of the
// target method for a generic call ($invoke(method, types, args)), as Dubbo's
// RpcUtils.getMethodName.
func hashCall(inv *kernel.Invocation) (string, []any) {
	if (inv.Method == "$invoke" || inv.Method == "$invokeAsync") && len(inv.Args) == 3 {
		if m, ok := inv.Args[0].(string); ok {
			if a, ok := inv.Args[2].([]any); ok {
				return m, a
			}
		}
	}
	return inv.Method, inv.Args
}

func (r *hashRing) builtFrom(invokers []kernel.Invoker) bool {
	if len(r.list) != len(invokers) {
		return false
	}
	for i, iv := range invokers {
		if r.list[i] != iv {
			return false
		}
	}
	return true
}

func (lb *consistentHash) build(invokers []kernel.Invoker, method string) *hashRing {
	lb.builds.Add(1)
	u := invokers[0].URL()
	replicas := u.MethodParamInt(method, KeyHashNodes, defaultHashNodes)
	// Dubbo builds an empty ring below 4 nodes and then fails every call.
	digests := max(replicas/4, 1)
	r := &hashRing{
		list: slices.Clone(invokers),
		args: parseHashArguments(u.MethodParamOr(method, KeyHashArguments, "0")),
	}
	type point struct {
		hash uint32
		node kernel.Invoker
	}
	points := make([]point, 0, len(invokers)*int(digests)*4)
	var b []byte
	for _, iv := range invokers {
		addr := javaAddress(iv.URL())
		for i := range digests {
			b = strconv.AppendInt(append(b[:0], addr...), i, 10)
			d := md5.Sum(b)
			for h := range 4 {
				points = append(points, point{binary.LittleEndian.Uint32(d[h*4:]), iv})
			}
		}
	}
	// Dubbo puts the points into a TreeMap in this order: on a collision the
	// later point wins. A stable sort keeps that order within equal hashes.
	slices.SortStableFunc(points, func(a, b point) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	r.hashes = make([]uint32, 0, len(points))
	r.nodes = make([]kernel.Invoker, 0, len(points))
	for i, p := range points {
		if i+1 < len(points) && points[i+1].hash == p.hash {
			continue
		}
		r.hashes = append(r.hashes, p.hash)
		r.nodes = append(r.nodes, p.node)
	}
	return r
}

// javaAddress is Dubbo's URL.getAddress: host, and ":port" when set.
func javaAddress(u *kernel.URL) string {
	if u.Port <= 0 {
		return u.Host
	}
	return u.Host + ":" + strconv.Itoa(u.Port)
}

// parseHashArguments reads Dubbo's comma list of argument indexes; entries
// that are not numbers are skipped (Dubbo fails the call), and a list with
// none means the first argument.
func parseHashArguments(s string) []int {
	var idx []int
	for f := range strings.SplitSeq(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			idx = append(idx, n)
		}
	}
	if len(idx) == 0 {
		idx = []int{0}
	}
	return idx
}

func (r *hashRing) pick(args []any) kernel.Invoker {
	var buf [64]byte
	key := buf[:0]
	for _, i := range r.args {
		if i >= 0 && i < len(args) {
			key = appendJavaString(key, args[i])
		}
	}
	d := md5.Sum(key)
	// ceilingEntry: the first point at or after the key, wrapping around.
	i, _ := slices.BinarySearch(r.hashes, binary.LittleEndian.Uint32(d[:4]))
	if i == len(r.hashes) {
		i = 0
	}
	return r.nodes[i]
}

// appendJavaString appends v as Java's String.valueOf formats the argument
// Dubbo would have decoded, so that keys hash alike on both stacks: null,
// decimal integers, Java's double/float notation, true/false, and lists as
// "[a, b]". Other values use their String method or their bounded text
// (view.Text). Lists are followed at most maxKeyDepth deep and the key is
// cut at maxKeyLen bytes: an argument may contain itself.
func appendJavaString(b []byte, v any) []byte { return appendJava(b, v, 0) }

// Bounds of a hash key, see appendJavaString.
const (
	maxKeyDepth = 16
	maxKeyLen   = 4 << 10
)

func appendJava(b []byte, v any, depth int) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return append(b, x...)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int8:
		return strconv.AppendInt(b, int64(x), 10)
	case int16:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return appendJavaFloat(b, x, 64)
	case float32:
		return appendJavaFloat(b, float64(x), 32)
	case []any:
		if depth >= maxKeyDepth {
			return append(b, "[...]"...)
		}
		b = append(b, '[')
		for i, e := range x {
			if len(b) > maxKeyLen {
				return append(b, "...]"...)
			}
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendJava(b, e, depth+1)
		}
		return append(b, ']')
	case fmt.Stringer:
		return append(b, x.String()...)
	}
	return append(b, view.Text(v)...)
}

// appendJavaFloat formats f as Java's Double.toString (bits 64) or
// Float.toString (bits 32) since JDK 19, which older JDKs match but for rare
// values: the shortest digits that read back to f (at least two), plain
// between 10^-3 and 10^7 ("100.0", "0.001"), else computerized scientific
// ("1.0E7", "1.5E-4").
func appendJavaFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	if math.Signbit(f) {
		b = append(b, '-')
		f = -f
	}
	if f == 0 {
		return append(b, "0.0"...)
	}
	// Shortest form as d.ddde±x, then laid out Java's way.
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, bits)
	if s[1] == 'e' {
		// One shortest digit: Java prints two, the pair closest to f
		// (4.9E-324, not 5.0E-324), then drops a zero second digit.
		s = strconv.AppendFloat(tmp[:0], f, 'e', 1, bits)
		if s[2] == '0' {
			s = append(s[:1], s[3:]...)
		}
	}
	e := slices.Index(s, 'e')
	exp := 0
	for _, ch := range s[e+2:] {
		exp = exp*10 + int(ch-'0')
	}
	if s[e+1] == '-' {
		exp = -exp
	}
	var dbuf [32]byte
	digits := append(dbuf[:0], s[0])
	if e > 1 {
		digits = append(digits, s[2:e]...)
	}
	if f >= 1e-3 && f < 1e7 {
		if exp < 0 {
			b = append(b, "0."...)
			for range -exp - 1 {
				b = append(b, '0')
			}
			return append(b, digits...)
		}
		for i := 0; i <= exp; i++ {
			if i < len(digits) {
				b = append(b, digits[i])
			} else {
				b = append(b, '0')
			}
		}
		b = append(b, '.')
		if len(digits) > exp+1 {
			return append(b, digits[exp+1:]...)
		}
		return append(b, '0')
	}
	b = append(b, digits[0], '.')
	if len(digits) > 1 {
		b = append(b, digits[1:]...)
	} else {
		b = append(b, '0')
	}
	b = append(b, 'E')
	return strconv.AppendInt(b, int64(exp), 10)
}
