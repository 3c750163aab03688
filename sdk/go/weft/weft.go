package weft

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/weftrpc/weft/sdk/go/weft/internal/hooks"
)

// ABIVersion is the version of the ABI this SDK implements (sdk/ABI.md).
const ABIVersion = 1

// Action is what a callback tells the host to do with the call.
type Action int32

const (
	// Continue lets the call go on, with any attachment changes made.
	Continue Action = 0
	// Reject fails the call with the code and message given to Call.Reject
	// (CodeForbidden and a generic message when it was not called).
	Reject Action = 1
)

// Code is one of weft's error codes (Dubbo's RpcException codes), used to
// reject a call.
type Code int32

const (
	CodeUnknown       Code = 0
	CodeNetwork       Code = 1
	CodeTimeout       Code = 2
	CodeBiz           Code = 3
	CodeForbidden     Code = 4
	CodeSerialization Code = 5
	CodeNoProvider    Code = 6
	CodeLimitExceeded Code = 7
)

// Level is a log level of the App's logger.
type Level int32

const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Status codes of the host functions.
const (
	statusOK          = 0
	statusNotFound    = 1
	statusBadArgument = 2
	statusAllocFailed = 3
	statusCasMismatch = 4 // v1.1
	statusLimit       = 5 // v1.1
	statusRefused     = 6 // v1.1
	statusUnavailable = 7 // v1.1
	statusTimeout     = 8 // v1.1
)

// maxAlloc bounds one weft_alloc: larger requests get 0 (out of memory)
// rather than a fatal runtime error.
const maxAlloc = 1 << 30

// Handler handles one call, on request or on response.
type Handler func(c *Call) Action

var (
	onRequest, onResponse Handler

	// pinned holds every buffer weft_alloc handed to the host during the
	// current callback, so the garbage collector cannot free (and reuse)
	// one before the guest has read it. Cleared when the callback returns.
	pinned [][]byte

	// retPtr and retLen are the out-parameters of the host functions that
	// return data. Globals have fixed addresses (a goroutine stack may
	// move), and an instance runs one callback at a time. http_call has
	// three more.
	retPtr, retLen                    uint32
	retStatus, retBodyPtr, retBodyLen uint32
)

// OnRequest registers the handler run before each call goes on. Register
// handlers in an init function: the host runs init functions (through
// _initialize) but never main.
func OnRequest(h Handler) { onRequest = h }

// OnResponse registers the handler run after each call's result came back.
// The filter must also import package onresponse, which exports
// weft_on_response:
//
//	import _ "github.com/weftrpc/weft/sdk/go/weft/onresponse"
//
// (without it, every call is rejected with a message saying so).
func OnResponse(h Handler) { onResponse = h }

func init() {
	hooks.Response = func() int32 { return int32(dispatch(true)) }
	hooks.Call = func() int32 { return int32(dispatchCall()) }
}

// ErrBadArgument is returned when the host refused an argument: a key or
// value that is not valid UTF-8.
var ErrBadArgument = errors.New("weft: bad argument (invalid UTF-8?)")

// Call is the call a callback handles. It is valid only during the callback
// it was given to.
type Call struct {
	response bool
	answered bool // ReturnString set the answer
	method   *string
	service  *string
	side     *string
}

// IsResponse tells whether the handler runs on response (after the result).
func (c *Call) IsResponse() bool { return c.response }

// Method returns the method name as on the wire (sayHello).
func (c *Call) Method() string { return cached(&c.method, "get_method", hostGetMethod) }

// Service returns the service key, group/interface:version.
func (c *Call) Service() string { return cached(&c.service, "get_service", hostGetService) }

// Side returns "provider" or "consumer".
func (c *Call) Side() string { return cached(&c.side, "get_side", hostGetSide) }

// Arguments returns the call's arguments as a JSON array. The host computes
// it only when asked, so call it only when needed.
func (c *Call) Arguments() string {
	s, _ := fetch("get_arguments", hostGetArguments)
	return s
}

