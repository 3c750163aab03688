package wasmfilter

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Weft ABI v1.1: the host capabilities proxy-wasm filters have, for weft-ABI
// filters too, on the same implementation (one store of shared data per
// vm_id, one set of guest metrics per filter, one ticker per filter).
// Imports only: a v1 module runs unchanged, and weft_abi_version stays 1.
// sdk/ABI.md, "Capabilities (v1.1)".

// Statuses v1.1 adds to ABI.md's.
const (
	statusCasMismatch = 4 // shared_set: another instance wrote the key since the guest read it
	statusLimit       = 5 // a bound of the store was reached (keys, bytes, metrics, queues, max_callouts)
	statusRefused     = 6 // the function is not in the filter's allowed_capabilities
	statusUnavailable = 7 // http_call: the callout failed (unreachable, reset, answer too large)
	statusTimeout     = 8 // http_call: its own timeout_ms passed before the answer
)

// Exports of v1.1: the tick and queue callbacks.
const (
	exportOnTick       = "weft_on_tick"
	exportOnQueueReady = "weft_on_queue_ready"
)

var (
	sigSharedGet = signature{[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}}
	sigSharedSet = sigSharedGet
	sigMetricDef = signature{[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}}
	sigMetricUpd = signature{[]api.ValueType{i32, i64}, []api.ValueType{i32}}
	sigTick      = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
	sigHTTPCall  = signature{i32s(16), []api.ValueType{i32}}
	sigQueueReg  = signature{i32s(3), []api.ValueType{i32}}
	sigQueueRes  = signature{i32s(5), []api.ValueType{i32}}
	sigQueueEnq  = signature{i32s(3), []api.ValueType{i32}}
	sigQueueDeq  = signature{i32s(3), []api.ValueType{i32}}
	sigQueueCB   = signature{[]api.ValueType{i32}, nil}
	sigGetProp   = signature{i32s(4), []api.ValueType{i32}}
)

// capHostFunctions are v1.1's host functions, by name; hostModule binds them
// beside v1's (a function the filter's allowed_capabilities do not list
// answers REFUSED).
var capHostFunctions = map[string]struct {
	sig signature
	fn  func(in *instance, ctx context.Context, s []uint64)
}{
	"shared_get":      {sigSharedGet, (*instance).hSharedGet},
	"shared_set":      {sigSharedSet, (*instance).hSharedSet},
	"metric_define":   {sigMetricDef, (*instance).hMetricDefine},
	"metric_add":      {sigMetricUpd, (*instance).hMetricAdd},
	"metric_record":   {sigMetricUpd, (*instance).hMetricRecord},
	"set_tick_period": {sigTick, (*instance).hSetTickPeriod},
	"http_call":       {sigHTTPCall, (*instance).hHTTPCall},
	"queue_register":  {sigQueueReg, (*instance).hQueueRegister},
	"queue_resolve":   {sigQueueRes, (*instance).hQueueResolve},
	"queue_enqueue":   {sigQueueEnq, (*instance).hQueueEnqueue},
	"queue_dequeue":   {sigQueueDeq, (*instance).hQueueDequeue},
	"get_property":    {sigGetProp, (*instance).hGetProperty},
	// v1.2: a service's handler answers with set_result; any callback
	// reads the call's deadline.
	"set_result":          {sigKey, (*instance).hSetResult},
	"set_result_string":   {sigKey, (*instance).hSetResultString},
	"get_argument_string": {sigMsg, (*instance).hGetArgumentString},
	"get_deadline":        {sigNow, (*instance).hGetDeadline},
}

// hGetProperty is get_property(path_ptr, path_len, ret_ptr_ptr,
// ret_len_ptr): a property by its dotted path, as proxy-wasm filters read
// them (one implementation, instance.property).
func (in *instance) hGetProperty(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	path, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	v, found := in.property(string(path))
	if !found {
		s[0] = statusNotFound
		return
	}
	s[0] = uint64(in.returnString(ctx, uint32(s[2]), uint32(s[3]), v))
}

// weftStatus maps a proxy-wasm status of the shared implementation to
// ABI.md's.
func weftStatus(st uint64) uint64 {
	switch st {
	case pwOK:
		return statusOK
	case pwNotFound:
		return statusNotFound
	case pwCasMismatch:
		return statusCasMismatch
	case pwInternalFailure:
		return statusLimit
	}
	return statusBadArgument
}

// hSharedGet is shared_get(key_ptr, key_len, ret_ptr_ptr, ret_len_ptr,
// cas_ptr).
func (in *instance) hSharedGet(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	key, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	v, cas, found := in.f.shared.get(in.f.vmID, key)
	if !found {
		s[0] = statusNotFound
		return
	}
	if !in.mem.WriteUint32Le(uint32(s[4]), cas) {
		s[0] = statusBadArgument
		return
	}
	s[0] = uint64(in.returnBytes(ctx, uint32(s[2]), uint32(s[3]), v))
}

// hSharedSet is shared_set(key_ptr, key_len, val_ptr, val_len, cas).
func (in *instance) hSharedSet(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	key, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	val, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 || len(key) == 0 {
		s[0] = statusBadArgument
		return
	}
	s[0] = weftStatus(in.f.shared.set(in.f.vmID, key, val, uint32(s[4])))
}

// hMetricDefine is metric_define(kind, name_ptr, name_len, id_ptr): kind 0
// counter, 1 gauge, 2 histogram, as proxy-wasm's.
func (in *instance) hMetricDefine(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	pwDefineMetric(nil, in, ctx, s)
	s[0] = weftStatus(s[0])
}

// hMetricAdd is metric_add(id, delta: i64).
func (in *instance) hMetricAdd(ctx context.Context, s []uint64) {
	pwIncrementMetric(nil, in, ctx, s)
	s[0] = weftStatus(s[0])
}

// hMetricRecord is metric_record(id, value: i64).
func (in *instance) hMetricRecord(ctx context.Context, s []uint64) {
	pwRecordMetric(nil, in, ctx, s)
	s[0] = weftStatus(s[0])
}

// hSetTickPeriod is set_tick_period(ms): weft_on_tick every ms (at least
// 10) on the filter's idle instances; 0 stops the ticks.
func (in *instance) hSetTickPeriod(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	in.f.setTick(time.Duration(uint32(s[0])) * time.Millisecond)
	s[0] = statusOK
}
