//! misbehave, in Rust: what it does depends on the attachment "mode", so that
//! one pool can be driven into each failure and then shown to recover (the
//! Rust counterpart of misbehave.c):
//!   ok     continue
//!   trap   core::arch::wasm32::unreachable()
//!   panic  panic!() (panic=abort: the handler traps)
//!   loop   spin forever (stopped by the deadline)
//!   grow   grow memory until memory.grow fails, then trap
//! and in weft_on_response the attachment "rmode" does the same.
//!
//! No crates, no std, no SDK: built by the tests with Debian's rustc,
//!   rustc --edition 2021 --target wasm32-unknown-unknown --crate-type cdylib -O -C panic=abort
#![no_std]

use core::arch::wasm32;
use core::ptr::{addr_of_mut, read_volatile, write_volatile};

#[link(wasm_import_module = "weft")]
extern "C" {
    fn get_attachment(key: *const u8, key_len: u32, ret_ptr: *mut *mut u8, ret_len: *mut u32) -> i32;
}

// A bump allocator over a static arena, reset at the start of every callback:
// nothing the host returns outlives the callback (ABI.md, Memory).
static mut ARENA: [u8; 4096] = [0; 4096];
static mut TOP: usize = 0;
static mut SINK: u32 = 0;

#[no_mangle]
pub extern "C" fn weft_alloc(size: u32) -> *mut u8 {
    unsafe {
        let at = (TOP + 7) & !7;
        let end = at + size as usize;
        if end > 4096 {
            return core::ptr::null_mut();
        }
        TOP = end;
        (addr_of_mut!(ARENA) as *mut u8).add(at)
    }
}

#[no_mangle]
pub extern "C" fn weft_abi_version() -> i32 {
    1
}

fn act(key: &str) -> i32 {
    let mode: &[u8] = unsafe {
        TOP = 0;
        let mut p: *mut u8 = core::ptr::null_mut();
        let mut n: u32 = 0;
        if get_attachment(key.as_ptr(), key.len() as u32, &mut p, &mut n) != 0 {
            return 0;
        }
        core::slice::from_raw_parts(p, n as usize)
    };
    match mode {
        b"trap" => wasm32::unreachable(),
        b"panic" => panic!("misbehave: asked to panic"),
        b"loop" => loop {
            unsafe { write_volatile(addr_of_mut!(SINK), read_volatile(addr_of_mut!(SINK)).wrapping_add(1)) }
        },
        b"grow" => loop {
            if wasm32::memory_grow(0, 16) == usize::MAX {
                wasm32::unreachable()
            }
        },
        _ => 0,
    }
}

#[no_mangle]
pub extern "C" fn weft_on_request() -> i32 {
    act("mode")
}

#[no_mangle]
pub extern "C" fn weft_on_response() -> i32 {
    act("rmode")
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    wasm32::unreachable()
}
