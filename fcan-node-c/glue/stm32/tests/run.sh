#!/usr/bin/env bash
# The STM32 HAL FDCAN glue's tests, on the host against the fake HAL (never on hardware):
#
#   fcan-node-c/glue/stm32/tests/run.sh
#
# 1. builds libfcan_node.a for the host (cargo, profile c-lib) and the I/O board's
#    generated C (fcan-codegen c schema/examples/io_board.yaml), unless FCAN_LIB /
#    FCAN_GEN name prebuilt ones (FCAN_GEN: a directory with fcan_io_board.{h,c});
# 2. for each HAL flavour the fake can be (G4 / H7 >= 1.11.3: FDCAN_DLC_BYTES_n the 4-bit
#    DLC, const-qualified prototypes; H7 < 1.11.3: the codes shifted by 16, the older
#    non-const prototypes), with gcc, -std=c99 -Wall -Wextra -Wpedantic -Werror and
#    AddressSanitizer + UBSan: builds and runs test_rx (the receive side and the ring,
#    with fcan_node_ingest replaced by a recorder) and test_glue (the real node, the
#    I/O board's application, conformance/boot-io-board-fd.txt end to end);
# 3. compiles the glue (and the fake) with clang, and the glue with arm-none-eabi-gcc for
#    Cortex-M0+, M4F and M7F, warnings as errors; checks that a ring size that is not a
#    power of two does not compile; prints the glue's size on the Cortex-M4F.
#
# Exit status 0 only if everything passed. Needs gcc, clang, arm-none-eabi-gcc, cargo
# (unless FCAN_LIB and FCAN_GEN are given). Builds under $GLUE_BUILD (default
# target/stm32-glue). cargo runs under nice -n 19.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(cd "$here/.." && pwd)"
root="$(cd "$glue/../../.." && pwd)"
out="${GLUE_BUILD:-$root/target/stm32-glue}"
step() { printf '\n==> %s\n' "$*"; }

for tool in gcc clang arm-none-eabi-gcc; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 1; }
done
mkdir -p "$out"

if [ -n "${FCAN_LIB:-}" ]; then
    lib="$FCAN_LIB"
else
    step "libfcan_node.a (host, profile c-lib)"
    (cd "$root" && nice -n 19 cargo rustc -q -p fcan-node-c --crate-type staticlib \
        --features panic-handler --profile c-lib)
    tdir="$(cd "$root" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    lib="$tdir/c-lib/libfcan_node.a"
fi
[ -f "$lib" ] || { echo "run.sh: no $lib" >&2; exit 1; }

if [ -n "${FCAN_GEN:-}" ]; then
    gen="$FCAN_GEN"
else
    step "generated I/O board code (fcan-codegen c schema/examples/io_board.yaml)"
    gen="$out/gen"
    rm -rf "$gen"
    mkdir -p "$gen"
    (cd "$root" && nice -n 19 cargo run -q -p fcan-codegen -- c schema/examples/io_board.yaml \
        --out "$gen")
fi
[ -f "$gen/fcan_io_board.c" ] || { echo "run.sh: no $gen/fcan_io_board.c" >&2; exit 1; }

app="$root/examples/c-io-board/app"
transcript="$root/conformance/boot-io-board-fd.txt"
WARN=(-std=c99 -Wall -Wextra -Wpedantic -Werror)
HAL=(-DFCAN_STM32_HAL_HEADER='"stm32_hal_fdcan_fake.h"' -I"$glue" -I"$glue/fake"
    -I"$root/fcan-node-c/include")
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

