// The optional guest export weft_on_response. A filter that registers
// onResponse re-exports it from its entry file:
//
//   export * from "../exports";
//   export * from "../on_response";
//
// It is separate because the export is costly when present: the host then
// keeps the filter's instance for the whole call (it must run
// weft_on_response on it when the result comes back), so each call in flight
// holds an instance of its own. Without it an instance is busy only while
// weft_on_request runs.

import { dispatch, markResponseExported } from "./weft";

markResponseExported();

export function weft_on_response(): i32 {
  return dispatch(true);
}
