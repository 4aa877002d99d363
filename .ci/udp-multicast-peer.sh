#!/usr/bin/env bash
# fcan's `udp-multicast:` transport judged by python-can (PyPI `python-can[multicast]`),
# which no one here wrote (tests/peers/udp_multicast_peer.py): its own UdpMulticastBus
# exchanges frames of every kind (Classical and FD, standard and extended ids, BRS, ESI,
# every FD length) with fcan-transport's `python_peer_echo`, a Classical fcan link
# ignores FD frames, and an fcan master and node find each other only through python-can
# bridging two ports. Both python-can groups, IPv6 (its default) and IPv4.
#
# Multicast: everything runs inside a network namespace this script creates with only
# `lo` up (multicast routed to it for both families), so no packet leaves the machine.
# Needs root (ip netns). The namespace is deleted on exit.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

python_can=4.6.1
venv=$root/target/udp-multicast-peer-venv
py=$venv/bin/python
if ! "$py" -c "import importlib.metadata as m, sys, msgpack; sys.exit(m.version('python-can') != '$python_can')" 2>/dev/null; then
  echo "==> venv with python-can[multicast]==$python_can"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "python-can[multicast]==$python_can"
fi

echo "==> building fcan, motor-node and fcan-transport's udp_multicast test"
exes=$(cargo_exes build --quiet -p fcan-cli --bin fcan -p fcan-examples --bin motor-node)
fcan=$(exe_named fcan <<<"$exes")
motor_node=$(exe_named motor-node <<<"$exes")
echo_test=$(cargo_exes test --quiet --no-run -p fcan-transport --test udp_multicast | exe_named udp_multicast)

loopback_netns fcan-udpmc-$$
# IPv6 multicast on lo is delivered through a `local` route (loopback_netns routes IPv4).
inns ip -6 route add local ff00::/8 dev lo

for family in ipv6 ipv4; do
  echo "==> tests/peers/udp_multicast_peer.py --family $family in network namespace $ns"
  status=0
  out=$(inns timeout 300 "$py" tests/peers/udp_multicast_peer.py --family "$family" \
    --echo "$echo_test" --fcan "$fcan" --motor-node "$motor_node" 2>&1) || status=$?
  echo "$out"
  summary=$(tail -1 <<<"$out")
  if [[ $status -ne 0 || ! $summary =~ ^udp_multicast_peer:\ $family:\ [1-9][0-9]*\ checks\ passed$ ]]; then
    echo "udp-multicast-peer: $family failed (exit $status)" >&2
    exit 1
  fi
done
echo "udp-multicast-peer: python-can and fcan share the bus, IPv6 and IPv4"
