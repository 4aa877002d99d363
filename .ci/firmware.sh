#!/usr/bin/env bash
# Firmware CI: the runtime and the example libraries for both Cortex-M targets, the
# eight-motor firmware built and run under QEMU (MPS2-AN386, Cortex-M4F) with its on-chip
# self-test master, in its polling and its async (embassy) variant, and the size report. Installs what it needs (rustup targets and
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
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-runtime-nostd --features update
# With logging (`defmt`, forwarded to fcan-core): defmt 1.x and its macros on 1.85, for
# the firmware target (a library check links nothing, so no defmt linker script).
rustup target add --toolchain 1.85 thumbv7em-none-eabihf
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-runtime-nostd --features defmt,update \
  --target thumbv7em-none-eabihf
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-embassy --features defmt \
  --target thumbv7em-none-eabihf
# The C library is firmware too (its layout checks are `const` assertions: a 1.85 build
# evaluates them for the host; a 32-bit target is checked by build-lib.sh).
env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-node-c --features panic-handler
# The async firmware's executor crates (embassy) declare no rust-version: checked here for
# the firmware target, with the versions Cargo.lock pins.
(cd examples/firmware && env CARGO_TARGET_DIR=target/msrv cargo +1.85 check --release \
  --features async --bin fcan-example-firmware-async)

step "the firmware crates' documentation has no broken links"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p fcan-core -p fcan-runtime-nostd

step "fcan-core and fcan-runtime-nostd for microcontrollers (no alloc; with defmt)"
for t in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cargo build -p fcan-core --no-default-features --target "$t"
  cargo build -p fcan-runtime-nostd --target "$t"
  # `defmt::Format` on the public types: a missing derive fails the crate's own check
  # (fcan-runtime-nostd/src/defmt_check.rs). A library build links nothing, so no defmt
  # logger or linker script is needed here.
  cargo build -p fcan-runtime-nostd --features defmt --target "$t"
  cargo build -p fcan-runtime-nostd --features defmt,update --target "$t"
done
cargo build -p fcan-embassy --features defmt,embassy-time --target thumbv7em-none-eabihf

step "example firmware libraries (generated code) for both targets"
for t in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cargo build -p fcan-example-motor-driver -p fcan-example-io-board --target "$t"
  # With firmware updates: the generated `App::update` and the application's rule.
  cargo build -p fcan-example-motor-driver --features update --target "$t"
  cargo build -p fcan-runtime-nostd --features update --target "$t"
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
# run_qemu ELF PASS-LINE: runs the firmware, requires exit code 0 and the PASS line.
run_qemu() {
  local log rc
  log="$(mktemp)"
  set +e
  timeout 120 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
    -semihosting-config enable=on,target=native -kernel "$1" </dev/null | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ] || ! grep -qx "$2" "$log"; then
    echo "firmware self-test FAILED under QEMU: $1 (exit code $rc)" >&2
    exit 1
  fi
  rm -f "$log"
}
run_qemu "$elf" 'fcan firmware self-test: PASS'

step "examples/firmware: the async variant (embassy executor, node as a task), built and run under QEMU"
# The same node, mailbox driver and self-test; the node sleeps until a frame or its next
# deadline (examples/firmware/README.md).
(cd examples/firmware && env -u CARGO_TARGET_DIR cargo build --release --features async \
  --bin fcan-example-firmware-async)
run_qemu examples/firmware/target/thumbv7em-none-eabihf/release/fcan-example-firmware-async \
  'fcan firmware async self-test: PASS'

step "size report (release, opt-level s, LTO, without the self-test)"
env -u CARGO_TARGET_DIR bash examples/firmware/size-report.sh

echo
echo "firmware: 2 passed, 0 failed"
