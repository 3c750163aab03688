package h2test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The golden file holds what dubbo-go-hessian2 v1.12.5 wrote and decoded for
// the cases below, captured with the library by the oracle module
// (go test -run TestGolden -update in plugins/serialization/hessian2/oracle),
// which also checks, on every run, that the library still gives them. The
// core's tests compare Marshal's bytes and Decode's values with it, so they
// check exact bytes without requiring the library.
//
// One line per entry: name, kind ("bytes" or "dump"), payload. Bytes are hex,
// a dump (see Dump) a quoted string; either, when long, is its SHA-256 and
// length instead, which keeps the file small and the check exact.
const GoldenFile = "golden.txt"

// maxInline is the longest payload written as it is rather than hashed.
const maxInline = 512

// Golden is the content of a golden file: name → kind → payload.
type Golden map[string]map[string]string

// ReadGolden reads a golden file.
func ReadGolden(path string) (Golden, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g := Golden{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s: bad line %.80q", path, line)
		}
		if g[parts[0]] == nil {
			g[parts[0]] = map[string]string{}
		}
		g[parts[0]][parts[1]] = parts[2]
	}
	return g, sc.Err()
}

// Set records an entry.
func (g Golden) Set(name, kind, payload string) {
	if g[name] == nil {
		g[name] = map[string]string{}
	}
	g[name][kind] = payload
}

// Write writes g to path, sorted, with a header saying where it comes from.
func (g Golden) Write(path string) error {
	var b strings.Builder
	b.WriteString("# Captured from github.com/apache/dubbo-go-hessian2 v1.12.5 by the oracle module:\n")
	b.WriteString("# cd plugins/serialization/hessian2/oracle && go test -run TestGolden -update\n")
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		kinds := make([]string, 0, len(g[n]))
		for k := range g[n] {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			fmt.Fprintf(&b, "%s\t%s\t%s\n", n, k, g[n][k])
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// BytesPayload is the golden form of encoded bytes.
func BytesPayload(b []byte) string {
	if len(b) <= maxInline/2 {
		return hex.EncodeToString(b)
	}
	return hashed(b)
}

// DumpPayload is the golden form of a dump (or of an error: "error").
func DumpPayload(dump string) string {
	if len(dump) <= maxInline {
		return strconv.Quote(dump)
	}
	return hashed([]byte(dump))
}

func hashed(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("sha256:%x:%d", h, len(b))
}

// DumpValues is Dump of a stream's values, or "error" if decoding failed
// (the message is not kept: the two decoders word it differently).
func DumpValues(vals []any, err error) string {
	if err != nil {
		return "error"
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = Dump(v)
	}
	return strings.Join(parts, ", ")
}

// Dump writes a decoded value as text that depends on its shape, not on the
// package of its types: types by their names without package (so weft's
// []Object and the library's []hessian.Object, or the two StackTraceElement
// types, read alike), exported struct fields, map entries sorted, a value
// met again inside itself as "(cycle)". It is how the core's tests compare
// their decoded values with the library's without the library's types.
func Dump(v any) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(v), map[uintptr]bool{}, 0)
	return b.String()
}

// TypeName is a type's name without its package: the shape-wise name Dump
// uses.
func TypeName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + TypeName(t.Elem())
	case reflect.Slice:
		return "[]" + TypeName(t.Elem())
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), TypeName(t.Elem()))
	case reflect.Map:
		return "map[" + TypeName(t.Key()) + "]" + TypeName(t.Elem())
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return "any"
		}
	}
	return t.String()
}

var timeType = reflect.TypeFor[time.Time]()

func dump(b *strings.Builder, v reflect.Value, seen map[uintptr]bool, depth int) {
	if !v.IsValid() {
		b.WriteString("nil")
		return
	}
	if depth > 100 {
		b.WriteString("(deep)")
		return
	}
	t := v.Type()
	if t == timeType {
		tm := v.Interface().(time.Time)
		fmt.Fprintf(b, "time(%d %s)", tm.UnixNano(), tm.Location())
		return
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dump(b, v.Elem(), seen, depth)
		return
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			fmt.Fprintf(b, "%s(nil)", TypeName(t))
			return
		}
		// A slice is its array and its length: two slices of one array
		// are not the same value.
		if v.Kind() != reflect.Slice || v.Len() > 0 {
			p := v.Pointer()
			if seen[p] && v.Kind() != reflect.Slice {
				b.WriteString("(cycle)")
				return
			}
			if v.Kind() != reflect.Slice {
				seen[p] = true
				defer delete(seen, p)
			}
		}
	}
	b.WriteString(TypeName(t))
	switch v.Kind() {
	case reflect.Bool:
		fmt.Fprintf(b, "(%t)", v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprintf(b, "(%d)", v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprintf(b, "(%d)", v.Uint())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f == 0 && math.Signbit(f) {
			b.WriteString("(-0)")
		} else {
			fmt.Fprintf(b, "(%s)", strconv.FormatFloat(f, 'g', -1, 64))
		}
	case reflect.String:
		fmt.Fprintf(b, "(%q)", v.String())
	case reflect.Pointer:
		b.WriteString("{")
		dump(b, v.Elem(), seen, depth+1)
		b.WriteString("}")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "(%x)", v.Bytes())
			return
		}
		b.WriteString("{")
		for i := range v.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			dump(b, v.Index(i), seen, depth+1)
		}
		b.WriteString("}")
	case reflect.Map:
		entries := make([]string, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			var e strings.Builder
			dump(&e, it.Key(), seen, depth+1)
			e.WriteString(": ")
			dump(&e, it.Value(), seen, depth+1)
			entries = append(entries, e.String())
		}
		slices.Sort(entries)
		b.WriteString("{" + strings.Join(entries, ", ") + "}")
	case reflect.Struct:
		b.WriteString("{")
		first := true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(f.Name + ": ")
			dump(b, v.Field(i), seen, depth+1)
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "(%v)", v.Interface())
	}
}
