// inspect: exercises every host function and reports what it saw as
// attachments ("saw.<what>"), for the ABI tests; on response it copies the
// result and error, and sets a reply attachment.
#include "weft.h"

static void put(const char *k, int status, const char *v, u32 n) {
  static char key[64];
  u32 kl = slen(k);
  copy(key, "saw.", 4);
  copy(key + 4, k, kl);
  if (status == WEFT_OK)
    weft_set_attachment(key, 4 + kl, v, n);
  else if (status == WEFT_NOT_FOUND)
    weft_set_attachment(key, 4 + kl, "<not found>", 11);
  else {
    char s[16] = "<status  >";
    s[8] = '0' + status;
    weft_set_attachment(key, 4 + kl, s, 10);
  }
}

#define SEE(what, fn)          \
  do {                         \
    char *p = 0;               \
    u32 n = 0;                 \
    int st = fn(&p, &n);       \
    put(what, st, p, n);       \
  } while (0)

static char num[32];
static u32 itoa(i64 v, char *out) {
  char tmp[32];
  u32 n = 0, o = 0;
  if (v < 0) {
    out[o++] = '-';
    v = -v;
  }
  do {
    tmp[n++] = '0' + (char)(v % 10);
    v /= 10;
  } while (v);
  while (n) out[o++] = tmp[--n];
  return o;
}

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  SEE("service", weft_get_service);
  SEE("method", weft_get_method);
  SEE("side", weft_get_side);
  SEE("arguments", weft_get_arguments);
  SEE("remote", weft_get_remote_address);
  SEE("config", weft_get_config);
  SEE("result", weft_get_result);
  SEE("error", weft_get_error);
  char *p;
  u32 n;
  put("attachment", weft_get_attachment("num", 3, &p, &n), p, n);
  put("missing", weft_get_attachment("nope", 4, &p, &n), p, n);
  weft_remove_attachment("drop", 4);
  // Bad arguments come back as BAD_ARGUMENT (2), not as a trap.
  put("badkey", weft_get_attachment((const char *)0x7ffffff0, 64, &p, &n), 0, 0);
  put("badout", weft_get_method((char **)0x7ffffffe, &n), 0, 0);
  put("badutf8", weft_set_attachment("k", 1, "\xff\xfe", 2), 0, 0);
  put("badcode", weft_reject(99, "x", 1), 0, 0);
  i64 c1 = weft_counter_add("hits", 4, 2, 60000);
  i64 c2 = weft_counter_add("hits", 4, 3, 60000);
  put("counter", WEFT_OK, num, itoa(c1 * 100 + c2, num));
  put("now", WEFT_OK, num, itoa(weft_now_ms() > 1600000000000LL, num));
  weft_log(1, "inspect saw a call", 18);
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_response) int on_response(void) {
  reset();
  char *p = 0;
  u32 n = 0;
  int st = weft_get_result(&p, &n);
  if (st == WEFT_OK) weft_set_attachment("saw.result", 10, p, n);
  st = weft_get_error(&p, &n);
  if (st == WEFT_OK) weft_set_attachment("saw.error", 9, p, n);
  st = weft_get_attachment("saw.method", 10, &p, &n);
  put("method.onresponse", st, p, n);
  weft_set_attachment("reply", 5, "from-wasm", 9);
  return WEFT_CONTINUE;
}
