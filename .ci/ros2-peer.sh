#!/usr/bin/env bash
# The ROS 2 types judged by rosbags (PyPI), which no one here wrote
# (tests/peers/check_ros2.py): the hash of every bundled standard interface against
# rosbags' own Jazzy definitions; every custom and generated type of the example,
# ancestor and coverage schemas parsed by rosbags' .msg parser and hashed alike; CDR
# samples decoded and re-encoded by rosbags byte for byte; rosbags' encodings decoded
# by the bridge's codec (tests/tests/ros2_types.rs's decode_what_rosbags_wrote,
# #[ignore]d elsewhere, run here with --ignored); and the interface packages
# `fcan-codegen ros-package` writes for the three ancestor nodes
# (../shared/compat/fibril) and the examples parsed without error. No DDS, no network.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"

venv=$root/target/ros2-peer-venv
py=$venv/bin/python
if ! "$py" -c "import rosbags" 2>/dev/null; then
  echo "==> venv with rosbags"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "rosbags>=0.10,<0.12"
fi

out=$root/target/ros2-peer
rm -rf "$out"
mkdir -p "$out"
echo "==> types, hashes and CDR samples (tests/tests/ros2_types.rs)"
FCAN_ROS2_ARTIFACTS=$out cargo test -q -p fcan-e2e --test ros2_types export_for_rosbags

echo "==> fcan-codegen ros-package: the three ancestor nodes, the examples, the coverage schema"
cargo build -q -p fcan-codegen
codegen=$root/target/debug/fcan-codegen
f=../shared/compat/fibril
"$codegen" ros-package \
  $f/md.node.yaml $f/md.instances.yaml $f/md_motor.type.yaml $f/adc_port.type.yaml $f/robstride_motor.type.yaml $f/solenoid.type.yaml \
  --node $f/air.node.yaml $f/solenoid.type.yaml $f/md_motor.type.yaml $f/robstride_motor.type.yaml $f/adc_port.type.yaml \
  --node $f/robstride.node.yaml $f/robstride.instances.yaml $f/robstride_motor.type.yaml $f/solenoid.type.yaml \
  --out "$out/ancestors"
"$codegen" ros-package schema/examples/motor_driver.yaml --node schema/examples/io_board.yaml --out "$out/examples"
"$codegen" ros-package tests/schemas/ros2_coverage.yaml --out "$out/coverage"

echo "==> judged by rosbags"
"$py" tests/peers/check_ros2.py "$out" "$out/ancestors" "$out/examples" "$out/coverage"

echo "==> rosbags' encodings decoded by the bridge"
test -s "$out/from_rosbags.json"
# #[ignore]d in a plain `cargo test` (it needs the peer's file): run by name, and make
# sure it did run.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
FCAN_ROS2_ARTIFACTS=$out cargo test -q -p fcan-e2e --test ros2_types \
  -- --ignored --exact decode_what_rosbags_wrote 2>&1 | tee "$log"
grep -q '^test result: ok\. 1 passed' "$log" \
  || { echo "ros2-peer: decode_what_rosbags_wrote did not run" >&2; exit 1; }
