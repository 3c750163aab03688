// Package view is weft's one bounded walker of values that crossed the wire.
//
// A decoded Hessian value is hostile: back references can make a list
// contain itself (a cycle), or one small list be referenced from many places
// at many levels (a DAG whose expansion has 2^64 leaves), and nesting may be
// deep. Walking such a value naively (encoding/json, fmt's %v, a recursive
// conversion) overflows the stack — a fatal error Go cannot recover — or
// runs and allocates without end. Everything in weft that walks a decoded
// value (the access log, the JSON view WASM guests read, the generic form of
// results, `weft invoke`'s printing, the conversion of arguments to Go types)
// goes through the limits here, so a new caller cannot forget them.
//
// Two forms come out:
//
//   - Generic (Dubbo's generic form, what $invoke returns): structs become
//     maps keyed by their wire field names plus "class"; lists and maps are
//     converted element by element. Shared containers stay shared and cycles
//     stay cycles, as Java's PojoUtils.generalize keeps them, so the result
//     encodes back to the same compact Hessian graph. Never print it with a
//     naive walker.
//   - JSON (for logs and guests): a tree that encoding/json always accepts,
//     however hostile the input: cycles become the string "(cycle)", deeper
//     nesting "(too deep)", values past the node budget "(truncated)", long
//     strings are cut, NaN and out-of-range dates become strings. Shared
//     containers are expanded, and each expansion counts against the budget.
package view

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Limits bound one walk. Zero fields take the defaults of the form.
type Limits struct {
	// MaxDepth is how deeply containers may nest; deeper ones are cut.
	MaxDepth int
	// MaxNodes bounds the values visited in all; in the JSON form a
	// container met twice counts twice.
	MaxNodes int
	// MaxString, in the JSON form, is how many bytes of a string (or of a
	// []byte, before base64) are kept; 0 keeps them whole.
	MaxString int
	// MaxBytes, in the JSON form, bounds the bytes of all strings kept: a
	// list that refers to one long string a million times must not expand
	// into a terabyte. 0: JSONLimits' value.
	MaxBytes int
}

// Defaults of the two forms.
var (
	// GenericLimits: as deep as the Hessian decoder allows containers to
	// nest, and enough nodes for any value a payload-limited frame decodes.
	GenericLimits = Limits{MaxDepth: 1000, MaxNodes: 1 << 22}
	// JSONLimits suit logs: a bounded line whatever the call carried.
	JSONLimits = Limits{MaxDepth: 64, MaxNodes: 4096, MaxString: 256, MaxBytes: 64 << 10}
)

// Markers put in the JSON form where a value was cut.
const (
	Cycle     = "(cycle)"
	TooDeep   = "(too deep)"
	Truncated = "(truncated)"
)

// ErrLimit is returned by Budget when a walk goes past its limits.
type ErrLimit struct{ What string }

func (e *ErrLimit) Error() string { return "value " + e.What }

// Budget is the accounting of a walk that builds something else than the two
// forms here (the conversion of arguments to Go types): depth and nodes, with
// the same meaning as in Limits.
type Budget struct {
	lim   Limits
	nodes int
}

// NewBudget returns a budget of lim (GenericLimits' values where zero).
func NewBudget(lim Limits) *Budget { return &Budget{lim: lim.or(GenericLimits)} }

// Visit counts one value at depth and fails past the limits.
func (b *Budget) Visit(depth int) error {
	if depth > b.lim.MaxDepth {
		return &ErrLimit{"nested deeper than " + strconv.Itoa(b.lim.MaxDepth)}
	}
	b.nodes++
	if b.nodes > b.lim.MaxNodes {
		return &ErrLimit{"of more than " + strconv.Itoa(b.lim.MaxNodes) + " elements"}
	}
	return nil
}

func (l Limits) or(d Limits) Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = d.MaxNodes
	}
	if l.MaxString < 0 {
		l.MaxString = 0
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	return l
}

