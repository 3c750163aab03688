// A proxy-wasm filter on the AssemblyScript SDK that does what weft's trace
// guest and native trace filter do (test/wasm_e2e_test.go): it appends its
// name (its plugin configuration) to the request header "trace" and to the
// response header "rtrace", so that a test reads the order of a chain that
// mixes native, weft-ABI and proxy-wasm filters.
export * from "@solo-io/proxy-runtime/proxy";
import { RootContext, Context, registerRootContext, FilterHeadersStatusValues, stream_context } from "@solo-io/proxy-runtime";

class TraceRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new Trace(context_id, this);
  }
}

function appendName(list: string, name: string): string {
  return list.length == 0 ? name : list + "," + name;
}

class Trace extends Context {
  constructor(context_id: u32, root_context: TraceRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const h = stream_context.headers.request;
    h.replace("trace", appendName(h.get("trace"), this.root_context.getConfiguration()));
    return FilterHeadersStatusValues.Continue;
  }

  onResponseHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const h = stream_context.headers.response;
    h.replace("rtrace", appendName(h.get("rtrace"), this.root_context.getConfiguration()));
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => { return new TraceRoot(context_id); }, "trace");
