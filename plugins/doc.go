// Package plugins groups weft's built-in extensions, one package per plugin by
// extension point: protocol/injvm, filter/echo, filter/executelimit, ... Each
// is a plain constructor; the root package turns them into fx plugins of an
// App. None registers itself anywhere.
package plugins
