// Package oracle checks weft's hessian2 serialization against
// github.com/apache/dubbo-go-hessian2, the encoding dubbo-go peers speak: the
// same bytes for the same values, the same values (by shape) for the same
// bytes, differential tests on random bodies and a fuzz target that decodes
// with both. It is a module of its own so that the core does not require the
// library; its TestGolden also writes and checks the golden file that carries
// the library's bytes to the core's own tests
// (../testdata/golden.txt).
package oracle
