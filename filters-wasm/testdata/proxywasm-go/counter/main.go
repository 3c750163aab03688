// A proxy-wasm filter on proxy-wasm-go-sdk that counts calls in shared
// data with compare-and-swap (retrying on CAS_MISMATCH, as a rate limiter
// does across Envoy's worker threads), hands each call its number in the
// header x-n, and counts ticks of a 20 ms timer in a guest counter metric
// "ticks".
package main

import (
	"encoding/binary"
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() { proxywasm.SetVMContext(&vm{}) }

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	ticks proxywasm.MetricCounter
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	p.ticks = proxywasm.DefineCounterMetric("ticks")
	if err := proxywasm.SetTickPeriodMilliSeconds(20); err != nil {
		proxywasm.LogCriticalf("set_tick_period: %v", err)
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *plugin) OnTick() { p.ticks.Increment(1) }

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &count{} }

type count struct{ types.DefaultHttpContext }

func (*count) OnHttpRequestHeaders(int, bool) types.Action {
	for range 1000 {
		value, cas, err := proxywasm.GetSharedData("count")
		var n uint64
		if err == nil && len(value) == 8 {
			n = binary.LittleEndian.Uint64(value)
		} else if err != nil && err != types.ErrorStatusNotFound {
			proxywasm.LogErrorf("get_shared_data: %v", err)
			return types.ActionContinue
		}
		n++
		err = proxywasm.SetSharedData("count", binary.LittleEndian.AppendUint64(nil, n), cas)
		if err == types.ErrorStatusCasMismatch {
			continue
		}
		if err != nil {
			proxywasm.LogErrorf("set_shared_data: %v", err)
			return types.ActionContinue
		}
		if err := proxywasm.AddHttpRequestHeader("x-n", strconv.FormatUint(n, 10)); err != nil {
			proxywasm.LogErrorf("x-n: %v", err)
		}
		return types.ActionContinue
	}
	proxywasm.LogErrorf("shared data: 1000 CAS mismatches in a row")
	return types.ActionContinue
}
