#!/usr/bin/env bash
# Checks that vendor/rustdds is RustDDS 0.15.1 as published, plus exactly
# vendor/rustdds-user-data.patch: cargo fetches the published crate (through the
# registry cargo is set up for) into a scratch project, the patch is applied to a copy of
# its src/, and the result must equal vendor/rustdds/src byte for byte.
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
version=0.15.1
work=$root/target/vendor-check
rm -rf "$work"
mkdir -p "$work/probe/src"
cat >"$work/probe/Cargo.toml" <<TOML
[package]
name = "vendor-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rustdds = "=$version"

[workspace]
TOML
echo "fn main() {}" >"$work/probe/src/main.rs"
manifest=$(cd "$work/probe" && cargo metadata --format-version 1 2>/dev/null |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="rustdds"))')
upstream=$(dirname "$manifest")
mkdir -p "$work/a" "$work/b"
cp -r "$upstream/src" "$work/a/src"
cp -r "$upstream/src" "$work/b/src"
(cd "$work/b" && patch --quiet -p1 <"$root/vendor/rustdds-user-data.patch")
if ! diff -r "$work/b/src" "$root/vendor/rustdds/src" >/dev/null; then
  echo "vendor/rustdds/src is not RustDDS $version plus vendor/rustdds-user-data.patch:" >&2
  diff -ru "$work/b/src" "$root/vendor/rustdds/src" | head -40 >&2
  exit 1
fi
for f in LICENSE.md README.md; do
  cmp -s "$upstream/$f" "$root/vendor/rustdds/$f" || { echo "vendor/rustdds/$f differs from RustDDS $version's" >&2; exit 1; }
done
echo "vendor/rustdds: RustDDS $version plus vendor/rustdds-user-data.patch ($(grep -c '^+++' "$root/vendor/rustdds-user-data.patch") files changed)"
