// Command rewrite is a weft WASM filter that sets the attachment
// x-rewritten = "by-wasm-go" on every request.
package main

import "github.com/weftrpc/weft/sdk/go/weft"

func init() {
	weft.OnRequest(func(c *weft.Call) weft.Action {
		if err := c.SetAttachment("x-rewritten", "by-wasm-go"); err != nil {
			return c.Reject(weft.CodeUnknown, err.Error())
		}
		return weft.Continue
	})
}

func main() {} // never run in a reactor module: handlers register in init
