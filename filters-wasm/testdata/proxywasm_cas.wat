;; A proxy-wasm 0.2.1 module counting its calls in shared data, as a rate
;; limit across instances does: each request reads key "n" and writes n+1
;; with the token it read (compare-and-swap), again on CAS_MISMATCH (8),
;; then adds header x-n with the count it wrote, in decimal.
(module
  (import "env" "proxy_get_shared_data" (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 1024) "n")
  (data (i32.const 1032) "x-n")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    ;; a ring of 16 KiB: the host's returns are read at once
    (if (i32.gt_u (i32.add (global.get $heap) (local.get $n)) (i32.const 131072))
      (then (global.set $heap (i32.const 65536))))
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (local.get $p))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $st i32) (local $v i32) (local $cas i32) (local $p i32)
    (block $done
      (loop $again
        (local.set $st (call $get (i32.const 1024) (i32.const 1) (i32.const 8) (i32.const 12) (i32.const 16)))
        (if (i32.eq (local.get $st) (i32.const 1))
          (then (local.set $v (i32.const 0)) (local.set $cas (i32.const 0)))
          (else
            (if (local.get $st) (then unreachable))
            (local.set $v (i32.load (i32.load (i32.const 8))))
            (local.set $cas (i32.load (i32.const 16)))))
        (local.set $v (i32.add (local.get $v) (i32.const 1)))
        (i32.store (i32.const 2000) (local.get $v))
        (local.set $st (call $set (i32.const 1024) (i32.const 1) (i32.const 2000) (i32.const 4) (local.get $cas)))
        (br_if $done (i32.eqz (local.get $st)))
        (br_if $again (i32.eq (local.get $st) (i32.const 8)))
        unreachable))
    ;; the count in decimal, written backwards from 3100
    (local.set $p (i32.const 3100))
    (loop $digits
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digits (local.get $v)))
    (drop (call $add_header (i32.const 0) (i32.const 1032) (i32.const 3) (local.get $p) (i32.sub (i32.const 3100) (local.get $p))))
    (i32.const 0)))
