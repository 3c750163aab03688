//! Rust SDK for weft WASM filters, ABI version 1 (see `sdk/ABI.md`).
//!
//! `no_std`, no dependencies, no allocator needed: a filter is a `cdylib`
//! for `wasm32-unknown-unknown` that hands its callbacks to [`filter!`]:
//!
//! ```ignore
//! #![no_std]
//! use weft::{Action, Call, Code};
//!
//! fn on_request(call: &Call) -> Action {
//!     match call.attachment("token") {
//!         Ok(_) => Action::Continue,
//!         Err(_) => call.reject(Code::Forbidden, "no token"),
//!     }
//! }
//!
//! weft::filter!(on_request = on_request);
//! weft::panic_handler!(); // only in a #![no_std] crate
//! ```
//!
//! [`filter!`] defines the exports `weft_abi_version`, `weft_alloc`,
//! `weft_on_request` and (optionally) `weft_on_response`.
//!
//! Memory: the host hands data to the guest through `weft_alloc`, which is
//! an arena (a static 64 KiB buffer that grows into fresh memory pages when
//! a callback needs more) reset at the start of every callback. Everything
//! the host returns therefore lives until the callback returns, and the
//! borrow checker holds you to it: strings returned by [`Call`] borrow the
//! `&Call` the callback was given. A crate that uses `std`/`alloc` as well
//! keeps its own global allocator; the arena only takes pages nobody else
//! has.
#![no_std]

#[cfg(test)]
extern crate std;

use core::marker::PhantomData;

/// The ABI version this SDK implements (`weft_abi_version`).
pub const ABI_VERSION: i32 = 1;

/// What a callback tells the host to do.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub enum Action {
    /// Go on, with any attachment changes made.
    Continue = 0,
    /// Fail the call with the code and message given to [`Call::reject`].
    Reject = 1,
}

/// Why a host function returned nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    /// `1`: nothing to return (absent attachment, no result yet...).
    NotFound,
    /// `2`: the host saw a bad pointer, length, or invalid UTF-8.
    BadArgument,
    /// `3`: `weft_alloc` failed.
    AllocFailed,
    /// `4` (ABI v1.1): `shared_set` with a token another instance's write
    /// made stale: read again and retry.
    CasMismatch,
    /// `5` (ABI v1.1): a bound of the host was reached (store, queues,
    /// `max_callouts`).
    Limit,
    /// `6` (ABI v1.1): the filter's `allowed_capabilities` do not list the
    /// function.
    Refused,
    /// `7` (ABI v1.1): the callout failed (unreachable upstream, reset,
    /// answer over 1 MiB, a reference that does not exist).
    Unavailable,
    /// `8` (ABI v1.1): the callout's own `timeout_ms` passed first.
    Timeout,
    /// The host returned bytes that are not UTF-8.
    InvalidUtf8,
    /// A status this SDK does not know.
    Other(i32),
}

impl Status {
    fn check(status: i32) -> Result<(), Status> {
        match status {
            0 => Ok(()),
            1 => Err(Status::NotFound),
            2 => Err(Status::BadArgument),
            3 => Err(Status::AllocFailed),
            4 => Err(Status::CasMismatch),
            5 => Err(Status::Limit),
            6 => Err(Status::Refused),
            7 => Err(Status::Unavailable),
            8 => Err(Status::Timeout),
            s => Err(Status::Other(s)),
        }
    }
}

/// Reject codes: weft's error codes (Dubbo's RpcException codes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub enum Code {
    Unknown = 0,
    Network = 1,
    Timeout = 2,
    Biz = 3,
    Forbidden = 4,
    Serialization = 5,
    NoProvider = 6,
    LimitExceeded = 7,
}

