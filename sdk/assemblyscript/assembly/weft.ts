// AssemblyScript guest SDK of weft's WASM filter ABI v1 (sdk/ABI.md).
//
// A filter is an entry file that registers its handlers at top level and
// re-exports the ABI's guest exports:
//
//   import { onRequest, Call, Action, Code } from "../weft";
//   export * from "../exports";
//
//   onRequest((c: Call): Action => {
//     if (c.attachment("token") == null) return c.reject(Code.Forbidden, "no token");
//     return Action.Continue;
//   });
//
// (a filter that registers onResponse adds `export * from "../on_response";`),
// built with build.sh (asc --runtime minimal --exportStart _initialize
// --use abort=... -O3).
//
// Memory: the SDK is built for the minimal runtime (TLSF allocator with a
// mark & sweep collector that runs only when called). Buffers the host fills
// through weft_alloc come from heap.alloc, outside the garbage collector:
// nothing can collect them while the host writes into them or before the
// guest has copied them into strings; the SDK frees them all when the
// callback returns. The SDK then runs a full collection (__collect), at the
// one point where it is safe for this runtime: the callback's stack is
// unwound, so every object still in use is reachable from a global.
// A filter must not call __collect itself.

import * as host from "./host";
import { JSONValue, parseJSON, lastJSONError } from "./json";

export { JSONValue, JSONKind, parseJSON } from "./json";

/** The version of the ABI this SDK implements. */
export const ABI_VERSION: i32 = 1;

/** What a callback tells the host to do with the call. */
export enum Action {
  /** Let the call go on, with any attachment changes made. */
  Continue = 0,
  /** Fail the call with the code and message given to Call.reject. */
  Reject = 1,
}

/** weft's error codes (Dubbo's RpcException codes). */
export enum Code {
  Unknown = 0,
  Network = 1,
  Timeout = 2,
  Biz = 3,
  Forbidden = 4,
  Serialization = 5,
  NoProvider = 6,
  LimitExceeded = 7,
}

/** Log levels of the App's logger. */
export enum Level {
  Debug = 0,
  Info = 1,
  Warn = 2,
  Error = 3,
}

export type Handler = (c: Call) => Action;

let requestHandler: Handler | null = null;
let responseHandler: Handler | null = null;

/** Registers the handler run before each call goes on (at top level). */
export function onRequest(h: Handler): void {
  requestHandler = h;
}

/**
 * Registers the handler run after each call's result came back. The entry
 * file must also export weft_on_response: `export * from "../on_response";`
 * (without it, every call is rejected with a message saying so).
 */
export function onResponse(h: Handler): void {
  responseHandler = h;
}

let responseExported = false;

/** Called by on_response.ts: the module exports weft_on_response. */
export function markResponseExported(): void {
  responseExported = true;
}

// ---- memory shared with the host -------------------------------------------

// Blocks handed to the host by weft_alloc during the current callback.
// A raw list (not a managed Array) so that no allocation of the collector's
// happens in weft_alloc.
const MAX_BLOCKS: i32 = 64;
const blocks = memory.data(MAX_BLOCKS * sizeof<usize>());
let nblocks: i32 = 0;

// The two out-parameters of the host functions that return data.
const retPtr = memory.data(8);
const retLen = retPtr + 4;

/** weft_alloc: `size` bytes the host may write, freed when the callback ends. */
export function alloc(size: i32): usize {
  if (size < 0 || size > (1 << 30)) return 0;
  // Each result is copied and freed as soon as its host function returns,
  // so the list holds one block; a host that asks for more is broken.
  if (nblocks == MAX_BLOCKS) return 0;
  let p = heap.alloc(<usize>max(size, 1));
  store<usize>(blocks + (<usize>nblocks << alignof<usize>()), p);
  nblocks++;
  return p;
}

function release(): void {
  for (let i = 0; i < nblocks; i++) {
    heap.free(load<usize>(blocks + (<usize>i << alignof<usize>())));
  }
  nblocks = 0;
}

function statusName(status: i32): string {
  if (status == host.STATUS_BAD_ARGUMENT) return "BAD_ARGUMENT";
  if (status == host.STATUS_ALLOC_FAILED) return "ALLOC_FAILED (out of memory)";
  return "status " + status.toString();
}

