;; A proxy-wasm 0.2.1 module with guest metrics, as Envoy's stats filters
;; have: it defines a counter (requests.total), a gauge (last.size) and a
;; histogram (size) in proxy_on_configure, and on each request increments
;; the counter, sets the gauge to 100 and records 100 in the histogram. It
;; then reads the counter back (proxy_get_metric) and traps if it is 0.
(module
  (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $inc (param i32 i64) (result i32)))
  (import "env" "proxy_record_metric" (func $record (param i32 i64) (result i32)))
  (import "env" "proxy_get_metric" (func $get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $counter (mut i32) (i32.const 0))
  (global $gauge (mut i32) (i32.const 0))
  (global $hist (mut i32) (i32.const 0))
  (data (i32.const 1024) "requests.total")
  (data (i32.const 1040) "last.size")
  (data (i32.const 1056) "size")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param i32) (result i32) (i32.const 4096))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (if (call $define (i32.const 0) (i32.const 1024) (i32.const 14) (i32.const 8)) (then (return (i32.const 0))))
    (global.set $counter (i32.load (i32.const 8)))
    (if (call $define (i32.const 1) (i32.const 1040) (i32.const 9) (i32.const 8)) (then (return (i32.const 0))))
    (global.set $gauge (i32.load (i32.const 8)))
    (if (call $define (i32.const 2) (i32.const 1056) (i32.const 4) (i32.const 8)) (then (return (i32.const 0))))
    (global.set $hist (i32.load (i32.const 8)))
    ;; a name defined again with another kind is refused
    (if (i32.ne (call $define (i32.const 1) (i32.const 1024) (i32.const 14) (i32.const 8)) (i32.const 2)) (then unreachable))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $inc (global.get $counter) (i64.const 1)) (then unreachable))
    (if (call $record (global.get $gauge) (i64.const 100)) (then unreachable))
    (if (call $record (global.get $hist) (i64.const 100)) (then unreachable))
    ;; a counter does not go down
    (if (i32.ne (call $inc (global.get $counter) (i64.const -1)) (i32.const 2)) (then unreachable))
    (if (call $get (global.get $counter) (i32.const 16)) (then unreachable))
    (if (i64.eqz (i64.load (i32.const 16))) (then unreachable))
    (i32.const 0)))
