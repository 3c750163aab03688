;; spec: a filter written in raw WebAssembly text from sdk/ABI.md alone (no
;; SDK, no toolchain but wat2wasm), so that the host's tests hold the spec to
;; what the host does. What it does depends on the attachment "mode":
;;   config  copies get_config's JSON into the attachment "out"
;;   badarg  calls set_attachment with a key outside memory, records the
;;           status it got in "status" (as a digit) and continues
;;   reject  rejects with code 7 and "slow down"
;;   loop    spins forever (stopped by the deadline)
;;   wasi    calls WASI functions and records their errnos in "wasi"
;; weft_on_response copies get_error's message, when there is one, into the
;; result's attachment "saw.error" and continues.
(module
  (import "weft" "get_attachment" (func $get_attachment (param i32 i32 i32 i32) (result i32)))
  (import "weft" "set_attachment" (func $set_attachment (param i32 i32 i32 i32) (result i32)))
  (import "weft" "get_config" (func $get_config (param i32 i32) (result i32)))
  (import "weft" "get_error" (func $get_error (param i32 i32) (result i32)))
  (import "weft" "reject" (func $reject (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sock_accept" (func $sock_accept (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_raise" (func $proc_raise (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $sched_yield (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))

  ;; Layout: 0 ret_ptr, 4 ret_len, 16.. WASI out-parameters, 256.. string
  ;; literals, 1024.. the "wasi" record, 8192.. weft_alloc's heap.
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 8192))
  (global $out (mut i32) (i32.const 1024))

  (data (i32.const 256) "mode")
  (data (i32.const 264) "config")
  (data (i32.const 272) "out")
  (data (i32.const 280) "badarg")
  (data (i32.const 288) "status")
  (data (i32.const 296) "reject")
  (data (i32.const 304) "slow down")
  (data (i32.const 320) "loop")
  (data (i32.const 328) "wasi")
  (data (i32.const 336) "saw.error")
  (data (i32.const 352) "hello")
  (data (i32.const 360) "x")

  (func (export "weft_abi_version") (result i32) (i32.const 1))

  ;; A bump allocator, reset at the start of each callback: what the host
  ;; returns lives until the callback ends (ABI.md, Memory and ownership).
  (func (export "weft_alloc") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (if (i32.gt_u (i32.add (local.get $p) (local.get $size)) (i32.const 65536))
      (then (return (i32.const 0))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))

  ;; eq: whether the bytes at (a, alen) are those at (b, blen).
  (func $eq (param $a i32) (param $alen i32) (param $b i32) (param $blen i32) (result i32)
    (local $i i32)
    (if (i32.ne (local.get $alen) (local.get $blen)) (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $alen)))
        (if (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                    (i32.load8_u (i32.add (local.get $b) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; put: appends a number below 100 as two digits and a comma to the record.
  (func $put (param $n i32)
    (i32.store8 (global.get $out) (i32.add (i32.const 48) (i32.div_u (local.get $n) (i32.const 10))))
    (i32.store8 (i32.add (global.get $out) (i32.const 1)) (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
    (i32.store8 (i32.add (global.get $out) (i32.const 2)) (i32.const 44))
    (global.set $out (i32.add (global.get $out) (i32.const 3))))

  (func $wasi
    (global.set $out (i32.const 1024))
    ;; args and environment: errno, then the counts
    (call $put (call $args_sizes_get (i32.const 16) (i32.const 20)))
    (call $put (i32.load (i32.const 16)))
    (call $put (call $environ_sizes_get (i32.const 16) (i32.const 20)))
    (call $put (i32.load (i32.const 16)))
    ;; clocks (realtime, monotonic) and randomness
    (call $put (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 24)))
    (call $put (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 24)))
    (call $put (call $random_get (i32.const 32) (i32.const 8)))
    ;; stdout takes 5 bytes (discarded); stdin is empty (0 bytes read)
    (i32.store (i32.const 40) (i32.const 352))
    (i32.store (i32.const 44) (i32.const 5))
    (call $put (call $fd_write (i32.const 1) (i32.const 40) (i32.const 1) (i32.const 48)))
    (call $put (i32.load (i32.const 48)))
    (i32.store (i32.const 40) (i32.const 512))
    (i32.store (i32.const 44) (i32.const 16))
    (call $put (call $fd_read (i32.const 0) (i32.const 40) (i32.const 1) (i32.const 48)))
    (call $put (i32.load (i32.const 48)))
    ;; no preopened directory, no file, no socket
    (call $put (call $fd_prestat_get (i32.const 3) (i32.const 56)))
    (call $put (call $path_open (i32.const 3) (i32.const 0) (i32.const 360) (i32.const 1) (i32.const 0)
      (i64.const -1) (i64.const -1) (i32.const 0) (i32.const 64)))
    (call $put (call $sock_accept (i32.const 3) (i32.const 0) (i32.const 64)))
    (call $put (call $proc_raise (i32.const 2)))
    (call $put (call $sched_yield))
    ;; sleep 10 s: one relative clock subscription (monotonic)
    (i64.store (i32.const 128) (i64.const 7))
    (i32.store8 (i32.const 136) (i32.const 0))
    (i32.store (i32.const 144) (i32.const 1))
    (i64.store (i32.const 152) (i64.const 10000000000))
    (i64.store (i32.const 160) (i64.const 0))
    (i32.store16 (i32.const 168) (i32.const 0))
    (call $put (call $poll_oneoff (i32.const 128) (i32.const 192) (i32.const 1) (i32.const 232)))
    (call $put (i32.load (i32.const 232)))
    (drop (call $set_attachment (i32.const 328) (i32.const 4) (i32.const 1024)
      (i32.sub (global.get $out) (i32.const 1024)))))

  (func (export "weft_on_request") (result i32)
    (local $m i32) (local $n i32)
    (global.set $heap (i32.const 8192))
    (if (i32.ne (call $get_attachment (i32.const 256) (i32.const 4) (i32.const 0) (i32.const 4)) (i32.const 0))
      (then (return (i32.const 0))))
    (local.set $m (i32.load (i32.const 0)))
    (local.set $n (i32.load (i32.const 4)))
    (if (call $eq (local.get $m) (local.get $n) (i32.const 264) (i32.const 6))
      (then
        (drop (call $get_config (i32.const 0) (i32.const 4)))
        (drop (call $set_attachment (i32.const 272) (i32.const 3) (i32.load (i32.const 0)) (i32.load (i32.const 4))))
        (return (i32.const 0))))
    (if (call $eq (local.get $m) (local.get $n) (i32.const 280) (i32.const 6))
      (then
        ;; the status is recorded as one digit at 1024, then ignored
        (i32.store8 (i32.const 1024) (i32.add (i32.const 48)
          (call $set_attachment (i32.const 0xfffffff0) (i32.const 64) (i32.const 352) (i32.const 5))))
        (drop (call $set_attachment (i32.const 288) (i32.const 6) (i32.const 1024) (i32.const 1)))
        (return (i32.const 0))))
    (if (call $eq (local.get $m) (local.get $n) (i32.const 296) (i32.const 6))
      (then
        (drop (call $reject (i32.const 7) (i32.const 304) (i32.const 9)))
        (return (i32.const 1))))
    (if (call $eq (local.get $m) (local.get $n) (i32.const 320) (i32.const 4))
      (then (loop $spin (br $spin))))
    (if (call $eq (local.get $m) (local.get $n) (i32.const 328) (i32.const 4))
      (then (call $wasi)))
    (i32.const 0))

  (func (export "weft_on_response") (result i32)
    (global.set $heap (i32.const 8192))
    (if (i32.eq (call $get_error (i32.const 0) (i32.const 4)) (i32.const 0))
      (then
        (drop (call $set_attachment (i32.const 336) (i32.const 9) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (i32.const 0)))
