// A proxy-wasm filter on the AssemblyScript SDK whose callout goes to
// another weft service rather than an HTTP server: its cluster "auth" is
// ref:auth in weft's config, a reference of the App. It asks
// /org.weft.Auth/check with the call's x-user as the JSON argument list,
// and lets the call through with the answer as x-role, or answers it
// itself with 403 when the auth service refuses (grpc-status not 0).
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext, Context, registerRootContext, FilterHeadersStatusValues, stream_context,
  send_local_response, continue_request, GrpcStatusValues, Headers, HeaderPair,
} from "@solo-io/proxy-runtime";
import { get_buffer_bytes, BufferTypeValues } from "@solo-io/proxy-runtime/runtime";

class RefRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new RefCall(context_id, this);
  }
}

function pair(k: string, v: string): HeaderPair {
  return new HeaderPair(String.UTF8.encode(k), String.UTF8.encode(v));
}

class RefCall extends Context {
  constructor(context_id: u32, root_context: RefRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const user = stream_context.headers.request.get("x-user");
    const headers: Headers = [pair(":method", "POST"), pair(":path", "/org.weft.Auth/check"),
      pair(":authority", "auth"), pair("content-type", "application/json"), pair("x-asked-by", "refcall")];
    this.root_context.httpCall("auth", headers, String.UTF8.encode("[\"" + user + "\"]"), [], 2000, this,
      (origin: Context, nheaders: u32, body_size: usize, ntrailers: u32): void => {
        const status = stream_context.headers.http_callback.get("grpc-status");
        if (status != "0") {
          send_local_response(403, "auth refused", String.UTF8.encode("auth: " + stream_context.headers.http_callback.get("grpc-message")), [], GrpcStatusValues.PermissionDenied);
          return;
        }
        const body = String.UTF8.decode(get_buffer_bytes(BufferTypeValues.HttpCallResponseBody, 0, body_size as u32));
        stream_context.headers.request.add("x-role", body);
        continue_request();
      });
    return FilterHeadersStatusValues.StopIteration;
  }
}

registerRootContext((context_id: u32) => { return new RefRoot(context_id); }, "refcall");
