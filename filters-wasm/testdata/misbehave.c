// misbehave: what it does depends on the attachment "mode", so that one pool
// can be driven into each failure and then shown to recover:
//   ok       continue
//   trap     __builtin_trap() (unreachable)
//   loop     spin forever (stopped by the deadline)
//   grow     grow memory until memory.grow fails, then trap
//   badptr   pass counter_add a key outside memory (an ABI violation)
//   reject   reject with code 7 (limit exceeded) and a message
//   reject0  return REJECT without calling reject
//   action9  return 9 (neither CONTINUE nor REJECT)
//   exit     call WASI proc_exit(3)
// and in weft_on_response the attachment "rmode" does the same.
#include "weft.h"

__attribute__((import_module("wasi_snapshot_preview1"), import_name("proc_exit")))
void proc_exit(int code);

static volatile int sink;

static int act(const char *key, u32 klen) {
  reset();
  char *m;
  u32 n;
  if (weft_get_attachment(key, klen, &m, &n) != WEFT_OK) return WEFT_CONTINUE;
  if (eq(m, n, "trap")) __builtin_trap();
  if (eq(m, n, "loop"))
    for (;;) sink++;
  if (eq(m, n, "grow")) {
    for (;;) {
      if (__builtin_wasm_memory_grow(0, 16) == (unsigned long)-1) __builtin_trap();
    }
  }
  if (eq(m, n, "badptr")) return (int)weft_counter_add((const char *)0x7ffffff0, 64, 1, 0);
  if (eq(m, n, "reject")) {
    weft_reject(7, "too many requests", 17);
    return WEFT_REJECT;
  }
  if (eq(m, n, "reject0")) return WEFT_REJECT;
  if (eq(m, n, "action9")) return 9;
  if (eq(m, n, "exit")) proc_exit(3);
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_request) int on_request(void) { return act("mode", 4); }
WEFT_EXPORT(weft_on_response) int on_response(void) { return act("rmode", 5); }
