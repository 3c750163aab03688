// attach: reads attachment "in" and writes it back as "out" with a "!"
// appended (one get_attachment through weft_alloc, one set_attachment): the
// typical work of a header-rewriting filter, for the overhead benchmark.
#include "weft.h"

static char buf[256];

WEFT_EXPORT(weft_on_request) int on_request(void) {
  reset();
  char *v;
  u32 n;
  if (weft_get_attachment("in", 2, &v, &n) != WEFT_OK) n = 0;
  if (n > sizeof(buf) - 1) n = sizeof(buf) - 1;
  copy(buf, v, n);
  buf[n] = '!';
  weft_set_attachment("out", 3, buf, n + 1);
  return WEFT_CONTINUE;
}