// RemoteAddress returns the peer's host:port on a provider; false in
// process.
func (c *Call) RemoteAddress() (string, bool) {
	return fetch("get_remote_address", hostGetRemoteAddress)
}

// Property returns a property of the call by its dotted path, with the
// names proxy-wasm filters read (ABI v1.1, sdk/ABI.md): request.path,
// source.address, destination.address, connection.mtls (one byte, 0 or
// 1), plugin_name, plugin_vm_id, weft.interface, weft.method, weft.side...;
// false when the call has none.
func (c *Call) Property(path string) (string, bool) {
	if !utf8.ValidString(path) {
		return "", false
	}
	retPtr, retLen = 0, 0
	return result("get_property", hostGetProperty(path, &retPtr, &retLen))
}

// Attachment returns the attachment key as text (non-string values
// formatted by the host); false when absent.
func (c *Call) Attachment(key string) (string, bool) {
	if !utf8.ValidString(key) {
		return "", false // no attachment has such a key
	}
	retPtr, retLen = 0, 0
	return result("get_attachment", hostGetAttachment(key, &retPtr, &retLen))
}

// SetAttachment sets the attachment key to value. On response, a provider
// sends it back with the result. It fails only with ErrBadArgument.
func (c *Call) SetAttachment(key, value string) error {
	if !utf8.ValidString(key) || !utf8.ValidString(value) {
		return ErrBadArgument
	}
	return errorOf(hostSetAttachment(key, value))
}

// RemoveAttachment removes the attachment key (absent is not an error).
func (c *Call) RemoveAttachment(key string) error {
	if !utf8.ValidString(key) {
		return ErrBadArgument
	}
	return errorOf(hostRemoveAttachment(key))
}

// Result returns, on response, the result value as JSON; false when the call
// failed.
func (c *Call) Result() (string, bool) { return fetch("get_result", hostGetResult) }

// ErrorMessage returns, on response, the call's error message; false when
// the call succeeded.
func (c *Call) ErrorMessage() (string, bool) { return fetch("get_error", hostGetError) }

// Config returns the filter's config (see the package function Config).
func (c *Call) Config() map[string]any { return Config() }

// Reject records why the call is rejected and returns Reject, so a handler
// can `return c.Reject(weft.CodeForbidden, "no token")`. On response, the
// result is replaced by that error.
// A code outside 0–7, which the host refuses, becomes CodeUnknown with the
// code at the start of the message.
func (c *Call) Reject(code Code, msg string) Action {
	if code < CodeUnknown || code > CodeLimitExceeded {
		msg = "(code " + itoa(int64(code)) + ") " + msg
		code = CodeUnknown
	}
	hostReject(int32(code), validUTF8(msg))
	return Reject
}

// Log logs msg through the App's logger (a level outside LevelDebug..LevelError
// is clamped to that range).
func Log(level Level, msg string) {
	hostLog(int32(min(max(level, LevelDebug), LevelError)), validUTF8(msg))
}

// CounterAdd adds delta to the counter key of the current fixed window of
// windowMs milliseconds (a new window starts at 0) and returns the new value.
// Counters are shared by every instance of every filter of the App.
// windowMs <= 0 means a counter that never resets.
func CounterAdd(key string, delta, windowMs int64) int64 {
	return hostCounterAdd(validUTF8(key), delta, windowMs)
}

// NowMs returns the host's wall-clock time in Unix milliseconds.
func NowMs() int64 { return hostNowMs() }

// Errors of SharedSet and the metric functions (ABI v1.1).
var (
	// ErrCasMismatch: another instance wrote the key since it was read;
	// read it again and retry.
	ErrCasMismatch = errors.New("weft: shared data: compare-and-swap mismatch")
	// ErrLimit: a bound of the host's store was reached (keys, bytes,
	// metrics).
	ErrLimit = errors.New("weft: a bound of the host's store was reached")
)

