// slowinit: a module whose start-up takes time, as a Go guest's runtime
// start does on a loaded machine. The first instance of a filter starts at
// once (so the filter loads); every later one spins in _initialize for
// INIT_MS milliseconds (a -D define; -1: forever). The attachment "mode"
// "trap" traps, to make the pool discard an instance. It exports
// weft_on_response, so a call holds its instance until its result is back.
#include "weft.h"

#ifndef INIT_MS
#define INIT_MS 300
#endif

static volatile int sink;

WEFT_EXPORT(_initialize) void initialize(void) {
  if (weft_counter_add("slowinit.instances", 18, 1, 0) == 1) return;
  i64 until = weft_now_ms() + INIT_MS;
  while (INIT_MS < 0 || weft_now_ms() < until) sink++;
}

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  char *m;
  u32 n;
  if (weft_get_attachment("mode", 4, &m, &n) == WEFT_OK && eq(m, n, "trap")) __builtin_trap();
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_response) int on_response(void) { return WEFT_CONTINUE; }
