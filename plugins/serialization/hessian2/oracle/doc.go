// Package oracle checks weft's hessian2 serialization against
// github.com/apache/dubbo-go-hessian2, the encoding dubbo-go peers speak: the
// same bytes for the same values, the same values (by shape) for the same
// bytes, differential tests on random bodies and a fuzz target that decodes
// with both: the fast paths the core keeps (strings, scalars, scalar maps)
// must write and read what the library does. It is a module of its own
// because it pins the library's version for these comparisons apart from
// the core's; its TestGolden also writes and checks the golden file that
// carries the library's bytes to the core's own tests
// (../testdata/golden.txt).
package oracle
