// A proxy-wasm filter on proxy-wasm-go-sdk that asks an auth server before
// letting a call through, as Envoy's ext_authz-style filters do: it pauses
// the request, calls the cluster "auth" (GET /check?user=<x-user>), and
// when the answer comes either resumes the call with the answer's x-role as
// a header, or answers it itself with 403. The same behaviour as
// ../../proxywasm-as/assembly/authcall.ts.
package main

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &auth{} }

type auth struct{ types.DefaultHttpContext }

func (a *auth) OnHttpRequestHeaders(int, bool) types.Action {
	user, _ := proxywasm.GetHttpRequestHeader("x-user")
	headers := [][2]string{{":method", "GET"}, {":path", "/check?user=" + user}, {":authority", "auth"}}
	if _, err := proxywasm.DispatchHttpCall("auth", headers, nil, nil, 2000, onAnswer); err != nil {
		proxywasm.LogErrorf("dispatching the auth call: %v", err)
		_ = proxywasm.SendHttpResponse(503, nil, []byte("auth unavailable"), 14 /* UNAVAILABLE */)
	}
	return types.ActionPause
}

// header is the first value of key in the callout's answer.
func header(headers [][2]string, key string) string {
	for _, h := range headers {
		if h[0] == key {
			return h[1]
		}
	}
	return ""
}

func onAnswer(int, int, int) {
	answer, err := proxywasm.GetHttpCallResponseHeaders()
	if err != nil {
		proxywasm.LogErrorf("the callout's headers: %v", err)
	}
	status := header(answer, ":status")
	if status != "200" {
		_ = proxywasm.SendHttpResponse(403, nil, []byte("not allowed: "+status), 7 /* PERMISSION_DENIED */)
		return
	}
	if err := proxywasm.AddHttpRequestHeader("x-role", header(answer, "x-role")); err != nil {
		proxywasm.LogErrorf("adding x-role: %v", err)
	}
	if err := proxywasm.ResumeHttpRequest(); err != nil {
		proxywasm.LogErrorf("resuming: %v", err)
	}
}
