#!/usr/bin/env bash
# fcan's `cia402` driver judged by python's `canopen` package (PyPI, which no one here
# wrote) playing a CiA 402 drive (tests/peers/cia402_drive.py, ros2_canopen's
# cia402_slave.eds beside it) on python-can's `udp_multicast` bus, which `fcan serve`
# drives as `udp-multicast:`. First canopen's own master (RemoteNode) checks the drive
# emulation (boot-up, heartbeat, SDO, NMT, CiA 402 states, CSP, PDOs on SYNC, heartbeat
# consumer, the fault and silence hooks); then `fcan serve --device cia402:…` drives it
# and the `fcan` CLI must see it: NMT operational, the PDO mapping in the drive's OD,
# Operation enabled after `enable`, a CSP target followed, a fault on the emcy topic, a
# silent drive offline, the drive's own watchdog when the bus owner dies; a drive whose
# EDS lacks 0x60C2 makes `fcan serve` name the object and "object does not exist"; last,
# the same drive on a Classical fcan link (`udp-multicast:classic`).
#
# Multicast: everything runs inside a network namespace this script creates with only
# `lo` up, so no packet leaves the machine. Needs root (ip netns). The namespace is
# deleted on exit.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

python_can=4.6.1
canopen=2.4.1
venv=$root/target/cia402-peer-venv
py=$venv/bin/python
if ! "$py" -c "import importlib.metadata as m, sys, msgpack; sys.exit(m.version('python-can') != '$python_can' or m.version('canopen') != '$canopen')" 2>/dev/null; then
  echo "==> venv with python-can[multicast]==$python_can canopen==$canopen"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "python-can[multicast]==$python_can" "canopen==$canopen"
fi

echo "==> building fcan"
fcan=$(cargo_exes build --quiet -p fcan-cli --bin fcan | exe_named fcan)

loopback_netns fcan-cia402-$$
# IPv6 multicast on lo is delivered through a `local` route (loopback_netns routes IPv4).
inns ip -6 route add local ff00::/8 dev lo

echo "==> tests/peers/cia402_drive.py test in network namespace $ns"
status=0
inns timeout 400 "$py" tests/peers/cia402_drive.py test --fcan "$fcan" \
  --eds tests/peers/cia402_slave.eds >"$log" 2>&1 || status=$?
cat "$log"
summary=$(tail -1 "$log")
if [[ $status -ne 0 || ! $summary =~ ^cia402_peer:\ [1-9][0-9]*\ checks\ passed$ ]]; then
  echo "cia402-peer: failed (exit $status)" >&2
  exit 1
fi
echo "cia402-peer: python canopen's CiA 402 drive and fcan's cia402 driver agree"
