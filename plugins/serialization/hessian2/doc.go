// Package hessian2 is the Dubbo protocol's default serialization (id 2): the
// Hessian 2.0 encoding that Java Dubbo, dubbo-go and this project all speak.
//
// # Two paths, one encoding
//
// github.com/apache/dubbo-go-hessian2 is the reference: it is what dubbo-go
// peers use, and it knows POJOs, enums, exceptions and the Java collection and
// time types. It is also slow on the values that make up almost every Dubbo
// body: strings (read rune by rune), integers and the attachment map. This
// package therefore encodes and decodes those values itself (the fast path) and
// hands everything else to the library (the slow path). The two are meant to be
// indistinguishable:
//
//   - Marshal writes exactly the bytes that one hessian.Encoder would write for
//     the same values in sequence. When any value, at any depth, is not a fast
//     type, the whole call is encoded by the library, so class definitions and
//     back references stay shared across the values as the library shares them.
//     The one liberty taken: maps are written with their keys sorted, where the
//     library writes them in Go's random iteration order; sorted is one of the
//     orders the library may produce and makes the output reproducible.
//   - Decode returns, for every well-formed input, what hessian.Decoder.Decode
//     returns for it (see "Decoded types" below). When the fast decoder meets
//     anything it does not handle (class definitions, objects, references,
//     collection types, typed lists or maps of a type that the library's
//     registry could know, mistyped elements) it gives up on that value, and
//     the library decodes the data from there, or from the start when earlier
//     values left state (references, type names) the library must have seen.
//
// Fast encoding covers nil, bool, every Go integer type (int8, int16, int32,
// uint8, uint16 as Hessian int; int, int64, uint, uint32, uint64 as Hessian
// long, which Java reads as long), float32, float64, string, []byte,
// time.Time, []string, []any, map[string]string, map[string]any (unless it has
// the library's "_class" key, which makes it an object) and map[any]any with
// string keys, nested to any depth, with the library's back references for
// slices and maps that appear twice.
//
// # Decoded types
//
// Decode returns the library's types, so that code never sees which path ran:
//
//	null                        nil
//	boolean                     bool
//	int (all compact forms)     int32
//	long (all compact forms)    int64
//	double (all compact forms)  float64 (the 0x5f form is float64(int32)/1000)
//	date                        time.Time, in time.Local
//	string                      string
//	binary                      []byte (never nil)
//	untyped list                []any
//	list "[string", "string"    []string (null elements become "")
//	list "[int", "[short"       []int32
//	list "[long"                []int64
//	list "[double", "[float"    []float64
//	list "[boolean"             []bool
//	list "[object"              []hessian.Object
//	list "[date"                []time.Time
//	map 'H', or 'M' of a java.util map class
//	                            map[any]any (an 'M' entry with a null
//	                            value is dropped, as the library drops it)
//	objects, enums, exceptions, other typed lists and maps: whatever the
//	library returns (registered POJOs, map[string]any with "_class" for
//	unknown classes, *hessian.UnknownException for unknown exceptions, in
//	which this package restores the class name that the library loses).
//
// # Hostile input
//
// Decoding never panics and never allocates in proportion to a declared length
// that the data cannot back: each list, string, binary and class definition
// length is checked against the bytes that remain, and nesting is limited to
// MaxDepth. The library does neither, so before it sees any data this package
// checks the whole remainder with its own grammar walk, bounds the library's
// quadratic reference bookkeeping, and turns any panic left into an error.
// On malformed data this package is the stricter of the two: a variable-length
// list cut short, for one, is an error here and a shorter list to the library.
package hessian2
