#!/usr/bin/env bash
# The README's "Quickstart on vcan (Linux)", end to end over real kernel SocketCAN.
#
# Builds the release binaries the README builds (`fcan`, `motor-node`, `io-node`) and the
# `vm_quickstart` test of fcan-examples, then runs that test in the throw-away Linux VM of
# ../shared/tools/run-in-vm.sh, with the binaries on the guest's PATH, twice: vcan0 at
# MTU 72 (CAN FD) and at MTU 16 (Classical CAN). The test starts the two example nodes
# and runs every `fcan` command of the quickstart as separate processes, checking exit
# codes and output. In a VM run of its own, `foreign_traffic_on_vcan0` does it again while
# can-utils' `cangen` (copied in with --with; installed here if missing and root) fills
# about half the bus with random standard and extended frames.
# `fake_vm` (fcan-e2e) runs `fcan fake` with the ancestor's motor-driver schema on vcan0,
# owned by `fcan serve`, and drives it with `fcan` commands, at both MTUs; and updates a
# fake I/O board's firmware with `fcan update` through the daemon, at both MTUs.
# `devices_vm` (fcan-examples) runs simulated RobStride and MIT devices (`fcan fake
# --device`) beside the example boards, driven by `fcan serve --device`, with `fcan`
# commands and a candump capture decoded by `fcan decode --device`, at both MTUs; and
# proves the RobStride's command watchdog: armed before the first enable (candump), the
# motor in reset mode after `fcan serve` is killed, one with `watchdog=off` still running.
# `c_node_vm` (fcan-e2e) runs the C I/O board (examples/c-io-board, built with make)
# beside a Rust motor driver under `fcan serve`, at both MTUs.
# These tests are #[ignore]d on hosts (no SocketCAN there): each runs here by name with
# --ignored --exact. Exits non-zero if a build or any run fails, or if a test did not
# run (no `1 passed`).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh
runner="${FCAN_VM_RUNNER:-$root/../shared/tools/run-in-vm.sh}"
[[ -f $runner ]] || { echo "vm-e2e: $runner not found" >&2; exit 1; }

echo "==> building fcan, motor-node and io-node (release)"
# Without the release profile's debug info (Cargo.toml keeps it for profiling): the VM
# gets stripped copies anyway, and it was 2 GB of target/ at this step, CI's peak.
bins=$(CARGO_PROFILE_RELEASE_DEBUG=0 cargo_exes build --release -p fcan-examples -p fcan-cli --bin fcan --bin motor-node --bin io-node)
# The VM unpacks its initrd into RAM (1 GiB): copies without debug info keep it small
# (the debug test binary alone is ~210 MB with it, ~45 MB without; unpacked whole, it did
# not fit, and the guest reported the program "not found").
stripped=$(mktemp -d)
trap 'rm -rf "$stripped"' EXIT
strip_copy() { objcopy --strip-debug "$1" "$stripped/$(basename "$1")" && echo "$stripped/$(basename "$1")"; }
with=()
for name in fcan motor-node io-node; do
  exe=$(exe_named "$name" <<<"$bins")
  with+=(--with "$(strip_copy "$exe")")
done

if ! command -v cangen >/dev/null && [[ $(id -u) = 0 ]] && command -v apt-get >/dev/null; then
  echo "vm-e2e: installing can-utils (for cangen)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils; }; } \
    >/dev/null 2>&1 || true
fi
command -v cangen >/dev/null && command -v candump >/dev/null \
  || { echo "vm-e2e: cangen and candump (can-utils) are needed" >&2; exit 1; }
with+=(--with cangen --with candump)

echo "==> building the vm_quickstart test binary"
test_bin=$(cargo_exes test -p fcan-examples --test vm_quickstart --no-run | exe_named vm_quickstart)
test_bin=$(strip_copy "$test_bin")

