#!/usr/bin/env bash
# The ROS 2 bridge over DDS judged by Cyclone DDS's Python binding (PyPI `cyclonedds`),
# which no one here wrote (tests/peers/ros2_dds_peer.py): `fcan serve --ros2` with the
# example nodes on its simulated bus (examples/host/src/bin/serve-sim.rs), values
# compared with what `fcan topic echo` prints through the remote API, a command from
# ROS reaching a node, a message of the wrong shape refused.
#
# DDS discovers by multicast: everything runs inside a network namespace this script
# creates with only `lo` up (multicast routed to it), so no packet leaves the machine.
# Needs root (ip netns). The namespace is deleted on exit.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

venv=$root/target/ros2-dds-venv
py=$venv/bin/python
if ! "$py" -c "import cyclonedds" 2>/dev/null; then
  echo "==> venv with cyclonedds"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "cyclonedds>=0.10.5,<12"
fi

echo "==> building serve-sim and fcan"
exes=$(cargo_exes build --quiet -p fcan-examples --bin serve-sim -p fcan-cli --bin fcan)
serve_sim=$(exe_named serve-sim <<<"$exes")
fcan=$(exe_named fcan <<<"$exes")

loopback_netns fcan-ros2-$$
# Cyclone DDS on the namespace's loopback, multicast allowed there.
export CYCLONEDDS_URI='<CycloneDDS><Domain><General><Interfaces><NetworkInterface name="lo" multicast="true"/></Interfaces></General></Domain></CycloneDDS>'

zport=7447
echo "==> fcan serve --ros2 (serve-sim) in network namespace $ns (log: $log)"
inns timeout 600 "$serve_sim" --bus sim --no-cache --listen "tcp/127.0.0.1:$zport" --ros2 --ros2-rmw cyclonedds </dev/null >"$log" 2>&1 &
up=""
for _ in $(seq 600); do
  if grep -q "^ROS 2: DDS domain" "$log"; then
    running=$(inns "$fcan" --connect "tcp/127.0.0.1:$zport" --bus sim --json nodes 2>/dev/null \
      | grep -c '"phase":"running"' || true)
    if [[ $running -eq 3 ]]; then up=yes; break; fi
  fi
  sleep 0.1
done
if [[ -z $up ]]; then
  echo "ros2-dds-peer: serve-sim --ros2 did not come up with three running nodes; its output:" >&2
  cat "$log" >&2
  exit 1
fi
# The bridge serves nodes as they start; give it a resync period after the last one.
sleep 1.5

echo "==> tests/peers/ros2_dds_peer.py (Cyclone DDS) in the namespace"
status=0
out=$(inns "$py" tests/peers/ros2_dds_peer.py --fcan "$fcan" --connect "tcp/127.0.0.1:$zport" 2>&1) || status=$?
echo "$out"
summary=$(tail -1 <<<"$out")
if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  echo "ros2-dds-peer: failed; the bridge's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
# The refused message left its trace in the bridge's log, and nothing else was refused.
if ! grep -q "motor1/target: refused" "$log"; then
  echo "ros2-dds-peer: the bridge did not log the refused Target; its output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "ros2-dds-peer: $summary"
