// trace: appends its name (from its config, {"name": "..."}) to the
// attachment "trace" on request, and to the attachment "rtrace" on response,
// so a test can read the order in which a chain ran. It also checks that its
// instance never serves two calls at once: a global counts the calls between
// on_request and on_response, and a second one inside rejects.
#include "weft.h"

static char name[64];
static u32 name_len;
static int busy;

// name_from_config finds "name":"..." in the config JSON.
static void load_name(void) {
  char *c;
  u32 n;
  name_len = 0;
  if (weft_get_config(&c, &n) != WEFT_OK) return;
  const char *key = "\"name\":\"";
  u32 kl = slen(key);
  for (u32 i = 0; i + kl <= n; i++) {
    if (!eq(c + i, kl, key)) continue;
    u32 j = i + kl;
    while (j < n && c[j] != '"' && name_len < sizeof(name)) name[name_len++] = c[j++];
    return;
  }
}

static void append(const char *key, u32 klen) {
  char *v;
  u32 n;
  static char out[1024];
  u32 o = 0;
  if (weft_get_attachment(key, klen, &v, &n) == WEFT_OK && n > 0 && n < 900) {
    copy(out, v, n);
    o = n;
    out[o++] = ',';
  }
  copy(out + o, name, name_len);
  o += name_len;
  weft_set_attachment(key, klen, out, o);
}

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  if (name_len == 0) load_name();
  if (++busy != 1) {
    weft_reject(0, "instance shared by two calls", 28);
    return WEFT_REJECT;
  }
  append("trace", 5);
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_response) int on_response(void) {
  reset();
  busy--;
  append("rtrace", 6);
  return WEFT_CONTINUE;
}
