// Package hessian2 is the Dubbo protocol's default serialization (id 2): the
// Hessian 2.0 encoding that Java Dubbo, dubbo-go and this project all speak.
//
// # One encoding, no library
//
// github.com/apache/dubbo-go-hessian2 is the reference: it is what dubbo-go
// peers use. This package does not import it (so that a program using weft
// does not require it, nor what it requires); it encodes and decodes
// everything itself and is held to the library's bytes by tests: the core's
// check golden bytes and values captured from the library
// (testdata/golden.txt), and the oracle module
// (plugins/serialization/hessian2/oracle) runs the two side by side.
//
//   - Marshal writes exactly the bytes that one hessian.Encoder would write for
//     the same values in sequence, class definitions and back references
//     shared across the values as the library shares them. The one liberty
//     taken: maps are written with their keys sorted, where the library
//     writes them in Go's random iteration order; sorted is one of the orders
//     the library may produce and makes the output reproducible.
//   - Decode returns, for the values that make up Dubbo bodies (see "Decoded
//     types"), what hessian.Decoder.Decode returns; for objects it returns
//     this package's types (see "Objects and the registry").
//
// Fast encoding (no allocation) covers nil, bool, every Go integer type
// (int8, int16, int32, uint8, uint16 as Hessian int; int, int64, uint, uint32,
// uint64 as Hessian long, which Java reads as long), float32, float64,
// string, []byte, time.Time, []string, []any, map[string]string,
// map[string]any (unless it has the "_class" key, which makes it an object)
// and map[any]any with string keys, nested to any depth, with the library's
// back references for slices and maps that appear twice. Anything else
// (POJOs, enums, exceptions, typed slices and maps, pointers) is encoded by
// reflection, as the library encodes it.
//
// # Decoded types
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
//	list "[object"              []Object (the library: []hessian.Object)
//	list "[date"                []time.Time
//	list "[C" of a registered
//	class C                     []*T of C's registered type
//	other typed lists           []any
//	map 'H', or 'M' of any type map[any]any (an 'M' entry with a null value
//	                            is dropped, as the library drops it)
//	back reference 'Q'          the list, map or object it names, itself
//	objects                     see below
//
// # Objects and the registry
//
// An object decodes into:
//
//   - a new value of the Go type registered for its class with RegisterPOJO
//     (a pointer to it), its fields set by name as the library sets them;
//     a registered enum (a POJO of an integer kind with String and
//     EnumValue, dubbo-go's POJOEnum shape) into a pointer to its constant;
//   - StackTraceElement and *GenericException for java.lang.StackTraceElement
//     and Dubbo's com.alibaba.dubbo.rpc.service.GenericException, the only
//     classes this package knows by itself;
//   - *UnknownException, keeping the class in Class, for an object of any
//     other class that has Throwable's fields (an exception nobody
//     registered);
//   - map[string]any with the class under "_class" for anything else.
//
// That is where this package and the library part: the library also knows,
// natively, Java classes that this package does not — java.time's types,
// BigDecimal and BigInteger, java.util collections of other classes, its
// built-in java.lang exceptions (java_exception). Unless a program registers
// types for them, they decode here as "_class" maps, and the exceptions as
// *UnknownException (whose Class and DetailMessage are what ExceptionError
// reads, so a consumer's business errors keep the class and message).
//
// The registry is process-wide, safe for concurrent use, and starts empty:
// nothing fills it in init, so importing this package registers nothing.
// Register before decoding starts; the last registration of a class wins.
// It is this package's own: a program that also runs dubbo-go registers its
// types with both (hessian2.RegisterPOJO and the library's
// hessian.RegisterPOJO or RegisterJavaEnum), since each decoder reads its own
// registry. Encoding needs no registration: a POJO encodes as its class.
//
// # Hostile input
//
// Decoding never panics and never allocates in proportion to a declared length
// that the data cannot back: each list, string, binary and class definition
// length is checked against the bytes that remain, nesting (of containers,
// objects, class definitions, and of the conversions into a POJO's fields,
// which a value containing itself would otherwise repeat without end) is
// limited to MaxDepth, and what decoding allocates is charged to a budget of
// BudgetFactor times the body's size (see BudgetFor). Errors name the
// offset and what was wrong, never echo a decoded value whole. On malformed
// data this package is stricter than the library: a variable-length list cut
// short, for one, is an error here and a shorter list to the library.
package hessian2
