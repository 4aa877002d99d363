#!/usr/bin/env bash
# fcan's `slcan:` transport against a real slcan peer: can-utils' `slcanpty` bridging a
# pty to the kernel's vcan0, in the throw-away Linux VM of ../shared/tools/run-in-vm.sh.
#
# Builds fcan-transport's `slcan_vm` test binary and runs its #[ignore]d
# `slcanpty_bridges_vcan0_both_ways` there with `slcanpty`, `cansend` and `candump`
# (can-utils, installed here with apt-get if missing and root) on the guest's PATH:
# frames `cansend vcan0 …` puts on the bus reach fcan through slcanpty, frames fcan sends
# appear in `candump vcan0`, standard and extended identifiers. slcanpty is Classical
# CAN only, so this is the Classical half; the FD letters are checked against a scripted
# adapter on a host pty (tests/slcan_pty.rs, plain `cargo test`). vcan0 at MTU 16 (a
# Classical bus, like the adapter's side of slcanpty).
# Exits non-zero if the build or the run fails, or if the test did not run (no
# `1 passed`).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh
runner=${FCAN_VM_RUNNER:-"$root/../shared/tools/run-in-vm.sh"}
[[ -f $runner ]] || { echo "slcan-vm: $runner not found" >&2; exit 1; }

if ! { command -v slcanpty && command -v cansend && command -v candump; } >/dev/null \
    && [[ $(id -u) = 0 ]] && command -v apt-get >/dev/null; then
  echo "slcan-vm: installing can-utils (slcanpty, cansend, candump)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils; }; } \
    >/dev/null 2>&1 || echo "slcan-vm: could not install can-utils" >&2
fi
for tool in slcanpty cansend candump; do
  command -v "$tool" >/dev/null || { echo "slcan-vm: $tool (can-utils) is needed" >&2; exit 1; }
done
command -v objcopy >/dev/null || { echo "slcan-vm: objcopy (binutils) is needed" >&2; exit 1; }

echo "==> building fcan-transport's slcan_vm test binary"
test_bin=$(cargo_exes test -p fcan-transport --test slcan_vm --no-run | exe_named slcan_vm)
# The VM unpacks its initrd into RAM: a copy without debug info keeps it small.
stripped=$(mktemp -d)
trap 'rm -rf "$stripped"' EXIT
objcopy --strip-debug "$test_bin" "$stripped/slcan_vm"

echo "==> slcanpty_bridges_vcan0_both_ways in the VM (vcan0 MTU 16)"
log=$(mktemp)
trap 'rm -rf "$stripped" "$log"' EXIT
status=0
bash "$runner" --timeout 300 --mtu 16 --with slcanpty --with cansend --with candump \
  "$stripped/slcan_vm" --ignored --exact slcanpty_bridges_vcan0_both_ways \
  --test-threads=1 --nocapture 2>&1 | tee "$log" || status=$?
if [[ $status -ne 0 ]]; then
  echo "slcan-vm: FAILED (exit $status)" >&2
  exit 1
fi
if ! grep -q '^test result: ok\. 1 passed' "$log"; then
  echo "slcan-vm: the test did not run" >&2
  exit 1
fi
echo "slcan-vm: fcan and slcanpty exchange frames both ways over vcan0"
