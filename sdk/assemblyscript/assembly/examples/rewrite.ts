// A weft WASM filter that sets the attachment x-rewritten = "by-wasm-as" on
// every request.
import { onRequest, Call, Action, Code } from "../weft";
export * from "../exports";

onRequest((c: Call): Action => {
  if (!c.setAttachment("x-rewritten", "by-wasm-as")) {
    return c.reject(Code.Unknown, "rewrite: the host refused the attachment");
  }
  return Action.Continue;
});
