// A proxy-wasm filter on proxy-wasm-go-sdk that does what
// ../../proxywasm-as/assembly/trace.ts does: it appends its name (its
// plugin configuration) to the request header "trace" and to the response
// header "rtrace", so that test/wasm_e2e_test.go reads the order of a chain
// that mixes native, weft-ABI and proxy-wasm filters of both SDKs.
package main

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	name string
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	cfg, err := proxywasm.GetPluginConfiguration()
	if err != nil || len(cfg) == 0 {
		proxywasm.LogCriticalf("trace needs its name as configuration (%v)", err)
		return types.OnPluginStartStatusFailed
	}
	p.name = string(cfg)
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(uint32) types.HttpContext { return &trace{name: p.name} }

type trace struct {
	types.DefaultHttpContext
	name string
}

func appendName(list, name string) string {
	if list == "" {
		return name
	}
	return list + "," + name
}

func (t *trace) OnHttpRequestHeaders(int, bool) types.Action {
	list, _ := proxywasm.GetHttpRequestHeader("trace")
	if err := proxywasm.ReplaceHttpRequestHeader("trace", appendName(list, t.name)); err != nil {
		proxywasm.LogErrorf("trace: %v", err)
	}
	return types.ActionContinue
}

func (t *trace) OnHttpResponseHeaders(int, bool) types.Action {
	list, _ := proxywasm.GetHttpResponseHeader("rtrace")
	if err := proxywasm.ReplaceHttpResponseHeader("rtrace", appendName(list, t.name)); err != nil {
		proxywasm.LogErrorf("rtrace: %v", err)
	}
	return types.ActionContinue
}