/// Log levels.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// The raw host functions, exactly as the ABI declares them (module `weft`).
pub mod sys {
    #[cfg(target_arch = "wasm32")]
    #[link(wasm_import_module = "weft")]
    extern "C" {
        pub fn get_service(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_method(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_side(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_arguments(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_remote_address(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_attachment(
            key_ptr: *const u8,
            key_len: usize,
            ret_ptr: *mut *const u8,
            ret_len: *mut usize,
        ) -> i32;
        pub fn set_attachment(key_ptr: *const u8, key_len: usize, val_ptr: *const u8, val_len: usize) -> i32;
        pub fn remove_attachment(key_ptr: *const u8, key_len: usize) -> i32;
        pub fn get_config(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_result(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_error(ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn reject(code: i32, msg_ptr: *const u8, msg_len: usize) -> i32;
        pub fn log(level: i32, msg_ptr: *const u8, msg_len: usize) -> i32;
        pub fn counter_add(key_ptr: *const u8, key_len: usize, delta: i64, window_ms: i64) -> i64;
        pub fn now_ms() -> i64;
        // ABI v1.1
        pub fn shared_get(
            key_ptr: *const u8,
            key_len: usize,
            ret_ptr: *mut *const u8,
            ret_len: *mut usize,
            cas: *mut u32,
        ) -> i32;
        pub fn shared_set(key_ptr: *const u8, key_len: usize, val_ptr: *const u8, val_len: usize, cas: u32) -> i32;
        pub fn metric_define(kind: i32, name_ptr: *const u8, name_len: usize, id: *mut u32) -> i32;
        pub fn metric_add(id: u32, delta: i64) -> i32;
        pub fn metric_record(id: u32, value: i64) -> i32;
        pub fn set_tick_period(ms: u32) -> i32;
        pub fn http_call(
            cluster_ptr: *const u8,
            cluster_len: usize,
            method_ptr: *const u8,
            method_len: usize,
            path_ptr: *const u8,
            path_len: usize,
            headers_ptr: *const u8,
            headers_len: usize,
            body_ptr: *const u8,
            body_len: usize,
            timeout_ms: u32,
            ret_status: *mut u32,
            ret_headers_ptr: *mut *const u8,
            ret_headers_len: *mut usize,
            ret_body_ptr: *mut *const u8,
            ret_body_len: *mut usize,
        ) -> i32;
        pub fn queue_register(name_ptr: *const u8, name_len: usize, id: *mut u32) -> i32;
        pub fn queue_resolve(vm_ptr: *const u8, vm_len: usize, name_ptr: *const u8, name_len: usize, id: *mut u32) -> i32;
        pub fn queue_enqueue(id: u32, item_ptr: *const u8, item_len: usize) -> i32;
        pub fn queue_dequeue(id: u32, ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn get_property(path_ptr: *const u8, path_len: usize, ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        // ABI v1.2: services
        pub fn set_result(json_ptr: *const u8, json_len: usize) -> i32;
        pub fn get_deadline() -> i64;
        pub fn get_argument_string(index: u32, ret_ptr: *mut *const u8, ret_len: *mut usize) -> i32;
        pub fn set_result_string(ptr: *const u8, len: usize) -> i32;
    }

    /// Off wasm (unit tests, docs) the host is absent: getters find nothing.
    #[cfg(not(target_arch = "wasm32"))]
    mod absent {
        pub unsafe fn get_service(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_method(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_side(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_arguments(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_remote_address(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_attachment(_: *const u8, _: usize, _: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn set_attachment(_: *const u8, _: usize, _: *const u8, _: usize) -> i32 { 0 }
        pub unsafe fn remove_attachment(_: *const u8, _: usize) -> i32 { 0 }
        pub unsafe fn get_config(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_result(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn get_error(_: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn reject(_: i32, _: *const u8, _: usize) -> i32 { 0 }
        pub unsafe fn log(_: i32, _: *const u8, _: usize) -> i32 { 0 }
        pub unsafe fn counter_add(_: *const u8, _: usize, delta: i64, _: i64) -> i64 { delta }
        pub unsafe fn now_ms() -> i64 { 0 }
        pub unsafe fn shared_get(_: *const u8, _: usize, _: *mut *const u8, _: *mut usize, _: *mut u32) -> i32 { 1 }
        pub unsafe fn shared_set(_: *const u8, _: usize, _: *const u8, _: usize, _: u32) -> i32 { 0 }
        pub unsafe fn metric_define(_: i32, _: *const u8, _: usize, _: *mut u32) -> i32 { 0 }
        pub unsafe fn metric_add(_: u32, _: i64) -> i32 { 0 }
        pub unsafe fn metric_record(_: u32, _: i64) -> i32 { 0 }
        pub unsafe fn set_tick_period(_: u32) -> i32 { 0 }
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn http_call(
            _: *const u8, _: usize, _: *const u8, _: usize, _: *const u8, _: usize, _: *const u8, _: usize,
            _: *const u8, _: usize, _: u32, _: *mut u32, _: *mut *const u8, _: *mut usize, _: *mut *const u8,
            _: *mut usize,
        ) -> i32 { 1 }
        pub unsafe fn queue_register(_: *const u8, _: usize, _: *mut u32) -> i32 { 1 }
        pub unsafe fn queue_resolve(_: *const u8, _: usize, _: *const u8, _: usize, _: *mut u32) -> i32 { 1 }
        pub unsafe fn queue_enqueue(_: u32, _: *const u8, _: usize) -> i32 { 2 }
        pub unsafe fn queue_dequeue(_: u32, _: *mut *const u8, _: *mut usize) -> i32 { 2 }
        pub unsafe fn get_property(_: *const u8, _: usize, _: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn set_result(_: *const u8, _: usize) -> i32 { 1 }
        pub unsafe fn get_deadline() -> i64 { 0 }
        pub unsafe fn get_argument_string(_: u32, _: *mut *const u8, _: *mut usize) -> i32 { 1 }
        pub unsafe fn set_result_string(_: *const u8, _: usize) -> i32 { 1 }
    }
    #[cfg(not(target_arch = "wasm32"))]
    pub use absent::*;
}

/// The arena behind `weft_alloc`.
pub mod arena {
    const FIRST: usize = 64 * 1024;

    #[repr(align(16))]
    struct First([u8; FIRST]);

    static mut FIRST_MEM: First = First([0; FIRST]);
    static mut BASE: *mut u8 = core::ptr::null_mut();
    static mut CAP: usize = FIRST;
    static mut USED: usize = 0;

    /// `size` bytes, 8-byte aligned, valid until the next [`reset`]; null
    /// when memory cannot grow.
    pub fn alloc(size: usize) -> *mut u8 {
        // SAFETY: a wasm instance runs one thread; nothing else touches these.
        unsafe {
            if BASE.is_null() {
                BASE = core::ptr::addr_of_mut!(FIRST_MEM) as *mut u8;
            }
            let start = match USED.checked_add(7) {
                Some(s) => s & !7,
                None => return core::ptr::null_mut(),
            };
            let end = match start.checked_add(size) {
                Some(e) => e,
                None => return core::ptr::null_mut(),
            };
            if end <= CAP {
                USED = end;
                return BASE.add(start);
            }
            grow(size)
        }
    }

    /// Takes fresh pages (at least twice the current capacity) as the new
    /// arena; earlier allocations stay where they are until the next reset.
    #[cfg(target_arch = "wasm32")]
    #[inline(never)]
    unsafe fn grow(size: usize) -> *mut u8 {
        let want = core::cmp::max(CAP.saturating_mul(2), size.saturating_add(8));
        let pages = (want >> 16) + ((want & 0xffff != 0) as usize);
        let old = core::arch::wasm32::memory_grow(0, pages);
        if old == usize::MAX {
            return core::ptr::null_mut();
        }
        BASE = (old << 16) as *mut u8;
        CAP = pages << 16;
        USED = size;
        BASE
    }

    #[cfg(not(target_arch = "wasm32"))]
    unsafe fn grow(_: usize) -> *mut u8 {
        core::ptr::null_mut()
    }

    /// Forgets every allocation.
    ///
    /// # Safety
    /// Nothing allocated before may be used afterwards. [`crate::filter!`]
    /// calls it at the start of each callback, before any [`crate::Call`]
    /// exists.
    pub unsafe fn reset() {
        USED = 0;
    }

    /// `size` arena bytes, or a trap when memory cannot grow (as Rust's
    /// allocation failures do).
    pub(crate) fn alloc_or_trap(size: usize) -> *mut u8 {
        let p = alloc(size);
        if p.is_null() {
            crate::trap();
        }
        p
    }
}

/// Stops the instance (a wasm trap): the host fails the call with a clear
/// error and replaces the instance.
#[inline(always)]
pub fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    panic!("weft: trap");
}

/// The call a callback is handling. Strings it returns live in the arena
/// and borrow the `&Call`, so they cannot outlive the callback.
pub struct Call {
    _not_send: PhantomData<*mut ()>,
}

#[inline(always)]
fn fetch<'a>(f: impl FnOnce(*mut *const u8, *mut usize) -> i32) -> Result<&'a str, Status> {
    let mut ptr: *const u8 = core::ptr::null();
    let mut len: usize = 0;
    Status::check(f(&mut ptr, &mut len))?;
    if len == 0 || ptr.is_null() {
        return Ok("");
    }
    // SAFETY: the host wrote `len` bytes at `ptr`, inside memory that
    // weft_alloc handed out during this callback.
    let bytes = unsafe { core::slice::from_raw_parts(ptr, len) };
    core::str::from_utf8(bytes).map_err(|_| Status::InvalidUtf8)
}

#[inline(always)]
fn fetch_bytes<'a>(f: impl FnOnce(*mut *const u8, *mut usize) -> i32) -> Result<&'a [u8], Status> {
    let mut ptr: *const u8 = core::ptr::null();
    let mut len: usize = 0;
    Status::check(f(&mut ptr, &mut len))?;
    if len == 0 || ptr.is_null() {
        return Ok(&[]);
    }
    // SAFETY: as in fetch.
    Ok(unsafe { core::slice::from_raw_parts(ptr, len) })
}

/// A callout's answer ([`Call::http_call`]), in the arena.
#[derive(Clone, Copy, Debug)]
pub struct HttpResponse<'a> {
    /// The HTTP status (a `ref:` cluster: 200, or on an error the HTTP
    /// status of its code).
    pub status: u32,
    /// The answer's headers as a JSON object, names in lower case, values
    /// of a repeated name joined by `", "`: read one with
    /// [`Call::json_string`]`(resp.headers, "x-role")`.
    pub headers: &'a str,
    /// The body (at most 1 MiB; a `ref:` cluster's: the result as JSON).
    pub body: &'a [u8],
}

impl Call {
    #[doc(hidden)]
    /// # Safety
    /// Only [`filter!`] makes a `Call`, right after resetting the arena.
    pub unsafe fn __new() -> Call {
        Call { _not_send: PhantomData }
    }

    /// The service key, `group/interface:version`.
    pub fn service(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_service(p, l) })
    }
    /// The method name as on the wire.
    pub fn method(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_method(p, l) })
    }
    /// `provider` or `consumer`.
    pub fn side(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_side(p, l) })
    }
    /// The arguments as a JSON array.
    pub fn arguments(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_arguments(p, l) })
    }
    /// The peer's `host:port` on a provider.
    pub fn remote_address(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_remote_address(p, l) })
    }
    /// The filter's `config` as a JSON object (`{}` when none).
    pub fn config(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_config(p, l) })
    }
    /// In `on_response`: the result value as JSON; `NotFound` when the call failed.
    pub fn result(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_result(p, l) })
    }
    /// In `on_response`: the error message; `NotFound` when the call succeeded.
    pub fn error(&self) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_error(p, l) })
    }
    /// A property of the call by its dotted path, with the names
    /// proxy-wasm filters read (ABI v1.1): `request.path`,
    /// `source.address`, `connection.mtls` (one byte, 0 or 1),
    /// `plugin_name`, `weft.interface`, `weft.side`...
    pub fn property(&self, path: &str) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_property(path.as_ptr(), path.len(), p, l) })
    }
    /// One attachment, as text.
    pub fn attachment(&self, key: &str) -> Result<&str, Status> {
        fetch(|p, l| unsafe { sys::get_attachment(key.as_ptr(), key.len(), p, l) })
    }
    /// Sets an attachment.
    pub fn set_attachment(&self, key: &str, value: &str) -> Result<(), Status> {
        Status::check(unsafe { sys::set_attachment(key.as_ptr(), key.len(), value.as_ptr(), value.len()) })
    }
    /// Removes an attachment.
    pub fn remove_attachment(&self, key: &str) -> Result<(), Status> {
        Status::check(unsafe { sys::remove_attachment(key.as_ptr(), key.len()) })
    }
    /// Records why the call is rejected and returns [`Action::Reject`]:
    /// `return call.reject(Code::Forbidden, "...")`.
    pub fn reject(&self, code: Code, message: &str) -> Action {
        unsafe { sys::reject(code as i32, message.as_ptr(), message.len()) };
        Action::Reject
    }
    /// Logs through the App's logger.
    pub fn log(&self, level: Level, message: &str) {
        unsafe { sys::log(level as i32, message.as_ptr(), message.len()) };
    }
    /// Adds `delta` to the host counter `key` in the current fixed window of
    /// `window_ms` ms (`<= 0`: never resets) and returns the new value.
    /// Counters are shared by every instance of every filter of the App.
    pub fn counter_add(&self, key: &str, delta: i64, window_ms: i64) -> i64 {
        unsafe { sys::counter_add(key.as_ptr(), key.len(), delta, window_ms) }
    }
    /// Wall-clock time, Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        unsafe { sys::now_ms() }
    }

    /// ABI v1.1: the value of `key` in the filter's `vm_id` space (shared
    /// by every instance of every filter of the App with that `vm_id`) and
    /// its compare-and-swap token.
    pub fn shared_get(&self, key: &str) -> Result<(&str, u32), Status> {
        let mut cas = 0u32;
        let v = fetch(|p, l| unsafe { sys::shared_get(key.as_ptr(), key.len(), p, l, &mut cas) })?;
        Ok((v, cas))
    }
    /// ABI v1.1: stores `value` under `key` with a new token; with `cas`
    /// not 0, only if it is still the key's token (else
    /// [`Status::CasMismatch`]: read again and retry). A key's first write,
    /// with `cas` 0, is unconditional.
    pub fn shared_set(&self, key: &str, value: &str, cas: u32) -> Result<(), Status> {
        Status::check(unsafe { sys::shared_set(key.as_ptr(), key.len(), value.as_ptr(), value.len(), cas) })
    }
    /// ABI v1.1: defines (or finds) the filter's metric `name`: `kind` 0
    /// counter, 1 gauge, 2 histogram; returns its id.
    pub fn metric_define(&self, kind: i32, name: &str) -> Result<u32, Status> {
        let mut id = 0u32;
        Status::check(unsafe { sys::metric_define(kind, name.as_ptr(), name.len(), &mut id) })?;
        Ok(id)
    }
    /// ABI v1.1: adds to a counter (not below 0) or a gauge.
    pub fn metric_add(&self, id: u32, delta: i64) -> Result<(), Status> {
        Status::check(unsafe { sys::metric_add(id, delta) })
    }
    /// ABI v1.1: sets a gauge, or records a value in a histogram.
    pub fn metric_record(&self, id: u32, value: i64) -> Result<(), Status> {
        Status::check(unsafe { sys::metric_record(id, value) })
    }
    /// ABI v1.1: the host calls the module's export `weft_on_tick` every
    /// `ms` milliseconds (at least 10) on the filter's idle instances; 0
    /// stops it. Define it with [`filter!`]'s `on_tick`.
    pub fn set_tick_period(&self, ms: u32) -> Result<(), Status> {
        Status::check(unsafe { sys::set_tick_period(ms) })
    }

    /// ABI v1.1: calls out to `cluster`, an upstream the filter's config
    /// names (`clusters: {auth: "http://..."}`, or `"ref:<id>"` for a weft
    /// reference of the App: the method is the last segment of `path`, the
    /// arguments the body, a JSON array), and waits for its answer; the
    /// call is paused meanwhile. `method` "" is GET, `path` "" is `/`;
    /// `headers` is a JSON object (`{"x-user":"alice"}`) or "";
    /// `timeout_ms` 0 waits as long as the call may. When the call's
    /// deadline comes first the filter is stopped there and the call fails
    /// with code timeout; a shorter `timeout_ms` gives [`Status::Timeout`].
    /// Other errors: [`Status::Limit`] (`max_callouts` in flight),
    /// [`Status::Unavailable`], [`Status::Refused`], [`Status::BadArgument`]
    /// (a cluster the config does not name, bad headers),
    /// [`Status::NotFound`] outside a call's callback (`on_tick`,
    /// `on_queue_ready`).
    pub fn http_call(
        &self,
        cluster: &str,
        method: &str,
        path: &str,
        headers: &str,
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<HttpResponse<'_>, Status> {
        let mut status = 0u32;
        let mut body_ptr: *const u8 = core::ptr::null();
        let mut body_len: usize = 0;
        let hdrs = fetch(|p, l| unsafe {
            sys::http_call(
                cluster.as_ptr(),
                cluster.len(),
                method.as_ptr(),
                method.len(),
                path.as_ptr(),
                path.len(),
                headers.as_ptr(),
                headers.len(),
                body.as_ptr(),
                body.len(),
                timeout_ms,
                &mut status,
                p,
                l,
                &mut body_ptr,
                &mut body_len,
            )
        })?;
        let body: &[u8] = if body_len == 0 || body_ptr.is_null() {
            &[]
        } else {
            // SAFETY: the host wrote `body_len` bytes at `body_ptr`, in memory
            // weft_alloc handed out during this callback.
            unsafe { core::slice::from_raw_parts(body_ptr, body_len) }
        };
        Ok(HttpResponse { status, headers: hdrs, body })
    }
    /// ABI v1.1: registers the shared queue `name` in the filter's `vm_id`
    /// space (again: the same queue) and returns its id; the filter's
    /// `on_queue_ready` (see [`filter!`]) hears of its items.
    pub fn queue_register(&self, name: &str) -> Result<u32, Status> {
        let mut id = 0u32;
        Status::check(unsafe { sys::queue_register(name.as_ptr(), name.len(), &mut id) })?;
        Ok(id)
    }
    /// ABI v1.1: the id of the queue `name` a filter of `vm_id` registered
    /// ([`Status::NotFound`] when none has).
    pub fn queue_resolve(&self, vm_id: &str, name: &str) -> Result<u32, Status> {
        let mut id = 0u32;
        Status::check(unsafe { sys::queue_resolve(vm_id.as_ptr(), vm_id.len(), name.as_ptr(), name.len(), &mut id) })?;
        Ok(id)
    }
    /// ABI v1.1: appends a copy of `item` ([`Status::Limit`]: the queue
    /// holds 1,024 items or the item is over 64 KiB; [`Status::BadArgument`]:
    /// no queue has that id).
    pub fn queue_enqueue(&self, id: u32, item: &[u8]) -> Result<(), Status> {
        Status::check(unsafe { sys::queue_enqueue(id, item.as_ptr(), item.len()) })
    }
    /// ABI v1.1: takes the oldest item ([`Status::NotFound`]: empty).
    pub fn queue_dequeue(&self, id: u32) -> Result<&[u8], Status> {
        fetch_bytes(|p, l| unsafe { sys::queue_dequeue(id, p, l) })
    }

    /// The parts joined, in the arena.
    pub fn concat(&self, parts: &[&str]) -> &str {
        let mut n = 0usize;
        for p in parts {
            n = n.saturating_add(p.len());
        }
        let out = self.arena_bytes(n);
        let mut at = 0;
        for p in parts {
            // never fails: `out` is exactly as long as the parts together
            if let Some(dst) = out.get_mut(at..at + p.len()) {
                dst.copy_from_slice(p.as_bytes());
            }
            at += p.len();
        }
        // SAFETY: a concatenation of whole UTF-8 strings.
        unsafe { core::str::from_utf8_unchecked(out) }
    }

    /// The string field `key` of the JSON object `json`, unescaped (into
    /// the arena when it has escapes); `None` when absent or not a string.
    pub fn json_string<'a>(&'a self, json: &'a str, key: &str) -> Option<&'a str> {
        let raw = json::string_body(json::find(json, key)?)?;
        if !raw.as_bytes().contains(&b'\\') {
            return Some(raw);
        }
        let out = self.arena_bytes(raw.len()); // decoded is never longer
        let mut n = 0;
        for b in json::Unescape::new(raw) {
            *out.get_mut(n)? = b;
            n += 1;
        }
        core::str::from_utf8(out.get(..n)?).ok()
    }

    /// The string field `key` of the filter's config.
    pub fn config_string(&self, key: &str) -> Option<&str> {
        self.json_string(self.config().ok()?, key)
    }

    /// The integer field `key` of the filter's config (see [`json::get_i64`]).
    pub fn config_i64(&self, key: &str) -> Option<i64> {
        json::get_i64(self.config().ok()?, key)
    }

    #[allow(clippy::mut_from_ref)]
    /// ABI v1.2, in a service's `on_call`: the call's answer, a JSON value
    /// (`BadArgument` when it is not JSON).
    pub fn set_result(&self, json: &str) -> Result<(), Status> {
        Status::check(unsafe { sys::set_result(json.as_ptr(), json.len()) })
    }
    /// ABI v1.2: the call's deadline in Unix milliseconds, `None` when it
    /// has none.
    pub fn deadline_ms(&self) -> Option<i64> {
        match unsafe { sys::get_deadline() } {
            0 => None,
            ms => Some(ms),
        }
    }
    /// ABI v1.2: the `n`th argument of a service's call when it is a
    /// string, as it is: no JSON to parse (the cheapest way to read one).
    pub fn arg_str(&self, n: u32) -> Result<&str, Status> {
        let b = fetch_bytes(|p, l| unsafe { sys::get_argument_string(n, p, l) })?;
        // SAFETY: the host returns valid UTF-8 only (ABI.md,
        // get_argument_string): no check, which would loop over each byte.
        Ok(unsafe { core::str::from_utf8_unchecked(b) })
    }
    /// ABI v1.2: answers a service's call with the string `s`, with no
    /// JSON to write.
    pub fn set_result_str(&self, s: &str) -> Result<(), Status> {
        Status::check(unsafe { sys::set_result_string(s.as_ptr(), s.len()) })
    }
    /// The `n`th argument of a service's call, when it is a JSON string:
    /// unescaped, in the arena.
    pub fn arg_string(&self, n: usize) -> Option<&str> {
        let args = self.arguments().ok()?;
        let raw = json::string_body(json::element(args, n)?)?;
        if !raw.as_bytes().contains(&b'\\') {
            return Some(raw);
        }
        let out = self.arena_bytes(raw.len());
        let mut k = 0;
        for b in json::Unescape::new(raw) {
            *out.get_mut(k)? = b;
            k += 1;
        }
        core::str::from_utf8(out.get(..k)?).ok()
    }
    /// `s` as a JSON string (quoted and escaped), in the arena.
    pub fn json_quote(&self, s: &str) -> &str {
        let mut n = 2usize;
        for c in s.bytes() {
            n += match c {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' => 2,
                0..=0x1f => 6,
                _ => 1,
            };
        }
        let out = self.arena_bytes(n);
        let mut k = 0;
        let mut put = |b: u8| {
            out[k] = b;
            k += 1;
        };
        put(b'"');
        for c in s.bytes() {
            match c {
                b'"' => { put(b'\\'); put(b'"') }
                b'\\' => { put(b'\\'); put(b'\\') }
                b'\n' => { put(b'\\'); put(b'n') }
                b'\r' => { put(b'\\'); put(b'r') }
                b'\t' => { put(b'\\'); put(b't') }
                0..=0x1f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    for b in [b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]] {
                        put(b);
                    }
                }
                _ => put(c),
            }
        }
        put(b'"');
        // SAFETY: `s` was UTF-8 and only ASCII was inserted.
        unsafe { core::str::from_utf8_unchecked(out) }
    }

    fn arena_bytes(&self, n: usize) -> &mut [u8] {
        let p = arena::alloc_or_trap(n);
        // SAFETY: fresh arena bytes, never handed out again before the reset
        // that precedes the next Call.
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }
}