// SharedGet returns the value of key in the filter's vm_id space, shared by
// every instance of every filter of the App with that vm_id, and its
// compare-and-swap token; ok is false when the key is absent (ABI v1.1).
func SharedGet(key string) (value string, cas uint32, ok bool) {
	retPtr, retLen = 0, 0
	var c uint32
	v, ok := result("shared_get", hostSharedGet(validUTF8(key), &retPtr, &retLen, &c))
	return v, c, ok
}

// SharedSet stores value under key with a new token; with cas != 0, only if
// cas is still the key's token (else ErrCasMismatch). An increment is a
// loop of SharedGet and SharedSet until it is not ErrCasMismatch.
func SharedSet(key, value string, cas uint32) error {
	switch st := hostSharedSet(validUTF8(key), value, cas); st {
	case statusOK:
		return nil
	case statusCasMismatch:
		return ErrCasMismatch
	case statusLimit:
		return ErrLimit
	default:
		panic(hostFailure("shared_set", st))
	}
}

// Metric is a metric the filter defined (ABI v1.1), on the App's /metrics
// as weft_wasm_guest_<name>{filter="..."}, summed over the filter's
// instances.
type Metric uint32

// Kinds of Metric.
const (
	MetricCounter   = 0
	MetricGauge     = 1
	MetricHistogram = 2
)

// DefineMetric defines (or finds) the filter's metric name of kind
// (MetricCounter, MetricGauge, MetricHistogram); call it once, in an init
// function or the first callback.
func DefineMetric(kind int32, name string) (Metric, error) {
	var id uint32
	switch st := hostMetricDefine(kind, validUTF8(name), &id); st {
	case statusOK:
		return Metric(id), nil
	case statusLimit:
		return 0, ErrLimit
	default:
		return 0, errors.New(hostFailure("metric_define", st))
	}
}

// Add adds delta to a counter (which does not go down) or a gauge.
func (m Metric) Add(delta int64) { hostMetricAdd(uint32(m), delta) }

// Record sets a gauge, or records value in a histogram.
func (m Metric) Record(value int64) { hostMetricRecord(uint32(m), value) }

// SetTickPeriod has the host call the function OnTick registered every ms
// milliseconds (at least 10) on the filter's idle instances; 0 stops it.
func SetTickPeriod(ms uint32) { hostSetTickPeriod(ms) }

// OnTick registers the function the host calls on each tick (SetTickPeriod).
func OnTick(f func()) { onTick = f }

var onTick func()

// More errors of the v1.1 functions.
var (
	// ErrRefused: the filter's allowed_capabilities do not list the
	// function.
	ErrRefused = errors.New("weft: refused: the filter's allowed_capabilities do not list this function")
	// ErrUnavailable: the callout failed (the upstream could not be
	// reached, reset the connection, or answered more than 1 MiB; a ref:
	// cluster whose reference does not exist).
	ErrUnavailable = errors.New("weft: callout failed: the upstream is unavailable")
	// ErrTimeout: the callout's own timeout passed before the answer.
	ErrTimeout = errors.New("weft: callout timed out")
	// ErrNoCall: HTTPCall outside a call's handler (in init, OnTick,
	// OnQueueReady): there is no call to pause.
	ErrNoCall = errors.New("weft: http_call works only in a call's handler")
	// ErrNoQueue: no queue has that id.
	ErrNoQueue = errors.New("weft: no queue has that id")
)

// HTTPResponse is a callout's answer.
type HTTPResponse struct {
	// Status is the HTTP status (a ref: cluster answers 200, or on an
	// error the HTTP status of its code).
	Status int
	// Headers are the answer's headers, names in lower case, values of a
	// repeated name joined by ", " (a ref: cluster's: grpc-status,
	// grpc-message, the result's attachments).
	Headers map[string]string
	// Body is the answer's body (at most 1 MiB; a ref: cluster's is the
	// result as JSON).
	Body string
}

