// Package onresponse makes a filter export weft_on_response. Import it, for
// its side effect, in a filter that registers weft.OnResponse:
//
//	import _ "github.com/weftrpc/weft/sdk/go/weft/onresponse"
//
// It is separate because the export is optional in the ABI, and costly when
// present: the host then keeps the filter's instance for the whole call (it
// must run weft_on_response on it when the result comes back), so each call
// in flight holds an instance of its own. Without it an instance is busy only
// while weft_on_request runs. A filter that registers weft.OnResponse without
// importing this package rejects every call, saying so.
package onresponse

import (
	_ "github.com/weftrpc/weft/sdk/go/weft" // initialised first: sets hooks.Response
	"github.com/weftrpc/weft/sdk/go/weft/internal/hooks"
)

func init() { hooks.ResponseExported = true }
