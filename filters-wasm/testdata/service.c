// service: a WASM service (ABI v1.2, weft_on_call) whose answer depends on
// the method, so that one pool can be driven into each failure and shown
// to recover:
//   echo     answers its first argument (get_argument_string,
//            set_result_string) and the deadline it saw as attachment
//            "deadline"
//   json     answers {"n":1} with set_result
//   notjson  set_result with bytes that are not JSON (BAD_ARGUMENT: then
//            rejects with code 5 and the status it got)
//   biz      rejects with code 3 and "java.lang.IllegalStateException: no"
//   trap     __builtin_trap() (unreachable)
//   loop     spins forever (stopped by the deadline)
//   action9  returns 9
#include "weft.h"

WEFT_IMPORT(get_argument_string) int weft_get_argument_string(u32 index, char **ptr, u32 *len);
WEFT_IMPORT(set_result_string) int weft_set_result_string(const char *s, u32 len);
WEFT_IMPORT(set_result) int weft_set_result(const char *json, u32 len);
WEFT_IMPORT(get_deadline) i64 weft_get_deadline(void);

static volatile int sink;

static u32 itoa(i64 v, char *out) {
  char tmp[24];
  u32 n = 0, k = 0;
  if (v == 0) tmp[n++] = '0';
  while (v > 0) {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  }
  while (n > 0) out[k++] = tmp[--n];
  return k;
}

WEFT_EXPORT(weft_on_call) int on_call(void) {
  reset();
  char *m;
  u32 n;
  if (weft_get_method(&m, &n) != WEFT_OK) return WEFT_REJECT;
  if (eq(m, n, "echo")) {
    char *a;
    u32 alen;
    if (weft_get_argument_string(0, &a, &alen) != WEFT_OK) {
      weft_reject(5, "no string argument", 18);
      return WEFT_REJECT;
    }
    char buf[24];
    u32 k = itoa(weft_get_deadline(), buf);
    weft_set_attachment("deadline", 8, buf, k);
    weft_set_result_string(a, alen);
    return WEFT_CONTINUE;
  }
  if (eq(m, n, "json")) {
    weft_set_result("{\"n\":1}", 7);
    return WEFT_CONTINUE;
  }
  if (eq(m, n, "notjson")) {
    int st = weft_set_result("{oops", 5);
    char msg[] = "set_result status ?";
    msg[18] = (char)('0' + st);
    weft_reject(5, msg, 19);
    return WEFT_REJECT;
  }
  if (eq(m, n, "biz")) {
    weft_reject(3, "java.lang.IllegalStateException: no", 35);
    return WEFT_REJECT;
  }
  if (eq(m, n, "trap")) __builtin_trap();
  if (eq(m, n, "loop"))
    for (;;) sink++;
  if (eq(m, n, "action9")) return 9;
  return WEFT_CONTINUE;
}
