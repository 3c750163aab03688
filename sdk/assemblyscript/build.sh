#!/usr/bin/env bash
# Builds the example AssemblyScript filters of the weft WASM ABI into OUTDIR:
#   bash sdk/assemblyscript/build.sh OUTDIR [EXAMPLE...]   (default: every example)
# Needs node >= 20 and npm >= 10. Installs the pinned compiler with `npm ci`
# (from package-lock.json) unless node_modules already holds that version, so
# it works offline once installed. Prints the absolute path of each module it
# built, one a line, on stdout; everything else goes to stderr.
set -euo pipefail
if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [EXAMPLE...]" >&2
	exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
cd "$here"

# The compiler version the lock file pins, and the one installed (if any).
want="$(node -e 'console.log(require("./package-lock.json").packages["node_modules/assemblyscript"].version)')"
have="$(node -e 'try{console.log(require("./node_modules/assemblyscript/package.json").version)}catch(e){console.log("")}')"
if [ "$want" != "$have" ] || [ ! -x node_modules/.bin/asc ]; then
	npm ci --no-audit --no-fund --loglevel=error >&2
fi

if [ $# -eq 0 ]; then
	set -- $(cd assembly/examples && ls *.ts | sed 's/\.ts$//')
fi
for name in "$@"; do
	if [ ! -f "assembly/examples/$name.ts" ]; then
		echo "no example $name in $here/assembly/examples" >&2
		exit 2
	fi
	# --runtime minimal: TLSF + a collector that runs only when the SDK calls
	#   it, at the end of each callback (see assembly/weft.ts).
	# --exportStart _initialize: top-level code (handler registration) runs
	#   when the host calls _initialize, not in a start section.
	# --use abort/trace/seed: the runtime's env imports go to the SDK (the
	#   host provides only the module "weft").
	npx --no -- asc "assembly/examples/$name.ts" \
		--runtime minimal \
		--exportStart _initialize \
		--use abort=assembly/weft/weftAbort \
		--use trace=assembly/weft/weftTrace \
		--use seed=assembly/weft/weftSeed \
		-O3 \
		--outFile "$out/$name.wasm" >&2
	echo "$out/$name.wasm"
done