// HTTPCall calls out (ABI v1.1 http_call) to cluster, an upstream the
// filter's config names (clusters: {auth: "http://..."}, or "ref:<id>" for
// a weft reference of the App, whose method is the last segment of path
// and arguments the body, a JSON array), and waits for the answer: the
// call is paused meanwhile. method "" is GET, path "" is /; headers may be
// nil; timeoutMs 0 waits as long as the call may (its deadline, or the
// filter's timeout without one). When the call's deadline comes first the
// filter is stopped there and the call fails with CodeTimeout; a shorter
// timeoutMs returns ErrTimeout instead, for the handler to decide. Only in
// a call's handler (ErrNoCall elsewhere). Other errors: ErrLimit
// (max_callouts in flight), ErrUnavailable, ErrRefused, ErrBadArgument (a
// cluster the config does not name, bad headers).
func HTTPCall(cluster, method, path string, headers map[string]string, body []byte, timeoutMs uint32) (*HTTPResponse, error) {
	hj := ""
	if len(headers) > 0 {
		hj = headersJSON(headers)
	}
	retPtr, retLen, retStatus, retBodyPtr, retBodyLen = 0, 0, 0, 0, 0
	st := hostHTTPCall(cluster, method, path, hj, unsafe.String(unsafe.SliceData(body), len(body)), timeoutMs,
		&retStatus, &retPtr, &retLen, &retBodyPtr, &retBodyLen)
	switch st {
	case statusOK:
	case statusNotFound:
		return nil, ErrNoCall
	default:
		return nil, statusError("http_call", st)
	}
	r := &HTTPResponse{Status: int(retStatus), Headers: map[string]string{}, Body: take(retBodyPtr, retBodyLen)}
	if v, err := parseJSON(take(retPtr, retLen)); err == nil {
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				if s, ok := x.(string); ok {
					r.Headers[k] = s
				}
			}
		}
	}
	return r, nil
}

