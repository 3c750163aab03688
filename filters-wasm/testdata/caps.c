// A weft-ABI v1.1 guest using the capabilities proxy-wasm filters have:
// _initialize defines a counter "calls" and a counter "ticks" and asks for
// a tick every 20 ms; each request increments the shared-data counter "n"
// with compare-and-swap (again on CAS_MISMATCH), sets the attachment "n" to
// the count it wrote, and adds 1 to "calls"; weft_on_tick adds 1 to
// "ticks".
#include "weft.h"

static u32 calls_id, ticks_id;

WEFT_EXPORT(_initialize) void initialize(void) {
  weft_metric_define(0, "calls", 5, &calls_id);
  weft_metric_define(0, "ticks", 5, &ticks_id);
  weft_set_tick_period(20);
}


WEFT_EXPORT(weft_on_tick) void on_tick(void) { weft_metric_add(ticks_id, 1); }

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  u32 v;
  for (;;) {
    char *p;
    u32 len, cas = 0;
    v = 0;
    int st = weft_shared_get("n", 1, &p, &len, &cas);
    if (st == WEFT_OK && len == 4) v = *(u32 *)p;
    v++;
    st = weft_shared_set("n", 1, (const char *)&v, 4, st == WEFT_OK ? cas : 0);
    if (st == WEFT_OK) break;
    if (st != WEFT_CAS_MISMATCH) __builtin_trap();
  }
  char buf[12];
  u32 i = sizeof buf;
  do {
    buf[--i] = '0' + v % 10;
    v /= 10;
  } while (v);
  weft_set_attachment("n", 1, buf + i, sizeof buf - i);
  weft_metric_add(calls_id, 1);
  return WEFT_CONTINUE;
}
