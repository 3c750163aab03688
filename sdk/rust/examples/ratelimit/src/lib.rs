//! ratelimit: at most `limit` calls per second per method, counted across
//! every instance by the host's counter `rl:<method>` (1 s fixed windows).
//! Over the limit the call is rejected with code 7 (limit exceeded).
//! Config: `{limit: 10}`. Without a usable limit every call goes on (and a
//! warning is logged).
#![no_std]

use weft::{Action, Buf, Call, Code, Level};

fn on_request(call: &Call) -> Action {
    let limit = match call.config_i64("limit") {
        Some(n) if n >= 0 => n,
        _ => {
            call.log(Level::Warn, "ratelimit: no \"limit\" number in the filter's config; not limiting");
            return Action::Continue;
        }
    };
    let method = call.method().unwrap_or("");
    if call.counter_add(call.concat(&["rl:", method]), 1, 1000) <= limit {
        return Action::Continue;
    }
    let mut n = Buf::<20>::new();
    n.push_i64(limit);
    let msg = call.concat(&["rate limit exceeded for method ", method, ": ", n.as_str(), " calls per second"]);
    call.reject(Code::LimitExceeded, msg)
}

weft::filter!(on_request = on_request);
weft::panic_handler!();
