// The required guest exports of weft's WASM filter ABI v1. An entry file (a
// filter) re-exports them with `export * from "../exports";`. The optional
// weft_on_response is in on_response.ts.

import { ABI_VERSION, alloc, dispatch, dispatchQueue } from "./weft";

export function weft_abi_version(): i32 {
  return ABI_VERSION;
}

export function weft_alloc(size: i32): usize {
  return alloc(size);
}

export function weft_on_request(): i32 {
  return dispatch(false);
}

// ABI v1.1: called when a queue the filter registered has items (see
// onQueueReady in weft.ts); does nothing when no handler is registered.
export function weft_on_queue_ready(id: u32): void {
  dispatchQueue(id);
}
