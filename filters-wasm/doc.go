// Package wasmfilter will hold the wazero host of WASM filters: ABI v1 host
// functions under the module "weft", a compiled-module cache, a pool of
// instances (one per in-flight call), memory and deadline limits, and hot
// reload. Each module configured under wasm.filters.<name> becomes a named
// extension.Filter that joins the same activation as native filters.
package wasmfilter
