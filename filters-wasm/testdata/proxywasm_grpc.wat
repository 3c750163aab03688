;; A proxy-wasm 0.2.1 module written from the spec that makes a gRPC
;; callout, as filters that ask an auth or a rate-limit service do: each
;; request calls cluster "up", service org.weft.PbEcho, the method its
;; header x-method names, with the message google.protobuf.StringValue
;; "hello" (0a 05 "hello") and the metadata x-from: wasm, and pauses. The
;; answer's message goes to the request header x-grpc-reply, the close's
;; status (proxy_get_status's, with its message) to x-grpc-status and
;; x-grpc-message; then the request goes on.
(module
  (import "env" "proxy_grpc_call" (func $grpc_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer_bytes (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_status" (func $get_status (param i32 i32 i32) (result i32)))
  (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 1024) "up")
  (data (i32.const 1040) "org.weft.PbEcho")
  (data (i32.const 1072) "x-method")
  (data (i32.const 1088) "\0a\05hello")
  ;; metadata pairs: 1 pair, "x-from" (6) "wasm" (4), each NUL-terminated
  (data (i32.const 1104) "\01\00\00\00\06\00\00\00\04\00\00\00x-from\00wasm\00")
  (data (i32.const 1140) "x-grpc-reply")
  (data (i32.const 1160) "x-grpc-status")
  (data (i32.const 1180) "x-grpc-message")
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
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    ;; x-method's value: pointer at 8, length at 12
    (if (call $get_header (i32.const 0) (i32.const 1072) (i32.const 8) (i32.const 8) (i32.const 12))
      (then unreachable))
    (if (call $grpc_call (i32.const 1024) (i32.const 2) (i32.const 1040) (i32.const 15)
          (i32.load (i32.const 8)) (i32.load (i32.const 12))
          (i32.const 1104) (i32.const 24) (i32.const 1088) (i32.const 7) (i32.const 2000) (i32.const 16))
      (then unreachable))
    (i32.const 1)) ;; pause until the answer
  (func (export "proxy_on_grpc_receive") (param i32 i32 i32)
    (if (call $get_buffer_bytes (i32.const 5) (i32.const 0) (local.get 2) (i32.const 20) (i32.const 24))
      (then unreachable))
    (drop (call $add_header (i32.const 0) (i32.const 1140) (i32.const 12) (i32.load (i32.const 20)) (i32.load (i32.const 24)))))
  (func (export "proxy_on_grpc_close") (param i32 i32 i32)
    (local $n i32)
    ;; the status in decimal (0..99) at 1200
    (if (i32.ge_u (local.get 2) (i32.const 10))
      (then
        (i32.store8 (i32.const 1200) (i32.add (i32.const 48) (i32.div_u (local.get 2) (i32.const 10))))
        (i32.store8 (i32.const 1201) (i32.add (i32.const 48) (i32.rem_u (local.get 2) (i32.const 10))))
        (local.set $n (i32.const 2)))
      (else
        (i32.store8 (i32.const 1200) (i32.add (i32.const 48) (local.get 2)))
        (local.set $n (i32.const 1))))
    (drop (call $add_header (i32.const 0) (i32.const 1160) (i32.const 13) (i32.const 1200) (local.get $n)))
    (if (i32.eqz (call $get_status (i32.const 28) (i32.const 32) (i32.const 36)))
      (then (if (i32.load (i32.const 36))
        (then (drop (call $add_header (i32.const 0) (i32.const 1180) (i32.const 14) (i32.load (i32.const 32)) (i32.load (i32.const 36))))))))
    (drop (call $continue (i32.const 0))))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32)))
