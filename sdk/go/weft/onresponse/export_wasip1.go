//go:build wasip1

package onresponse

import "github.com/weftrpc/weft/sdk/go/weft/internal/hooks"

//go:wasmexport weft_on_response
func exportOnResponse() int32 { return hooks.Response() }
