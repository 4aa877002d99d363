#!/usr/bin/env bash
# Firmware CI: the runtime and the example libraries for both Cortex-M targets, the
# eight-motor firmware built and run under QEMU (MPS2-AN386, Cortex-M4F) with its on-chip
# self-test master, and the size report. Installs what it needs (rustup targets and
# llvm-tools, qemu-system-arm from Debian, pyelftools from PyPI).
#
#   bash .ci/firmware.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
rustup target add thumbv7em-none-eabihf thumbv6m-none-eabi
rustup component add llvm-tools >/dev/null

step "the firmware crates build with their rust-version (1.85)"
# What a firmware author on an older toolchain gets: a dependency bump that needs a newer
# Rust fails here, not on their machine. Host check: the language and library features
# are the same for every target.
rustup toolchain install 1.85 --profile minimal
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-core --no-default-features
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-runtime-nostd

step "fcan-core and fcan-runtime-nostd for microcontrollers (no alloc)"
for t in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cargo build -p fcan-core --no-default-features --target "$t"
  cargo build -p fcan-runtime-nostd --target "$t"
done

step "example firmware libraries (generated code) for both targets"
for t in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cargo build -p fcan-example-motor-driver -p fcan-example-io-board --target "$t"
done

step "examples/firmware: Cortex-M4F binary with the self-test master (release)"
# Its own workspace and its own target dir (examples/firmware/target).
(cd examples/firmware && env -u CARGO_TARGET_DIR cargo build --release)
elf=examples/firmware/target/thumbv7em-none-eabihf/release/fcan-example-firmware

step "run it under QEMU (mps2-an386, semihosting)"
if ! command -v qemu-system-arm >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-arm
fi
log="$(mktemp)"
set +e
timeout 120 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
  -semihosting-config enable=on,target=native -kernel "$elf" </dev/null | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ] || ! grep -q '^fcan firmware self-test: PASS$' "$log"; then
  echo "firmware self-test FAILED under QEMU (exit code $rc)" >&2
  exit 1
fi
rm -f "$log"

step "size report (release, opt-level s, LTO, without the self-test)"
env -u CARGO_TARGET_DIR bash examples/firmware/size-report.sh

echo
echo "firmware: 1 passed, 0 failed"
