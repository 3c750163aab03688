module weft.test/proxywasm-go

go 1.26

require github.com/tetratelabs/proxy-wasm-go-sdk v0.24.0
