//! greeter: a service written in Rust and compiled to WASM, the
//! implementation of org.example.Greeter (`sayHello`, `echo`) for a weft
//! service configured with `impl: {wasm: greeter.wasm}` (ABI v1.2).
#![no_std]

use weft::{Action, Call, Code};

fn on_call(call: &Call) -> Action {
    let method = call.method().unwrap_or("");
    // A string argument is read without parsing JSON, and a string answered
    // without writing it: the fast way.
    if let Ok(s) = call.arg_str(0) {
        match method {
            "echo" => return answer(call, call.set_result_str(s)),
            "sayHello" | "SayHello" if !s.is_empty() => {
                let suffix = call.attachment("suffix").unwrap_or("");
                let _ = call.set_attachment("served-by", "wasm-rust");
                return answer(call, call.set_result_str(call.concat(&["hello ", s, suffix])));
            }
            _ => {}
        }
    }
    // A method declared with Java types gets its arguments as they are;
    // one declared by a protobuf IDL gets its request as an object
    // (HelloRequest{name}) and answers one (HelloReply{message}).
    let args = call.arguments().unwrap_or("[]");
    let arg0 = weft::json::element(args, 0).unwrap_or("null");
    let object = arg0.starts_with('{');
    let first = if object { call.json_string(arg0, "name").unwrap_or("") } else { call.arg_string(0).unwrap_or("") };
    match method {
        "sayHello" | "SayHello" => {
            if first.is_empty() {
                return call.reject(Code::Biz, "java.lang.IllegalArgumentException: name is empty");
            }
            let suffix = call.attachment("suffix").unwrap_or("");
            let _ = call.set_attachment("served-by", "wasm-rust");
            let greeting = call.json_quote(call.concat(&["hello ", first, suffix]));
            let answer = if object { call.concat(&["{\"message\":", greeting, "}"]) } else { greeting };
            match call.set_result(answer) {
                Ok(()) => Action::Continue,
                Err(_) => call.reject(Code::Serialization, "the result is not JSON"),
            }
        }
        "echo" => match call.set_result(call.json_quote(first)) {
            Ok(()) => Action::Continue,
            Err(_) => call.reject(Code::Serialization, "the result is not JSON"),
        },
        _ => call.reject(Code::Unknown, call.concat(&["no method ", method])),
    }
}

fn answer(call: &Call, set: Result<(), weft::Status>) -> Action {
    match set {
        Ok(()) => Action::Continue,
        Err(_) => call.reject(Code::Serialization, "the result could not be set"),
    }
}

weft::service!(on_call = on_call);
weft::panic_handler!();
