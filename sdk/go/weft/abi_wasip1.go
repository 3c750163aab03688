//go:build wasip1

package weft

// Host functions of ABI v1, module "weft". A Go string parameter is lowered
// to the (ptr: i32, len: i32) pair the ABI uses, and a *uint32 to an i32
// address, so each declaration below has exactly the ABI's Wasm signature.

//go:wasmimport weft get_service
func hostGetService(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_method
func hostGetMethod(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_side
func hostGetSide(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_arguments
func hostGetArguments(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_remote_address
func hostGetRemoteAddress(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_attachment
func hostGetAttachment(key string, retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft set_attachment
func hostSetAttachment(key, value string) int32

//go:wasmimport weft remove_attachment
func hostRemoveAttachment(key string) int32

//go:wasmimport weft get_config
func hostGetConfig(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_result
func hostGetResult(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_error
func hostGetError(retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft reject
func hostReject(code int32, msg string) int32

//go:wasmimport weft log
func hostLog(level int32, msg string) int32

//go:wasmimport weft counter_add
func hostCounterAdd(key string, delta, windowMs int64) int64

//go:wasmimport weft now_ms
func hostNowMs() int64

// ABI v1.1: shared data, guest metrics, ticks.

//go:wasmimport weft shared_get
func hostSharedGet(key string, retPtrPtr, retLenPtr, casPtr *uint32) int32

//go:wasmimport weft shared_set
func hostSharedSet(key, value string, cas uint32) int32

//go:wasmimport weft metric_define
func hostMetricDefine(kind int32, name string, idPtr *uint32) int32

//go:wasmimport weft metric_add
func hostMetricAdd(id uint32, delta int64) int32

//go:wasmimport weft metric_record
func hostMetricRecord(id uint32, value int64) int32

//go:wasmimport weft set_tick_period
func hostSetTickPeriod(ms uint32) int32

// ABI v1.1: callouts and shared queues.

//go:wasmimport weft http_call
func hostHTTPCall(cluster, method, path, headers, body string, timeoutMs uint32,
	statusPtr, headersPtrPtr, headersLenPtr, bodyPtrPtr, bodyLenPtr *uint32) int32

//go:wasmimport weft queue_register
func hostQueueRegister(name string, idPtr *uint32) int32

//go:wasmimport weft queue_resolve
func hostQueueResolve(vmID, name string, idPtr *uint32) int32

//go:wasmimport weft queue_enqueue
func hostQueueEnqueue(id uint32, item string) int32

//go:wasmimport weft queue_dequeue
func hostQueueDequeue(id uint32, retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft get_property
func hostGetProperty(path string, retPtrPtr, retLenPtr *uint32) int32

// ABI v1.2: services.

//go:wasmimport weft set_result
func hostSetResult(json string) int32

//go:wasmimport weft get_deadline
func hostGetDeadline() int64

//go:wasmimport weft get_argument_string
func hostGetArgumentString(index uint32, retPtrPtr, retLenPtr *uint32) int32

//go:wasmimport weft set_result_string
func hostSetResultString(s string) int32
