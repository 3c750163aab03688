;; A proxy-wasm 0.2.1 module with a shared queue, as filters that hand work
;; to a background root context do: proxy_on_configure registers queue
;; "jobs" and defines a counter "dequeued"; each request resolves "jobs" in
;; its vm_id ("q") and enqueues an item; proxy_on_queue_ready dequeues until
;; EMPTY (7), counting the items.
(module
  (import "env" "proxy_register_shared_queue" (func $register (param i32 i32 i32) (result i32)))
  (import "env" "proxy_resolve_shared_queue" (func $resolve (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_enqueue_shared_queue" (func $enqueue (param i32 i32 i32) (result i32)))
  (import "env" "proxy_dequeue_shared_queue" (func $dequeue (param i32 i32 i32) (result i32)))
  (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $inc (param i32 i64) (result i32)))
  (memory (export "memory") 1)
  (global $counter (mut i32) (i32.const 0))
  (data (i32.const 1024) "jobs")
  (data (i32.const 1032) "dequeued")
  (data (i32.const 1048) "q")
  (data (i32.const 1056) "item")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param i32) (result i32) (i32.const 4096))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (if (call $register (i32.const 1024) (i32.const 4) (i32.const 8)) (then (return (i32.const 0))))
    (if (call $define (i32.const 0) (i32.const 1032) (i32.const 8) (i32.const 12)) (then (return (i32.const 0))))
    (global.set $counter (i32.load (i32.const 12)))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $resolve (i32.const 1048) (i32.const 1) (i32.const 1024) (i32.const 4) (i32.const 16)) (then unreachable))
    (if (call $enqueue (i32.load (i32.const 16)) (i32.const 1056) (i32.const 4)) (then unreachable))
    (i32.const 0))
  (func (export "proxy_on_queue_ready") (param i32 i32)
    (local $st i32)
    (block $empty
      (loop $drain
        (local.set $st (call $dequeue (local.get 1) (i32.const 20) (i32.const 24)))
        (br_if $empty (i32.eq (local.get $st) (i32.const 7)))
        (if (local.get $st) (then unreachable))
        (drop (call $inc (global.get $counter) (i64.const 1)))
        (br $drain)))))
