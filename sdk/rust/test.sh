#!/usr/bin/env bash
# Runs the Rust SDK's unit tests (JSON reader, builder, arena helpers)
# natively with Debian's rustc. Usage: bash sdk/rust/test.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rustc="${RUSTC:-/usr/bin/rustc}"
[ -x "$rustc" ] || rustc="$(command -v rustc)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$rustc" --edition 2021 --test -D warnings -o "$tmp/weft_test" "$here/weft/src/lib.rs"
"$tmp/weft_test" --test-threads=1
