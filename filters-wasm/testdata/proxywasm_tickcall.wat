;; A proxy-wasm 0.2.1 module written from the spec that refreshes a key on
;; a timer, as JWT filters refresh their key sets: proxy_on_configure sets a
;; 20 ms tick; each tick with no callout out calls cluster "keys" (GET
;; /key) from the root context; proxy_on_http_call_response stores the
;; answer's x-key header in shared data "key"; each request copies the key
;; it finds there into its header x-key.
(module
  (import "env" "proxy_set_tick_period_milliseconds" (func $set_tick (param i32) (result i32)))
  (import "env" "proxy_http_call" (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $get_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set_shared (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $out (mut i32) (i32.const 0)) ;; a callout is out
  (data (i32.const 1024) "keys")
  ;; headers pairs: 1 pair, ":path" (5) "/key" (4), each NUL-terminated
  (data (i32.const 1040) "\01\00\00\00\05\00\00\00\04\00\00\00:path\00/key\00")
  (data (i32.const 1080) "x-key")
  (data (i32.const 1096) "key")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (i32.eqz (call $set_tick (i32.const 20))))
  (func (export "proxy_on_tick") (param i32)
    (if (global.get $out) (then (return)))
    (if (call $http_call (i32.const 1024) (i32.const 4) (i32.const 1040) (i32.const 23)
          (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1000) (i32.const 8))
      (then unreachable))
    (global.set $out (i32.const 1)))
  (func (export "proxy_on_http_call_response") (param i32 i32 i32 i32 i32)
    (global.set $out (i32.const 0))
    ;; x-key of the answer (map 6): pointer at 16, length at 20
    (if (call $get_header (i32.const 6) (i32.const 1080) (i32.const 5) (i32.const 16) (i32.const 20))
      (then (return)))
    (if (call $set_shared (i32.const 1096) (i32.const 3) (i32.load (i32.const 16)) (i32.load (i32.const 20)) (i32.const 0))
      (then unreachable)))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (i32.eqz (call $get_shared (i32.const 1096) (i32.const 3) (i32.const 24) (i32.const 28) (i32.const 32)))
      (then (drop (call $add_header (i32.const 0) (i32.const 1080) (i32.const 5) (i32.load (i32.const 24)) (i32.load (i32.const 28))))))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32)))
