// A weft WASM filter that counts the calls of every instance of every
// filter with its vm_id in the host's shared data (ABI v1.1), with a
// compare-and-swap loop so that no increment is lost when instances race;
// it sets the attachment x-count to the count it wrote, and counts its
// calls in the metric "requests" too.
import { onRequest, sharedGet, sharedSet, metricDefine, metricAdd, METRIC_COUNTER, Call, Action, Code } from "../weft";
import { STATUS_OK, STATUS_CAS_MISMATCH } from "../host";
export * from "../exports";

let requests: u32 = 0;

onRequest((c: Call): Action => {
  if (requests == 0) requests = metricDefine(METRIC_COUNTER, "requests");
  let next = "";
  for (;;) {
    let cur = sharedGet("calls");
    let n: i64 = cur === null ? 0 : I64.parseInt(cur.value);
    next = (n + 1).toString();
    let st = sharedSet("calls", next, cur === null ? 0 : cur.cas);
    if (st == STATUS_OK) break;
    if (st != STATUS_CAS_MISMATCH) return c.reject(Code.Unknown, "sharedcount: shared_set status " + st.toString());
  }
  c.setAttachment("x-count", next);
  // Which filter counted: a property, as proxy-wasm filters read them.
  let name = c.property("plugin_name");
  if (name != null) c.setAttachment("x-counted-by", name);
  metricAdd(requests, 1);
  return Action.Continue;
});
