#!/usr/bin/env bash
# Runs weft.h's helpers (strings, builder, JSON lookup) natively, under
# AddressSanitizer/UBSan when the toolchain has them. Needs clang and libc
# headers. Usage: bash sdk/c/test.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cc="${CC:-clang}"
flags=(-std=c11 -O1 -g -Wall -Wextra -Wno-unknown-attributes -Wno-ignored-attributes)
if ! "$cc" "${flags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all \
    -o "$tmp/json_test" "$here/tests/json_test.c" 2>/dev/null; then
  "$cc" "${flags[@]}" -o "$tmp/json_test" "$here/tests/json_test.c"
fi
ASAN_OPTIONS=detect_leaks=0 "$tmp/json_test"
