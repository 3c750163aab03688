#!/usr/bin/env bash
# Builds the Rust example filters into OUTDIR (default: sdk/rust/build) and
# prints the path of each .wasm produced, one per line. Offline, no crates:
# needs Debian's rustc and its wasm32 std (apt-get install rustc
# libstd-rust-dev-wasm32 lld). Works from any directory.
#
#   bash sdk/rust/build.sh [OUTDIR]
#
# RUSTC overrides the compiler (default /usr/bin/rustc: rustup's rustc, if
# first in PATH, may have no wasm32 std). The same build through Cargo:
#   cd sdk/rust && RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --offline --target wasm32-unknown-unknown
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/build}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rustc="${RUSTC:-/usr/bin/rustc}"
[ -x "$rustc" ] || rustc="$(command -v rustc)"
target=wasm32-unknown-unknown
if [ ! -d "$("$rustc" --print sysroot)/lib/rustlib/$target" ]; then
  echo "build.sh: $rustc has no $target std (apt-get install rustc libstd-rust-dev-wasm32 lld)" >&2
  exit 1
fi
deps="$(mktemp -d)"
trap 'rm -rf "$deps"' EXIT
# Same settings as [profile.release] in Cargo.toml and .cargo/config.toml.
flags=(--edition 2021 --target "$target" -D warnings
  -C opt-level=z -C panic=abort -C codegen-units=1 -C debuginfo=0
  -C target-feature=+bulk-memory)
"$rustc" "${flags[@]}" --crate-type rlib --crate-name weft \
  "$here/weft/src/lib.rs" --out-dir "$deps"
for dir in "$here"/examples/*/; do
  name="$(basename "$dir")"
  "$rustc" "${flags[@]}" -C lto -C strip=symbols -C link-arg=-zstack-size=65536 \
    --crate-type cdylib --crate-name "$name" \
    --extern weft="$deps/libweft.rlib" -L "$deps" \
    -o "$out/$name.wasm" "$dir/src/lib.rs"
  echo "$out/$name.wasm"
done
