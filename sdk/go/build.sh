#!/usr/bin/env bash
# Builds the example Go filters of the weft WASM ABI into OUTDIR:
#   bash sdk/go/build.sh OUTDIR [EXAMPLE...]     (default: every example)
# Needs only Go (1.24+, as the module says) and no network: the SDK has no
# dependencies. Prints the absolute path of each module it built, one a line,
# on stdout; the build's own messages go to stderr.
set -euo pipefail
if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [EXAMPLE...]" >&2
	exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
if [ $# -eq 0 ]; then
	set -- $(cd "$here/examples" && ls -d */ | tr -d /)
fi
cd "$here"
for name in "$@"; do
	if [ ! -f "examples/$name/main.go" ]; then
		echo "no example $name in $here/examples" >&2
		exit 2
	fi
	# GOWORK=off: the SDK is its own module, whatever go.work may be above.
	GOWORK=off GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 \
		go build -buildmode=c-shared -trimpath -o "$out/$name.wasm" "./examples/$name" >&2
	echo "$out/$name.wasm"
done
