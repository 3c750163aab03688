//! sharedcount (ABI v1.1): counts the calls of every instance of every
//! filter with its `vm_id` in the host's shared data, with a
//! compare-and-swap loop so that no increment is lost when instances race;
//! sets the attachment `x-count` to the count it wrote (stored as decimal
//! text) and `x-counted-by` to the filter's name (a property), and counts
//! its calls in the metric `requests` too. The other v1.1 capabilities, in
//! a few lines each: a tick every 20 ms counted in `ticks`, and each call
//! enqueued on the shared queue `seen`, whose items the queue callback
//! counts in `dequeued`.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering};
use weft::{Action, Buf, Call, Code, Status};

/// The metric's id once defined (`u32::MAX`: not yet).
static REQUESTS: AtomicU32 = AtomicU32::new(u32::MAX);
static TICKS: AtomicU32 = AtomicU32::new(u32::MAX);
static DEQUEUED: AtomicU32 = AtomicU32::new(u32::MAX);
static SEEN: AtomicU32 = AtomicU32::new(u32::MAX);

/// Defines the tick and queue metrics, registers the queue and starts the
/// tick in whichever callback runs first on this instance.
fn setup(call: &Call) {
    if SEEN.load(Ordering::Relaxed) != u32::MAX {
        return;
    }
    if let (Ok(t), Ok(d)) = (call.metric_define(0, "ticks"), call.metric_define(0, "dequeued")) {
        TICKS.store(t, Ordering::Relaxed);
        DEQUEUED.store(d, Ordering::Relaxed);
    }
    if let Ok(q) = call.queue_register("seen") {
        SEEN.store(q, Ordering::Relaxed);
    }
    let _ = call.set_tick_period(20);
}

fn on_tick(call: &Call) {
    setup(call);
    let _ = call.metric_add(TICKS.load(Ordering::Relaxed), 1);
}

fn on_queue_ready(call: &Call, id: u32) {
    setup(call);
    while call.queue_dequeue(id).is_ok() {
        let _ = call.metric_add(DEQUEUED.load(Ordering::Relaxed), 1);
    }
}

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
    setup(call);
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
    let _ = call.queue_enqueue(SEEN.load(Ordering::Relaxed), b"1");
    Action::Continue
}

weft::filter!(on_request = on_request, on_tick = on_tick, on_queue_ready = on_queue_ready);
weft::panic_handler!();
