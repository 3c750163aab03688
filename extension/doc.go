// Package extension defines the contract of every weft extension point: one
// small interface each, with the name of its default extension. The kernel's
// Loader holds the named implementations of each point; built-in ones live
// under plugins/, cluster/, transport-netty/, registry-nacos/ and
// filters-wasm/.
//
// An extension may also implement io.Closer (or have a Destroy method): the
// App's Loader calls it at shutdown.
package extension
