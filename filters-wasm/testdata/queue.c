// A weft-ABI v1.1 guest using shared queues: _initialize registers the
// queue "jobs" in the filter's vm_id and defines the counters "enqueued"
// and "dequeued"; each request resolves the queue by vm_id "q" and name
// (as any filter of the App could), enqueues the item "job:<x-n>" and
// counts it; weft_on_queue_ready dequeues until the queue is empty,
// counting each item that reads "job:...". A dequeue of an id no queue
// has must answer BAD_ARGUMENT, and an enqueue to it too (else a trap).
#include "weft.h"

static u32 enqueued, dequeued, registered;

WEFT_EXPORT(_initialize) void initialize(void) {
  weft_metric_define(0, "enqueued", 8, &enqueued);
  weft_metric_define(0, "dequeued", 8, &dequeued);
  if (weft_queue_register("jobs", 4, &registered) != WEFT_OK) __builtin_trap();
}

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  u32 id;
  if (weft_queue_resolve("q", 1, "jobs", 4, &id) != WEFT_OK || id != registered) __builtin_trap();
  char *ptr;
  u32 len;
  if (weft_queue_dequeue(id + 1000, &ptr, &len) != WEFT_BAD_ARGUMENT) __builtin_trap();
  if (weft_queue_enqueue(id + 1000, "x", 1) != WEFT_BAD_ARGUMENT) __builtin_trap();
  char item[80] = "job:";
  char *n = "";
  u32 nlen = 0;
  weft_get_attachment("x-n", 3, &n, &nlen);
  if (nlen > 64) nlen = 64;
  copy(item + 4, n, nlen);
  if (weft_queue_enqueue(id, item, 4 + nlen) != WEFT_OK) __builtin_trap();
  weft_metric_add(enqueued, 1);
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_queue_ready) void on_queue_ready(u32 id) {
  reset();
  if (id != registered) __builtin_trap();
  for (;;) {
    char *ptr;
    u32 len;
    int st = weft_queue_dequeue(id, &ptr, &len);
    if (st == WEFT_NOT_FOUND) return; // empty
    if (st != WEFT_OK) __builtin_trap();
    if (len >= 4 && ptr[0] == 'j' && ptr[1] == 'o' && ptr[2] == 'b' && ptr[3] == ':') weft_metric_add(dequeued, 1);
  }
}