// Result of a host function that returns data: the string, null when
// NOT_FOUND; any other status is a bug or out of memory, and traps.
function result(name: string, status: i32): string | null {
  if (status == host.STATUS_OK) {
    let s = String.UTF8.decodeUnsafe(load<u32>(retPtr), load<u32>(retLen));
    release(); // copied: give the host's buffer back at once
    return s;
  }
  if (status == host.STATUS_NOT_FOUND) return null;
  throw new Error("weft: " + name + ": " + statusName(status));
}

function clearRet(): void {
  store<u64>(retPtr, 0);
}

/** UTF-8 bytes of s for the host (lone surrogates become U+FFFD). */
function utf8(s: string): ArrayBuffer {
  return String.UTF8.encode(s, false, String.UTF8.ErrorMode.REPLACE);
}

// ---- the call ----------------------------------------------------------------

/** The call a callback handles; valid only during that callback. */
export class Call {
  private _method: string | null = null;
  private _service: string | null = null;
  private _side: string | null = null;

  constructor(public readonly isResponse: bool) {}

  /** The method name as on the wire (sayHello). */
  method(): string {
    let m = this._method;
    if (m == null) {
      clearRet();
      m = result("get_method", host.get_method(retPtr, retLen));
      if (m == null) m = "";
      this._method = m;
    }
    return m;
  }

  /** The service key, group/interface:version. */
  service(): string {
    let s = this._service;
    if (s == null) {
      clearRet();
      s = result("get_service", host.get_service(retPtr, retLen));
      if (s == null) s = "";
      this._service = s;
    }
    return s;
  }

  /** "provider" or "consumer". */
  side(): string {
    let s = this._side;
    if (s == null) {
      clearRet();
      s = result("get_side", host.get_side(retPtr, retLen));
      if (s == null) s = "";
      this._side = s;
    }
    return s;
  }

  /** The arguments as a JSON array (computed by the host when asked). */
  arguments(): string {
    clearRet();
    let s = result("get_arguments", host.get_arguments(retPtr, retLen));
    return s == null ? "[]" : s;
  }

  /** The peer's host:port on a provider; null in process. */
  remoteAddress(): string | null {
    clearRet();
    return result("get_remote_address", host.get_remote_address(retPtr, retLen));
  }

  /** A property of the call by its dotted path, with the names proxy-wasm
   * filters read (ABI v1.1): request.path, source.address, connection.mtls
   * (one byte, 0 or 1), plugin_name, weft.interface, weft.side...; null when
   * the call has none. */
  property(path: string): string | null {
    let p = utf8(path);
    clearRet();
    return result("get_property",
      host.get_property(changetype<usize>(p), p.byteLength, retPtr, retLen));
  }

  /** One attachment as text (non-string values formatted); null when absent. */
  attachment(key: string): string | null {
    let k = utf8(key);
    clearRet();
    return result("get_attachment",
      host.get_attachment(changetype<usize>(k), k.byteLength, retPtr, retLen));
  }

  /** Sets an attachment; on response, a provider sends it back with the result. */
  setAttachment(key: string, value: string): bool {
    let k = utf8(key);
    let v = utf8(value);
    return host.set_attachment(changetype<usize>(k), k.byteLength,
      changetype<usize>(v), v.byteLength) == host.STATUS_OK;
  }

  /** Removes an attachment (true also when it was absent). */
  removeAttachment(key: string): bool {
    let k = utf8(key);
    let st = host.remove_attachment(changetype<usize>(k), k.byteLength);
    return st == host.STATUS_OK || st == host.STATUS_NOT_FOUND;
  }

  /** On response: the result value as JSON; null when the call failed. */
  result(): string | null {
    clearRet();
    return result("get_result", host.get_result(retPtr, retLen));
  }

  /** On response: the error message; null when the call succeeded. */
  errorMessage(): string | null {
    clearRet();
    return result("get_error", host.get_error(retPtr, retLen));
  }

  /** The filter's config (see config()). */
  config(): JSONValue {
    return config();
  }

  /**
   * Records why the call is rejected and returns Action.Reject:
   * `return c.reject(Code.Forbidden, "no token")`. A code outside 0-7 becomes
   * Code.Unknown with the code at the start of the message.
   */
  reject(code: Code, msg: string): Action {
    rejectWith(code, msg);
    return Action.Reject;
  }
}