/// Compares two secrets in a time that depends only on their lengths.
pub fn eq_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut d = 0u8;
    for i in 0..a.len() {
        d |= a[i] ^ b[i];
    }
    // a volatile read keeps the loop from being turned into an early exit
    unsafe { core::ptr::read_volatile(&d) == 0 }
}

/// A string builder over `N` bytes on the stack; appends past the end are
/// cut at a character boundary and set [`Buf::overflowed`].
pub struct Buf<const N: usize> {
    bytes: [u8; N],
    len: usize,
    overflow: bool,
}

impl<const N: usize> Default for Buf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Buf<N> {
    pub const fn new() -> Self {
        Buf { bytes: [0; N], len: 0, overflow: false }
    }
    pub fn push_str(&mut self, s: &str) -> &mut Self {
        let room = N - self.len;
        let mut k = s.len();
        if k > room {
            k = room;
            while k > 0 && !s.is_char_boundary(k) {
                k -= 1;
            }
            self.overflow = true;
        }
        if let (Some(dst), Some(src)) = (self.bytes.get_mut(self.len..self.len + k), s.as_bytes().get(..k)) {
            dst.copy_from_slice(src);
            self.len += k;
        }
        self
    }
    pub fn push_i64(&mut self, v: i64) -> &mut Self {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        let mut u = v.unsigned_abs();
        loop {
            i -= 1;
            tmp[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            self.push_str("-");
        }
        // SAFETY: ASCII digits.
        self.push_str(unsafe { core::str::from_utf8_unchecked(&tmp[i..]) })
    }
    pub fn as_str(&self) -> &str {
        // SAFETY: only whole characters are ever copied in.
        unsafe { core::str::from_utf8_unchecked(&self.bytes[..self.len]) }
    }
    pub fn overflowed(&self) -> bool {
        self.overflow
    }
    pub fn clear(&mut self) {
        self.len = 0;
        self.overflow = false;
    }
}

impl<const N: usize> core::fmt::Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push_str(s);
        if self.overflow {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// A minimal JSON reader: enough to look up the fields of an object such as
/// the filter's config. Not a validator: it walks well-formed JSON (what
/// the host sends) and answers `None` on what it cannot read.
pub mod json {
    fn ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    }

    /// `b[i]` is `"`: the index after the closing quote, and whether the
    /// string has escapes.
    fn skip_string(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
        let mut escaped = false;
        i += 1;
        while i < b.len() {
            match b[i] {
                b'"' => return Some((i + 1, escaped)),
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                _ => i += 1,
            }
        }
        None
    }

    fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i = skip_string(b, i)?.0;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    i += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        return Some(i); // end of a scalar
                    }
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(i),
                _ => i += 1,
            }
        }
        if depth == 0 {
            Some(i)
        } else {
            None
        }
    }

    /// The raw JSON text of the field `key` of the top-level object `json`
    /// (`"s3cret"` with its quotes, `10`, `{...}`).
    pub fn find<'a>(json: &'a str, key: &str) -> Option<&'a str> {
        let b = json.as_bytes();
        let mut i = ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        loop {
            i = ws(b, i);
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let (key_end, escaped) = skip_string(b, i)?;
            let raw_key = json.get(i + 1..key_end - 1)?;
            let matched = if escaped { Unescape::new(raw_key).eq(key.bytes()) } else { raw_key == key };
            i = ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            let start = ws(b, i + 1);
            let end = skip_value(b, start)?;
            if end <= start {
                return None;
            }
            if matched {
                return json.get(start..end);
            }
            i = ws(b, end);
            if b.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
        }
    }

    /// The raw JSON text of the `n`th element of the top-level array `json`.
    pub fn element(json: &str, n: usize) -> Option<&str> {
        let b = json.as_bytes();
        let mut i = ws(b, 0);
        if b.get(i) != Some(&b'[') {
            return None;
        }
        i += 1;
        let mut k = 0;
        loop {
            let start = ws(b, i);
            let end = skip_value(b, start)?;
            if end <= start {
                return None;
            }
            if k == n {
                return json.get(start..end);
            }
            i = ws(b, end);
            if b.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
            k += 1;
        }
    }

    /// The body of a JSON string value (between the quotes, still escaped).
    pub fn string_body(value: &str) -> Option<&str> {
        let b = value.as_bytes();
        if b.first() != Some(&b'"') {
            return None;
        }
        let (end, _) = skip_string(b, 0)?;
        if end != b.len() {
            return None;
        }
        value.get(1..end - 1)
    }

    /// The string field `key`, when it has no escapes (see
    /// [`crate::Call::json_string`] for any string).
    pub fn get_plain_str<'a>(json: &'a str, key: &str) -> Option<&'a str> {
        string_body(find(json, key)?).filter(|s| !s.as_bytes().contains(&b'\\'))
    }

    /// The integer field `key`: a fraction is cut (toward zero), an
    /// exponent applied (`1e3` is 1000); `None` when absent, not a number,
    /// or out of the i64 range.
    pub fn get_i64(json: &str, key: &str) -> Option<i64> {
        parse_i64(find(json, key)?.as_bytes())
    }

    fn parse_i64(v: &[u8]) -> Option<i64> {
        let neg = v.first() == Some(&b'-');
        let lim: u64 = if neg { 1 << 63 } else { (1 << 63) - 1 };
        let mut i = neg as usize;
        let mut u: u64 = 0;
        let mut scale: i32 = 0; // value = u * 10^scale
        let digit = |i: usize| v.get(i).filter(|c| c.is_ascii_digit()).map(|c| (c - b'0') as u64);
        let start = i;
        while let Some(d) = digit(i) {
            if u > (lim - d) / 10 {
                return None;
            }
            u = u * 10 + d;
            i += 1;
        }
        if i == start {
            return None;
        }
        if v.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while let Some(d) = digit(i) {
                if u <= (lim - d) / 10 {
                    u = u * 10 + d;
                    scale -= 1;
                }
                i += 1;
            }
            if i == start {
                return None;
            }
        }
        if matches!(v.get(i), Some(b'e') | Some(b'E')) {
            i += 1;
            let neg_exp = v.get(i) == Some(&b'-');
            if matches!(v.get(i), Some(b'+') | Some(b'-')) {
                i += 1;
            }
            let start = i;
            let mut e: i32 = 0;
            while let Some(d) = digit(i) {
                if e < 100_000 {
                    e = e * 10 + d as i32;
                }
                i += 1;
            }
            if i == start {
                return None;
            }
            scale += if neg_exp { -e } else { e };
        }
        if i != v.len() {
            return None;
        }
        while scale > 0 && u != 0 {
            if u > lim / 10 {
                return None;
            }
            u *= 10;
            scale -= 1;
        }
        while scale < 0 && u != 0 {
            u /= 10;
            scale += 1;
        }
        Some(if neg { (u as i64).wrapping_neg() } else { u as i64 })
    }

    /// The bytes (UTF-8) that the body of a JSON string stands for.
    pub struct Unescape<'a> {
        b: &'a [u8],
        i: usize,
        pending: [u8; 4],
        next: u8,
        end: u8,
    }

    impl<'a> Unescape<'a> {
        pub fn new(raw: &'a str) -> Self {
            Unescape { b: raw.as_bytes(), i: 0, pending: [0; 4], next: 0, end: 0 }
        }

        fn hex4(&mut self) -> Option<u32> {
            let mut v = 0u32;
            for k in 0..4 {
                let c = *self.b.get(self.i + k)?;
                v = v << 4 | (c as char).to_digit(16)?;
            }
            self.i += 4;
            Some(v)
        }
    }

    impl<'a> Iterator for Unescape<'a> {
        type Item = u8;

        fn next(&mut self) -> Option<u8> {
            if self.next < self.end {
                self.next += 1;
                return Some(self.pending[self.next as usize - 1]);
            }
            let c = *self.b.get(self.i)?;
            self.i += 1;
            if c != b'\\' {
                return Some(c);
            }
            let e = *self.b.get(self.i)?;
            self.i += 1;
            Some(match e {
                b'b' => 8,
                b'f' => 12,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let mut cp = self.hex4().unwrap_or(0xFFFD);
                    if (0xD800..0xDC00).contains(&cp) {
                        let save = self.i;
                        let mut paired = false;
                        if self.b.get(self.i) == Some(&b'\\') && self.b.get(self.i + 1) == Some(&b'u') {
                            self.i += 2;
                            if let Some(lo) = self.hex4().filter(|lo| (0xDC00..0xE000).contains(lo)) {
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                paired = true;
                            }
                        }
                        if !paired {
                            self.i = save;
                            cp = 0xFFFD;
                        }
                    }
                    let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                    let n = ch.encode_utf8(&mut self.pending).len();
                    self.next = 1;
                    self.end = n as u8;
                    self.pending[0]
                }
                other => other, // \" \\ \/ (and, leniently, anything else)
            })
        }
    }
}

