/* ratelimit: at most `limit` calls per second per method, counted across
 * every instance by the host's counter "rl:<method>" (1 s fixed windows).
 * Over the limit the call is rejected with code 7 (limit exceeded).
 * Config: {limit: 10}. Without a usable limit every call goes on (and a
 * warning is logged). */
#include "../weft.h"

static int32_t on_request(void) {
    weft_str config, method;
    int64_t limit;
    if (weft_get_config(&config) != WEFT_OK || !weft_json_i64(config, WEFT_LIT("limit"), &limit) || limit < 0) {
        weft_log(WEFT_LOG_WARN, WEFT_LIT("ratelimit: no \"limit\" number in the filter's config; not limiting"));
        return WEFT_CONTINUE;
    }
    if (weft_get_method(&method) != WEFT_OK) method = WEFT_LIT("");

    weft_buf key = weft_buf_arena(3 + method.len);
    weft_buf_append(&key, WEFT_LIT("rl:"));
    weft_buf_append(&key, method);
    if (weft_counter_add(weft_buf_str(&key), 1, 1000) <= limit) return WEFT_CONTINUE;

    weft_buf msg = weft_buf_arena(64 + method.len);
    weft_buf_append(&msg, WEFT_LIT("rate limit exceeded for method "));
    weft_buf_append(&msg, method);
    weft_buf_append(&msg, WEFT_LIT(": "));
    weft_buf_i64(&msg, limit);
    weft_buf_append(&msg, WEFT_LIT(" calls per second"));
    return weft_reject(WEFT_CODE_LIMIT_EXCEEDED, weft_buf_str(&msg));
}

WEFT_ON_REQUEST(on_request)
