// A weft WASM filter (ABI v1.1) that asks an auth service whether each
// call may go on (http_call): GET /check?user=<x-user> with the header
// x-user, to the cluster "auth" of the filter's config (clusters: {auth:
// "http://auth.internal:8080"}). An answer 200 lets the call through with
// the attachment x-role set from the answer's header x-role; any other
// answer, or a callout that fails, rejects it as forbidden. The call waits
// for the answer (its deadline bounds the wait). A user name other than
// letters, digits, '-', '_' and '.' is rejected (this example neither URL-
// nor JSON-escapes it).
import { onRequest, httpCall, Call, Action, Code } from "../weft";
import { STATUS_OK } from "../host";
export * from "../exports";

function plain(s: string): bool {
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    let ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f || c == 0x2e;
    if (!ok) return false;
  }
  return true;
}

onRequest((c: Call): Action => {
  let u = c.attachment("x-user");
  let user = u === null ? "" : u;
  if (!plain(user)) return c.reject(Code.Forbidden, "authcall: x-user has characters this example does not send");
  let r = httpCall("auth", "GET", "/check?user=" + user, '{"x-user":"' + user + '"}', "", 0);
  if (r.result != STATUS_OK) return c.reject(Code.Forbidden, "authcall: the auth service did not answer (status " + r.result.toString() + ")");
  if (r.status != 200) return c.reject(Code.Forbidden, "authcall: the auth service answered " + r.status.toString());
  let role = r.header("x-role");
  if (role !== null) c.setAttachment("x-role", role);
  return Action.Continue;
});
