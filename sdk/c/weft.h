/*
 * weft.h — C SDK for weft WASM filters, ABI version 1 (see ../ABI.md).
 *
 * A single freestanding header: no libc, no allocator, no runtime. Build a
 * filter with
 *
 *   clang --target=wasm32 -nostdlib -O2 -Wl,--no-entry -Wl,--strip-all \
 *         -o authz.wasm authz.c
 *
 * and write it like this:
 *
 *   #include "weft.h"
 *
 *   static int32_t on_request(void) {
 *       weft_str token;
 *       if (weft_get_attachment(WEFT_LIT("token"), &token) != WEFT_OK)
 *           return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("no token"));
 *       return WEFT_CONTINUE;
 *   }
 *   WEFT_ON_REQUEST(on_request)
 *
 * What the header defines in the file that includes it:
 *   - the exports `weft_abi_version` (returns 1) and `weft_alloc`;
 *   - an arena allocator behind `weft_alloc`: a static buffer of
 *     WEFT_ARENA_SIZE bytes (64 KiB unless defined before the include) that
 *     grows into fresh memory pages when a callback needs more. It is reset
 *     at the start of every callback, so everything the host returned (and
 *     everything weft_arena_alloc gave) is valid until the callback returns;
 *   - WEFT_ON_REQUEST(fn) / WEFT_ON_RESPONSE(fn): define the exports
 *     `weft_on_request` / `weft_on_response` that reset the arena and call
 *     `int32_t fn(void)`, which returns WEFT_CONTINUE or WEFT_REJECT.
 *
 * A module made of several .c files defines WEFT_NO_IMPL before including
 * this header in all of them but one.
 *
 * Strings are `weft_str` (pointer + length, not NUL-terminated). Helpers:
 * WEFT_LIT("literal"), weft_cstr, weft_str_eq, weft_buf (a fixed-size
 * string builder), weft_json_string / weft_json_i64 (look up a field of a
 * JSON object, e.g. the filter's config).
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_ABI_VERSION 1

/* Actions returned by the callbacks. */
#define WEFT_CONTINUE 0
#define WEFT_REJECT 1

/* Statuses returned by the host functions. */
#define WEFT_OK 0
#define WEFT_NOT_FOUND 1
#define WEFT_BAD_ARGUMENT 2
#define WEFT_ALLOC_FAILED 3

/* Reject codes (weft's error codes). */
#define WEFT_CODE_UNKNOWN 0
#define WEFT_CODE_NETWORK 1
#define WEFT_CODE_TIMEOUT 2
#define WEFT_CODE_BIZ 3
#define WEFT_CODE_FORBIDDEN 4
#define WEFT_CODE_SERIALIZATION 5
#define WEFT_CODE_NO_PROVIDER 6
#define WEFT_CODE_LIMIT_EXCEEDED 7

/* Log levels. */
#define WEFT_LOG_DEBUG 0
#define WEFT_LOG_INFO 1
#define WEFT_LOG_WARN 2
#define WEFT_LOG_ERROR 3

#ifndef WEFT_ARENA_SIZE
#define WEFT_ARENA_SIZE 65536
#endif

#define WEFT_EXPORT(name) __attribute__((export_name(name), used))
/* For helpers big enough that inlining every use costs more than a call. */
#define WEFT_NOINLINE __attribute__((noinline))
#define WEFT_IMPORT(name) __attribute__((import_module("weft"), import_name(name)))

/* A UTF-8 string: `len` bytes at `ptr`, not NUL-terminated. The layout
 * (a 32-bit pointer then a 32-bit length) is what the host writes through
 * ret_ptr_ptr / ret_len_ptr, so a weft_str can be filled in place. */
typedef struct {
    const char *ptr;
    uint32_t len;
} weft_str;

/* A weft_str for a string literal (no strlen at run time). */
#define WEFT_LIT(s) ((weft_str){(s), (uint32_t)(sizeof(s) - 1)})

/* ------------------------------------------------------------------ */
/* Raw imports, exactly the ABI's signatures (pointers are i32).       */

