// A weft-ABI v1.1 guest that calls out (http_call) before letting a call
// through, the way an authorization filter asks an auth service:
//   - by default to the cluster "auth" (an HTTP server): GET
//     /check?user=<x-user>, with the header x-user; an answer 200 lets the
//     call through with the attachment x-role set from the answer's header
//     x-role, any other status rejects it (forbidden, "not allowed: N");
//   - with the attachment x-mode "ref", to the cluster "users" (a weft
//     reference): POST /org.weft.Auth/check with the body ["<x-user>"]; an
//     answer 200 sets x-role to the result (a JSON string, unquoted here);
//   - x-timeout, when set, is the callout's timeout_ms.
// A callout that fails rejects the call with a code per status: LIMIT
// limit exceeded, UNAVAILABLE network, TIMEOUT timeout, REFUSED forbidden.
// _initialize calls out too, outside any call: the status it got (NOT_FOUND
// expected) goes to the attachment x-init-status of every call.
// weft_on_response, when the call has the attachment x-resp-user, asks the
// cluster "auth" about that user the same way and sets the result's
// attachment x-resp-role from the answer (or rejects).
#include "weft.h"

static int init_status = -1;

static u32 put(char *dst, u32 at, const char *s, u32 n) {
  copy(dst + at, s, n);
  return at + n;
}

static u32 put_u32(char *dst, u32 at, u32 v) {
  char buf[10];
  u32 i = sizeof buf;
  do {
    buf[--i] = '0' + v % 10;
    v /= 10;
  } while (v);
  return put(dst, at, buf + i, sizeof buf - i);
}

static u32 parse_u32(const char *p, u32 n) {
  u32 v = 0;
  for (u32 i = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++) v = v * 10 + (p[i] - '0');
  return v;
}

// find returns the index of needle in hay, or -1.
static int find(const char *hay, u32 n, const char *needle) {
  u32 m = slen(needle);
  for (u32 i = 0; i + m <= n; i++) {
    u32 j = 0;
    while (j < m && hay[i + j] == needle[j]) j++;
    if (j == m) return (int)i;
  }
  return -1;
}

static int reject_with(int code, const char *msg, u32 n) {
  weft_reject(code, msg, n);
  return WEFT_REJECT;
}

WEFT_EXPORT(_initialize) void initialize(void) {
  u32 status;
  char *h, *b;
  u32 hn, bn;
  init_status = weft_http_call("auth", 4, "GET", 3, "/", 1, 0, 0, 0, 0, 0, &status, &h, &hn, &b, &bn);
}

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  char *user = "", *mode = "", *to = "";
  u32 ulen = 0, mlen = 0, tlen = 0;
  weft_get_attachment("x-user", 6, &user, &ulen);
  weft_get_attachment("x-mode", 6, &mode, &mlen);
  weft_get_attachment("x-timeout", 9, &to, &tlen);
  if (ulen > 64) ulen = 64;
  char digit = '0' + (char)init_status;
  weft_set_attachment("x-init-status", 13, &digit, 1);

  int ref = eq(mode, mlen, "ref");
  char path[128], hdrs[128], body[128];
  u32 pn = 0, hn = 0, bn = 0;
  if (ref) {
    pn = put(path, 0, "/org.weft.Auth/check", 20);
    bn = put(body, 0, "[\"", 2);
    bn = put(body, bn, user, ulen);
    bn = put(body, bn, "\"]", 2);
  } else {
    pn = put(path, 0, "/check?user=", 12);
    pn = put(path, pn, user, ulen);
    hn = put(hdrs, 0, "{\"x-user\":\"", 11);
    hn = put(hdrs, hn, user, ulen);
    hn = put(hdrs, hn, "\"}", 2);
  }
  u32 status = 0;
  char *rh = 0, *rb = 0;
  u32 rhn = 0, rbn = 0;
  int st = weft_http_call(ref ? "users" : "auth", ref ? 5 : 4, ref ? "POST" : "GET", ref ? 4 : 3, path, pn, hdrs, hn, body,
                          bn, parse_u32(to, tlen), &status, &rh, &rhn, &rb, &rbn);
  switch (st) {
  case WEFT_OK:
    break;
  case WEFT_LIMIT:
    return reject_with(7, "callout limit", 13);
  case WEFT_UNAVAILABLE:
    return reject_with(1, "callout unavailable", 19);
  case WEFT_TIMEOUT:
    return reject_with(2, "callout timeout", 15);
  case WEFT_REFUSED:
    return reject_with(4, "callout refused", 15);
  default: {
    char msg[32];
    u32 n = put(msg, 0, "callout status ", 15);
    n = put_u32(msg, n, (u32)st);
    return reject_with(0, msg, n);
  }
  }
  char num[10];
  u32 nn = put_u32(num, 0, status);
  weft_set_attachment("x-status", 8, num, nn);
  if (status != 200) {
    char msg[32];
    u32 n = put(msg, 0, "not allowed: ", 13);
    n = put(msg, n, num, nn);
    return reject_with(4, msg, n);
  }
  if (ref) {
    // The result as JSON: a string, "admin".
    if (rbn >= 2 && rb[0] == '"') weft_set_attachment("x-role", 6, rb + 1, rbn - 2);
    return WEFT_CONTINUE;
  }
  int at = find(rh, rhn, "\"x-role\":\"");
  if (at >= 0) {
    u32 from = (u32)at + 10, to_ = from;
    while (to_ < rhn && rh[to_] != '"') to_++;
    weft_set_attachment("x-role", 6, rh + from, to_ - from);
  }
  return WEFT_CONTINUE;
}

WEFT_EXPORT(weft_on_response) int on_response(void) {
  reset();
  char *user;
  u32 ulen;
  if (weft_get_attachment("x-resp-user", 11, &user, &ulen) != WEFT_OK) return WEFT_CONTINUE;
  if (ulen > 64) ulen = 64;
  char path[128], hdrs[128];
  u32 pn = put(path, 0, "/check?user=", 12);
  pn = put(path, pn, user, ulen);
  u32 hn = put(hdrs, 0, "{\"x-user\":\"", 11);
  hn = put(hdrs, hn, user, ulen);
  hn = put(hdrs, hn, "\"}", 2);
  u32 status = 0;
  char *rh = 0, *rb = 0;
  u32 rhn = 0, rbn = 0;
  int st = weft_http_call("auth", 4, "", 0, path, pn, hdrs, hn, "", 0, 0, &status, &rh, &rhn, &rb, &rbn);
  if (st != WEFT_OK || status != 200) return reject_with(4, "response callout refused", 24);
  int at = find(rh, rhn, "\"x-role\":\"");
  if (at >= 0) {
    u32 from = (u32)at + 10, to = from;
    while (to < rhn && rh[to] != '"') to++;
    weft_set_attachment("x-resp-role", 11, rh + from, to - from);
  }
  return WEFT_CONTINUE;
}
