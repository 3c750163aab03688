/* authz: rejects (forbidden) calls whose `token` attachment is missing or
 * differs from `token` in the filter's config, e.g. config: {token: s3cret}.
 * With no token in the config, every call is rejected. */
#include "../weft.h"

static int32_t on_request(void) {
    weft_str config, want, got;
    if (weft_get_config(&config) != WEFT_OK || !weft_json_string(config, WEFT_LIT("token"), &want)) {
        weft_log(WEFT_LOG_ERROR, WEFT_LIT("authz: no \"token\" string in the filter's config"));
        return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("missing or wrong token"));
    }
    if (weft_get_attachment(WEFT_LIT("token"), &got) != WEFT_OK || !weft_str_eq_secret(got, want))
        return weft_reject(WEFT_CODE_FORBIDDEN, WEFT_LIT("missing or wrong token"));
    return WEFT_CONTINUE;
}

WEFT_ON_REQUEST(on_request)