// Generic returns v in Dubbo's generic form within GenericLimits.
func Generic(v any) any { return GenericWith(v, GenericLimits) }

// GenericWith returns v in Dubbo's generic form within lim. Past the limits,
// the values cut are nil.
func GenericWith(v any, lim Limits) any {
	w := walker{lim: lim.or(GenericLimits)}
	return w.walk(reflect.ValueOf(v), 0)
}

// JSON returns a tree of v that encoding/json encodes without error, within
// JSONLimits.
func JSON(v any) any { return JSONWith(v, JSONLimits) }

// JSONWith is JSON within lim.
func JSONWith(v any, lim Limits) any {
	w := walker{lim: lim.or(JSONLimits), json: true}
	return w.walk(reflect.ValueOf(v), 0)
}

// identity is what makes two containers the same one: a map's or a struct
// pointer's address, a slice's array address and length (a list that
// contains itself holds a copy of its own header).
type identity struct {
	p    unsafe.Pointer
	n    int
	kind reflect.Kind
}

type walker struct {
	lim   Limits
	json  bool
	nodes int
	bytes int
	cut   bool
	// open holds the containers on the path from the root (JSON form); done
	// the converted containers (generic form), which also serves cycles: a
	// container's output is recorded before its elements are walked.
	open map[identity]bool
	done map[identity]any
}

func (w *walker) limit(depth int) (any, bool) {
	if w.cut {
		return w.marker(Truncated), false
	}
	if depth > w.lim.MaxDepth {
		return w.marker(TooDeep), false
	}
	w.nodes++
	if w.nodes > w.lim.MaxNodes {
		w.cut = true
		return w.marker(Truncated), false
	}
	return nil, true
}

func (w *walker) marker(m string) any {
	if w.json {
		return m
	}
	return nil
}

// enter reports whether the container id may be walked now: in the JSON
// form, not if it is open on the path (a cycle); in the generic form, not if
// it was converted already (prev is its output).
func (w *walker) enter(id identity) (prev any, ok bool) {
	if id.p == nil {
		return nil, true
	}
	if w.json {
		if w.open[id] {
			return Cycle, false
		}
		if w.open == nil {
			w.open = make(map[identity]bool)
		}
		w.open[id] = true
		return nil, true
	}
	if out, seen := w.done[id]; seen {
		return out, false
	}
	return nil, true
}

func (w *walker) leave(id identity) {
	if w.json && id.p != nil {
		delete(w.open, id)
	}
}

func (w *walker) record(id identity, out any) {
	if w.json || id.p == nil {
		return
	}
	if w.done == nil {
		w.done = make(map[identity]any)
	}
	w.done[id] = out
}

var timeType = reflect.TypeOf(time.Time{})

func (w *walker) walk(rv reflect.Value, depth int) any {
	if m, ok := w.limit(depth); !ok {
		return m
	}
	for rv.IsValid() && rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	switch rv.Kind() {
	case reflect.String:
		return w.str(rv.String())
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if rv.Type().PkgPath() != "" && w.json {
			return rv.Int() // named ints (enums) as their number
		}
		return rv.Interface()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if rv.Type().PkgPath() != "" && w.json {
			return rv.Uint()
		}
		return rv.Interface()
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if w.json && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return rv.Interface()
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		if rv.Elem().Kind() != reflect.Struct {
			return w.walk(rv.Elem(), depth+1)
		}
		return w.structValue(rv, rv.Elem(), identity{rv.UnsafePointer(), 0, reflect.Pointer}, depth)
	case reflect.Struct:
		if rv.Type() == timeType || rv.Type().ConvertibleTo(timeType) {
			t := rv.Convert(timeType).Interface().(time.Time)
			if w.json {
				return t.UTC().Format(time.RFC3339Nano)
			}
			return rv.Interface()
		}
		return w.structValue(rv, rv, identity{}, depth)
	case reflect.Slice:
		if rv.IsNil() {
			if w.json {
				return nil
			}
			return rv.Interface()
		}
		return w.slice(rv, identity{rv.UnsafePointer(), rv.Len(), reflect.Slice}, depth)
	case reflect.Array:
		return w.slice(rv, identity{}, depth)
	case reflect.Map:
		if rv.IsNil() {
			return nil
		}
		return w.mapValue(rv, identity{rv.UnsafePointer(), 0, reflect.Map}, depth)
	case reflect.Complex64, reflect.Complex128:
		if w.json {
			return fmt.Sprint(rv.Complex())
		}
		return rv.Interface()
	}
	// Channels, functions, unsafe pointers: nothing to walk. The generic
	// form keeps them, so that whoever encodes it reports them.
	if w.json {
		return "(" + rv.Type().String() + ")"
	}
	if rv.CanInterface() {
		return rv.Interface()
	}
	return nil
}