declare -A FLAVOUR=(
    [g4]="-DFAKE_HAL_DLC_SHIFT=0"
    [h7-before-1.11.3]="-DFAKE_HAL_DLC_SHIFT=16 -DFAKE_HAL_OLD_PROTOTYPES=1"
)
for name in g4 h7-before-1.11.3; do
    read -r -a defs <<<"${FLAVOUR[$name]}"
    b="$out/$name"
    mkdir -p "$b"
    step "gcc, fake HAL $name (${FLAVOUR[$name]}): build"
    cflags=("${WARN[@]}" -O1 -g "${SAN[@]}" "${defs[@]}" "${HAL[@]}")
    gcc "${cflags[@]}" -o "$b/test_rx" "$here/test_rx.c" "$glue/fcan_stm32_fdcan.c" \
        "$glue/fake/stm32_hal_fdcan_fake.c"
    gcc "${cflags[@]}" -I"$gen" -I"$app" -ffp-contract=off -o "$b/test_glue" \
        "$here/test_glue.c" "$glue/fcan_stm32_fdcan.c" "$glue/fake/stm32_hal_fdcan_fake.c" \
        "$gen/fcan_io_board.c" "$app/io_board_app.c" "$lib"
    step "run test_rx ($name)"
    "$b/test_rx"
    step "run test_glue ($name)"
    "$b/test_glue" "$transcript"
done

step "clang: the glue and the fake, both flavours"
for name in g4 h7-before-1.11.3; do
    read -r -a defs <<<"${FLAVOUR[$name]}"
    for src in "$glue/fcan_stm32_fdcan.c" "$glue/fake/stm32_hal_fdcan_fake.c" \
        "$here/test_rx.c"; do
        clang "${WARN[@]}" -O2 "${defs[@]}" "${HAL[@]}" -c "$src" -o /dev/null
    done
    clang "${WARN[@]}" -O2 "${defs[@]}" "${HAL[@]}" -I"$gen" -I"$app" -c "$here/test_glue.c" \
        -o /dev/null
done
echo "clang: clean"

step "arm-none-eabi-gcc: the glue for Cortex-M0+, M4F, M7F"
for cpu in "-mcpu=cortex-m0plus -mthumb" \
    "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16" \
    "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16"; do
    read -r -a arch <<<"$cpu"
    for name in g4 h7-before-1.11.3; do
        read -r -a defs <<<"${FLAVOUR[$name]}"
        arm-none-eabi-gcc "${arch[@]}" "${WARN[@]}" -Os "${defs[@]}" "${HAL[@]}" \
            -c "$glue/fcan_stm32_fdcan.c" -o "$out/glue-arm.o"
    done
done
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 "${WARN[@]}" -Os \
    -ffunction-sections "${HAL[@]}" -c "$glue/fcan_stm32_fdcan.c" -o "$out/glue-arm.o"
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb "${WARN[@]}" -Os -DFCAN_STM32_FDCAN_RX_RING=64u \
    "${HAL[@]}" -c "$glue/fcan_stm32_fdcan.c" -o /dev/null
echo "arm-none-eabi-gcc: clean; Cortex-M4F -Os, code and data of the glue (its context is"
echo "the application's: sizeof(fcan_stm32_fdcan_t) with the default ring below):"
arm-none-eabi-size "$out/glue-arm.o"
printf '#include "fcan_stm32_fdcan.h"\nchar size_of_context[sizeof(fcan_stm32_fdcan_t)];\n' \
    >"$out/ctx-size.c"
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb "${WARN[@]}" "${HAL[@]}" -c "$out/ctx-size.c" \
    -o "$out/ctx-size.o"
arm-none-eabi-size "$out/ctx-size.o" | awk 'NR == 2 { print "sizeof(fcan_stm32_fdcan_t) on Cortex-M: " $3 + $2 " bytes" }'

step "a ring size that is not a power of two does not compile"
if gcc "${WARN[@]}" "${HAL[@]}" -DFCAN_STM32_FDCAN_RX_RING=12u -c "$glue/fcan_stm32_fdcan.c" \
    -o /dev/null 2>/dev/null; then
    echo "run.sh: FCAN_STM32_FDCAN_RX_RING=12 compiled" >&2
    exit 1
fi
echo "refused, as it must be"

printf '\nfcan STM32 FDCAN glue: PASS (host, fake HAL; not run on hardware)\n'
