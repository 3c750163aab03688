// Package hooks links package weft with package onresponse, which exports
// weft_on_response only in the filters that import it.
package hooks

var (
	// Response runs the on-response callback; package weft sets it.
	Response func() int32
	// ResponseExported is set when package onresponse is linked in, i.e.
	// when the module exports weft_on_response.
	ResponseExported bool
	// Call runs a service's handler (weft_on_call); package weft sets it,
	// package service exports it.
	Call func() int32
)
