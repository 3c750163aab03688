// A proxy-wasm filter on proxy-wasm-go-sdk (v0.24.0's API, as written for
// Envoy): it reads and edits the request's headers, answers a call itself
// with SendHttpResponse, reads properties, and edits the response's
// headers. The same behaviour as ../../proxywasm-as/assembly/headers.ts,
// so one test checks both SDKs.
package main

import (
	"strconv"
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

// plugins counts the plugin (root) contexts of this instance: a VM shared
// by filters with one vm_id holds one per filter (x-vm-plugins).
var plugins int

func (*vm) NewPluginContext(uint32) types.PluginContext { plugins++; return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	config string
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	cfg, err := proxywasm.GetPluginConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		proxywasm.LogCriticalf("reading the configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	p.config = string(cfg)
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(uint32) types.HttpContext { return &headers{plugin: p} }

type headers struct {
	types.DefaultHttpContext
	plugin *plugin
}

func (h *headers) OnHttpRequestHeaders(int, bool) types.Action {
	user, _ := proxywasm.GetHttpRequestHeader("x-user")
	if mode, _ := proxywasm.GetHttpRequestHeader("x-mode"); mode == "deny" {
		proxywasm.LogInfof("denying %s", user)
		if err := proxywasm.SendHttpResponse(403, nil, []byte("no entry for "+user), 7 /* PERMISSION_DENIED */); err != nil {
			proxywasm.LogErrorf("send_local_response: %v", err)
		}
		return types.ActionPause
	}
	path, _ := proxywasm.GetHttpRequestHeader(":path")
	method, _ := proxywasm.GetProperty([]string{"weft", "method"})
	side, _ := proxywasm.GetProperty([]string{"weft", "side"})
	for _, err := range []error{
		proxywasm.AddHttpRequestHeader("x-proxy-wasm", h.plugin.config),
		proxywasm.ReplaceHttpRequestHeader("x-path", path),
		proxywasm.AddHttpRequestHeader("x-method", string(method)),
		proxywasm.AddHttpRequestHeader("x-side", string(side)),
		proxywasm.AddHttpRequestHeader("x-vm-plugins", strconv.Itoa(plugins)),
		proxywasm.RemoveHttpRequestHeader("x-secret"),
	} {
		if err != nil {
			proxywasm.LogErrorf("editing the request headers: %v", err)
		}
	}
	return types.ActionContinue
}

func (h *headers) OnHttpResponseHeaders(int, bool) types.Action {
	root, err := proxywasm.GetProperty([]string{"plugin_root_id"})
	if err != nil {
		proxywasm.LogErrorf("plugin_root_id: %v", err)
	}
	for _, err := range []error{
		proxywasm.AddHttpResponseHeader("x-served-by", strings.TrimSpace(string(root))),
		proxywasm.AddHttpResponseHeader("x-vm-plugins", strconv.Itoa(plugins)),
	} {
		if err != nil {
			proxywasm.LogErrorf("editing the response headers: %v", err)
		}
	}
	return types.ActionContinue
}