WEFT_IMPORT("get_service") int32_t weft__get_service(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_method") int32_t weft__get_method(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_side") int32_t weft__get_side(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_arguments") int32_t weft__get_arguments(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_remote_address") int32_t weft__get_remote_address(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_attachment") int32_t weft__get_attachment(const char *key, uint32_t key_len,
                                                           const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("set_attachment") int32_t weft__set_attachment(const char *key, uint32_t key_len,
                                                           const char *val, uint32_t val_len);
WEFT_IMPORT("remove_attachment") int32_t weft__remove_attachment(const char *key, uint32_t key_len);
WEFT_IMPORT("get_config") int32_t weft__get_config(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_result") int32_t weft__get_result(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_error") int32_t weft__get_error(const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("reject") int32_t weft__reject(int32_t code, const char *msg, uint32_t msg_len);
WEFT_IMPORT("log") int32_t weft__log(int32_t level, const char *msg, uint32_t msg_len);
WEFT_IMPORT("counter_add") int64_t weft__counter_add(const char *key, uint32_t key_len,
                                                     int64_t delta, int64_t window_ms);
WEFT_IMPORT("now_ms") int64_t weft__now_ms(void);
/* ABI v1.1: shared data, guest metrics, ticks (sdk/ABI.md, Capabilities). */
WEFT_IMPORT("shared_get") int32_t weft__shared_get(const char *key, uint32_t key_len,
                                                   const char **ret_ptr, uint32_t *ret_len, uint32_t *cas);
WEFT_IMPORT("shared_set") int32_t weft__shared_set(const char *key, uint32_t key_len,
                                                   const char *val, uint32_t val_len, uint32_t cas);
WEFT_IMPORT("metric_define") int32_t weft__metric_define(int32_t kind, const char *name, uint32_t name_len, uint32_t *id);
WEFT_IMPORT("metric_add") int32_t weft__metric_add(uint32_t id, int64_t delta);
WEFT_IMPORT("metric_record") int32_t weft__metric_record(uint32_t id, int64_t value);
WEFT_IMPORT("set_tick_period") int32_t weft__set_tick_period(uint32_t ms);
/* ABI v1.1: callouts and shared queues. */
WEFT_IMPORT("http_call") int32_t weft__http_call(const char *cluster, uint32_t cluster_len, const char *method,
                                                 uint32_t method_len, const char *path, uint32_t path_len,
                                                 const char *headers, uint32_t headers_len, const char *body,
                                                 uint32_t body_len, uint32_t timeout_ms, uint32_t *ret_status,
                                                 const char **ret_headers, uint32_t *ret_headers_len,
                                                 const char **ret_body, uint32_t *ret_body_len);
WEFT_IMPORT("queue_register") int32_t weft__queue_register(const char *name, uint32_t name_len, uint32_t *id);
WEFT_IMPORT("queue_resolve") int32_t weft__queue_resolve(const char *vm_id, uint32_t vm_id_len, const char *name,
                                                         uint32_t name_len, uint32_t *id);
WEFT_IMPORT("queue_enqueue") int32_t weft__queue_enqueue(uint32_t id, const char *item, uint32_t item_len);
WEFT_IMPORT("queue_dequeue") int32_t weft__queue_dequeue(uint32_t id, const char **ret_ptr, uint32_t *ret_len);
WEFT_IMPORT("get_property") int32_t weft__get_property(const char *path, uint32_t path_len, const char **ret_ptr,
                                                       uint32_t *ret_len);

/* ------------------------------------------------------------------ */
/* Typed wrappers. Getters fill *out and return a WEFT_* status; *out is
 * left untouched unless the status is WEFT_OK. Returned bytes live in the
 * arena until the current callback returns.                           */

static inline int32_t weft_get_service(weft_str *out) { return weft__get_service(&out->ptr, &out->len); }
static inline int32_t weft_get_method(weft_str *out) { return weft__get_method(&out->ptr, &out->len); }
static inline int32_t weft_get_side(weft_str *out) { return weft__get_side(&out->ptr, &out->len); }
static inline int32_t weft_get_arguments(weft_str *out) { return weft__get_arguments(&out->ptr, &out->len); }
static inline int32_t weft_get_remote_address(weft_str *out) { return weft__get_remote_address(&out->ptr, &out->len); }
static inline int32_t weft_get_config(weft_str *out) { return weft__get_config(&out->ptr, &out->len); }
static inline int32_t weft_get_result(weft_str *out) { return weft__get_result(&out->ptr, &out->len); }
static inline int32_t weft_get_error(weft_str *out) { return weft__get_error(&out->ptr, &out->len); }
static inline int32_t weft_get_attachment(weft_str key, weft_str *out) {
    return weft__get_attachment(key.ptr, key.len, &out->ptr, &out->len);
}
static inline int32_t weft_set_attachment(weft_str key, weft_str val) {
    return weft__set_attachment(key.ptr, key.len, val.ptr, val.len);
}
static inline int32_t weft_remove_attachment(weft_str key) { return weft__remove_attachment(key.ptr, key.len); }
static inline int32_t weft_log(int32_t level, weft_str msg) { return weft__log(level, msg.ptr, msg.len); }
static inline int64_t weft_counter_add(weft_str key, int64_t delta, int64_t window_ms) {
    return weft__counter_add(key.ptr, key.len, delta, window_ms);
}
static inline int64_t weft_now_ms(void) { return weft__now_ms(); }

/* ABI v1.1. shared_set returns WEFT_CAS_MISMATCH when another instance wrote
 * the key since its token was read (read again and retry), WEFT_LIMIT past
 * the store's bounds. A tick calls the module's export weft_on_tick. */
#define WEFT_CAS_MISMATCH 4
#define WEFT_LIMIT 5
#define WEFT_METRIC_COUNTER 0
#define WEFT_METRIC_GAUGE 1
#define WEFT_METRIC_HISTOGRAM 2
static inline int32_t weft_shared_get(weft_str key, weft_str *out, uint32_t *cas) {
    return weft__shared_get(key.ptr, key.len, &out->ptr, &out->len, cas);
}
static inline int32_t weft_shared_set(weft_str key, weft_str val, uint32_t cas) {
    return weft__shared_set(key.ptr, key.len, val.ptr, val.len, cas);
}
static inline int32_t weft_metric_define(int32_t kind, weft_str name, uint32_t *id) {
    return weft__metric_define(kind, name.ptr, name.len, id);
}
static inline int32_t weft_metric_add(uint32_t id, int64_t delta) { return weft__metric_add(id, delta); }
static inline int32_t weft_metric_record(uint32_t id, int64_t value) { return weft__metric_record(id, value); }
static inline int32_t weft_set_tick_period(uint32_t ms) { return weft__set_tick_period(ms); }

/* ABI v1.1: a v1.1 function the filter's allowed_capabilities do not list
 * returns WEFT_REFUSED. */
#define WEFT_REFUSED 6
#define WEFT_UNAVAILABLE 7
#define WEFT_TIMEOUT 8

/* A callout's answer: the HTTP status, the headers as a JSON object (names
 * in lower case; read one with weft_json_string), the body. */
typedef struct {
    uint32_t status;
    weft_str headers;
    weft_str body;
} weft_http_response;

/* ABI v1.1: calls out to the cluster `cluster` of the filter's config (an
 * HTTP server, or a weft reference) and waits for its answer: the call is
 * paused meanwhile. Only in weft_on_request and weft_on_response (else
 * WEFT_NOT_FOUND). method "" is GET, path "" is /; headers is a JSON object
 * ({"x-user":"alice"}) or empty; timeout_ms 0 waits as long as the call
 * may. WEFT_OK with *out filled, whatever the HTTP status; WEFT_LIMIT
 * (max_callouts in flight), WEFT_UNAVAILABLE (failed), WEFT_TIMEOUT
 * (timeout_ms passed), WEFT_BAD_ARGUMENT (a cluster the config does not
 * name, bad headers). At the call's deadline the guest is stopped and the
 * call fails with code timeout. */
static inline int32_t weft_http_call(weft_str cluster, weft_str method, weft_str path, weft_str headers, weft_str body,
                                     uint32_t timeout_ms, weft_http_response *out) {
    return weft__http_call(cluster.ptr, cluster.len, method.ptr, method.len, path.ptr, path.len, headers.ptr,
                           headers.len, body.ptr, body.len, timeout_ms, &out->status, &out->headers.ptr,
                           &out->headers.len, &out->body.ptr, &out->body.len);
}
/* ABI v1.1 shared queues: register a queue (in the filter's vm_id; the
 * export weft_on_queue_ready, see WEFT_ON_QUEUE_READY, hears of its items),
 * find one by vm_id and name (WEFT_NOT_FOUND: none registered), enqueue
 * (WEFT_LIMIT: full, or the item over 64 KiB), dequeue (WEFT_NOT_FOUND:
 * empty). An id no queue has is WEFT_BAD_ARGUMENT. */
static inline int32_t weft_queue_register(weft_str name, uint32_t *id) {
    return weft__queue_register(name.ptr, name.len, id);
}
static inline int32_t weft_queue_resolve(weft_str vm_id, weft_str name, uint32_t *id) {
    return weft__queue_resolve(vm_id.ptr, vm_id.len, name.ptr, name.len, id);
}
static inline int32_t weft_queue_enqueue(uint32_t id, weft_str item) {
    return weft__queue_enqueue(id, item.ptr, item.len);
}
/* A property of the call by its dotted path, with the names proxy-wasm
 * filters read (v1.1): request.path, source.address, connection.mtls (one
 * byte, 0 or 1), plugin_name, weft.interface, weft.side... */
static inline int32_t weft_get_property(weft_str path, weft_str *out) {
    return weft__get_property(path.ptr, path.len, &out->ptr, &out->len);
}
static inline int32_t weft_queue_dequeue(uint32_t id, weft_str *out) {
    return weft__queue_dequeue(id, &out->ptr, &out->len);
}

/* Records the rejection and returns WEFT_REJECT, so a callback can
 * `return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("..."));`. */
static inline int32_t weft_reject(int32_t code, weft_str msg) {
    weft__reject(code, msg.ptr, msg.len);
    return WEFT_REJECT;
}

/* ------------------------------------------------------------------ */
/* Arena.                                                              */

/* Returns `size` bytes (8-byte aligned) valid until the callback returns,
 * or NULL when memory cannot grow. */
void *weft_arena_alloc(uint32_t size);
/* Forgets every allocation; the callback exports call it first. */
void weft_arena_reset(void);

#ifndef WEFT_NO_IMPL
static unsigned char weft__arena0[WEFT_ARENA_SIZE] __attribute__((aligned(16)));
static unsigned char *weft__arena_base = weft__arena0;
static uintptr_t weft__arena_cap = WEFT_ARENA_SIZE;
static uintptr_t weft__arena_used = 0;

void weft_arena_reset(void) { weft__arena_used = 0; }

void *weft_arena_alloc(uint32_t size) {
    uintptr_t start = (weft__arena_used + 7u) & ~(uintptr_t)7u;
    if (start < weft__arena_used || start + size < start) return NULL;
    if (start + size > weft__arena_cap) {
        /* Take fresh pages, at least twice the current capacity, and make
         * them the arena: earlier allocations stay valid where they are
         * until the next reset, later callbacks use the bigger region. */
        uintptr_t want = weft__arena_cap * 2;
        if (want < (uintptr_t)size + 8u) want = (uintptr_t)size + 8u;
        uintptr_t pages = (want + 65535u) >> 16;
        if (pages > 65536u) return NULL;
        intptr_t old = __builtin_wasm_memory_grow(0, pages);
        if (old < 0) return NULL;
        weft__arena_base = (unsigned char *)((uintptr_t)old << 16);
        weft__arena_cap = pages << 16;
        start = 0;
    }
    weft__arena_used = start + size;
    return weft__arena_base + start;
}

WEFT_EXPORT("weft_abi_version") int32_t weft_abi_version(void) { return WEFT_ABI_VERSION; }

WEFT_EXPORT("weft_alloc") void *weft_alloc(int32_t size) {
    if (size < 0) return NULL;
    return weft_arena_alloc((uint32_t)size);
}
#endif /* WEFT_NO_IMPL */

/* Define the callback exports: `WEFT_ON_REQUEST(fn)` at file scope, where
 * fn is `int32_t fn(void)`. */
#define WEFT_ON_REQUEST(fn)                                                \
    WEFT_EXPORT("weft_on_request") int32_t weft_on_request(void) {         \
        weft_arena_reset();                                                \
        return fn();                                                       \
    }
#define WEFT_ON_RESPONSE(fn)                                               \
    WEFT_EXPORT("weft_on_response") int32_t weft_on_response(void) {       \
        weft_arena_reset();                                                \
        return fn();                                                       \
    }
/* ABI v1.1: the tick callback (fn is `void fn(void)`, after
 * weft_set_tick_period) and the queue callback (fn is `void fn(uint32_t
 * queue_id)`, after weft_queue_register). */
#define WEFT_ON_TICK(fn)                                                   \
    WEFT_EXPORT("weft_on_tick") void weft_on_tick(void) {                  \
        weft_arena_reset();                                                \
        fn();                                                              \
    }
#define WEFT_ON_QUEUE_READY(fn)                                            \
    WEFT_EXPORT("weft_on_queue_ready") void weft_on_queue_ready(uint32_t id) { \
        weft_arena_reset();                                                \
        fn(id);                                                            \
    }

/* ------------------------------------------------------------------ */
/* Strings.                                                            */

static inline weft_str weft_cstr(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return (weft_str){s, n};
}

static inline int weft_str_eq(weft_str a, weft_str b) {
    if (a.len != b.len) return 0;
    for (uint32_t i = 0; i < a.len; i++)
        if (a.ptr[i] != b.ptr[i]) return 0;
    return 1;
}

/* Like weft_str_eq, but the time taken depends only on the lengths, not on
 * where the strings differ (for secrets). */
static inline int weft_str_eq_secret(weft_str a, weft_str b) {
    if (a.len != b.len) return 0;
    unsigned char d = 0;
    for (uint32_t i = 0; i < a.len; i++) d |= (unsigned char)(a.ptr[i] ^ b.ptr[i]);
    return d == 0;
}

static inline int weft_str_starts_with(weft_str s, weft_str prefix) {
    return s.len >= prefix.len && weft_str_eq((weft_str){s.ptr, prefix.len}, prefix);
}

/* A string builder over a caller-provided buffer. Appends past the end are
 * cut (at a UTF-8 character boundary) and set `overflow`. */
typedef struct {
    char *ptr;
    uint32_t len, cap;
    int overflow;
} weft_buf;

static inline weft_buf weft_buf_init(char *mem, uint32_t cap) { return (weft_buf){mem, 0, cap, 0}; }

/* A builder over `cap` arena bytes (cap 0 when the arena is exhausted). */
static inline weft_buf weft_buf_arena(uint32_t cap) {
    char *mem = (char *)weft_arena_alloc(cap);
    return (weft_buf){mem, 0, mem ? cap : 0, 0};
}

static inline weft_str weft_buf_str(const weft_buf *b) { return (weft_str){b->ptr, b->len}; }

static WEFT_NOINLINE void weft_buf_append(weft_buf *b, weft_str s) {
    uint32_t n = s.len;
    if (n > b->cap - b->len) {
        n = b->cap - b->len;
        /* do not cut a multi-byte character */
        while (n > 0 && ((unsigned char)s.ptr[n] & 0xC0) == 0x80) n--;
        b->overflow = 1;
    }
    for (uint32_t i = 0; i < n; i++) b->ptr[b->len + i] = s.ptr[i];
    b->len += n;
}

static inline void weft_buf_cstr(weft_buf *b, const char *s) { weft_buf_append(b, weft_cstr(s)); }

static inline void weft_buf_i64(weft_buf *b, int64_t v) {
    char tmp[20];
    int n = 0;
    uint64_t u = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[sizeof tmp - 1 - n++] = '-';
    weft_buf_append(b, (weft_str){tmp + sizeof tmp - n, (uint32_t)n});
}

/* ------------------------------------------------------------------ */
/* Minimal JSON: look up one field of a top-level object.              */
/* Not a validator: it walks well-formed JSON (what the host sends) and
 * stops with "not found" on anything it cannot read.                  */

static inline uint32_t weft__json_ws(weft_str j, uint32_t i) {
    while (i < j.len && (j.ptr[i] == ' ' || j.ptr[i] == '\t' || j.ptr[i] == '\n' || j.ptr[i] == '\r')) i++;
    return i;
}

/* j.ptr[i] is '"'. Returns the index after the closing quote (0 on error);
 * *escaped tells whether the string has backslashes. */
static inline uint32_t weft__json_skip_string(weft_str j, uint32_t i, int *escaped) {
    *escaped = 0;
    for (i++; i < j.len; i++) {
        char c = j.ptr[i];
        if (c == '"') return i + 1;
        if (c == '\\') {
            *escaped = 1;
            i++;
        }
    }
    return 0;
}

/* Skips the value starting at i. Returns the index after it, or 0. */
static WEFT_NOINLINE uint32_t weft__json_skip_value(weft_str j, uint32_t i) {
    int depth = 0, esc;
    while (i < j.len) {
        char c = j.ptr[i];
        if (c == '"') {
            i = weft__json_skip_string(j, i, &esc);
            if (!i) return 0;
            if (depth == 0) return i;
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return i; /* end of a scalar */
            i++;
            if (--depth == 0) return i;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            return i; /* end of a scalar */
        } else {
            i++;
        }
    }
    return depth == 0 ? i : 0;
}

static inline int weft__hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int weft__json_u4(weft_str raw, uint32_t i, uint32_t *cp) {
    if (i + 4 > raw.len) return 0;
    uint32_t v = 0;
    for (uint32_t k = 0; k < 4; k++) {
        int h = weft__hex(raw.ptr[i + k]);
        if (h < 0) return 0;
        v = v << 4 | (uint32_t)h;
    }
    *cp = v;
    return 1;
}

/* Decodes the body of a JSON string (without the quotes) into the arena. */
static WEFT_NOINLINE int weft__json_unescape(weft_str raw, weft_str *out) {
    char *o = (char *)weft_arena_alloc(raw.len); /* decoded is never longer */
    if (!o) return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < raw.len; i++) {
        char c = raw.ptr[i];
        if (c != '\\') {
            o[n++] = c;
            continue;
        }
        if (++i >= raw.len) return 0;
        switch (raw.ptr[i]) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (!weft__json_u4(raw, i + 1, &cp)) return 0;
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < raw.len && raw.ptr[i + 1] == '\\' &&
                raw.ptr[i + 2] == 'u' && weft__json_u4(raw, i + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = 0xFFFD; /* lone surrogate */
            }
            /* \uXXXX is 6 bytes of input, at most 3 of output; a pair is
             * 12 bytes for 4: the output never overtakes the input. */
            if (cp < 0x80) {
                o[n++] = (char)cp;
            } else if (cp < 0x800) {
                o[n++] = (char)(0xC0 | cp >> 6);
                o[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                o[n++] = (char)(0xE0 | cp >> 12);
                o[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
                o[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                o[n++] = (char)(0xF0 | cp >> 18);
                o[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
                o[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
                o[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return 0;
        }
    }
    *out = (weft_str){o, n};
    return 1;
}

/* Finds the value of `key` in the top-level JSON object `json`. On success
 * *value is the raw JSON text of the value (e.g. `"s3cret"` with quotes,
 * `10`, `{...}`) and the result is 1; 0 when absent or unreadable. */
static WEFT_NOINLINE int weft_json_find(weft_str json, weft_str key, weft_str *value) {
    uint32_t i = weft__json_ws(json, 0);
    int esc;
    if (i >= json.len || json.ptr[i] != '{') return 0;
    i++;
    for (;;) {
        i = weft__json_ws(json, i);
        if (i >= json.len || json.ptr[i] != '"') return 0;
        uint32_t ks = i + 1;
        uint32_t ke = weft__json_skip_string(json, i, &esc);
        if (!ke) return 0;
        weft_str k = {json.ptr + ks, ke - 1 - ks};
        int match;
        if (esc) {
            weft_str dk;
            match = weft__json_unescape(k, &dk) && weft_str_eq(dk, key);
        } else {
            match = weft_str_eq(k, key);
        }
        i = weft__json_ws(json, ke);
        if (i >= json.len || json.ptr[i] != ':') return 0;
        uint32_t vs = weft__json_ws(json, i + 1);
        uint32_t ve = weft__json_skip_value(json, vs);
        if (!ve || ve <= vs) return 0;
        if (match) {
            *value = (weft_str){json.ptr + vs, ve - vs};
            return 1;
        }
        i = weft__json_ws(json, ve);
        if (i >= json.len || json.ptr[i] != ',') return 0;
        i++;
    }
}

/* The string field `key` of the JSON object `json`, unescaped (into the
 * arena when it has escapes). 1 on success, 0 when absent or not a string. */
static inline int weft_json_string(weft_str json, weft_str key, weft_str *out) {
    weft_str v;
    int esc;
    if (!weft_json_find(json, key, &v) || v.ptr[0] != '"') return 0;
    if (!weft__json_skip_string(v, 0, &esc)) return 0;
    weft_str body = {v.ptr + 1, v.len - 2};
    if (!esc) {
        *out = body;
        return 1;
    }
    return weft__json_unescape(body, out);
}

/* The integer field `key` of the JSON object `json`: a fraction is cut
 * (toward zero), an exponent applied (`1e3` is 1000). 1 on success, 0 when
 * absent, not a number, or out of the int64 range. */
static inline int weft_json_i64(weft_str json, weft_str key, int64_t *out) {
    weft_str v;
    if (!weft_json_find(json, key, &v)) return 0;
    uint32_t i = 0, digits = 0;
    int neg = v.ptr[0] == '-';
    const uint64_t lim = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
    uint64_t u = 0;
    int32_t scale = 0; /* value = u * 10^scale */
    if (neg) i++;
    for (; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++, digits++) {
        uint64_t d = (uint64_t)(v.ptr[i] - '0');
        if (u > (lim - d) / 10) return 0;
        u = u * 10 + d;
    }
    if (!digits) return 0;
    if (i < v.len && v.ptr[i] == '.') {
        for (i++, digits = 0; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++, digits++) {
            uint64_t d = (uint64_t)(v.ptr[i] - '0');
            if (u <= (lim - d) / 10) { /* digits past the precision are dropped */
                u = u * 10 + d;
                scale--;
            }
        }
        if (!digits) return 0;
    }
    if (i < v.len && (v.ptr[i] == 'e' || v.ptr[i] == 'E')) {
        int eneg = 0;
        int32_t e = 0;
        i++;
        if (i < v.len && (v.ptr[i] == '+' || v.ptr[i] == '-')) eneg = v.ptr[i++] == '-';
        for (digits = 0; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++, digits++)
            if (e < 100000) e = e * 10 + (v.ptr[i] - '0');
        if (!digits) return 0;
        scale += eneg ? -e : e;
    }
    if (i != v.len) return 0;
    for (; scale > 0 && u; scale--) {
        if (u > lim / 10) return 0;
        u *= 10;
    }
    for (; scale < 0 && u; scale++) u /= 10;
    *out = neg ? (int64_t)(0u - u) : (int64_t)u;
    return 1;
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
