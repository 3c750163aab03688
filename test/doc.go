// Package test holds cross-package tests: architecture rules, end-to-end runs,
// and (in nested modules with their own go.mod) interop with real peers and
// benchmarks.
package test
