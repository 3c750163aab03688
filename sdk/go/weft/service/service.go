// Package service makes a module export weft_on_call, the handler of a
// service implemented in WASM (ABI v1.2). Import it, for its side effect,
// in a module that registers weft.Serve:
//
//	import _ "github.com/weftrpc/weft/sdk/go/weft/service"
//
// It is separate so that filters do not export a service's handler.
package service

import _ "github.com/weftrpc/weft/sdk/go/weft" // initialised first: sets hooks.Call
