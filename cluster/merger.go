package cluster

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// KeyMerger is Dubbo's `merger` (method-level `m.merger` first): how a
// mergeable call merges the answers of its groups.
//
//	"" | false | 0 | null | N/A   no merge: the first group that has a
//	                              provider answers alone
//	true | default                by the answers' type: lists (slices) are
//	                              concatenated, maps joined (later groups
//	                              win a key), anything else has no merger
//	list | set | map              Java's built-in mergers by name; set
//	                              concatenates without duplicates, or joins
//	                              maps used as sets
//	byte | char | short | int |   Java's typed-array mergers: concatenate
//	long | float | double |       (char also joins strings, which a char[]
//	boolean                       may decode into)
//	.name                         the answers' method name (Java's
//	                              `.merge`; weft also tries it with its
//	                              first letter upper-cased, as Go exports
//	                              it): a.Merge(b), then with c, ...
//	NAME                          an extension.Merger of that name
//	                              (a plugin's: Java's Merger SPI)
const KeyMerger = "merger"

// Merger is extension.Merger.
type Merger = extension.Merger

// MergerFunc is a function that is a Merger.
type MergerFunc func(answers []any) (any, error)

// Merge calls f.
func (f MergerFunc) Merge(answers []any) (any, error) { return f(answers) }

// Mergers finds the mergers `merger` may name besides the built-in ones:
// an App's kernel.Loader of extension.Merger, or a MergerMap.
type Mergers interface {
	Has(name string) bool
	Get(name string) (extension.Merger, error)
	Names() []string
}

// MergerMap is Mergers in a map.
type MergerMap map[string]Merger

func (m MergerMap) Has(name string) bool { return m[name] != nil }

func (m MergerMap) Get(name string) (extension.Merger, error) {
	if mg := m[name]; mg != nil {
		return mg, nil
	}
	return nil, fmt.Errorf("no merger %q", name)
}

func (m MergerMap) Names() []string { return slices.Sorted(maps.Keys(m)) }

func has(mergers Mergers, name string) bool { return mergers != nil && mergers.Has(name) }

// noMerger reports whether a `merger` value asks for no merge (Java's
// ConfigUtils.isEmpty).
func noMerger(spec string) bool { return !kernel.IsTruthy(spec) }

// byType reports whether a `merger` value asks for the merger by type:
// Java's true or default, and "1", which config makes of a YAML true.
func byType(spec string) bool { return spec == "true" || spec == "default" || spec == "1" }

// valueMerger merges two or more values, none nil.
type valueMerger func(vals []reflect.Value) (reflect.Value, error)

// builtinMergers are Java's built-in mergers by name
// (META-INF/dubbo/internal/org.apache.dubbo.rpc.cluster.Merger), over the
// Go values their Java types decode into.
var builtinMergers = map[string]valueMerger{
	"list": concatOnly("list", false), "set": mergeSet, "map": mapsOnly,
	"byte": concatOnly("byte", true), "char": mergeChars, "short": concatOnly("short", true), "int": concatOnly("int", true),
	"long": concatOnly("long", true), "float": concatOnly("float", true), "double": concatOnly("double", true), "boolean": concatOnly("boolean", true),
}

