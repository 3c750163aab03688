#!/usr/bin/env bash
# Builds the proxy-wasm filters of assembly/ (AssemblyScript, on
# @solo-io/proxy-runtime 0.1.8 and the AssemblyScript 0.14.9 it needs, both
# pinned by package-lock.json) into OUTDIR:
#   bash build.sh OUTDIR [NAME...]   (default: every filter)
# Installs the pinned packages with `npm ci` unless node_modules holds them.
# Prints the absolute path of each module it built, one a line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
cd "$here"
have="$(node -e 'try{console.log(require("./node_modules/assemblyscript/package.json").version)}catch(e){console.log("")}')"
if [ "$have" != "0.14.9" ] || [ ! -d node_modules/@solo-io/proxy-runtime ]; then
	npm ci --no-audit --no-fund --loglevel=error >&2
fi
if [ $# -eq 0 ]; then
	set -- $(cd assembly && ls *.ts | sed 's/\.ts$//')
fi
for name in "$@"; do
	# --use abort=abort_proc_exit: the SDK's abort (a failed CHECK_RESULT)
	# exits through wasi_unstable.proc_exit, which the host turns into a
	# failed callback.
	npx --no -- asc "assembly/$name.ts" -b "$out/$name.wasm" --use abort=abort_proc_exit -O >&2
	echo "$out/$name.wasm"
done
