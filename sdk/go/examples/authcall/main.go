// Command authcall is a weft WASM filter that asks an auth service whether
// each call may go on (ABI v1.1 http_call): GET /check?user=<x-user> with
// the header x-user, to the cluster "auth" of the filter's config
// (clusters: {auth: "http://auth.internal:8080"}). An answer 200 lets the
// call through with the attachment x-role set from the answer's header
// x-role; any other answer, or a callout that fails, rejects it as
// forbidden. The call waits for the answer (its deadline bounds the wait).
package main

import (
	"net/url"
	"strconv"

	"github.com/weftrpc/weft/sdk/go/weft"
)

func init() {
	weft.OnRequest(func(c *weft.Call) weft.Action {
		user, _ := c.Attachment("x-user")
		resp, err := weft.HTTPCall("auth", "GET", "/check?user="+url.QueryEscape(user),
			map[string]string{"x-user": user}, nil, 0)
		if err != nil {
			return c.Reject(weft.CodeForbidden, "authcall: "+err.Error())
		}
		if resp.Status != 200 {
			return c.Reject(weft.CodeForbidden, "authcall: the auth service answered "+strconv.Itoa(resp.Status))
		}
		if role, ok := resp.Headers["x-role"]; ok {
			c.SetAttachment("x-role", role)
		}
		return weft.Continue
	})
}

func main() {} // never run in a reactor module: handlers register in init
