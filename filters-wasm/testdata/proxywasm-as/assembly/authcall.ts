// A proxy-wasm filter on the AssemblyScript SDK that asks an auth server
// before letting a call through, as Envoy's ext_authz-style filters do: it
// pauses the request, calls the cluster "auth" (GET /check?user=<x-user>),
// and when the answer comes either resumes the call with the answer's
// x-role as a header, or answers it itself with 403.
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext, Context, BaseContext, registerRootContext, FilterHeadersStatusValues, stream_context,
  send_local_response, continue_request, GrpcStatusValues, Headers, HeaderPair,
} from "@solo-io/proxy-runtime";

class AuthRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new Auth(context_id, this);
  }
}

function pair(k: string, v: string): HeaderPair {
  return new HeaderPair(String.UTF8.encode(k), String.UTF8.encode(v));
}

class Auth extends Context {
  constructor(context_id: u32, root_context: AuthRoot) {
    super(context_id, root_context);
  }

  onRequestHeaders(n: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const user = stream_context.headers.request.get("x-user");
    const headers: Headers = [pair(":method", "GET"), pair(":path", "/check?user=" + user), pair(":authority", "auth")];
    this.root_context.httpCall("auth", headers, new ArrayBuffer(0), [], 2000, this,
      (origin: Context, nheaders: u32, body_size: usize, ntrailers: u32): void => {
        const status = stream_context.headers.http_callback.get(":status");
        if (status != "200") {
          send_local_response(403, "auth said " + status, String.UTF8.encode("not allowed: " + status), [], GrpcStatusValues.PermissionDenied);
          return;
        }
        stream_context.headers.request.add("x-role", stream_context.headers.http_callback.get("x-role"));
        continue_request();
      });
    return FilterHeadersStatusValues.StopIteration;
  }
}

registerRootContext((context_id: u32) => { return new AuthRoot(context_id); }, "authcall");
