#!/usr/bin/env bash
# Builds the C example filters into OUTDIR (default: sdk/c/build) and prints
# the path of each .wasm produced, one per line. Needs clang and lld
# (Debian: apt-get install clang lld). Works offline, from any directory.
#
#   bash sdk/c/build.sh [OUTDIR]
#
# CC overrides the compiler (default clang). WEFT_CFLAGS adds flags, e.g.
# WEFT_CFLAGS=-g to keep debug info (the default strips names too).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/build}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cc="${CC:-clang}"
strip="-Wl,--strip-all"
case " ${WEFT_CFLAGS:-} " in *" -g "*) strip="" ;; esac
for src in "$here"/examples/*.c; do
  name="$(basename "$src" .c)"
  # shellcheck disable=SC2086
  "$cc" --target=wasm32 -nostdlib -ffreestanding -Oz -std=c11 -Wall -Wextra -Werror \
    -Wl,--no-entry -Wl,--export-dynamic $strip ${WEFT_CFLAGS:-} \
    -o "$out/$name.wasm" "$src"
  echo "$out/$name.wasm"
done