// MergerNames lists the names `merger` takes besides `.method`: the
// built-in ones and those of mergers, sorted.
func MergerNames(mergers Mergers) []string {
	names := []string{"default", "true"}
	for n := range builtinMergers {
		names = append(names, n)
	}
	if mergers != nil {
		names = append(names, mergers.Names()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// CheckMerger reports a `merger` value that names no merger, with the
// names it could take.
func CheckMerger(spec string, mergers Mergers) error {
	spec = strings.TrimSpace(spec)
	if noMerger(spec) || byType(spec) || builtinMergers[spec] != nil || has(mergers, spec) {
		return nil
	}
	if name, ok := strings.CutPrefix(spec, "."); ok {
		if name == "" || strings.ContainsAny(name, ". ") {
			return fmt.Errorf("merger %q: want .methodName, the method of the result type that merges another result into it (such as .merge)", spec)
		}
		return nil
	}
	return fmt.Errorf("unknown merger %q (known: %s, or .methodName to call a method of the result type; false: no merge)",
		spec, strings.Join(MergerNames(mergers), ", "))
}

// Merge merges answers (two or more, as decoded, possibly nil) as spec, a
// `merger` value, says. Nil answers are left out, as Java's mergers skip
// null. Answers a protocol left to decode until their type is known
// (protobuf's kernel.Decodable) are merged once the caller's type is:
// the result is a kernel.Decodable that decodes each and merges them.
func Merge(spec string, answers []any, mergers Mergers) (any, error) {
	spec = strings.TrimSpace(spec)
	if has(mergers, spec) {
		m, err := mergers.Get(spec)
		if err != nil {
			return nil, kernel.Errorf(kernel.CodeUnknown, "merger %q: %v", spec, err)
		}
		vals := slices.DeleteFunc(slices.Clone(answers), func(v any) bool { return v == nil })
		if len(vals) < 2 {
			return first(vals), nil
		}
		return m.Merge(vals)
	}
	var vm valueMerger
	switch {
	case strings.HasPrefix(spec, "."):
		vm = methodMerger(spec[1:])
	case byType(spec):
		vm = mergeByType
	default:
		if vm = builtinMergers[spec]; vm == nil {
			return nil, kernel.Errorf(kernel.CodeUnknown, "There is no merger to merge result. (merger %q; known: %s, or .methodName)",
				spec, strings.Join(MergerNames(mergers), ", "))
		}
	}
	vals := make([]reflect.Value, 0, len(answers))
	var lazy []kernel.Decodable
	for _, a := range answers {
		if a == nil {
			continue
		}
		if d, ok := a.(kernel.Decodable); ok {
			lazy = append(lazy, d)
		}
		vals = append(vals, reflect.ValueOf(a))
	}
	switch {
	case len(vals) == 0:
		return nil, nil
	case len(lazy) == len(vals):
		return &mergedLater{parts: lazy, merge: vm}, nil
	case len(lazy) > 0:
		return nil, kernel.Errorf(kernel.CodeUnknown, "Can not merge result: %d answers still in their wire form (%T) and %d decoded: the groups answered over different protocols",
			len(lazy), lazy[0], len(vals)-len(lazy))
	case len(vals) == 1:
		return vals[0].Interface(), nil
	}
	v, err := vm(vals)
	if err != nil {
		return nil, err
	}
	return v.Interface(), nil
}

func first(vals []any) any {
	if len(vals) == 0 {
		return nil
	}
	return vals[0]
}

// mergedLater is answers merged once a caller says their type: Triple's
// protobuf messages do not say what they hold.
type mergedLater struct {
	parts []kernel.Decodable
	merge valueMerger
}

var _ kernel.Decodable = (*mergedLater)(nil)

func (m *mergedLater) DecodeAs(t reflect.Type) (reflect.Value, error) {
	vals := make([]reflect.Value, 0, len(m.parts))
	for _, p := range m.parts {
		v, err := p.DecodeAs(t)
		if err != nil {
			return reflect.Value{}, err
		}
		if isNil(v) {
			continue
		}
		vals = append(vals, v)
	}
	switch len(vals) {
	case 0:
		return reflect.Zero(t), nil
	case 1:
		return vals[0], nil
	}
	return m.merge(vals)
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

func typeError(vals []reflect.Value) error {
	types := make([]string, len(vals))
	for i, v := range vals {
		types[i] = v.Type().String()
	}
	return kernel.Errorf(kernel.CodeUnknown, "Can not merge result: Arguments' types are different (%s)", strings.Join(types, ", "))
}

// hessianClass is the key under which hessian2 keeps the class of an
// object whose class no Go type is registered for: such a map is an
// object, not a map to join.
const hessianClass = "_class"

func isObject(v reflect.Value) bool {
	if v.Kind() != reflect.Map {
		return false
	}
	kt := v.Type().Key()
	k := reflect.ValueOf(hessianClass)
	switch {
	case kt.Kind() == reflect.String:
		k = k.Convert(kt)
	case !k.Type().AssignableTo(kt):
		return false
	}
	return v.MapIndex(k).IsValid()
}

// mergeByType is `merger: true`: Java's MergerFactory picks by the return
// type; here by the answers' kind.
func mergeByType(vals []reflect.Value) (reflect.Value, error) {
	switch kindOf(vals) {
	case reflect.Slice:
		return concat(vals), nil
	case reflect.Map:
		return joinMaps(vals), nil
	}
	return reflect.Value{}, kernel.Errorf(kernel.CodeUnknown,
		"There is no merger to merge result. (merger: true merges lists and maps; the answers are %s: set merger: .methodName to merge them with a method of theirs)", vals[0].Type())
}

// kindOf is Slice when every value is a slice, Map when every value is a
// map (not an object), else Invalid.
func kindOf(vals []reflect.Value) reflect.Kind {
	k := vals[0].Kind()
	if k != reflect.Slice && k != reflect.Map {
		return reflect.Invalid
	}
	for _, v := range vals {
		if v.Kind() != k || isObject(v) {
			return reflect.Invalid
		}
	}
	return k
}

// sameType is the values' one type, or nil when they differ: a Java
// provider's ArrayList decodes into []any where a Go provider's list of
// strings decodes into []string, and one merge may take both.
func sameType(vals []reflect.Value) reflect.Type {
	t := vals[0].Type()
	for _, v := range vals[1:] {
		if v.Type() != t {
			return nil
		}
	}
	return t
}

var anyType = reflect.TypeFor[any]()

// concat appends slices (Java's ListMerger and array mergers): into their
// type when they share one, else into []any.
func concat(vals []reflect.Value) reflect.Value {
	t := sameType(vals)
	if t == nil {
		t = reflect.SliceOf(anyType)
	}
	n := 0
	for _, v := range vals {
		n += v.Len()
	}
	out := reflect.MakeSlice(t, 0, n)
	for _, v := range vals {
		if v.Type() == t {
			out = reflect.AppendSlice(out, v)
			continue
		}
		for i := range v.Len() {
			out = reflect.Append(out, v.Index(i))
		}
	}
	return out
}

// joinMaps is Java's MapMerger: putAll in order, so later groups win a key.
func joinMaps(vals []reflect.Value) reflect.Value {
	t := sameType(vals)
	if t == nil {
		t = reflect.MapOf(anyType, anyType)
	}
	out := reflect.MakeMap(t)
	for _, v := range vals {
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), it.Value())
		}
	}
	return out
}

// concatOnly concatenates slices; typed (Java's typed-array mergers, whose
// arrays must be of one type) wants them all of one type, as Java's
// ArrayMerger does.
func concatOnly(name string, typed bool) valueMerger {
	return func(vals []reflect.Value) (reflect.Value, error) {
		if kindOf(vals) != reflect.Slice {
			return reflect.Value{}, notFor(name, "lists (slices)", vals)
		}
		if typed && sameType(vals) == nil {
			return reflect.Value{}, typeError(vals)
		}
		return concat(vals), nil
	}
}

func notFor(name, what string, vals []reflect.Value) error {
	if sameType(vals) == nil {
		return typeError(vals)
	}
	return kernel.Errorf(kernel.CodeUnknown, "Can not merge result: merger %s merges %s, and the answers are %s", name, what, vals[0].Type())
}

func mapsOnly(vals []reflect.Value) (reflect.Value, error) {
	if kindOf(vals) != reflect.Map {
		return reflect.Value{}, notFor("map", "maps", vals)
	}
	return joinMaps(vals), nil
}

// mergeSet is Java's SetMerger: a union. A Java Set decodes into a list
// (concatenated without duplicates, in order of first appearance) or a
// Go set is a map (joined).
func mergeSet(vals []reflect.Value) (reflect.Value, error) {
	switch kindOf(vals) {
	case reflect.Map:
		return joinMaps(vals), nil
	case reflect.Slice:
		all := concat(vals)
		out := reflect.MakeSlice(all.Type(), 0, all.Len())
		seen := map[any]bool{}
		for i := range all.Len() {
			e := all.Index(i)
			if e.Comparable() {
				k := e.Interface()
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			out = reflect.Append(out, e)
		}
		return out, nil
	}
	return reflect.Value{}, notFor("set", "lists (slices) and sets (maps)", vals)
}

// mergeChars is Java's CharArrayMerger: a char[] may decode into a string.
func mergeChars(vals []reflect.Value) (reflect.Value, error) {
	if t := sameType(vals); t != nil && t.Kind() == reflect.String {
		var b strings.Builder
		for _, v := range vals {
			b.WriteString(v.String())
		}
		return reflect.ValueOf(b.String()).Convert(t), nil
	}
	return concatOnly("char", true)(vals)
}

var errorType = reflect.TypeFor[error]()

// methodMerger is `merger: .name` (Java's MergeableClusterInvoker): the
// first answer's method name is called with the second, its result (when
// it returns one of the answers' type) with the third, and so on. A method
// that returns nothing merges into its receiver, which then must be a
// pointer (or the value is copied to one first). A method may also return
// an error, last.
func methodMerger(name string) valueMerger {
	return func(vals []reflect.Value) (reflect.Value, error) {
		t := sameType(vals)
		if t == nil {
			return reflect.Value{}, typeError(vals)
		}
		res := vals[0]
		for _, next := range vals[1:] {
			recv, m, ok := findMethod(res, name)
			if !ok {
				return reflect.Value{}, kernel.Errorf(kernel.CodeUnknown,
					"Can not merge result because missing method [ %s ] in class [ %s ]%s", name, t, missingHint(t))
			}
			mt := m.Type()
			nout := mt.NumOut()
			hasErr := nout > 0 && mt.Out(nout-1) == errorType
			if hasErr {
				nout--
			}
			if mt.NumIn() != 1 || !t.AssignableTo(mt.In(0)) || nout > 1 {
				return reflect.Value{}, kernel.Errorf(kernel.CodeUnknown,
					"Can not merge result: method %s of %s is %s; want func(%s) with no result, one of type %[2]s, and/or an error last", name, t, mt, t)
			}
			out, err := call(m, next)
			if err != nil {
				return reflect.Value{}, err
			}
			if hasErr && !out[len(out)-1].IsNil() {
				return reflect.Value{}, kernel.Wrap(kernel.CodeUnknown, out[len(out)-1].Interface().(error), "Can not merge result: %s.%s", t, name)
			}
			switch {
			case nout == 1 && out[0].Type().AssignableTo(t):
				res = out[0]
			case recv.Type() != t: // a copy taken for a pointer receiver
				res = recv.Elem()
			}
		}
		return res, nil
	}
}

// findMethod finds name (or Name) on v, or on a pointer to a copy of v.
func findMethod(v reflect.Value, name string) (recv, m reflect.Value, ok bool) {
	names := []string{name}
	if r, size := utf8.DecodeRuneInString(name); unicode.IsLower(r) {
		names = append(names, string(unicode.ToUpper(r))+name[size:])
	}
	for _, n := range names {
		if m := v.MethodByName(n); m.IsValid() {
			return v, m, true
		}
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		for _, n := range names {
			if m := p.MethodByName(n); m.IsValid() {
				return p, m, true
			}
		}
	}
	return reflect.Value{}, reflect.Value{}, false
}

func missingHint(t reflect.Type) string {
	if t.Kind() == reflect.Map {
		return " (an object of a class no Go type is registered for decodes into a map: register the type with hessian2.RegisterPOJO so that answers decode into it and its method can be called)"
	}
	return ""
}

// call calls m with arg, turning a panic into an error: the method is the
// program's, the answers the providers'.
func call(m, arg reflect.Value) (out []reflect.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = kernel.Errorf(kernel.CodeUnknown, "Can not merge result: the merge method panicked: %v", p)
		}
	}()
	return m.Call([]reflect.Value{arg}), nil
}
