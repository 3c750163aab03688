// The host functions of weft's WASM filter ABI v1 (sdk/ABI.md), module
// "weft". Strings are (ptr, len) pairs of UTF-8 bytes in this module's memory;
// functions that return data write a pointer and a length (little-endian
// i32, into buffers the host got from weft_alloc) at retPtrPtr and retLenPtr.
// Prefer the API of weft.ts.

// @ts-ignore: decorator
@external("weft", "get_service")
export declare function get_service(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_method")
export declare function get_method(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_side")
export declare function get_side(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_arguments")
export declare function get_arguments(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_remote_address")
export declare function get_remote_address(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_attachment")
export declare function get_attachment(keyPtr: usize, keyLen: usize, retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "set_attachment")
export declare function set_attachment(keyPtr: usize, keyLen: usize, valPtr: usize, valLen: usize): i32;
// @ts-ignore: decorator
@external("weft", "remove_attachment")
export declare function remove_attachment(keyPtr: usize, keyLen: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_config")
export declare function get_config(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_result")
export declare function get_result(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "get_error")
export declare function get_error(retPtrPtr: usize, retLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "reject")
export declare function reject(code: i32, msgPtr: usize, msgLen: usize): i32;
// @ts-ignore: decorator
@external("weft", "log")
export declare function log(level: i32, msgPtr: usize, msgLen: usize): i32;
// @ts-ignore: decorator
@external("weft", "counter_add")
export declare function counter_add(keyPtr: usize, keyLen: usize, delta: i64, windowMs: i64): i64;
// @ts-ignore: decorator
@external("weft", "now_ms")
export declare function now_ms(): i64;

// ABI v1.1: shared data, guest metrics, ticks.
// @ts-ignore: decorator
@external("weft", "shared_get")
export declare function shared_get(keyPtr: usize, keyLen: usize, retPtrPtr: usize, retLenPtr: usize, casPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "shared_set")
export declare function shared_set(keyPtr: usize, keyLen: usize, valPtr: usize, valLen: usize, cas: u32): i32;
// @ts-ignore: decorator
@external("weft", "metric_define")
export declare function metric_define(kind: i32, namePtr: usize, nameLen: usize, idPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "metric_add")
export declare function metric_add(id: u32, delta: i64): i32;
// @ts-ignore: decorator
@external("weft", "metric_record")
export declare function metric_record(id: u32, value: i64): i32;
// @ts-ignore: decorator
@external("weft", "set_tick_period")
export declare function set_tick_period(ms: u32): i32;

// ABI v1.1: callouts and shared queues.
// @ts-ignore: decorator
@external("weft", "http_call")
export declare function http_call(clusterPtr: usize, clusterLen: usize, methodPtr: usize, methodLen: usize,
  pathPtr: usize, pathLen: usize, headersPtr: usize, headersLen: usize, bodyPtr: usize, bodyLen: usize,
  timeoutMs: u32, statusPtr: usize, retHeadersPtrPtr: usize, retHeadersLenPtr: usize,
  retBodyPtrPtr: usize, retBodyLenPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "queue_register")
export declare function queue_register(namePtr: usize, nameLen: usize, idPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "queue_resolve")
export declare function queue_resolve(vmPtr: usize, vmLen: usize, namePtr: usize, nameLen: usize, idPtr: usize): i32;
// @ts-ignore: decorator
@external("weft", "queue_enqueue")
export declare function queue_enqueue(id: u32, itemPtr: usize, itemLen: usize): i32;
// @ts-ignore: decorator
@external("weft", "queue_dequeue")
export declare function queue_dequeue(id: u32, retPtrPtr: usize, retLenPtr: usize): i32;

@external("weft", "get_property")
export declare function get_property(pathPtr: usize, pathLen: usize, retPtrPtr: usize, retLenPtr: usize): i32;

/** Status codes of the host functions. */
export const STATUS_OK: i32 = 0;
export const STATUS_NOT_FOUND: i32 = 1;
export const STATUS_BAD_ARGUMENT: i32 = 2;
export const STATUS_ALLOC_FAILED: i32 = 3;
export const STATUS_CAS_MISMATCH: i32 = 4; // v1.1
export const STATUS_LIMIT: i32 = 5; // v1.1
export const STATUS_REFUSED: i32 = 6; // v1.1: not in the filter's allowed_capabilities
export const STATUS_UNAVAILABLE: i32 = 7; // v1.1: http_call failed
export const STATUS_TIMEOUT: i32 = 8; // v1.1: http_call's own timeoutMs passed
