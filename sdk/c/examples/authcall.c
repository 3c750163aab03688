/* authcall (ABI v1.1): asks an auth service whether each call may go on
 * (http_call): GET /check?user=<x-user> with the header x-user, to the
 * cluster "auth" of the filter's config (clusters: {auth:
 * "http://auth.internal:8080"}). An answer 200 lets the call through with
 * the attachment x-role set from the answer's header x-role; any other
 * answer, or a callout that fails, rejects it as forbidden. The call waits
 * for the answer (its deadline bounds the wait). A user name other than
 * letters, digits, '-', '_' and '.' is rejected (this example neither URL-
 * nor JSON-escapes it). */
#include "../weft.h"

static int plain(weft_str s) {
    for (uint32_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return 0;
    }
    return 1;
}

static int32_t on_request(void) {
    weft_str user = WEFT_LIT("");
    weft_get_attachment(WEFT_LIT("x-user"), &user);
    if (!plain(user))
        return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("authcall: x-user has characters this example does not send"));
    weft_buf path = weft_buf_arena(16 + user.len);
    weft_buf_cstr(&path, "/check?user=");
    weft_buf_append(&path, user);
    weft_buf hdrs = weft_buf_arena(16 + user.len);
    weft_buf_cstr(&hdrs, "{\"x-user\":\"");
    weft_buf_append(&hdrs, user);
    weft_buf_cstr(&hdrs, "\"}");
    weft_http_response resp;
    if (weft_http_call(WEFT_LIT("auth"), WEFT_LIT("GET"), weft_buf_str(&path), weft_buf_str(&hdrs), WEFT_LIT(""), 0,
                       &resp) != WEFT_OK)
        return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("authcall: the auth service did not answer"));
    if (resp.status != 200) {
        weft_buf msg = weft_buf_arena(64);
        weft_buf_cstr(&msg, "authcall: the auth service answered ");
        weft_buf_i64(&msg, resp.status);
        return weft_reject(WEFT_CODE_FORBIDDEN, weft_buf_str(&msg));
    }
    weft_str role;
    if (weft_json_string(resp.headers, WEFT_LIT("x-role"), &role)) weft_set_attachment(WEFT_LIT("x-role"), role);
    return WEFT_CONTINUE;
}

WEFT_ON_REQUEST(on_request)