echo "==> building the fake_vm test binary (fcan fake with an ancestor schema)"
fake_bin=$(cargo_exes test -p fcan-e2e --test fake_vm --no-run | exe_named fake_vm)
fake_bin=$(strip_copy "$fake_bin")
# The ancestor's schemas go into the VM as they are (read in place here, never copied
# into the project).
fibril="$root/../shared/compat/fibril"
[[ -d $fibril ]] || { echo "vm-e2e: $fibril not found" >&2; exit 1; }
fibril_files=()
for f in "$fibril"/*.yaml; do fibril_files+=(--file "$f"); done

echo "==> building the devices_vm test binary (RobStride and MIT devices beside boards)"
devices_bin=$(cargo_exes test -p fcan-examples --test devices_vm --no-run | exe_named devices_vm)
devices_bin=$(strip_copy "$devices_bin")

echo "==> building the C I/O board (examples/c-io-board, make) and the c_node_vm test binary"
make -s -C "$root/examples/c-io-board" >/dev/null
with+=(--with "$root/examples/c-io-board/build/io-board-c")
c_node_bin=$(cargo_exes test -p fcan-e2e --test c_node_vm --no-run | exe_named c_node_vm)
c_node_bin=$(strip_copy "$c_node_bin")

status=0
for mtu in 72 16; do
  echo "==> fake_fibril_node_on_vcan0 in the VM, vcan0 MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" --env FCAN_FIBRIL_DIR=/payload/files \
      "${with[@]}" "${fibril_files[@]}" \
      "$fake_bin" --ignored --exact fake_fibril_node_on_vcan0 --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "vm-e2e: fake_vm, MTU $mtu: the test did not run" >&2
      status=1
    fi
  else
    echo "vm-e2e: fake_vm, MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done

for mtu in 72 16; do
  # The C I/O board (C application + generated C + libfcan_node.a) beside a Rust motor
  # driver under `fcan serve`.
  echo "==> c_io_board_beside_a_rust_node_on_vcan0 in the VM, vcan0 MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" "${with[@]}" \
      "$c_node_bin" --ignored --exact c_io_board_beside_a_rust_node_on_vcan0 --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "vm-e2e: c_node_vm, MTU $mtu: the test did not run" >&2
      status=1
    fi
  else
    echo "vm-e2e: c_node_vm, MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done

for mtu in 72 16; do
  # Firmware update over SocketCAN: `fcan update` through `fcan serve` into a fake I/O
  # board that takes updates (the example schema copied in).
  echo "==> fake_io_board_updated_on_vcan0 in the VM, vcan0 MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" --env FCAN_IO_BOARD_YAML=/payload/files/io_board.yaml \
      "${with[@]}" --file "$root/schema/examples/io_board.yaml" \
      "$fake_bin" --ignored --exact fake_io_board_updated_on_vcan0 --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "vm-e2e: fake_io_board_updated_on_vcan0, MTU $mtu: the test did not run" >&2
      status=1
    fi
  else
    echo "vm-e2e: fake_io_board_updated_on_vcan0, MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done

for mtu in 72 16; do
  # Two boards with one node id (docs/protocol.md §5.3): `fcan fake` twice with id 9
  # under `fcan serve`; the collision is reported and the first board keeps running.
  echo "==> two_fakes_with_one_id_on_vcan0 in the VM, vcan0 MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" --env FCAN_IO_BOARD_YAML=/payload/files/io_board.yaml \
      "${with[@]}" --file "$root/schema/examples/io_board.yaml" \
      "$fake_bin" --ignored --exact two_fakes_with_one_id_on_vcan0 --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "vm-e2e: two_fakes_with_one_id_on_vcan0, MTU $mtu: the test did not run" >&2
      status=1
    fi
  else
    echo "vm-e2e: two_fakes_with_one_id_on_vcan0, MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done

for mtu in 72 16; do
  # `fcan fake --device` (a RobStride RS03, an MIT motor) and `fcan serve --device` beside
  # the example boards, candump capturing; then RobStrides whose bus owner is killed
  # (one with its command watchdog armed, one with `watchdog=off`). One VM run per test.
  for t in devices_beside_boards_on_vcan0 a_robstride_stops_when_fcan_serve_dies_on_vcan0; do
    echo "==> $t in the VM, vcan0 MTU $mtu"
    log=$(mktemp)
    if bash "$runner" --timeout 300 --mtu "$mtu" "${with[@]}" \
        "$devices_bin" --ignored --exact "$t" --test-threads=1 --nocapture 2>&1 | tee "$log"; then
      if ! grep -q '^test result: ok\. 1 passed' "$log"; then
        echo "vm-e2e: devices_vm $t, MTU $mtu: the test did not run" >&2
        status=1
      fi
    else
      echo "vm-e2e: devices_vm $t, MTU $mtu: FAILED" >&2
      status=1
    fi
    rm -f "$log"
  done
done

for mtu in 72 16; do
  # One VM run per test: each starts its own nodes on a fresh vcan0.
  for t in quickstart_on_vcan0 foreign_traffic_on_vcan0 candump_capture_decodes_like_echo; do
    echo "==> $t in the VM, vcan0 MTU $mtu"
    log=$(mktemp)
    if bash "$runner" --timeout 300 --mtu "$mtu" "${with[@]}" \
        "$test_bin" --ignored --exact "$t" --test-threads=1 --nocapture 2>&1 | tee "$log"; then
      if ! grep -q '^test result: ok\. 1 passed' "$log"; then
        echo "vm-e2e: $t, MTU $mtu: the test did not run" >&2
        status=1
      fi
    else
      echo "vm-e2e: $t, MTU $mtu: FAILED" >&2
      status=1
    fi
    rm -f "$log"
  done
done
exit $status
