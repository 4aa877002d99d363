#!/usr/bin/env bash
# Real-chip CI (docs/firmware-rust-chips.md): fcan-embassy's host tests (the run loop
# driving the io-board node over fakes of each driver trait, the frame conversions, the
# STM32 adapters' conversions against embassy-stm32's own frame types), the
# crate with its default features on its rust-version (1.85), each chip adapter built
# against its HAL for a chip that has the controller (FDCAN: the NUCLEO-G474RE firmware;
# bxCAN: STM32F446RE; TWAI: ESP32-C6 and, through fcan-embassy/esp32c3-check, ESP32-C3),
# and the NUCLEO-G474RE firmware's release build with its size. Nothing here runs on a
# chip: there is no hardware in CI. Installs what it needs (rustup targets, Rust 1.85).
#
#   bash .ci/chips.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

times=()
# sub NAME CMD...: runs CMD under a heading and notes how long it took.
sub() {
  local name=$1 start=$SECONDS
  shift
  printf '\n==> %s\n' "$name"
  "$@"
  times+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
  printf '  -- %s: %d s\n' "$name" $((SECONDS - start))
}

targets() {
  rustup target add thumbv7em-none-eabihf riscv32imc-unknown-none-elf riscv32imac-unknown-none-elf
  rustup toolchain install 1.85 --profile minimal
}

host_tests() {
  cargo test -p fcan-embassy
}

adapters_on_host() {
  # embassy-stm32 builds for the host once a chip is chosen: the FDCAN and bxCAN
  # conversions are tested against its real frame types (the FD header at every length,
  # BRS on and off; what its own constructors would have sent), and linted.
  local fdcan=stm32-fdcan,embassy-stm32/stm32g474re,embassy-stm32/dual-bank
  local bxcan=stm32-bxcan,embassy-stm32/stm32f446re
  cargo test -p fcan-embassy --lib --features "$fdcan"
  cargo test -p fcan-embassy --lib --features "$bxcan"
  cargo clippy -p fcan-embassy --all-targets --features "$fdcan" -- -D warnings
  cargo clippy -p fcan-embassy --all-targets --features "$bxcan" -- -D warnings
}

msrv() {
  # The crate without chip features keeps the node side's Rust 1.85 (the chip features
  # need their HALs' versions, see the guide).
  env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-embassy
  env CARGO_TARGET_DIR=target/msrv cargo +1.85 check -p fcan-embassy --features embassy-time
}

bxcan() {
  # embassy-stm32 needs a chip; the STM32F446RE has two bxCAN controllers.
  cargo build -p fcan-embassy --features stm32-bxcan,embassy-stm32/stm32f446re \
    --target thumbv7em-none-eabihf
}

twai_c6() {
  # ESP32-C6 (RV32IMAC): the adapter and the node runtime as they are.
  cargo build -p fcan-embassy --features esp-twai,embassy-time,esp-hal/esp32c6 \
    --target riscv32imac-unknown-none-elf
}

twai_c3() {
  # ESP32-C3 (RV32IMC, no atomic read-modify-write): heapless's SPSC queue needs
  # portable-atomic over a critical section; the check crate adds that as a firmware
  # must, and builds the loop, the TWAI port and the io-board node for the chip.
  (cd fcan-embassy/esp32c3-check && cargo build --target riscv32imc-unknown-none-elf)
}

nucleo() {
  (cd examples/nucleo-g474re && cargo build --release)
  local dir=${CARGO_TARGET_DIR:-$PWD/examples/nucleo-g474re/target}
  local elf=$dir/thumbv7em-none-eabihf/release/fcan-example-nucleo-g474re
  local size=size
  command -v arm-none-eabi-size >/dev/null && size=arm-none-eabi-size
  "$size" -A "$elf" | grep -E '^(\.vector_table|\.text|\.rodata|\.data|\.bss) '
  # Flash: vector table, code, constants and the initial values of .data; RAM: .data and
  # .bss (the stack takes the rest). The board has 512 KiB and 96 KiB.
  "$size" -A "$elf" | awk '
    $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" { flash += $2 }
    $1 == ".data" { flash += $2; ram += $2 }
    $1 == ".bss" { ram += $2 }
    END {
      printf "  NUCLEO-G474RE firmware: flash %d B (%.1f KiB of 512), static RAM %d B (%.1f KiB of 96)\n",
        flash, flash / 1024, ram, ram / 1024
      if (flash > 512 * 1024 || ram > 96 * 1024) { print "  does not fit the STM32G474RE"; exit 1 }
    }'
}

sub "toolchain: the targets, Rust 1.85" targets
sub "fcan-embassy host tests (cargo test -p fcan-embassy)" host_tests
sub "the STM32 adapters' conversions against embassy-stm32's frame types, on the host" adapters_on_host
sub "fcan-embassy default features with Rust 1.85" msrv
sub "stm32-bxcan adapter for the STM32F446RE (thumbv7em-none-eabihf)" bxcan
sub "esp-twai adapter for the ESP32-C6 (riscv32imac-unknown-none-elf)" twai_c6
sub "esp-twai adapter with the io-board node for the ESP32-C3 (riscv32imc-unknown-none-elf)" twai_c3
sub "NUCLEO-G474RE firmware (stm32-fdcan): cargo build --release, size" nucleo

printf '\n==> chips: time per step\n'
printf '%s\n' "${times[@]}"