/// Defines the ABI exports of a filter: `weft_abi_version`, `weft_alloc`,
/// `weft_on_request` and, when given, `weft_on_response` (each a
/// `fn(&weft::Call) -> weft::Action`), and the ABI v1.1 callbacks
/// `weft_on_tick` (a `fn(&weft::Call)`, after [`Call::set_tick_period`])
/// and `weft_on_queue_ready` (a `fn(&weft::Call, u32)`, given the queue's
/// id, after [`Call::queue_register`]); outside a call, the `Call`'s
/// getters about a call answer [`Status::NotFound`]. In this order:
///
/// ```ignore
/// weft::filter!(on_request = my_request);
/// weft::filter!(on_request = my_request, on_response = my_response);
/// weft::filter!(on_request = my_request, on_tick = my_tick, on_queue_ready = my_queue);
/// ```
#[macro_export]
macro_rules! filter {
    (on_request = $request:path $(, on_response = $response:path)? $(, on_tick = $tick:path)?
     $(, on_queue_ready = $queue:path)? $(,)?) => {
        #[no_mangle]
        pub extern "C" fn weft_abi_version() -> i32 {
            $crate::ABI_VERSION
        }

        #[no_mangle]
        pub extern "C" fn weft_alloc(size: i32) -> i32 {
            $crate::__alloc(size)
        }

        #[no_mangle]
        pub extern "C" fn weft_on_request() -> i32 {
            $crate::__run($request)
        }

        $(
            #[no_mangle]
            pub extern "C" fn weft_on_response() -> i32 {
                $crate::__run($response)
            }
        )?

        $(
            #[no_mangle]
            pub extern "C" fn weft_on_tick() {
                $crate::__run(|c: &$crate::Call| {
                    $tick(c);
                    $crate::Action::Continue
                });
            }
        )?

        $(
            #[no_mangle]
            pub extern "C" fn weft_on_queue_ready(id: u32) {
                $crate::__run(|c: &$crate::Call| {
                    $queue(c, id);
                    $crate::Action::Continue
                });
            }
        )?
    };
}

