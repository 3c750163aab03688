//go:build wasip1

package service

import "github.com/weftrpc/weft/sdk/go/weft/internal/hooks"

//go:wasmexport weft_on_call
func exportOnCall() int32 { return hooks.Call() }
