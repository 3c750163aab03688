// Command authz is a weft WASM filter that rejects, as forbidden, every call
// whose "token" attachment is missing or differs from the filter's config
// {"token": "..."}. A filter configured without a token rejects every call.
package main

import "github.com/weftrpc/weft/sdk/go/weft"

func init() {
	weft.OnRequest(func(c *weft.Call) weft.Action {
		want, configured := weft.ConfigString("token")
		got, present := c.Attachment("token")
		if !configured || !present || got != want {
			return c.Reject(weft.CodeForbidden, "missing or wrong token")
		}
		return weft.Continue
	})
}

func main() {} // never run in a reactor module: handlers register in init