/// Defines the exports of a service implemented in WASM (ABI v1.2): the
/// module is a service's `impl.wasm`, and `on_call` (a `fn(&weft::Call) ->
/// weft::Action`) answers each call: it reads the method and arguments,
/// sets the answer with [`Call::set_result`] (JSON) and attachments that go
/// back with it, and returns [`Action::Continue`]; or fails the call with
/// [`Call::reject`] — [`Code::Biz`] for a business error, whose message may
/// start with its Java class (`"java.lang.IllegalArgumentException: ..."`).
///
/// ```ignore
/// weft::service!(on_call = my_handler);
/// ```
#[macro_export]
macro_rules! service {
    (on_call = $call:path $(,)?) => {
        #[no_mangle]
        pub extern "C" fn weft_abi_version() -> i32 {
            $crate::ABI_VERSION
        }

        #[no_mangle]
        pub extern "C" fn weft_alloc(size: i32) -> i32 {
            $crate::__alloc(size)
        }

        #[no_mangle]
        pub extern "C" fn weft_on_call() -> i32 {
            $crate::__run($call)
        }
    };
}

/// Defines a `#[panic_handler]` that traps, for `#![no_std]` filters (a
/// crate using `std` has one already). The host then fails the call with a
/// clear error and replaces the instance.
#[macro_export]
macro_rules! panic_handler {
    () => {
        #[panic_handler]
        fn __weft_panic(_: &::core::panic::PanicInfo) -> ! {
            $crate::trap()
        }
    };
}

