#!/usr/bin/env bash
# Runs the C I/O-board firmware's self-test (build.sh builds it) on QEMU's MPS2-AN386
# (Cortex-M4F) with semihosting; exits with the self-test's status (0: every conformance
# vector passed), 124 when QEMU did not finish within the timeout.
#
#   examples/c-io-board/firmware/run.sh [ELF]     # default build/fcan-c-io-board-selftest.elf
#
# FCAN_QEMU_TIMEOUT: seconds (default 120).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
elf="${1:-$here/build/fcan-c-io-board-selftest.elf}"
[ -f "$elf" ] || { echo "run.sh: no $elf (run build.sh first)" >&2; exit 2; }
command -v qemu-system-arm >/dev/null || {
    echo "run.sh: qemu-system-arm not found (Debian: apt-get install qemu-system-arm)" >&2
    exit 2
}
# The semihosting console on stdout (QEMU writes it to stderr without a chardev), so
# `run.sh | tee log` keeps it; the board's UARTs and QEMU's monitor are not connected.
exec timeout "${FCAN_QEMU_TIMEOUT:-120}" qemu-system-arm -machine mps2-an386 -cpu cortex-m4 \
    -nographic -monitor none -serial none -chardev stdio,id=semihosting \
    -semihosting-config enable=on,target=native,chardev=semihosting -kernel "$elf" </dev/null
