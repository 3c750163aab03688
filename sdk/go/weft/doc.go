// Package weft is the Go guest SDK of weft's WASM filter ABI v1
// (sdk/ABI.md). A filter is a package main that registers its callbacks in
// an init function and is built as a WASI reactor:
//
//	package main
//
//	import "github.com/weftrpc/weft/sdk/go/weft"
//
//	func init() {
//		weft.OnRequest(func(c *weft.Call) weft.Action {
//			if _, ok := c.Attachment("token"); !ok {
//				return c.Reject(weft.CodeForbidden, "no token")
//			}
//			return weft.Continue
//		})
//	}
//
//	func main() {} // required, but never run: register handlers in init
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o filter.wasm .
//
// The package defines the ABI's required exports itself (weft_abi_version,
// weft_alloc, weft_on_request) with //go:wasmexport, so importing it is
// enough; the host runs the module's _initialize, which runs the Go runtime
// and every init function, but not main. The optional weft_on_response is
// exported by package onresponse, which a filter that registers OnResponse
// imports for its side effect (see that package for why it is separate).
//
// One module instance serves one call at a time, so the SDK keeps its state
// in plain globals. Buffers the host fills through weft_alloc stay reachable
// until the callback that asked for them returns; strings returned by Call's
// methods stay valid after that (the garbage collector frees them when they
// are no longer used).
//
// A panic in a handler is recovered: it is logged through the App's logger at
// level error and the call is rejected with CodeUnknown and the panic's
// message. Fatal runtime errors (out of memory) still trap and the host
// replaces the instance.
//
// Outside GOOS=wasip1 the package compiles (so that filters can be vetted
// and their pure logic unit-tested natively), but every host function
// panics.
package weft
