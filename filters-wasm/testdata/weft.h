// weft.h: a minimal freestanding binding of weft's WASM filter ABI v1
// (sdk/ABI.md) for the host's tests. It is deliberately self-contained (no
// libc, no sdk/c) so the host's tests do not depend on an SDK: the guests are
// built with
//
//   clang --target=wasm32 -nostdlib -O2 -Wl,--no-entry -Wl,--export-dynamic -Wl,--allow-undefined
#ifndef WEFT_TEST_H
#define WEFT_TEST_H

typedef unsigned int u32;
typedef long long i64;

#define WEFT_IMPORT(name) __attribute__((import_module("weft"), import_name(#name)))
#define WEFT_EXPORT(name) __attribute__((export_name(#name)))

WEFT_IMPORT(get_service) int weft_get_service(char **ptr, u32 *len);
WEFT_IMPORT(get_method) int weft_get_method(char **ptr, u32 *len);
WEFT_IMPORT(get_side) int weft_get_side(char **ptr, u32 *len);
WEFT_IMPORT(get_arguments) int weft_get_arguments(char **ptr, u32 *len);
WEFT_IMPORT(get_remote_address) int weft_get_remote_address(char **ptr, u32 *len);
WEFT_IMPORT(get_attachment) int weft_get_attachment(const char *k, u32 klen, char **ptr, u32 *len);
WEFT_IMPORT(set_attachment) int weft_set_attachment(const char *k, u32 klen, const char *v, u32 vlen);
WEFT_IMPORT(remove_attachment) int weft_remove_attachment(const char *k, u32 klen);
WEFT_IMPORT(get_config) int weft_get_config(char **ptr, u32 *len);
WEFT_IMPORT(get_result) int weft_get_result(char **ptr, u32 *len);
WEFT_IMPORT(get_error) int weft_get_error(char **ptr, u32 *len);
WEFT_IMPORT(reject) int weft_reject(int code, const char *msg, u32 len);
WEFT_IMPORT(log) int weft_log(int level, const char *msg, u32 len);
WEFT_IMPORT(counter_add) i64 weft_counter_add(const char *k, u32 klen, i64 delta, i64 window_ms);
WEFT_IMPORT(now_ms) i64 weft_now_ms(void);
// v1.1: shared data, guest metrics, ticks.
WEFT_IMPORT(shared_get) int weft_shared_get(const char *k, u32 klen, char **ptr, u32 *len, u32 *cas);
WEFT_IMPORT(shared_set) int weft_shared_set(const char *k, u32 klen, const char *v, u32 vlen, u32 cas);
WEFT_IMPORT(metric_define) int weft_metric_define(int kind, const char *name, u32 len, u32 *id);
WEFT_IMPORT(metric_add) int weft_metric_add(u32 id, i64 delta);
WEFT_IMPORT(metric_record) int weft_metric_record(u32 id, i64 value);
WEFT_IMPORT(set_tick_period) int weft_set_tick_period(u32 ms);
// v1.1: callouts and shared queues.
WEFT_IMPORT(http_call) int weft_http_call(const char *cluster, u32 cluster_len, const char *method, u32 method_len,
                                          const char *path, u32 path_len, const char *headers, u32 headers_len,
                                          const char *body, u32 body_len, u32 timeout_ms, u32 *status,
                                          char **hdrs, u32 *hdrs_len, char **resp_body, u32 *resp_body_len);
WEFT_IMPORT(queue_register) int weft_queue_register(const char *name, u32 len, u32 *id);
WEFT_IMPORT(queue_resolve) int weft_queue_resolve(const char *vm, u32 vm_len, const char *name, u32 len, u32 *id);
WEFT_IMPORT(queue_enqueue) int weft_queue_enqueue(u32 id, const char *data, u32 len);
WEFT_IMPORT(queue_dequeue) int weft_queue_dequeue(u32 id, char **ptr, u32 *len);

#define WEFT_CONTINUE 0
#define WEFT_REJECT 1
#define WEFT_OK 0
#define WEFT_NOT_FOUND 1
#define WEFT_BAD_ARGUMENT 2
#define WEFT_CAS_MISMATCH 4
#define WEFT_LIMIT 5
#define WEFT_REFUSED 6
#define WEFT_UNAVAILABLE 7
#define WEFT_TIMEOUT 8

// A bump allocator over a static arena, reset at the start of every
// callback: nothing the host returns outlives the callback (ABI.md, Memory).
static char arena[64 * 1024];
static u32 arena_top;

WEFT_EXPORT(weft_alloc) void *weft_alloc(u32 size) {
  u32 at = (arena_top + 7) & ~7u;
  if (at + size > sizeof(arena)) return 0;
  arena_top = at + size;
  return arena + at;
}

static void reset(void) { arena_top = 0; }

static u32 slen(const char *s) {
  u32 n = 0;
  while (s[n]) n++;
  return n;
}

static int eq(const char *a, u32 alen, const char *b) {
  u32 blen = slen(b);
  if (alen != blen) return 0;
  for (u32 i = 0; i < alen; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

// clang turns copy loops into calls to memcpy and memset even without libc,
// so a freestanding guest defines them; the volatile stores keep clang from
// turning these very loops into calls to themselves.
void *memcpy(void *dst, const void *src, unsigned long n) {
  volatile char *d = dst;
  const char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}

void *memset(void *dst, int c, unsigned long n) {
  volatile char *d = dst;
  while (n--) *d++ = (char)c;
  return dst;
}

static void copy(char *dst, const char *src, u32 n) { memcpy(dst, src, n); }

#ifndef ABI_VERSION
#define ABI_VERSION 1
#endif
WEFT_EXPORT(weft_abi_version) int weft_abi_version(void) { return ABI_VERSION; }

#endif
