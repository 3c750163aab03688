//! rewrite: on request, sets the attachment `x-rewritten` = "by-wasm-rust"
//! (the provider sees it); on response, sets `x-rewritten-response` =
//! "by-wasm-rust" (on a provider it goes back with the result).
#![no_std]

use weft::{Action, Call};

fn on_request(call: &Call) -> Action {
    let _ = call.set_attachment("x-rewritten", "by-wasm-rust");
    Action::Continue
}

fn on_response(call: &Call) -> Action {
    let _ = call.set_attachment("x-rewritten-response", "by-wasm-rust");
    Action::Continue
}

weft::filter!(on_request = on_request, on_response = on_response);
weft::panic_handler!();
