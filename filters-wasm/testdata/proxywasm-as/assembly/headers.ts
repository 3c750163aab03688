// A proxy-wasm filter on the AssemblyScript SDK (@solo-io/proxy-runtime),
// written as for Envoy: it reads and edits the request's headers, answers a
// call itself with send_local_response, reads properties, and edits the
// response's headers. weft's tests run it over dubbo and tri calls.
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext, Context, registerRootContext, FilterHeadersStatusValues,
  stream_context, send_local_response, GrpcStatusValues, log, LogLevelValues,
} from "@solo-io/proxy-runtime";
// The package's index does not re-export get_property; its runtime does.
import { get_property } from "@solo-io/proxy-runtime/runtime";

class HeadersRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new Headers(context_id, this);
  }
}

class Headers extends Context {
  constructor(context_id: u32, root_context: HeadersRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const h = stream_context.headers.request;
    const user = h.get("x-user");
    if (h.get("x-mode") == "deny") {
      log(LogLevelValues.info, "denying " + user);
      send_local_response(403, "denied by as_headers", String.UTF8.encode("no entry for " + user), [], GrpcStatusValues.PermissionDenied);
      return FilterHeadersStatusValues.StopIteration;
    }
    h.add("x-proxy-wasm", this.root_context.getConfiguration());
    h.replace("x-path", h.get(":path"));
    h.add("x-method", String.UTF8.decode(get_property("weft.method")));
    h.add("x-side", String.UTF8.decode(get_property("weft.side")));
    h.remove("x-secret");
    return FilterHeadersStatusValues.Continue;
  }

  onResponseHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    stream_context.headers.response.add("x-served-by", "as_headers");
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => { return new HeadersRoot(context_id); }, "as_headers");
