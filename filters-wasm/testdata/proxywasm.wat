;; A proxy-wasm 0.2.1 module written from the spec alone, for the ABI's
;; corners. Its plugin configuration's first byte picks what
;; proxy_on_request_headers does:
;;   o  continue
;;   t  trap (unreachable)
;;   l  loop without end
;;   p  pause (return 1) with nothing pending
;;   b  bad pointers: get_header_map_value with a key outside memory must
;;      answer INVALID_MEMORY_ACCESS (6), else the module traps
;;   s  oversized pairs: set_header_map_pairs claiming 100000 pairs must
;;      answer PARSE_FAILURE (4), else the module traps
;;   n  absent header: get_header_map_value("nope") must answer NOT_FOUND (1)
;;   g  memory bomb: memory.grow until it fails, then trap
;;   z  nothing at all (the no-op of the benchmarks)
;;   r  read one header (x-mode, absent), then continue (the reader of the
;;      benchmarks)
;;   x  callout storm: 100 proxy_http_call to cluster "up" in one callback;
;;      traps if more than 4 are accepted (the test's max_callouts), then
;;      continues without waiting for them
;;   f  shared-data flood: sets up to 10000 distinct keys; traps unless the
;;      host refuses one with INTERNAL_FAILURE (10) before the end
;;   c  crash loop: proxy_on_vm_start refuses to start any instance but the
;;      first (it marks "started" in shared data), and requests trap, so
;;      that every call needs a new instance that cannot start
;; and in other callbacks (for the hostile-guest deadline test):
;;   A  loop in proxy_on_context_create
;;   R  loop in proxy_on_response_headers; T trap there; M memory bomb there
;;   D  loop in proxy_on_done; L in proxy_on_log; E in proxy_on_delete
;;   Y  loop in proxy_on_request_body (with body: [request])
;; Every mode but t, l, p and g then adds header x-mode with the mode byte.
(module
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer_bytes (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_header_map_pairs" (func $set_pairs (param i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $get_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_http_call" (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $mode (mut i32) (i32.const 111)) ;; 'o'
  (data (i32.const 1024) "x-mode")
  (data (i32.const 1040) "nope")
  (data (i32.const 1060) "started")
  (data (i32.const 1070) "up")
  ;; a pairs buffer claiming 100000 pairs, 16 bytes long
  (data (i32.const 1100) "\a0\86\01\00\00\00\00\00\00\00\00\00\00\00\00\00")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (local.get $n) (i32.const 16)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32)
    (if (i32.eq (global.get $mode) (i32.const 65)) (then (loop $l (br $l))))) ;; A
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32)
    ;; the configuration is read after this (proxy_on_configure): the crash
    ;; loop's refusal runs there, once the mode is known
    (i32.const 1))
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32)
    (if (i32.eqz (local.get $size)) (then (return (i32.const 1))))
    (if (call $get_buffer_bytes (i32.const 7) (i32.const 0) (local.get $size) (i32.const 8) (i32.const 12))
      (then (return (i32.const 0))))
    (global.set $mode (i32.load8_u (i32.load (i32.const 8))))
    (if (i32.eq (global.get $mode) (i32.const 99)) ;; c
      (then
        (if (i32.eqz (call $get_shared (i32.const 1060) (i32.const 7) (i32.const 8) (i32.const 12) (i32.const 16)))
          (then (return (i32.const 0)))) ;; started before: refuse
        (drop (call $set_shared (i32.const 1060) (i32.const 7) (i32.const 1060) (i32.const 1) (i32.const 0)))))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $m i32) (local $i i32) (local $ok i32)
    (local.set $m (global.get $mode))
    (if (i32.eq (local.get $m) (i32.const 122)) (then (return (i32.const 0)))) ;; z
    (if (i32.eq (local.get $m) (i32.const 114)) ;; r
      (then (drop (call $get_header (i32.const 0) (i32.const 1024) (i32.const 6) (i32.const 8) (i32.const 12))) (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 116)) (then unreachable)) ;; t
    (if (i32.eq (local.get $m) (i32.const 99)) (then unreachable)) ;; c
    (if (i32.eq (local.get $m) (i32.const 120)) ;; x
      (then
        (local.set $i (i32.const 0))
        (local.set $ok (i32.const 0))
        (loop $storm
          (if (i32.eqz (call $http_call (i32.const 1070) (i32.const 2) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                (i32.const 0) (i32.const 0) (i32.const 1000) (i32.const 24)))
            (then (local.set $ok (i32.add (local.get $ok) (i32.const 1)))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $storm (i32.lt_u (local.get $i) (i32.const 100))))
        (if (i32.gt_u (local.get $ok) (i32.const 4)) (then unreachable))
        (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 102)) ;; f
      (then
        (local.set $i (i32.const 0))
        (block $refused
          (loop $flood
            (i32.store (i32.const 2100) (local.get $i))
            (br_if $refused (i32.eq (call $set_shared (i32.const 2100) (i32.const 4) (i32.const 2100) (i32.const 4) (i32.const 0)) (i32.const 10)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $flood (i32.lt_u (local.get $i) (i32.const 10000))))
          unreachable)
        (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 108)) (then (loop $l (br $l)))) ;; l
    (if (i32.eq (local.get $m) (i32.const 112)) (then (return (i32.const 1)))) ;; p
    (if (i32.eq (local.get $m) (i32.const 103)) ;; g
      (then (loop $g (br_if $g (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable))
    (if (i32.eq (local.get $m) (i32.const 98)) ;; b
      (then (if (i32.ne (call $get_header (i32.const 0) (i32.const 0x7ffffff0) (i32.const 64) (i32.const 8) (i32.const 12)) (i32.const 6))
        (then unreachable))))
    (if (i32.eq (local.get $m) (i32.const 115)) ;; s
      (then (if (i32.ne (call $set_pairs (i32.const 0) (i32.const 1100) (i32.const 16)) (i32.const 4))
        (then unreachable))))
    (if (i32.eq (local.get $m) (i32.const 110)) ;; n
      (then (if (i32.ne (call $get_header (i32.const 0) (i32.const 1040) (i32.const 4) (i32.const 8) (i32.const 12)) (i32.const 1))
        (then unreachable))))
    ;; x-mode: the mode byte, kept at 2000
    (i32.store8 (i32.const 2000) (local.get $m))
    (drop (call $add_header (i32.const 0) (i32.const 1024) (i32.const 6) (i32.const 2000) (i32.const 1)))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 82)) (then (loop $l (br $l)))) ;; R
    (if (i32.eq (global.get $mode) (i32.const 84)) (then unreachable)) ;; T
    (if (i32.eq (global.get $mode) (i32.const 77)) ;; M
      (then (loop $g (br_if $g (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 68)) (then (loop $l (br $l)))) ;; D
    (i32.const 1))
  (func (export "proxy_on_log") (param i32)
    (if (i32.eq (global.get $mode) (i32.const 76)) (then (loop $l (br $l))))) ;; L
  (func (export "proxy_on_delete") (param i32)
    (if (i32.eq (global.get $mode) (i32.const 69)) (then (loop $l (br $l))))) ;; E
  (func (export "proxy_on_request_body") (param i32 i32 i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 89)) (then (loop $l (br $l)))) ;; Y
    (i32.const 0)))
