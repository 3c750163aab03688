// A weft WASM filter that lets at most `limit` calls per second through for
// each method (config {"limit": N}); the others are rejected with code 7
// (limit exceeded). The counters are the host's, so the limit holds across
// every instance of the filter.
import { onRequest, configInt, counterAdd, Call, Action, Code } from "../weft";
export * from "../exports";

onRequest((c: Call): Action => {
  let limit = configInt("limit", -1);
  if (limit < 0) {
    return c.reject(Code.Unknown, "ratelimit: config needs a non-negative integer \"limit\"");
  }
  let method = c.method();
  if (counterAdd("rl:" + method, 1, 1000) > limit) {
    return c.reject(Code.LimitExceeded, "rate limit exceeded for method " + method +
      ": at most " + limit.toString() + " calls per second");
  }
  return Action.Continue;
});