function rejectWith(code: i32, msg: string): void {
  if (code < Code.Unknown || code > Code.LimitExceeded) {
    // The host refuses codes outside 0-7.
    msg = "(code " + code.toString() + ") " + msg;
    code = Code.Unknown;
  }
  let m = utf8(msg);
  host.reject(code, changetype<usize>(m), m.byteLength);
}

// ---- host services -------------------------------------------------------------

/** Logs through the App's logger. */
export function log(level: Level, msg: string): void {
  let m = utf8(msg);
  host.log(min(max(<i32>level, Level.Debug), Level.Error), changetype<usize>(m), m.byteLength);
}

/**
 * Adds delta to the counter `key` of the current fixed window of windowMs
 * milliseconds (a new window starts at 0) and returns the new value. Counters
 * are shared by every instance of every filter of the App; windowMs <= 0 is
 * a counter that never resets.
 */
export function counterAdd(key: string, delta: i64, windowMs: i64): i64 {
  let k = utf8(key);
  return host.counter_add(changetype<usize>(k), k.byteLength, delta, windowMs);
}

/** Wall-clock time, Unix milliseconds. */
export function nowMs(): i64 {
  return host.now_ms();
}

// ---- ABI v1.1: shared data, metrics, ticks ---------------------------------

const casOut = memory.data(4);

/** A value of shared data and its compare-and-swap token. */
export class Shared {
  constructor(public value: string, public cas: u32) {}
}

/**
 * The value of key in the filter's vm_id space (shared by every instance of
 * every filter of the App with that vm_id) and its token; null when absent.
 */
export function sharedGet(key: string): Shared | null {
  let k = utf8(key);
  clearRet();
  store<u32>(casOut, 0);
  let v = result("shared_get", host.shared_get(changetype<usize>(k), k.byteLength, retPtr, retLen, casOut));
  if (v === null) return null;
  return new Shared(v, load<u32>(casOut));
}

/**
 * Stores value under key with a new token; with cas not 0, only if it is
 * still the key's token. Returns host.STATUS_OK, host.STATUS_CAS_MISMATCH
 * (another instance wrote it since: read again and retry) or
 * host.STATUS_LIMIT. A key's first write, with cas 0, is unconditional.
 */
export function sharedSet(key: string, value: string, cas: u32): i32 {
  let k = utf8(key);
  let v = utf8(value);
  return host.shared_set(changetype<usize>(k), k.byteLength, changetype<usize>(v), v.byteLength, cas);
}

const idOut = memory.data(4);

/** Kinds of metric. */
export const METRIC_COUNTER: i32 = 0;
export const METRIC_GAUGE: i32 = 1;
export const METRIC_HISTOGRAM: i32 = 2;

/** Defines (or finds) the filter's metric name of kind; returns its id (0 on failure). */
export function metricDefine(kind: i32, name: string): u32 {
  let n = utf8(name);
  if (host.metric_define(kind, changetype<usize>(n), n.byteLength, idOut) != host.STATUS_OK) return 0;
  return load<u32>(idOut);
}

/** Adds to a counter (not below 0) or a gauge. */
export function metricAdd(id: u32, delta: i64): i32 {
  return host.metric_add(id, delta);
}

/** Sets a gauge, or records a value in a histogram. */
export function metricRecord(id: u32, value: i64): i32 {
  return host.metric_record(id, value);
}

/**
 * Has the host call the module's export weft_on_tick every ms milliseconds
 * (at least 10) on the filter's idle instances; 0 stops it. Export it from
 * the filter: `export function weft_on_tick(): void { ... }`.
 */
export function setTickPeriod(ms: u32): i32 {
  return host.set_tick_period(ms);
}

// ---- ABI v1.1: callouts and shared queues ------------------------------------

const calloutStatus = memory.data(4);
const retBody = memory.data(8); // pointer, then length

/** A callout's answer (httpCall). */
export class HttpResponse {
  constructor(
    /** The host's status: host.STATUS_OK, or why there is no answer. */
    public result: i32,
    /** The HTTP status (a ref: cluster: 200, or the HTTP status of its error). */
    public status: u32,
    /** The answer's headers as a JSON object, names in lower case. */
    public headers: string,
    /** The body (at most 1 MiB), as UTF-8 text; bodyBytes as it came. */
    public body: string,
    public bodyBytes: ArrayBuffer,
  ) {}

  /** The header name (lower case) of the answer; null when absent. */
  header(name: string): string | null {
    let j = parseJSON(this.headers);
    if (j === null) return null;
    let v = j.get(name);
    if (v === null || !v.isString()) return null;
    return v.str;
  }
}

