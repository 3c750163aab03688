/* Native unit test of weft.h's string, builder and JSON helpers (run by ../test.sh). */
#define WEFT_NO_IMPL
#include "../weft.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* the arena is the wasm build's; natively, malloc stands in (never freed) */
void *weft_arena_alloc(uint32_t n) { return malloc(n ? n : 1); }
void weft_arena_reset(void) {}
static int fails;
#define S(x) weft_cstr(x)
static void str(const char *j, const char *k, const char *want) {
    weft_str out; int ok = weft_json_string(S(j), S(k), &out);
    if (want == NULL ? ok : !(ok && out.len == strlen(want) && !memcmp(out.ptr, want, out.len))) {
        fails++; printf("FAIL str %s %s: ok=%d %.*s\n", j, k, ok, ok ? (int)out.len : 0, ok ? out.ptr : "");
    }
}
static void num(const char *v, int ok_want, long long want) {
    char j[128]; snprintf(j, sizeof j, "{\"n\":%s}", v);
    int64_t n = 0; int ok = weft_json_i64(S(j), S("n"), &n);
    if (ok != ok_want || (ok && n != want)) { fails++; printf("FAIL num %s: ok=%d n=%lld\n", v, ok, (long long)n); }
}
int main(void) {
    const char *j = " { \"a\" : [1, {\"b\": \"}\"}], \"token\":\"s3cret\", \"n\": -12 , \"o\":{\"x\":1},\"t\":true,\"last\":\"x\\\"y\"} ";
    str(j, "token", "s3cret"); str(j, "last", "x\"y"); str(j, "n", NULL); str(j, "zz", NULL); str(j, "b", NULL);
    str("{}", "a", NULL); str("[]", "a", NULL); str("{\"k\\u0065y\":\"v\"}", "key", "v");
    str("{\"t\":\"\\u00e9\\u20ac\\ud83d\\ude00\\n\"}", "t", "é€😀\n"); str("{\"t\":\"\\ud83dx\"}", "t", "\xEF\xBF\xBDx");
    str("{\"t\":\"\"}", "t", "");
    num("10", 1, 10); num("-3", 1, -3); num("2.9", 1, 2); num("1e3", 1, 1000); num("1.5E+3", 1, 1500);
    num("15e-1", 1, 1); num("9223372036854775807", 1, 9223372036854775807LL); num("-9223372036854775808", 1, (-9223372036854775807LL - 1));
    num("9223372036854775808", 0, 0); num("1e30", 0, 0); num("\"10\"", 0, 0); num("true", 0, 0); num("1.", 0, 0); num("-", 0, 0);
    char mem[8]; weft_buf b = weft_buf_init(mem, sizeof mem);
    weft_buf_cstr(&b, "ab"); weft_buf_i64(&b, -120); weft_buf_cstr(&b, "é€");
    if (b.len != 8 || memcmp(mem, "ab-120é", 8) || !b.overflow) { fails++; printf("FAIL buf %.*s\n", (int)b.len, mem); }
    char m2[20]; weft_buf c = weft_buf_init(m2, 20); weft_buf_i64(&c, (-9223372036854775807LL - 1));
    if (c.len != 20 || memcmp(m2, "-9223372036854775808", 20)) { fails++; printf("FAIL min\n"); }
    printf(fails ? "C json/buf: %d failures\n" : "C json/buf: all ok\n", fails);
    return fails != 0;
}
