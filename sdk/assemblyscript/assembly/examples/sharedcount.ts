// A weft WASM filter that counts the calls of every instance of every
// filter with its vm_id in the host's shared data (ABI v1.1), with a
// compare-and-swap loop so that no increment is lost when instances race;
// it sets the attachment x-count to the count it wrote and x-counted-by to
// the filter's name (a property), and counts its calls in the metric
// "requests" too. The other v1.1 capabilities, in a few lines each: a tick
// every 20 ms counted in "ticks", and each call enqueued on the shared
// queue "seen", whose items the queue callback counts in "dequeued".
import {
  onRequest, onQueueReady, sharedGet, sharedSet, metricDefine, metricAdd, setTickPeriod,
  queueRegister, queueEnqueue, queueDequeue, METRIC_COUNTER, Call, Action, Code,
} from "../weft";
import { STATUS_OK, STATUS_CAS_MISMATCH } from "../host";
export * from "../exports";

// At top level: defined (again: the same ids) and registered as each
// instance starts.
const requests = metricDefine(METRIC_COUNTER, "requests");
const ticks = metricDefine(METRIC_COUNTER, "ticks");
const dequeued = metricDefine(METRIC_COUNTER, "dequeued");
const seen = queueRegister("seen");
setTickPeriod(20);

onRequest((c: Call): Action => {
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
  queueEnqueue(seen, "1");
  return Action.Continue;
});

export function weft_on_tick(): void {
  metricAdd(ticks, 1);
}

onQueueReady((id: u32): void => {
  while (queueDequeue(id) !== null) metricAdd(dequeued, 1);
});
