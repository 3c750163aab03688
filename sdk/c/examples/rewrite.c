/* rewrite: on request, sets the attachment `x-rewritten` = "by-wasm-c" (the
 * provider sees it); on response, sets `x-rewritten-response` = "by-wasm-c"
 * (on a provider it goes back to the consumer with the result). */
#include "../weft.h"

static int32_t on_request(void) {
    weft_set_attachment(WEFT_LIT("x-rewritten"), WEFT_LIT("by-wasm-c"));
    return WEFT_CONTINUE;
}

static int32_t on_response(void) {
    weft_set_attachment(WEFT_LIT("x-rewritten-response"), WEFT_LIT("by-wasm-c"));
    return WEFT_CONTINUE;
}

WEFT_ON_REQUEST(on_request)
WEFT_ON_RESPONSE(on_response)
