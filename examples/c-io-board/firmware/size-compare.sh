#!/usr/bin/env bash
# The C I/O-board firmware's size beside the Rust I/O board (examples/io-board) built
# with the same main loop (rust-io-board/: its own cargo workspace, like
# examples/firmware, target dir rust-io-board/target). Run build.sh first.
#
#   examples/c-io-board/firmware/size-compare.sh
#
# Needs python3 with pyelftools (examples/firmware/size_breakdown.py reads the Rust ELF's
# debug info).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
c_elf="$here/build/fcan-c-io-board.elf"
[ -f "$c_elf" ] || { echo "size-compare.sh: no $c_elf (run build.sh first)" >&2; exit 2; }
python3 -c 'import elftools' 2>/dev/null || {
    echo "size-compare.sh: needs pyelftools (pip install pyelftools)" >&2
    exit 2
}
(cd "$here/rust-io-board" && cargo build --release)
tdir="$(cd "$here/rust-io-board" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
rust_elf="$tdir/thumbv7em-none-eabihf/release/fcan-rust-io-board-firmware"
echo
arm-none-eabi-size "$c_elf" "$rust_elf"
echo
python3 "$here/size_compare.py" "$c_elf" "$here/build/fcan-c-io-board.map" "$rust_elf" |
    tee "$here/build/size-compare.md"