// headersJSON encodes http_call's headers as a JSON object.
func headersJSON(h map[string]string) string {
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for k, v := range h {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	return string(append(b, '}'))
}

// appendJSONString appends s as a JSON string (invalid UTF-8 as U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range validUTF8(s) {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// statusError is the error of a v1.1 function's status.
func statusError(name string, st int32) error {
	switch st {
	case statusBadArgument:
		return ErrBadArgument
	case statusLimit:
		return ErrLimit
	case statusRefused:
		return ErrRefused
	case statusUnavailable:
		return ErrUnavailable
	case statusTimeout:
		return ErrTimeout
	}
	return errors.New(hostFailure(name, st))
}

// Queue is a shared queue (ABI v1.1), by id.
type Queue uint32

// RegisterQueue registers the queue name in the filter's vm_id space (again:
// the same queue) and returns it; the function OnQueueReady registered is
// called when it has items. Call it in an init function. ErrLimit past
// 1,024 queues in the App.
func RegisterQueue(name string) (Queue, error) {
	var id uint32
	if st := hostQueueRegister(validUTF8(name), &id); st != statusOK {
		return 0, statusError("queue_register", st)
	}
	return Queue(id), nil
}

// ResolveQueue finds the queue name that a filter with vmID registered;
// false when none has (yet).
func ResolveQueue(vmID, name string) (Queue, bool) {
	var id uint32
	return Queue(id), hostQueueResolve(validUTF8(vmID), validUTF8(name), &id) == statusOK
}

// Enqueue appends a copy of item; ErrLimit when the queue holds 1,024
// items or item is over 64 KiB, ErrNoQueue when q does not exist.
func (q Queue) Enqueue(item string) error {
	switch st := hostQueueEnqueue(uint32(q), item); st {
	case statusOK:
		return nil
	case statusBadArgument:
		return ErrNoQueue
	default:
		return statusError("queue_enqueue", st)
	}
}

// Dequeue takes the oldest item; false when the queue is empty.
func (q Queue) Dequeue() (string, bool) {
	retPtr, retLen = 0, 0
	return result("queue_dequeue", hostQueueDequeue(uint32(q), &retPtr, &retLen))
}

// OnQueueReady registers the function the host calls when a queue the
// filter registered has items; it should Dequeue until false.
func OnQueueReady(f func(q Queue)) { onQueueReady = f }

var onQueueReady func(q Queue)

var (
	config    map[string]any
	configRaw string
	configOK  bool
)

// Config returns the filter's own config from the App's config, parsed once
// per instance: JSON objects are map[string]any, arrays []any, numbers
// float64, and strings, booleans and null as string, bool and nil. It is
// empty (never nil) when the filter has none, and when the host's JSON could
// not be parsed (logged at level error). Do not modify it.
func Config() map[string]any {
	if !configOK {
		loadConfig()
	}
	return config
}

// ConfigJSON returns the filter's config as the host gave it (a JSON
// object), for a filter that decodes it itself (encoding/json).
func ConfigJSON() string {
	if !configOK {
		loadConfig()
	}
	return configRaw
}

// ConfigString returns the config value key if it is a string.
func ConfigString(key string) (string, bool) {
	s, ok := Config()[key].(string)
	return s, ok
}

// ConfigInt returns the config value key if it is an integer (a JSON number
// without fraction, or a string holding one).
func ConfigInt(key string) (int64, bool) {
	switch v := Config()[key].(type) {
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func loadConfig() {
	configOK = true
	config = map[string]any{}
	raw, ok := fetch("get_config", hostGetConfig)
	if !ok || raw == "" {
		configRaw = "{}"
		return
	}
	// A copy: raw shares a buffer allocated for the host; a copy keeps the
	// parsed config independent of it (it lives as long as the instance).
	configRaw = strings.Clone(raw)
	v, err := parseJSON(configRaw)
	if err != nil {
		Log(LevelError, "weft: the filter's config is not valid JSON: "+err.Error())
		return
	}
	m, isObject := v.(map[string]any)
	if !isObject {
		Log(LevelError, "weft: the filter's config is not a JSON object")
		return
	}
	config = m
}

// fetch calls a host function that returns data through the two
// out-parameters.
func fetch(name string, f func(retPtrPtr, retLenPtr *uint32) int32) (string, bool) {
	retPtr, retLen = 0, 0
	return result(name, f(&retPtr, &retLen))
}

func result(name string, status int32) (string, bool) {
	switch status {
	case statusOK:
		return take(retPtr, retLen), true
	case statusNotFound:
		return "", false
	default:
		panic(hostFailure(name, status))
	}
}

func cached(slot **string, name string, f func(retPtrPtr, retLenPtr *uint32) int32) string {
	if *slot == nil {
		s, _ := fetch(name, f)
		*slot = &s
	}
	return **slot
}

func errorOf(status int32) error {
	switch status {
	case statusOK, statusNotFound:
		return nil
	case statusBadArgument:
		return ErrBadArgument
	default:
		panic(hostFailure("host function", status))
	}
}

func hostFailure(name string, status int32) string {
	switch status {
	case statusBadArgument:
		return "weft: " + name + ": BAD_ARGUMENT"
	case statusAllocFailed:
		return "weft: " + name + ": ALLOC_FAILED (out of memory)"
	}
	return "weft: " + name + ": status " + itoa(int64(status))
}

// dispatch runs the registered handler of one callback. It recovers a
// panic (logged, then the call is rejected with CodeUnknown) and releases the
// buffers handed to the host during the callback.
func dispatch(response bool) (action Action) {
	defer release()
	h := onRequest
	if response {
		h = onResponse
	}
	if !response && onResponse != nil && !hooks.ResponseExported {
		// Fail closed: the response handler would never run.
		const msg = "weft: the filter registered OnResponse but does not export weft_on_response: " +
			"import _ \"github.com/weftrpc/weft/sdk/go/weft/onresponse\""
		Log(LevelError, msg)
		hostReject(int32(CodeUnknown), msg)
		return Reject
	}
	if h == nil {
		if onRequest == nil && onResponse == nil {
			// Fail closed: an authz filter whose handlers were registered in
			// main (never run in a reactor) must not let everything through.
			const msg = "weft: the filter registered no handler (register them in func init: main never runs)"
			Log(LevelError, msg)
			hostReject(int32(CodeUnknown), msg)
			return Reject
		}
		return Continue
	}
	c := &Call{response: response}
	defer func() {
		if r := recover(); r != nil {
			msg := "wasm filter panic: " + panicText(r)
			Log(LevelError, msg)
			action = c.Reject(CodeUnknown, msg)
		}
	}()
	return h(c)
}

func release() {
	clear(pinned)
	pinned = pinned[:0]
}

func panicText(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	case interface{ String() string }:
		return v.String()
	}
	return "(non-string panic value)"
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A module can implement a service instead of filtering one (ABI v1.2,
// sdk/ABI.md "Services"): configured as a service's impl.wasm, it answers
// each call of the service's declared interface.

// CallHandler answers one call of a service: the result as JSON ("" is
// null), or an error. An *Error says its code (CodeBiz by default: a
// business error, with its Java class when Class is set); any other error
// is a business error with its text.
type CallHandler func(c *Call) (result string, err error)

var onCall CallHandler

// Serve registers the handler of the service's calls. Register it in an
// init function, and import package service, which exports weft_on_call:
//
//	import _ "github.com/weftrpc/weft/sdk/go/weft/service"
func Serve(h CallHandler) { onCall = h }

// Error is a failed call of a service. Code CodeBiz (the zero value is
// CodeUnknown: set it) is a business error, which callers get as the
// service's exception: Class names its Java class
// (java.lang.IllegalArgumentException), as a Java provider's would.
type Error struct {
	Code    Code
	Class   string
	Message string
}

func (e *Error) Error() string {
	if e.Class != "" {
		return e.Class + ": " + e.Message
	}
	return e.Message
}

// Args returns the call's arguments, parsed from their JSON: strings,
// float64 numbers, bools, nil, []any and map[string]any.
func (c *Call) Args() ([]any, error) {
	v, err := parseJSON(c.Arguments())
	if err != nil {
		return nil, err
	}
	args, _ := v.([]any)
	return args, nil
}

// Deadline returns the call's deadline in Unix milliseconds; false when it
// has none.
func (c *Call) Deadline() (int64, bool) {
	ms := hostGetDeadline()
	return ms, ms != 0
}

// ArgString returns the index-th argument of a service's call when it is a
// string, without JSON to parse (the cheapest way to read one); false when
// there is no such argument or it is not a string.
func (c *Call) ArgString(index int) (string, bool) {
	if index < 0 {
		return "", false
	}
	retPtr, retLen = 0, 0
	switch st := hostGetArgumentString(uint32(index), &retPtr, &retLen); st {
	case statusOK:
		return take(retPtr, retLen), true
	case statusNotFound, statusBadArgument:
		return "", false
	default:
		panic(hostFailure("get_argument_string", st))
	}
}

// ReturnString answers a service's call with the string s, without JSON to
// write; the handler then returns ("", nil).
func (c *Call) ReturnString(s string) error {
	if err := errorOf(hostSetResultString(validUTF8(s))); err != nil {
		return err
	}
	c.answered = true
	return nil
}

// JSONString returns s as a JSON string.
func JSONString(s string) string { return string(appendJSONString(nil, s)) }

// dispatchCall runs the service's handler for one call.
func dispatchCall() (action Action) {
	defer release()
	c := &Call{}
	defer func() {
		if r := recover(); r != nil {
			msg := "wasm service panic: " + panicText(r)
			Log(LevelError, msg)
			action = c.Reject(CodeUnknown, msg)
		}
	}()
	if onCall == nil {
		const msg = "weft: the module registered no service handler (weft.Serve, in func init: main never runs)"
		Log(LevelError, msg)
		return c.Reject(CodeUnknown, msg)
	}
	result, err := onCall(c)
	if err != nil {
		if e, ok := err.(*Error); ok {
			return c.Reject(e.Code, e.Error())
		}
		return c.Reject(CodeBiz, err.Error())
	}
	if result == "" && c.answered {
		return Continue
	}
	if result == "" {
		result = "null"
	}
	if hostSetResult(validUTF8(result)) != statusOK {
		return c.Reject(CodeSerialization, "the service's result is not JSON")
	}
	return Continue
}
