//! greeter: a service written in Rust and compiled to WASM, the
//! implementation of org.example.Greeter (`sayHello`, `echo`) for a weft
//! service configured with `impl: {wasm: greeter.wasm}` (ABI v1.2), whether
//! its interface is declared by Java types (string arguments and results)
//! or by a protobuf IDL (a request object with a `name` or `msg` field).
#![no_std]

use weft::{Action, Call, Code};

const EMPTY_NAME: &str = "java.lang.IllegalArgumentException: name is empty";

fn on_call(call: &Call) -> Action {
    // An attachment answered with one: x-req comes back as x-resp.
    if let Ok(x) = call.attachment("x-req") {
        let _ = call.set_attachment("x-resp", call.concat(&["resp-", x]));
    }
    let method = call.method().unwrap_or("");
    // A string argument is read without parsing JSON, and a string answered
    // without writing it: the fast way.
    if let Ok(s) = call.arg_str(0) {
        match method {
            "echo" | "Echo" => return answer(call, call.set_result_str(s)),
            "sayHello" | "SayHello" if s.is_empty() => return call.reject(Code::Biz, EMPTY_NAME),
            "sayHello" | "SayHello" => return answer(call, call.set_result_str(greet(call, s))),
            _ => {}
        }
    }
    // A method declared by a protobuf IDL gets its request as an object and
    // answers one.
    let args = call.arguments().unwrap_or("[]");
    let req = weft::json::element(args, 0).unwrap_or("{}");
    match method {
        "echo" | "Echo" => {
            let msg = call.json_string(req, "msg").unwrap_or("");
            if msg == "fail" {
                return call.reject(Code::Biz, "fail: idl");
            }
            answer(call, call.set_result(call.concat(&["{\"msg\":", call.json_quote(msg), "}"])))
        }
        "sayHello" | "SayHello" => {
            let name = call.json_string(req, "name").unwrap_or("");
            if name.is_empty() {
                return call.reject(Code::Biz, EMPTY_NAME);
            }
            answer(call, call.set_result(call.concat(&["{\"message\":", call.json_quote(greet(call, name)), "}"])))
        }
        _ => call.reject(Code::Unknown, call.concat(&["no method ", method])),
    }
}

fn greet<'a>(call: &'a Call, name: &'a str) -> &'a str {
    let suffix = call.attachment("suffix").unwrap_or("");
    let _ = call.set_attachment("served-by", "wasm-rust");
    call.concat(&["hello ", name, suffix])
}

fn answer(call: &Call, set: Result<(), weft::Status>) -> Action {
    match set {
        Ok(()) => Action::Continue,
        Err(_) => call.reject(Code::Serialization, "the result could not be set"),
    }
}

weft::service!(on_call = on_call);
weft::panic_handler!();
