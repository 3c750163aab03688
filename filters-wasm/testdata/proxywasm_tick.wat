;; A proxy-wasm 0.2.1 module with a timer: proxy_on_configure sets a tick
;; period of 20 ms and defines a counter "ticks"; proxy_on_tick increments
;; it. (A filter refreshing a key set on a timer has this shape.)
(module
  (import "env" "proxy_set_tick_period_milliseconds" (func $tick_period (param i32) (result i32)))
  (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $inc (param i32 i64) (result i32)))
  (memory (export "memory") 1)
  (global $ticks (mut i32) (i32.const 0))
  (data (i32.const 1024) "ticks")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param i32) (result i32) (i32.const 4096))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (if (call $define (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 8)) (then (return (i32.const 0))))
    (global.set $ticks (i32.load (i32.const 8)))
    (if (call $tick_period (i32.const 20)) (then (return (i32.const 0))))
    (i32.const 1))
  (func (export "proxy_on_tick") (param i32)
    (drop (call $inc (global.get $ticks) (i64.const 1)))))