func (w *walker) str(s string) any {
	if !w.json {
		return s
	}
	if w.lim.MaxString > 0 && len(s) > w.lim.MaxString {
		s = Cut(s, w.lim.MaxString)
	}
	if !w.spend(len(s)) {
		return Truncated
	}
	return s
}

// spend accounts for n bytes of strings in the JSON form.
func (w *walker) spend(n int) bool {
	if w.lim.MaxBytes > 0 && w.bytes+n > w.lim.MaxBytes {
		w.cut = true
		return false
	}
	w.bytes += n
	return true
}

// Cut returns s cut to at most n bytes (at a rune boundary) and marked with
// its full length, for echoing hostile input into errors and logs.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// scalarElems tells slices whose elements need no walk: they are leaves in
// both forms (and the generic form keeps them typed, as Hessian's typed
// lists).
func scalarElems(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func (w *walker) slice(rv reflect.Value, id identity, depth int) any {
	et := rv.Type().Elem()
	if et.Kind() == reflect.Uint8 {
		b := rv.Bytes()
		if rv.Kind() == reflect.Array {
			b = make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
		}
		if w.json {
			full := len(b)
			if w.lim.MaxString > 0 && len(b) > w.lim.MaxString {
				b = b[:w.lim.MaxString]
			}
			if !w.spend(base64.StdEncoding.EncodedLen(len(b))) {
				return Truncated
			}
			if full > len(b) {
				return base64.StdEncoding.EncodeToString(b) + "…(" + strconv.Itoa(full) + " bytes)"
			}
			return base64.StdEncoding.EncodeToString(b)
		}
		return b
	}
	n := rv.Len()
	if scalarElems(et.Kind()) && et.PkgPath() == "" {
		// Leaves, counted as one node each so the budget still bounds
		// the output.
		if w.nodes+n <= w.lim.MaxNodes && (!w.json || et.Kind() != reflect.String) {
			w.nodes += n
			return rv.Interface()
		}
	}
	if prev, ok := w.enter(id); !ok {
		return prev
	}
	defer w.leave(id)
	out := make([]any, n)
	w.record(id, out)
	for i := range out {
		if w.cut {
			out = out[:i]
			if w.json {
				out = append(out, Truncated)
			}
			break
		}
		out[i] = w.walk(rv.Index(i), depth+1)
	}
	return out
}

func (w *walker) mapValue(rv reflect.Value, id identity, depth int) any {
	if prev, ok := w.enter(id); !ok {
		return prev
	}
	defer w.leave(id)
	out := make(map[string]any, min(rv.Len(), 64))
	w.record(id, out)
	keys := rv.MapKeys()
	if w.json {
		// Output in a stable order, so a cut keeps the same entries.
		sort.Slice(keys, func(i, j int) bool { return w.key(keys[i]) < w.key(keys[j]) })
	}
	for _, k := range keys {
		if w.cut {
			if w.json {
				out[Truncated] = true
			}
			break
		}
		ks := w.key(k)
		if w.json && !w.spend(len(ks)) {
			out[Truncated] = true
			break
		}
		out[ks] = w.walk(rv.MapIndex(k), depth+1)
	}
	return out
}

// key formats a map key. Keys are hashable, so they hold no slices or maps;
// a struct or array key is formatted shallowly and cut.
func (w *walker) key(k reflect.Value) string {
	for k.Kind() == reflect.Interface && !k.IsNil() {
		k = k.Elem()
	}
	var s string
	switch k.Kind() {
	case reflect.String:
		s = k.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10)
	case reflect.Bool:
		return strconv.FormatBool(k.Bool())
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(k.Float(), 'g', -1, 64)
	case reflect.Invalid, reflect.Interface:
		return "(nil)"
	default:
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "(nil)"
		}
		// A struct, array or pointer key: its bounded text, never %v,
		// which would follow what it points to.
		if k.CanInterface() {
			s = Text(k.Interface())
		} else {
			s = "(" + k.Type().String() + ")"
		}
	}
	if w.json && w.lim.MaxString > 0 {
		return Cut(s, w.lim.MaxString)
	}
	return s
}

