//! sharedcount (ABI v1.1): counts the calls of every instance of every
//! filter with its `vm_id` in the host's shared data, with a
//! compare-and-swap loop so that no increment is lost when instances race;
//! sets the attachment `x-count` to the count it wrote (stored as decimal
//! text), and counts its calls in the metric `requests` too.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering};
use weft::{Action, Buf, Call, Code, Status};

/// The metric's id once defined (`u32::MAX`: not yet).
static REQUESTS: AtomicU32 = AtomicU32::new(u32::MAX);

fn parse(v: &str) -> i64 {
    let mut n: i64 = 0;
    for b in v.bytes() {
        if !b.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add((b - b'0') as i64);
    }
    n
}

fn on_request(call: &Call) -> Action {
    let mut id = REQUESTS.load(Ordering::Relaxed);
    if id == u32::MAX {
        match call.metric_define(0, "requests") {
            Ok(m) => {
                id = m;
                REQUESTS.store(m, Ordering::Relaxed);
            }
            Err(_) => return call.reject(Code::Unknown, "sharedcount: metric_define failed"),
        }
    }
    let mut next = Buf::<20>::new();
    loop {
        let (n, cas) = match call.shared_get("calls") {
            Ok((v, cas)) => (parse(v), cas),
            Err(Status::NotFound) => (0, 0),
            Err(_) => return call.reject(Code::Unknown, "sharedcount: shared_get failed"),
        };
        next.clear();
        next.push_i64(n + 1);
        match call.shared_set("calls", next.as_str(), cas) {
            Ok(()) => break,
            Err(Status::CasMismatch) => continue, // another instance counted first: read again
            Err(_) => return call.reject(Code::Unknown, "sharedcount: shared_set failed"),
        }
    }
    let _ = call.set_attachment("x-count", next.as_str());
    // Which filter counted: a property, as proxy-wasm filters read them.
    if let Ok(name) = call.property("plugin_name") {
        let _ = call.set_attachment("x-counted-by", name);
    }
    let _ = call.metric_add(id, 1);
    Action::Continue
}

weft::filter!(on_request = on_request);
weft::panic_handler!();
