package main

import (
	"context"
	"fmt"
	"io"
	"os"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
)

// wasmCmd is `weft wasm check FILE.wasm`: it validates a filter module
// against ABI v1 the way an App loads it (compile, imports, exports, then
// weft_abi_version in the sandbox), so a module can be checked before it is
// deployed. Exit 0 when valid, 1 when not (or unreadable), 2 on usage errors.
func wasmCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: weft wasm check FILE.wasm")
		return 2
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Fprintln(stderr, "weft wasm check:", err)
		return 1
	}
	r := wasmfilter.Check(context.Background(), b)
	r.Print(stdout, args[1])
	if !r.Valid() {
		return 1
	}
	return 0
}
