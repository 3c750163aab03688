// A weft WASM filter that rejects, as forbidden, every call whose "token"
// attachment is missing or differs from the filter's config {"token": "..."}.
// A filter configured without a token rejects every call.
import { onRequest, configString, Call, Action, Code } from "../weft";
export * from "../exports";

onRequest((c: Call): Action => {
  let want = configString("token");
  let got = c.attachment("token");
  if (want == null || got == null || got != want) {
    return c.reject(Code.Forbidden, "missing or wrong token");
  }
  return Action.Continue;
});
