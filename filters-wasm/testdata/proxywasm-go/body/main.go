// A proxy-wasm filter on proxy-wasm-go-sdk that reads and replaces bodies,
// for test/'s body tests: it answers the request body it saw, hex-encoded,
// in the response header x-req-body; when the request carries x-new-body
// (hex), it replaces the request body with those bytes and answers the
// outcome in x-set-body ("ok" or the SDK's error); when it carries
// x-new-resp-body (hex), it replaces the response body with those bytes.
package main

import (
	"encoding/hex"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &body{} }

type body struct {
	types.DefaultHttpContext
	newBody, newResp string
	seen, setOutcome string
}

func (b *body) OnHttpRequestHeaders(int, bool) types.Action {
	b.newBody, _ = proxywasm.GetHttpRequestHeader("x-new-body")
	b.newResp, _ = proxywasm.GetHttpRequestHeader("x-new-resp-body")
	return types.ActionContinue
}

func (b *body) OnHttpRequestBody(size int, _ bool) types.Action {
	data, err := proxywasm.GetHttpRequestBody(0, size)
	if err != nil {
		proxywasm.LogErrorf("reading the request body: %v", err)
	}
	b.seen = hex.EncodeToString(data)
	if b.newBody != "" {
		nb, _ := hex.DecodeString(b.newBody)
		b.setOutcome = "ok"
		if err := proxywasm.ReplaceHttpRequestBody(nb); err != nil {
			b.setOutcome = err.Error()
		}
	}
	return types.ActionContinue
}

func (b *body) OnHttpResponseHeaders(int, bool) types.Action {
	_ = proxywasm.AddHttpResponseHeader("x-req-body", b.seen)
	if b.setOutcome != "" {
		_ = proxywasm.AddHttpResponseHeader("x-set-body", b.setOutcome)
	}
	return types.ActionContinue
}

func (b *body) OnHttpResponseBody(size int, _ bool) types.Action {
	if b.newResp != "" {
		nb, _ := hex.DecodeString(b.newResp)
		if err := proxywasm.ReplaceHttpResponseBody(nb); err != nil {
			proxywasm.LogErrorf("replacing the response body: %v", err)
		}
	}
	return types.ActionContinue
}
