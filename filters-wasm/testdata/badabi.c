// badabi: breaks the ABI in ways `weft wasm check` must report: an import
// from "weft" with the wrong signature, one that does not exist, one from a
// module the host does not provide, and no weft_on_request export.
#include "weft.h"

__attribute__((import_module("weft"), import_name("get_method"))) int wrong_get_method(int);
__attribute__((import_module("weft"), import_name("get_weather"))) int get_weather(void);
__attribute__((import_module("env"), import_name("emscripten_notify"))) void notify(void);

WEFT_EXPORT(weft_on_reqest) int on_reqest(void) {
  notify();
  return wrong_get_method(1) + get_weather();
}
