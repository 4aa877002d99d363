#!/usr/bin/env bash
# Real-kernel SocketCAN tests for fcan-transport.
#
# Builds the `socketcan_vm` integration test binary and runs it in the throw-away Linux VM
# of ../shared/tools/run-in-vm.sh twice: with CAN FD interfaces (vcan0/vcan1 at MTU 72)
# and with classical ones (MTU 16). Exits non-zero if a build or either run fails, or if
# the tests did not really run (e.g. FCAN_VM did not reach them: they print "skipped: …",
# which --nocapture lets through).
# If can-utils' `candump` is on the host (installed here when running as root), it goes
# into the VM too and our candump writer is compared with real `candump -L` output.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
runner="$root/../shared/tools/run-in-vm.sh"
[[ -f $runner ]] || { echo "vm-socketcan: $runner not found" >&2; exit 1; }

if ! command -v candump >/dev/null && [[ $(id -u) = 0 ]] && command -v apt-get >/dev/null; then
  echo "vm-socketcan: installing can-utils (for candump)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils; }; } \
    >/dev/null 2>&1 || echo "vm-socketcan: could not install can-utils" >&2
fi
with=()
if command -v candump >/dev/null; then
  with=(--with candump)
else
  echo "vm-socketcan: no candump on the host: the candump comparison will be skipped" >&2
fi

echo "==> building the socketcan_vm test binary"
cargo test -p fcan-transport --test socketcan_vm --no-run
bin=$(cargo test -p fcan-transport --test socketcan_vm --no-run --message-format=json 2>/dev/null \
  | grep -o '"executable":"[^"]*socketcan_vm[^"]*"' | tail -1 | sed 's/^"executable":"//; s/"$//')
[[ -n $bin && -x $bin ]] || { echo "vm-socketcan: test binary not found" >&2; exit 1; }

status=0
for mtu in 72 16; do
  echo "==> SocketCAN tests in the VM, vcan MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" --env FCAN_VM=1 ${with[@]+"${with[@]}"} \
      "$bin" --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if grep -q 'skipped: set FCAN_VM' "$log" || ! grep -q '^test result: ok\. [1-9]' "$log"; then
      echo "vm-socketcan: MTU $mtu: the tests did not run" >&2
      status=1
    fi
  else
    echo "vm-socketcan: MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done
exit $status
