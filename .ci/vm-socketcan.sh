#!/usr/bin/env bash
# Real-kernel SocketCAN tests for fcan-transport.
#
# Builds the `socketcan_vm` integration test binary and runs all its tests (#[ignore]d
# on a host without SocketCAN, so here with --include-ignored) in the throw-away Linux
# VM of ../shared/tools/run-in-vm.sh twice: with CAN FD interfaces (vcan0/vcan1 at MTU
# 72) and with classical ones (MTU 16). Exits non-zero if a build or either run fails,
# or if not every test it meant to run passed (the count `--list` gives, checked
# against the `test result` line).
# With `tc` on the host, the VM kernel's sch_tbf.ko goes in too, for the ENOBUFS test.
# If can-utils' `candump` is on the host (installed here when running as root), it goes
# into the VM too and our candump writer is compared with real `candump -L` output.
# Without them those tests fail, so they are left out by name (--skip), with a warning.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh
runner=${FCAN_VM_RUNNER:-"$root/../shared/tools/run-in-vm.sh"}
[[ -f $runner ]] || { echo "vm-socketcan: $runner not found" >&2; exit 1; }

if ! command -v candump >/dev/null && [[ $(id -u) = 0 ]] && command -v apt-get >/dev/null; then
  echo "vm-socketcan: installing can-utils (for candump)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq can-utils; }; } \
    >/dev/null 2>&1 || echo "vm-socketcan: could not install can-utils" >&2
fi
with=()
skip=()
if command -v candump >/dev/null; then
  with=(--with candump)
else
  echo "vm-socketcan: no candump on the host: the candump comparison is left out" >&2
  skip+=(--skip our_log_lines_match_real_candump)
fi

# ENOBUFS back-pressure test: `tc` from the host and the VM kernel's sch_tbf.ko (a token
# bucket that makes vcan drain at a bus's pace), taken once from the kernel package that
# run-in-vm.sh boots and kept in its cache.
cache=${VCAN_VM_CACHE:-${TMPDIR:-/tmp}/vcan-vm-cache}
tbf="$cache/sch_tbf.ko"
if [[ ! -s $cache/base.cpio ]]; then
  # A fresh machine: one throw-away boot builds the VM cache (kernel + base initramfs),
  # which names the kernel version sch_tbf.ko must match.
  echo "vm-socketcan: first VM boot on this machine (builds the VM cache)" >&2
  bash "$runner" --timeout 120 /bin/true >/dev/null 2>&1 || true
fi
if [[ ! -s $tbf && -s $cache/base.cpio ]] && command -v busybox >/dev/null; then
  kver=$(busybox cpio -t < "$cache/base.cpio" 2>/dev/null | sed -n 's|^lib/modules/\([^/]*\)$|\1|p' | head -1)
  if [[ -n $kver ]]; then
    echo "vm-socketcan: fetching sch_tbf.ko for $kver (one-off)" >&2
    tmp=$(mktemp -d)
    if (cd "$tmp" && apt-get download -o APT::Sandbox::User=root "linux-image-$kver" >/dev/null 2>&1) \
        && dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp" --wildcards '*/sch_tbf.ko' \
        && cp "$(find "$tmp" -name sch_tbf.ko | head -1)" "$tbf"; then :; else
      echo "vm-socketcan: could not get sch_tbf.ko" >&2
    fi
    rm -rf "$tmp"
  fi
fi
if [[ -s $tbf ]] && command -v tc >/dev/null; then
  with+=(--with tc --file "$tbf")
else
  echo "vm-socketcan: no tc or sch_tbf.ko: the ENOBUFS test is left out" >&2
  skip+=(--skip enobufs_is_back_pressure)
fi

echo "==> building the socketcan_vm test binary"
bin=$(cargo_exes test -p fcan-transport --test socketcan_vm --no-run | exe_named socketcan_vm)
# Its tests are #[ignore]d (no SocketCAN on a host); here every test of it runs.
args=(--include-ignored ${skip[@]+"${skip[@]}"})
want=$("$bin" --list "${args[@]}" | grep -c ': test$' || true)
[[ $want -gt 0 ]] || { echo "vm-socketcan: no test to run" >&2; exit 1; }

status=0
for mtu in 72 16; do
  echo "==> SocketCAN tests in the VM, vcan MTU $mtu"
  log=$(mktemp)
  if bash "$runner" --timeout 300 --mtu "$mtu" ${with[@]+"${with[@]}"} \
      "$bin" "${args[@]}" --test-threads=1 --nocapture 2>&1 | tee "$log"; then
    if ! grep -q "^test result: ok\. $want passed" "$log"; then
      echo "vm-socketcan: MTU $mtu: not all $want tests ran" >&2
      status=1
    fi
  else
    echo "vm-socketcan: MTU $mtu: FAILED" >&2
    status=1
  fi
  rm -f "$log"
done
exit $status