/**
 * Calls out to cluster, an upstream the filter's config names (clusters:
 * {auth: "http://..."}, or "ref:<id>" for a weft reference of the App:
 * the method is the last segment of path, the arguments the body, a JSON
 * array), and waits for its answer: the call is paused meanwhile. method ""
 * is GET, path "" is /; headers is a JSON object ('{"x-user":"alice"}') or
 * ""; timeoutMs 0 waits as long as the call may. The answer's result is
 * host.STATUS_OK, or STATUS_LIMIT (max_callouts in flight),
 * STATUS_UNAVAILABLE (failed), STATUS_TIMEOUT (timeoutMs passed),
 * STATUS_REFUSED, STATUS_BAD_ARGUMENT (a cluster the config does not name,
 * bad headers), STATUS_NOT_FOUND (outside a call's handler). When the
 * call's deadline comes first the filter is stopped there and the call
 * fails with code timeout.
 */
export function httpCall(cluster: string, method: string, path: string, headers: string, body: string, timeoutMs: u32): HttpResponse {
  let c = utf8(cluster), m = utf8(method), p = utf8(path), h = utf8(headers), b = utf8(body);
  clearRet();
  store<u32>(calloutStatus, 0);
  store<u64>(retBody, 0);
  let st = host.http_call(changetype<usize>(c), c.byteLength, changetype<usize>(m), m.byteLength,
    changetype<usize>(p), p.byteLength, changetype<usize>(h), h.byteLength, changetype<usize>(b), b.byteLength,
    timeoutMs, calloutStatus, retPtr, retLen, retBody, retBody + 4);
  if (st != host.STATUS_OK) {
    release();
    return new HttpResponse(st, 0, "", "", new ArrayBuffer(0));
  }
  let hs = String.UTF8.decodeUnsafe(load<u32>(retPtr), load<u32>(retLen));
  let bn = load<u32>(retBody + 4);
  let bytes = new ArrayBuffer(<i32>bn);
  memory.copy(changetype<usize>(bytes), load<u32>(retBody), bn);
  release(); // copied: give the host's buffers back at once
  return new HttpResponse(st, load<u32>(calloutStatus), hs, String.UTF8.decode(bytes), bytes);
}

const queueOut = memory.data(4);

/**
 * Registers the shared queue name in the filter's vm_id space (again: the
 * same queue) and returns its id, 0xFFFFFFFF on failure (host.STATUS_LIMIT
 * past 1,024 queues in the App, or STATUS_REFUSED); the handler of
 * onQueueReady hears of its items. Call it at top level.
 */
export function queueRegister(name: string): u32 {
  let n = utf8(name);
  if (host.queue_register(changetype<usize>(n), n.byteLength, queueOut) != host.STATUS_OK) return u32.MAX_VALUE;
  return load<u32>(queueOut);
}

/** The id of the queue name a filter of vmId registered; 0xFFFFFFFF when none has. */
export function queueResolve(vmId: string, name: string): u32 {
  let v = utf8(vmId), n = utf8(name);
  if (host.queue_resolve(changetype<usize>(v), v.byteLength, changetype<usize>(n), n.byteLength, queueOut) != host.STATUS_OK) {
    return u32.MAX_VALUE;
  }
  return load<u32>(queueOut);
}

/**
 * Appends item to queue id: host.STATUS_OK, STATUS_LIMIT (1,024 items, or
 * an item over 64 KiB), STATUS_BAD_ARGUMENT (no queue has that id).
 */
export function queueEnqueue(id: u32, item: string): i32 {
  let b = utf8(item);
  return host.queue_enqueue(id, changetype<usize>(b), b.byteLength);
}

/** The oldest item of queue id, removed; null when the queue is empty. */
export function queueDequeue(id: u32): string | null {
  clearRet();
  return result("queue_dequeue", host.queue_dequeue(id, retPtr, retLen));
}

let queueHandler: ((id: u32) => void) | null = null;

/** Registers the function called (with the queue's id) when a queue the filter registered has items; it should dequeue until null. */
export function onQueueReady(h: (id: u32) => void): void {
  queueHandler = h;
}

/** Runs the queue handler; used by exports.ts. */
export function dispatchQueue(id: u32): void {
  let h = queueHandler;
  if (h != null) h(id);
  release();
  __collect();
}

