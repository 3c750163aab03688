//! authcall (ABI v1.1): asks an auth service whether each call may go on
//! (`http_call`): `GET /check?user=<x-user>` with the header `x-user`, to the
//! cluster `auth` of the filter's config
//! (`clusters: {auth: "http://auth.internal:8080"}`). An answer 200 lets the
//! call through with the attachment `x-role` set from the answer's header
//! `x-role`; any other answer, or a callout that fails, rejects it as
//! forbidden. The call waits for the answer (its deadline bounds the wait).
//! A user name other than letters, digits, `-`, `_` and `.` is rejected
//! (this example neither URL- nor JSON-escapes it).
#![no_std]

use weft::{Action, Buf, Call, Code};

fn on_request(call: &Call) -> Action {
    let user = call.attachment("x-user").unwrap_or("");
    if !user.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
        return call.reject(Code::Forbidden, "authcall: x-user has characters this example does not send");
    }
    let path = call.concat(&["/check?user=", user]);
    let headers = call.concat(&["{\"x-user\":\"", user, "\"}"]);
    let resp = match call.http_call("auth", "GET", path, headers, b"", 0) {
        Ok(r) => r,
        Err(_) => return call.reject(Code::Forbidden, "authcall: the auth service did not answer"),
    };
    if resp.status != 200 {
        let mut n = Buf::<10>::new();
        n.push_i64(resp.status as i64);
        return call.reject(Code::Forbidden, call.concat(&["authcall: the auth service answered ", n.as_str()]));
    }
    if let Some(role) = call.json_string(resp.headers, "x-role") {
        let _ = call.set_attachment("x-role", role);
    }
    Action::Continue
}

weft::filter!(on_request = on_request);
weft::panic_handler!();
