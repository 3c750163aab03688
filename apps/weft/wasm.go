package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
)

const wasmCheckUsage = `usage: weft wasm check [-h] [-root-id ID] [-configuration TEXT] FILE.wasm

Checks a WASM filter module against weft's ABI v%d (sdk/ABI.md) the way an
App loads it, so that a module can be checked before it is deployed:
  - it compiles (WebAssembly 2.0 core features, memory within %d pages);
  - exports: memory, weft_abi_version, weft_alloc and weft_on_request
    (required), weft_on_response and _initialize (optional), each with the
    ABI's signature;
  - imports: only functions of module "weft" that ABI v%d declares, with
    their signatures, and of wasi_snapshot_preview1 that the host provides;
  - one instance starts in the filter sandbox: _initialize (if exported)
    and weft_abi_version run under the %v start-up limit, and the version
    must be %d.
A proxy-wasm module (one exporting proxy_abi_version_0_2_1, _0_2_0 or
_0_1_0) is checked against that ABI instead, and started as a filter with
abi: proxy-wasm is: _initialize and main, proxy_on_vm_start, then its root
context with proxy_on_configure; -root-id and -configuration give it the
filter's root_id and configuration (an SDK that registers its root contexts
by id does not start without its own).
It prints the imports, the exports with their roles, the version the module
reports and a verdict.

Arguments:
  FILE.wasm   the module file

Flags:
  -h, -help            print this help and exit 0
  -root-id ID          a proxy-wasm module's plugin_root_id (root_id)
  -configuration TEXT  a proxy-wasm module's plugin configuration

Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.
`

// wasmCmd is `weft wasm check FILE.wasm`: it validates a filter module
// against ABI v1 the way an App loads it (compile, imports, exports, then
// weft_abi_version in the sandbox), so a module can be checked before it is
// deployed. Exit 0 when valid, 1 when not (or unreadable), 2 on usage errors;
// -h prints the usage on stderr and exits 0, as Go's flag package does.
func wasmCmd(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintf(stderr, wasmCheckUsage, wasmfilter.ABIVersion, wasmfilter.DefaultMaxMemoryPages,
			wasmfilter.ABIVersion, wasmfilter.DefaultInitTimeout, wasmfilter.ABIVersion)
	}
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			usage()
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "weft wasm: unknown subcommand %q (known: check)\n", args[0])
		}
		usage()
		return 2
	}
	fs := flag.NewFlagSet("weft wasm check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage
	rootID := fs.String("root-id", "", "a proxy-wasm module's plugin_root_id")
	configuration := fs.String("configuration", "", "a proxy-wasm module's plugin configuration")
	if err := fs.Parse(args[1:]); err != nil {
		// Parse has printed the problem and the usage.
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "weft wasm check: want one module file, got %d arguments\n", fs.NArg())
		usage()
		return 2
	}
	file := fs.Arg(0)
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(stderr, "weft wasm check:", err)
		return 1
	}
	r := wasmfilter.CheckWith(context.Background(), b, wasmfilter.CheckOptions{RootID: *rootID, Configuration: []byte(*configuration)})
	r.Print(stdout, file)
	if !r.Valid() {
		return 1
	}
	return 0
}