// ---- config ----------------------------------------------------------------------

let configValue: JSONValue | null = null;
let configText: string = "{}";

/**
 * The filter's own config, parsed once per instance: a JSON object (empty
 * when the filter has none, or when the host's text did not parse: logged at
 * level Error).
 */
export function config(): JSONValue {
  let cached = configValue;
  if (cached != null) return cached;
  clearRet();
  let text = result("get_config", host.get_config(retPtr, retLen));
  if (text != null) configText = text;
  let c = JSONValue.object();
  let v = parseJSON(configText);
  if (v == null) {
    log(Level.Error, "weft: the filter's config is not valid JSON: " + lastJSONError);
  } else if (!v.isObject()) {
    log(Level.Error, "weft: the filter's config is not a JSON object");
  } else {
    c = v;
  }
  configValue = c;
  return c;
}

/** The filter's config as the host gave it (JSON text). */
export function configJSON(): string {
  config();
  return configText;
}

/** The config value `key` if it is a string, else null. */
export function configString(key: string): string | null {
  let v = config().get(key);
  return v != null && v.isString() ? v.str : null;
}

/**
 * The config value `key` if it is an integer (a JSON number without fraction,
 * or a string holding one), else `fallback`.
 */
export function configInt(key: string, fallback: i64): i64 {
  let v = config().get(key);
  if (v == null) return fallback;
  let n: f64 = NaN;
  if (v.isNumber()) n = v.num;
  else if (v.isString()) n = parseDecimal(v.str.trim());
  if (isFinite(n) && n == Math.trunc(n) && Math.abs(n) <= 9007199254740992) return <i64>n;
  return fallback;
}

function parseDecimal(s: string): f64 {
  let n = s.length;
  if (n == 0) return NaN;
  let i = 0;
  let neg = false;
  if (s.charCodeAt(0) == 45 /* - */ || s.charCodeAt(0) == 43 /* + */) {
    neg = s.charCodeAt(0) == 45;
    i = 1;
    if (n == 1) return NaN;
  }
  let v: f64 = 0;
  for (; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 48 || c > 57) return NaN;
    v = v * 10 + <f64>(c - 48);
  }
  return neg ? -v : v;
}

// ---- callbacks -------------------------------------------------------------------

/** Runs one callback; used by exports.ts. */
export function dispatch(response: bool): i32 {
  let h = response ? responseHandler : requestHandler;
  let action: i32 = Action.Continue;
  if (!response && responseHandler != null && !responseExported) {
    // Fail closed: the response handler would never run.
    const msg = "weft: the filter registered onResponse but does not export weft_on_response: " +
      "add `export * from \"../on_response\";` to the entry file";
    log(Level.Error, msg);
    rejectWith(Code.Unknown, msg);
    action = Action.Reject;
  } else if (h == null) {
    if (requestHandler == null && responseHandler == null) {
      // Fail closed: a filter that registered nothing must not let calls through.
      const msg = "weft: the filter registered no handler (call onRequest at top level)";
      log(Level.Error, msg);
      rejectWith(Code.Unknown, msg);
      action = Action.Reject;
    }
  } else {
    action = h(new Call(response));
  }
  release();
  __collect();
  return action;
}

// ---- runtime hooks (see build.sh: --use abort=... --use trace=... --use seed=...) ----

let aborting = false;

/**
 * Replaces the runtime's env.abort (a failed assertion, a thrown error, an
 * out-of-bounds access): logs the reason at level Error, then traps; the host
 * fails the call and replaces the instance.
 */
export function weftAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (!aborting) {
    aborting = true;
    let msg = "wasm filter abort: " + (message == null ? "(no message)" : message);
    if (fileName != null) msg += " at " + fileName + ":" + line.toString() + ":" + column.toString();
    log(Level.Error, msg);
  }
  unreachable();
}

/** Replaces env.trace: logs at level Debug. */
export function weftTrace(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let msg = "trace: " + message;
  if (n > 0) msg += " " + a0.toString();
  if (n > 1) msg += " " + a1.toString();
  if (n > 2) msg += " " + a2.toString();
  if (n > 3) msg += " " + a3.toString();
  if (n > 4) msg += " " + a4.toString();
  log(Level.Debug, msg);
}

/** Replaces env.seed (Math.random's seed): the host's clock. */
export function weftSeed(): f64 {
  return <f64>host.now_ms();
}
