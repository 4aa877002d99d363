#!/usr/bin/env bash
# A benchmark, not a test (not in .ci/run): the latency the ROS 2 topic path of
# `fcan serve --ros2 --joints` adds. tests/peers/joints_latency.py, Cyclone DDS's Python
# binding (PyPI `cyclonedds`) acting as ros2_control's JointStateTopicSystem at 500 Hz,
# against serve-sim (release build: the example nodes on the simulated bus, in the
# daemon's process) with examples/host/config/joints-latency.yaml; the daemon's frame tap
# read over Zenoh (PyPI `eclipse-zenoh`, the Rust crate's version). Figures and what they
# mean: docs/performance.md, "ROS 2 joints: the latency the topic path adds".
#
# Run it as root from anywhere in the checkout (it needs `ip netns`):
#
#   .ci/joints-latency.sh                      # one run: three phases of 10 s (baseline, quiet, tapped)
#   RUNS=3 SECONDS_PER_PHASE=10 .ci/joints-latency.sh
#   SERVE_SIM=target/release/serve-sim .ci/joints-latency.sh   # no build: that binary
#
# Like .ci/joints-dds-peer.sh: everything inside a network namespace with only `lo` up
# (multicast routed to it), so no DDS packet leaves the machine. Each run starts a fresh
# daemon. Prints the peer's lines per run; exits non-zero only when a run could not be
# measured (the joints never active, the peer failing), never because of a figure.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

runs=${RUNS:-1}
seconds=${SECONDS_PER_PHASE:-10}

zenoh_version=$(awk '$0 == "name = \"zenoh\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
[[ -n $zenoh_version ]] || { echo "joints-latency: no zenoh crate in Cargo.lock" >&2; exit 1; }
venv=$root/target/joints-latency-venv
py=$venv/bin/python
if ! "$py" -c "import cyclonedds, importlib.metadata as m, sys; sys.exit(m.version('eclipse-zenoh') != '$zenoh_version')" 2>/dev/null; then
  echo "==> venv with cyclonedds and eclipse-zenoh==$zenoh_version"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "cyclonedds>=0.10.5,<12" "eclipse-zenoh==$zenoh_version"
fi

if [[ -n ${SERVE_SIM:-} ]]; then
  serve_sim=$SERVE_SIM   # a serve-sim built already (e.g. while the workspace does not build)
else
  echo "==> building serve-sim (release)"
  serve_sim=$(cargo_exes build --release --quiet -p fcan-examples --bin serve-sim | exe_named serve-sim)
fi

loopback_netns fcan-jlat-$$
export CYCLONEDDS_URI='<CycloneDDS><Domain><General><Interfaces><NetworkInterface name="lo" multicast="true"/></Interfaces></General></Domain></CycloneDDS>'
zport=7447

stop_daemon() {
  for pid in $(ip netns pids "$ns"); do
    if [[ $(ps -o comm= -p "$pid" 2>/dev/null) == serve-sim ]]; then kill -INT "$pid"; fi
  done
  for _ in $(seq 50); do
    [[ -z $(ip netns pids "$ns") ]] && break
    sleep 0.1
  done
}

for run in $(seq "$runs"); do
  : >"$log"
  echo "==> run $run of $runs: fcan serve --ros2 --joints (serve-sim) in network namespace $ns"
  inns timeout 600 "$serve_sim" --bus sim --no-cache --listen "tcp/127.0.0.1:$zport" --ros2 --ros2-rmw cyclonedds \
    --joints examples/host/config/joints-latency.yaml </dev/null >"$log" 2>&1 &
  up=""
  for _ in $(seq 600); do
    if grep -q "joints: active" "$log" && grep -q "fcan serve: ready" "$log"; then up=yes; break; fi
    sleep 0.1
  done
  if [[ -z $up ]]; then
    echo "joints-latency: the joints did not become active; the daemon's output:" >&2
    cat "$log" >&2
    exit 1
  fi
  if ! inns "$py" tests/peers/joints_latency.py --connect "tcp/127.0.0.1:$zport" --bus sim --seconds "$seconds"; then
    echo "joints-latency: the peer failed; the daemon's output:" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  refused=$(grep -c "refused" "$log" || true)
  echo "daemon: $refused log lines about refused commands; faults: $(grep -c "FAULT" "$log" || true)"
  stop_daemon
done
