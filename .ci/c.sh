#!/usr/bin/env bash
# C CI: the node runtime for C (fcan-node-c) as a C team gets it. fcan.h is what src/
# generates; libfcan_node.a builds for every shipped target and defines the whole API;
# the C I/O board example builds with CMake (gcc and clang) and with make, warnings as
# errors, and runs; the generated C passes fcan-codegen's C tests with every compiler;
# the C firmware for Cortex-M4F builds and passes its self-test under QEMU. Installs what
# it needs (cmake, clang, the Arm GNU toolchain, qemu-system-arm from Debian; cbindgen
# from crates.io).
#
#   bash .ci/c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
export CARGO_TERM_COLOR=never

# Each sub-step prints its name, and the time the one before took.
step_name=""
step_start=0
script_start=$(date +%s)
finish_step() {
    if [ -n "$step_name" ]; then
        printf '    (%s: %ds)\n' "$step_name" $(($(date +%s) - step_start))
    fi
}
step() {
    finish_step
    step_name="$*"
    step_start=$(date +%s)
    printf '\n==> %s  [%s]\n' "$*" "$(date +%H:%M:%S)"
}

# A failing command ends the script (set -e): say in which step.
trap 'echo "c: FAILED in step \"$step_name\" after $(($(date +%s) - step_start))s" >&2' ERR

step "tools"
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v clang >/dev/null || need+=(clang)
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi)
[ -e /usr/lib/arm-none-eabi/include/stdint.h ] || [ -e /usr/lib/arm-none-eabi/newlib ] ||
    need+=(libnewlib-arm-none-eabi)
command -v readelf >/dev/null || need+=(binutils)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
if ! command -v cbindgen >/dev/null || [ "$(cbindgen --version)" != "cbindgen 0.29.4" ]; then
    cargo install cbindgen --locked --version 0.29.4
fi
cmake --version | head -1
gcc --version | head -1
clang --version | head -1
arm-none-eabi-gcc --version | head -1
cbindgen --version

step "fcan.h is what fcan-node-c/src generates (cbindgen)"
fcan-node-c/scripts/header.sh --check

step "libfcan_node.a for every shipped target (build-lib.sh)"
libdir="$root/target/fcan-c"
fcan-node-c/scripts/build-lib.sh --out "$libdir"

step "fcan-codegen (release)"
cargo build -p fcan-codegen --release
codegen="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/fcan-codegen"
[ -x "$codegen" ] || { echo "ci: no $codegen" >&2; exit 1; }

# The example's builds, each in a fresh directory under target/c-ci.
work="$root/target/c-ci"
rm -rf "$work"
mkdir -p "$work"

# smoke EXE: the example's binary answers --help (exit 0) and refuses bad arguments
# with exit 2 (usage).
smoke() {
    local exe=$1 rc
    "$exe" --help >/dev/null
    set +e
    "$exe" --node-id 999 --bus socketcan:vcan0 >/dev/null 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 2 ]; then
        echo "ci: $exe --node-id 999 exited $rc, not 2 (usage)" >&2
        exit 1
    fi
}

step "examples/c-io-board with CMake and gcc (fcan-codegen and libfcan_node.a built by cargo)"
# The from-source path: no FCAN_LIB_DIR (cargo builds the archive); fcan-codegen is
# taken from the PATH when there is one there, else built by cargo.
CC=gcc cmake -S examples/c-io-board -B "$work/cmake-gcc" -DIO_BOARD_WERROR=ON
cmake --build "$work/cmake-gcc"
smoke "$work/cmake-gcc/io-board-c"

step "examples/c-io-board with CMake and clang (prebuilt: build-lib.sh's layout, fcan-codegen)"
CC=clang cmake -S examples/c-io-board -B "$work/cmake-clang" -DIO_BOARD_WERROR=ON \
    -DCMAKE_BUILD_TYPE=Release \
    -DFCAN_LIB_DIR="$libdir" -DFCAN_CODEGEN="$codegen"
cmake --build "$work/cmake-clang"
smoke "$work/cmake-clang/io-board-c"

step "examples/c-io-board with make (gcc, then clang with the prebuilt layout)"
make -C examples/c-io-board BUILD="$work/make-gcc" CC=gcc
smoke "$work/make-gcc/io-board-c"
make -C examples/c-io-board BUILD="$work/make-clang" CC=clang FCAN_LIB_DIR="$libdir" \
    FCAN_CODEGEN="$codegen"
smoke "$work/make-clang/io-board-c"

step "the application for Cortex-M (arm-none-eabi-gcc, M0 to M4F): no OS calls"
gen="$work/cmake-gcc/fcan_io_board"
for cpu in "-mcpu=cortex-m0plus" "-mcpu=cortex-m3" "-mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16"; do
    # shellcheck disable=SC2086
    arm-none-eabi-gcc $cpu -mthumb -std=c99 -Wall -Wextra -Wpedantic -Werror -Os \
        -ffreestanding -I examples/c-io-board/app -I "$gen" -I fcan-node-c/include \
        -c examples/c-io-board/app/io_board_app.c -o "$work/io_board_app.o"
    # shellcheck disable=SC2086
    arm-none-eabi-gcc $cpu -mthumb -std=c99 -Wall -Wextra -Wpedantic -Werror -Os \
        -ffreestanding -I "$gen" -I fcan-node-c/include -c "$gen/fcan_io_board.c" \
        -o "$work/fcan_io_board.o"
    echo "  $cpu: ok"
done

step "the generated C judged by gcc, clang, g++ and arm-none-eabi-gcc; every node booted on the real host library"
# The compilers are installed above: here a missing one fails instead of skipping.
host=$(rustc -vV | sed -n 's/^host: //p')
FCAN_REQUIRE_CLANG=1 FCAN_REQUIRE_ARM_GCC=1 FCAN_REQUIRE_GXX=1 FCAN_REQUIRE_FIBRIL=1 \
    FCAN_NODE_LIB="$libdir/lib/$host/libfcan_node.a" \
    cargo test -p fcan-codegen --test c -- --include-ignored

step "fcan-node-c's own tests with firmware updates on (the update build's ABI)"
cargo test -p fcan-node-c --features update

step "STM32 HAL FDCAN glue against a fake of ST's HAL (host: every DLC both ways, a full Tx FIFO, bus-off, a conformance vector through the glue; G4 and old H7 length codes)"
FCAN_LIB="$libdir/lib/$host/libfcan_node.a" bash fcan-node-c/glue/stm32/tests/run.sh

step "examples/c-io-board/firmware (Cortex-M4F): build and size report"
bash examples/c-io-board/firmware/build.sh

step "examples/c-io-board/firmware: its self-test under QEMU (mps2-an386), the conformance vectors on the target"
if ! command -v qemu-system-arm >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-arm
fi
bash examples/c-io-board/firmware/run.sh

finish_step
echo
echo "c: all steps passed in $(($(date +%s) - script_start))s"
