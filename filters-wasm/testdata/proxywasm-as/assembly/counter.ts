// A proxy-wasm filter on the AssemblyScript SDK (@solo-io/proxy-runtime)
// that counts calls in shared data with compare-and-swap (retrying on
// CAS_MISMATCH, as a rate limiter does across Envoy's worker threads), hands
// each call its number in the header x-n, and counts the ticks of a 20 ms
// timer in the guest counter "ticks". The same behaviour as
// ../../proxywasm-go/counter. The SDK's get/set_shared_data wrappers do not
// pass a value or a CAS token (0.1.8), so this filter calls the host
// functions its imports declare, as the SDK's own wrappers do.
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext, Context, registerRootContext, FilterHeadersStatusValues, stream_context, log, LogLevelValues,
} from "@solo-io/proxy-runtime";
import { Counter, set_tick_period_milliseconds, WasmResultValues } from "@solo-io/proxy-runtime/runtime";
import * as imports from "@solo-io/proxy-runtime/imports";

class CounterRoot extends RootContext {
  ticks: Counter | null = null;

  createContext(context_id: u32): Context {
    return new Count(context_id, this);
  }

  onConfigure(configuration_size: u32): bool {
    super.onConfigure(configuration_size);
    this.ticks = new Counter("ticks");
    set_tick_period_milliseconds(20);
    return true;
  }

  onTick(): void {
    (this.ticks as Counter).increment(1);
  }
}

const key = String.UTF8.encode("count");

// increment adds one to the shared counter and answers the new value, or
// 0 when the host refused.
function increment(): u64 {
  const valuePtr = new ArrayBuffer(4);
  const valueLen = new ArrayBuffer(4);
  const cas = new ArrayBuffer(4);
  const next = new ArrayBuffer(8);
  for (let i = 0; i < 1000; i++) {
    store<u32>(changetype<usize>(valuePtr), 0);
    store<u32>(changetype<usize>(valueLen), 0);
    store<u32>(changetype<usize>(cas), 0);
    const got = imports.proxy_get_shared_data(changetype<usize>(key), key.byteLength,
      changetype<usize>(valuePtr), changetype<usize>(valueLen), changetype<usize>(cas));
    let n: u64 = 0;
    if (got == WasmResultValues.Ok && load<u32>(changetype<usize>(valueLen)) == 8) {
      n = load<u64>(load<u32>(changetype<usize>(valuePtr)));
    } else if (got != WasmResultValues.Ok && got != WasmResultValues.NotFound) {
      return 0;
    }
    n++;
    store<u64>(changetype<usize>(next), n);
    const set = imports.proxy_set_shared_data(changetype<usize>(key), key.byteLength,
      changetype<usize>(next), 8, load<u32>(changetype<usize>(cas)));
    if (set == WasmResultValues.CasMismatch) {
      continue;
    }
    if (set != WasmResultValues.Ok) {
      return 0;
    }
    return n;
  }
  return 0;
}

class Count extends Context {
  constructor(context_id: u32, root_context: CounterRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const count = increment();
    if (count == 0) {
      log(LogLevelValues.error, "shared data: the host refused the counter");
    }
    stream_context.headers.request.add("x-n", count.toString());
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => { return new CounterRoot(context_id); }, "counter");
