#!/usr/bin/env bash
# `fcan serve --ros2 --joints` judged by Cyclone DDS's Python binding (PyPI `cyclonedds`)
# acting as ros2_control's TopicBasedSystem (tests/peers/joints_dds_peer.py): serve-sim's
# example nodes, examples/host/config/joints.yaml, JointStates read, JointState commands
# moving the motors, a malformed one refused, clear_fault answered.
#
# Like .ci/ros2-dds-peer.sh: inside a network namespace with only `lo` up (multicast
# routed to it), so no packet leaves the machine. Needs root (ip netns).
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

loopback_netns fcan-joints-$$
export CYCLONEDDS_URI='<CycloneDDS><Domain><General><Interfaces><NetworkInterface name="lo" multicast="true"/></Interfaces></General></Domain></CycloneDDS>'

zport=7447
echo "==> fcan serve --ros2 --joints (serve-sim) in network namespace $ns (log: $log)"
inns timeout 600 "$serve_sim" --bus sim --no-cache --listen "tcp/127.0.0.1:$zport" --ros2 --ros2-rmw cyclonedds \
  --joints examples/host/config/joints.yaml </dev/null >"$log" 2>&1 &
up=""
for _ in $(seq 600); do
  if grep -q "joints: active" "$log"; then up=yes; break; fi
  sleep 0.1
done
if [[ -z $up ]]; then
  echo "joints-dds-peer: the joints did not become active; the daemon's output:" >&2
  cat "$log" >&2
  exit 1
fi

echo "==> tests/peers/joints_dds_peer.py (Cyclone DDS) in the namespace"
status=0
out=$(inns "$py" tests/peers/joints_dds_peer.py --fcan "$fcan" --connect "tcp/127.0.0.1:$zport" 2>&1) || status=$?
echo "$out"
summary=$(tail -1 <<<"$out")
if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  echo "joints-dds-peer: failed; the daemon's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
if ! grep -q "/robot_joint_commands: refused: \`velocity\` has 1 values for 2 names" "$log"; then
  echo "joints-dds-peer: the daemon did not log the refused command; its output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
# Ctrl-C: an active loop is deactivated before the daemon goes: the commands in force
# flushed once, no safe stop, no disable (docs/control.md; each device's own watchdog
# stops it once the daemon is gone).
for pid in $(ip netns pids "$ns"); do
  if [[ $(ps -o comm= -p "$pid" 2>/dev/null) == serve-sim ]]; then kill -INT "$pid"; fi
done
for _ in $(seq 50); do grep -q "joints: deactivated" "$log" && break; sleep 0.1; done
if ! grep -q "joints: deactivated: the commands in force flushed once" "$log"; then
  echo "joints-dds-peer: no deactivation on Ctrl-C; the daemon's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "joints-dds-peer: $summary"
