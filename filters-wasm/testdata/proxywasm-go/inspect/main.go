// A proxy-wasm filter on proxy-wasm-go-sdk (v0.24.0's API) that reports
// what the host shows it of a call, for the tests of the HTTP view: the
// request's headers, its properties, the VM's and the plugin's
// configuration, the response's headers and trailers. The report is one
// JSON object in the response header x-inspect-<side>, added from the
// trailers callback (the last to run). A request header x-inspect-fail
// makes the trailers callback set grpc-status to its value: a success
// turned into that error.
package main

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

var vmConfig string

func (*vm) OnVMStart(int) types.OnVMStartStatus {
	b, err := proxywasm.GetVMConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		return types.OnVMStartStatusFailed
	}
	vmConfig = string(b)
	return types.OnVMStartStatusOK
}

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	config string
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	b, err := proxywasm.GetPluginConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		return types.OnPluginStartStatusFailed
	}
	p.config = string(b)
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(uint32) types.HttpContext {
	return &inspect{report: map[string]any{"vm_configuration": vmConfig, "configuration": p.config}}
}

type inspect struct {
	types.DefaultHttpContext
	report map[string]any
	fail   string
}

// props are the properties reported: Envoy's attribute names and weft's.
var props = []string{"request.path", "request.method", "request.scheme", "request.host", "request.protocol",
	"source.address", "destination.address", "plugin_name", "plugin_root_id", "plugin_vm_id",
	"weft.interface", "weft.method", "weft.side", "weft.protocol", "request.headers.x-user"}

func (c *inspect) OnHttpRequestHeaders(int, bool) types.Action {
	hs, err := proxywasm.GetHttpRequestHeaders()
	if err != nil {
		proxywasm.LogErrorf("request headers: %v", err)
	}
	c.report["request_headers"] = pairs(hs)
	c.fail, _ = proxywasm.GetHttpRequestHeader("x-inspect-fail")
	got := map[string]string{}
	for _, name := range props {
		if v, err := proxywasm.GetProperty(split(name)); err == nil {
			got[name] = string(v)
		}
	}
	// A map attribute comes in the header map's pairs encoding.
	if b, err := proxywasm.GetProperty([]string{"request", "headers"}); err == nil {
		got["request.headers"] = pairs(decodePairs(b))["x-user"]
	}
	// A bool attribute is one byte.
	if b, err := proxywasm.GetProperty([]string{"connection", "mtls"}); err == nil {
		got["connection.mtls"] = hex.EncodeToString(b)
	}
	c.report["properties"] = got
	return types.ActionContinue
}

func (c *inspect) OnHttpResponseHeaders(int, bool) types.Action {
	hs, err := proxywasm.GetHttpResponseHeaders()
	if err != nil {
		proxywasm.LogErrorf("response headers: %v", err)
	}
	c.report["response_headers"] = pairs(hs)
	return types.ActionContinue
}

func (c *inspect) OnHttpResponseTrailers(int) types.Action {
	ts, err := proxywasm.GetHttpResponseTrailers()
	if err != nil {
		proxywasm.LogErrorf("response trailers: %v", err)
	}
	c.report["response_trailers"] = pairs(ts)
	side, _ := proxywasm.GetProperty([]string{"weft", "side"})
	js, _ := json.Marshal(c.report)
	if err := proxywasm.AddHttpResponseHeader("x-inspect-"+string(side), string(js)); err != nil {
		proxywasm.LogErrorf("x-inspect: %v", err)
	}
	if c.fail != "" {
		proxywasm.ReplaceHttpResponseTrailer("grpc-status", c.fail)
		proxywasm.ReplaceHttpResponseTrailer("grpc-message", "failed by the inspect filter")
	}
	return types.ActionContinue
}

func pairs(hs [][2]string) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h[0]] = h[1]
	}
	return m
}

func split(name string) []string {
	var out []string
	start := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '.' && !(len(out) == 2 && out[0] == "request") {
			out = append(out, name[start:i])
			start = i + 1
		}
	}
	return append(out, name[start:])
}

// decodePairs reads the pairs encoding: a count, each name's and value's
// length (u32 little endian), then the names and values, each followed by
// a NUL.
func decodePairs(b []byte) [][2]string {
	if len(b) < 4 {
		return nil
	}
	n := int(binary.LittleEndian.Uint32(b))
	sizes := b[4:]
	if len(sizes) < 8*n {
		return nil
	}
	data := sizes[8*n:]
	var out [][2]string
	for i := 0; i < n; i++ {
		kl, vl := int(binary.LittleEndian.Uint32(sizes[8*i:])), int(binary.LittleEndian.Uint32(sizes[8*i+4:]))
		if len(data) < kl+vl+2 {
			return out
		}
		out = append(out, [2]string{string(data[:kl]), string(data[kl+1 : kl+1+vl])})
		data = data[kl+vl+2:]
	}
	return out
}
