// noop: the cheapest filter, to measure the host's per-call overhead.
#include "weft.h"

WEFT_EXPORT(weft_on_request) int on_request(void) { return WEFT_CONTINUE; }
