#!/usr/bin/env bash
# Builds the proxy-wasm filters of this folder, written on the API of
# proxy-wasm-go-sdk v0.24.0 (github.com/tetratelabs/proxy-wasm-go-sdk, a
# TinyGo SDK), with Go's own compiler into OUTDIR:
#   bash build.sh OUTDIR [NAME...]   (default: every filter)
# The filters' code and go.mod are used as they are. The SDK is copied from
# the module cache and its ABI glue rewritten by wasmexport.go (TinyGo's
# //export pragmas become //go:wasmexport and //go:wasmimport; see there),
# then each filter is built with GOOS=wasip1 -buildmode=c-shared against the
# copy through a replace directive in a copy of go.mod. Needs Go >= 1.24 and
# the Go module proxy (or a module cache holding the SDK).
# Prints the absolute path of each module it built, one a line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
export GOWORK=off GOFLAGS=-mod=mod
sdk=github.com/tetratelabs/proxy-wasm-go-sdk
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" && rm -rf "$work"' EXIT
cd "$here"
go mod download "$sdk" >&2
cp -r "$(go list -m -f '{{.Dir}}' "$sdk")" "$work/sdk"
chmod -R u+w "$work/sdk"
(cd "$work" && go run "$here/wasmexport.go" "$work/sdk/proxywasm/internal" >&2)
mkdir "$work/filters"
cp -r go.mod go.sum */ "$work/filters/"
cd "$work/filters"
go mod edit -replace "$sdk=../sdk"
if [ $# -eq 0 ]; then
	set -- $(cd "$here" && ls -d */ | tr -d /)
fi
for name in "$@"; do
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 \
		go build -buildmode=c-shared -trimpath -o "$out/$name.wasm" "./$name" >&2
	echo "$out/$name.wasm"
done
