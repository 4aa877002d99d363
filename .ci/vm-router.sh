#!/usr/bin/env bash
# The fcan-router binary on real kernel SocketCAN.
#
# Builds the `fcan-router` binary and the `router_vm` integration test (fcan-e2e) binary, and runs the
# test in the throw-away Linux VM of ../shared/tools/run-in-vm.sh (with the router binary
# on PATH there) twice: with CAN FD interfaces (vcan0/vcan1 at MTU 72) and with classical
# ones (MTU 16). The test starts `fcan-router --uplink socketcan:vcan0 --downlink
# socketcan:vcan1`, a master on vcan0 and a scripted node on vcan1, and checks discovery,
# topics, a service, a parameter, SIGUSR1 counters and a clean exit on SIGINT.
# The test is #[ignore]d on hosts (no SocketCAN there): it runs here with --ignored
# --exact. Exits non-zero if a build or either run fails, or if the test did not run
# (no `1 passed`).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh
runner="$root/../shared/tools/run-in-vm.sh"
[[ -f $runner ]] || { echo "vm-router: $runner not found" >&2; exit 1; }

echo "==> building fcan-router and the router_vm test binary"
router=$(cargo_exes build -p fcan-router --bin fcan-router | exe_named fcan-router)
bin=$(cargo_exes test -p fcan-e2e --test router_vm --no-run | exe_named router_vm)

status=0
for mtu in 72 16; do
  echo "==> fcan-router in the VM, vcan MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" --with "$router" \
      "$bin" --ignored --exact router_binary_between_vcan0_and_vcan1 \
      --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "vm-router: MTU $mtu: the test did not run" >&2
      status=1
    fi
  else
    echo "vm-router: MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done
exit $status
