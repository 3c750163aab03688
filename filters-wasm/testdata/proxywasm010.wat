;; A proxy-wasm 0.1.0 module: 0.1.0's names and shapes. Its header
;; callbacks take no end_of_stream; proxy_get_configuration reads the
;; plugin's configuration; an absent header reads as empty with status OK;
;; it adds x-abi: 0.1.0 plus the configuration as x-config, and calls
;; proxy_continue_request (0.1.0's continue).
(module
  (import "env" "proxy_get_configuration" (func $get_config (param i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_continue_request" (func $continue_request (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $cfg (mut i32) (i32.const 0))
  (global $cfglen (mut i32) (i32.const 0))
  (data (i32.const 1024) "x-abi")
  (data (i32.const 1032) "0.1.0")
  (data (i32.const 1040) "nope")
  (data (i32.const 1048) "x-config")
  (func (export "proxy_abi_version_0_1_0"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (if (call $get_config (i32.const 8) (i32.const 12)) (then (return (i32.const 0))))
    (global.set $cfg (i32.load (i32.const 8)))
    (global.set $cfglen (i32.load (i32.const 12)))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32) (result i32)
    (if (call $get_header (i32.const 0) (i32.const 1040) (i32.const 4) (i32.const 8) (i32.const 12)) (then unreachable))
    (if (i32.load (i32.const 12)) (then unreachable)) ;; empty value
    (drop (call $add_header (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 1032) (i32.const 5)))
    (drop (call $add_header (i32.const 0) (i32.const 1048) (i32.const 8) (global.get $cfg) (global.get $cfglen)))
    (drop (call $continue_request))
    (i32.const 1)) ;; paused, but continued within the callback
  (func (export "proxy_on_response_headers") (param i32 i32) (result i32) (i32.const 0)))