#[doc(hidden)]
pub fn __alloc(size: i32) -> i32 {
    if size < 0 {
        return 0;
    }
    arena::alloc(size as usize) as usize as i32
}

#[doc(hidden)]
#[inline(always)]
pub fn __run(callback: impl FnOnce(&Call) -> Action) -> i32 {
    // SAFETY: nothing from a previous callback is alive: every arena string
    // borrowed the previous Call, which is gone.
    unsafe { arena::reset() };
    let call = unsafe { Call::__new() };
    callback(&call) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_fields() {
        let j = r#" { "a" : [1, {"b": "}"}], "token":"s3cret", "n": -12 , "o":{"x":1},"t":true,"last":"x\"y"} "#;
        assert_eq!(json::find(j, "token"), Some("\"s3cret\""));
        assert_eq!(json::find(j, "a"), Some("[1, {\"b\": \"}\"}]"));
        assert_eq!(json::find(j, "n"), Some("-12"));
        assert_eq!(json::find(j, "o"), Some("{\"x\":1}"));
        assert_eq!(json::find(j, "t"), Some("true"));
        assert_eq!(json::find(j, "last"), Some("\"x\\\"y\""));
        assert_eq!(json::find(j, "x"), None);
        assert_eq!(json::find("{}", "x"), None);
        assert_eq!(json::find("[]", "x"), None);
        assert_eq!(json::find("{\"k\\u0065y\":1}", "key"), Some("1"));
        assert_eq!(json::get_plain_str(j, "token"), Some("s3cret"));
        assert_eq!(json::get_plain_str(j, "n"), None);
        let a = r#" ["x\"y", {"name":"n"} , 3,[1,2]] "#;
        assert_eq!(json::element(a, 0), Some("\"x\\\"y\""));
        assert_eq!(json::element(a, 1), Some("{\"name\":\"n\"}"));
        assert_eq!(json::element(a, 2), Some("3"));
        assert_eq!(json::element(a, 3), Some("[1,2]"));
        assert_eq!(json::element(a, 4), None);
        assert_eq!(json::element("[]", 0), None);
        assert_eq!(json::element("{}", 0), None);
    }

    #[test]
    fn numbers() {
        let n = |s: &str| json::get_i64(&std::format!("{{\"n\":{}}}", s), "n");
        assert_eq!(n("10"), Some(10));
        assert_eq!(n("-3"), Some(-3));
        assert_eq!(n("2.9"), Some(2));
        assert_eq!(n("1e3"), Some(1000));
        assert_eq!(n("1.5E+3"), Some(1500));
        assert_eq!(n("15e-1"), Some(1));
        assert_eq!(n("9223372036854775807"), Some(i64::MAX));
        assert_eq!(n("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(n("9223372036854775808"), None);
        assert_eq!(n("1e30"), None);
        assert_eq!(n("\"10\""), None);
        assert_eq!(n("true"), None);
        assert_eq!(n("1."), None);
        assert_eq!(n("-"), None);
    }

    #[test]
    fn unescape() {
        let u = |s: &str| std::string::String::from_utf8(json::Unescape::new(s).collect()).unwrap();
        assert_eq!(u(r#"a\"b\\c\/d\n"#), "a\"b\\c/d\n");
        assert_eq!(u(r#"\u00e9\u20ac\ud83d\ude00"#), "é€😀");
        assert_eq!(u(r#"\ud83dx"#), "\u{FFFD}x");
        let call = unsafe { Call::__new() };
        assert_eq!(call.json_string(r#"{"t":"s3\u0063ret"}"#, "t"), Some("s3cret"));
        assert_eq!(call.json_string(r#"{"t":"plain"}"#, "t"), Some("plain"));
        assert_eq!(call.json_string(r#"{"t":1}"#, "t"), None);
        // (the arena is one per process: keep its users in this one test)
        assert_eq!(call.concat(&["rl:", "sayHello"]), "rl:sayHello");
        assert_eq!(call.json_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
    }

    #[test]
    fn buf_and_concat() {
        let mut b = Buf::<8>::new();
        b.push_str("ab").push_i64(-120);
        assert_eq!(b.as_str(), "ab-120");
        b.push_str("é€");
        assert_eq!(b.as_str(), "ab-120é");
        assert!(b.overflowed());
        let mut c = Buf::<20>::new();
        c.push_i64(i64::MIN);
        assert_eq!(c.as_str(), "-9223372036854775808");
        assert!(eq_secret("abc", "abc") && !eq_secret("abc", "abd") && !eq_secret("ab", "abc"));
    }
}
