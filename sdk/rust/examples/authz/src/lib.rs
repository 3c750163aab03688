//! authz: rejects (forbidden) calls whose `token` attachment is missing or
//! differs from `token` in the filter's config, e.g. `config: {token: s3cret}`.
//! With no token in the config, every call is rejected.
#![no_std]

use weft::{Action, Call, Code, Level};

fn on_request(call: &Call) -> Action {
    let want = match call.config_string("token") {
        Some(t) => t,
        None => {
            call.log(Level::Error, "authz: no \"token\" string in the filter's config");
            return call.reject(Code::Forbidden, "missing or wrong token");
        }
    };
    match call.attachment("token") {
        Ok(got) if weft::eq_secret(got, want) => Action::Continue,
        _ => call.reject(Code::Forbidden, "missing or wrong token"),
    }
}

weft::filter!(on_request = on_request);
weft::panic_handler!();