func (w *walker) structValue(orig, sv reflect.Value, id identity, depth int) any {
	if prev, ok := w.enter(id); !ok {
		return prev
	}
	defer w.leave(id)
	t := sv.Type()
	out := make(map[string]any, t.NumField()+1)
	w.record(id, out)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("hessian") == "-" {
			continue
		}
		if w.cut {
			if w.json {
				out[Truncated] = true
			}
			break
		}
		out[FieldName(f)] = w.walk(sv.Field(i), depth+1)
	}
	if orig.CanInterface() {
		if j, ok := orig.Interface().(interface{ JavaClassName() string }); ok {
			out["class"] = safeClassName(j)
		}
	}
	return out
}

// safeClassName calls JavaClassName, which user code implements, as the rest
// of the walk calls nothing: a panic there (a nil receiver) becomes "".
func safeClassName(j interface{ JavaClassName() string }) (s string) {
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	return j.JavaClassName()
}

// textLimits bound Text: a line of a log or an error.
var textLimits = Limits{MaxDepth: 16, MaxNodes: 256, MaxString: 256, MaxBytes: 4 << 10}

// Text formats v for a message, a log line or a comparison: strings as they
// are, numbers and booleans as fmt formats them, anything else as its
// bounded JSON view (cycles, depth and size cut, at most some 4 KiB). It is
// what to use instead of fmt's %v, which follows a value that contains
// itself until the stack overflows.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case string:
		return x
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprint(x)
	case error:
		return Cut(x.Error(), textLimits.MaxBytes)
	}
	b, err := json.Marshal(JSONWith(v, textLimits))
	if err != nil {
		return "(" + reflect.TypeOf(v).String() + ")"
	}
	return string(b)
}

// WireName is the name a Go identifier goes by on the wire: the first rune
// lowered, as Java methods and bean fields are named.
func WireName(goName string) string {
	r, n := utf8.DecodeRuneInString(goName)
	if r == utf8.RuneError || unicode.IsLower(r) {
		return goName
	}
	return string(unicode.ToLower(r)) + goName[n:]
}

// FieldName is the name a struct field has on the wire: its `hessian` tag,
// else its name with the first rune lowered (Java's bean convention).
func FieldName(f reflect.StructField) string {
	if tag := f.Tag.Get("hessian"); tag != "" && tag != "-" {
		return tag
	}
	return WireName(f.Name)
}

// StringKeys is m with its keys as strings: a string key as it is, any
// other as Text writes it (bounded). Decoded attachment maps arrive keyed by
// any; the call path reads them by string.
func StringKeys(m map[any]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, val := range m {
		s, ok := k.(string)
		if !ok {
			s = Text(k)
		}
		out[s] = val
	}
	return out
}
