// Command ratelimit is a weft WASM filter that lets at most `limit` calls
// per second through for each method (config {"limit": N}); the others are
// rejected with code 7 (limit exceeded). The counters are the host's, so the
// limit holds across every instance of the filter.
package main

import (
	"strconv"

	"github.com/weftrpc/weft/sdk/go/weft"
)

func init() {
	weft.OnRequest(func(c *weft.Call) weft.Action {
		limit, ok := weft.ConfigInt("limit")
		if !ok || limit < 0 {
			return c.Reject(weft.CodeUnknown, "ratelimit: config needs a non-negative integer \"limit\"")
		}
		method := c.Method()
		if n := weft.CounterAdd("rl:"+method, 1, 1000); n > limit {
			return c.Reject(weft.CodeLimitExceeded, "rate limit exceeded for method "+method+
				": at most "+strconv.FormatInt(limit, 10)+" calls per second")
		}
		return weft.Continue
	})
}

func main() {} // never run in a reactor module: handlers register in init
