#!/usr/bin/env bash
# Builds the C I/O-board firmware (examples/c-io-board/app on the MPS2-AN386, Cortex-M4F)
# in two variants, both into build/:
#
#   fcan-c-io-board-selftest.elf  the self-test: the conformance vectors replayed through
#                                 the application on the target (run.sh runs it in QEMU)
#   fcan-c-io-board.elf           the firmware without the self-test (main.c: the endless
#                                 node loop): what the size report measures
#
#   examples/c-io-board/firmware/build.sh
#
# Steps: libfcan_node.a for thumbv7em-none-eabihf (cargo, the shared target dir), the
# generated code (fcan-codegen c), the vectors (vectors2c.py), compile, link with the
# archive and libgcc, arm-none-eabi-size of both, the size report of the second
# (size_report.py; build/size-report.md). Needs arm-none-eabi-gcc, python3, cargo.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
app="$(cd "$here/../app" && pwd)"
out="$here/build"
target=thumbv7em-none-eabihf

step() { printf '\n==> %s\n' "$*"; }

step "libfcan_node.a ($target, profile c-lib)"
(cd "$root" && cargo rustc -p fcan-node-c --crate-type staticlib --features panic-handler \
    --profile c-lib --target "$target")
tdir="$(cd "$root" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
lib="$tdir/$target/c-lib/libfcan_node.a"
[ -f "$lib" ] || { echo "build.sh: cargo built no $lib" >&2; exit 1; }

step "generated code (fcan-codegen c schema/examples/io_board.yaml) and the vectors"
rm -rf "$out/gen"
mkdir -p "$out/gen"
(cd "$here" && cargo run -q -p fcan-codegen -- c ../../../schema/examples/io_board.yaml --out build/gen)
python3 "$here/vectors2c.py" "$root/conformance" "$out/gen/vectors.c"

CC=arm-none-eabi-gcc
ARCH=(-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16)
# -ffp-contract=off: no fused multiply-add, so floats round as Rust's do (the app's
# analog samples; -std=c99 implies it, said anyway). -g: debug info only, not in flash.
CFLAGS=("${ARCH[@]}" -Os -ffunction-sections -fdata-sections -std=c99 -Wall -Wextra
    -Wpedantic -Werror -ffp-contract=off -g)
INC=(-I"$here" -I"$root/fcan-node-c/include" -I"$out/gen" -I"$app")
# No C library: memcpy/memset/memcmp come from libfcan_node.a's compiler builtins, the
# rest of what the compiler calls from libgcc (or the archive, which comes first).
LDFLAGS=("${ARCH[@]}" -T "$here/mps2_an386.ld" -nostartfiles -nostdlib -Wl,--gc-sections
    -Wl,-z,noexecstack)

common=("$here/startup.c" "$here/clock.c" "$out/gen/fcan_io_board.c" "$app/io_board_app.c")
selftest=("$here/semihosting.c" "$here/selftest.c" "$here/dut_app.c" "$out/gen/vectors.c")
node=("$here/main.c")

# build NAME SOURCES...: compiles into build/obj-NAME/ and links build/NAME.elf (+ .map).
build() {
    local name=$1 objs=() src obj
    shift
    mkdir -p "$out/obj-$name"
    for src in "$@"; do
        obj="$out/obj-$name/$(basename "${src%.c}").o"
        "$CC" "${CFLAGS[@]}" "${INC[@]}" -c "$src" -o "$obj"
        objs+=("$obj")
    done
    "$CC" "${LDFLAGS[@]}" -Wl,-Map="$out/$name.map" "${objs[@]}" "$lib" -lgcc -o "$out/$name.elf"
}

step "compile and link"
build fcan-c-io-board-selftest "${common[@]}" "${selftest[@]}"
build fcan-c-io-board "${common[@]}" "${node[@]}"

step "arm-none-eabi-size"
arm-none-eabi-size "$out/fcan-c-io-board-selftest.elf" "$out/fcan-c-io-board.elf"

step "size report of build/fcan-c-io-board.elf (without the self-test)"
python3 "$here/size_report.py" "$out/fcan-c-io-board.elf" "$out/fcan-c-io-board.map" |
    tee "$out/size-report.md"
echo
echo "built: $out/fcan-c-io-board-selftest.elf (run.sh runs it), $out/fcan-c-io-board.elf"
