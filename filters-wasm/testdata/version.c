// version: sets the attachment "version" to VERSION (a -D define), so a
// test can tell which build of the module served a call (hot reload).
#include "weft.h"

#ifndef VERSION
#define VERSION "1"
#endif

WEFT_EXPORT(weft_on_request) int on_request(void) {
  weft_set_attachment("version", 7, VERSION, sizeof(VERSION) - 1);
  return WEFT_CONTINUE;
}
