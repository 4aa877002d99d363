"""python-can judges fcan's `udp-multicast` transport (issue 36 item 1).

Run inside a network namespace holding only `lo`, with multicast on and routes for both
families (`.ci/udp-multicast-peer.sh` sets it up), with python-can[multicast] installed:

    udp_multicast_peer.py --family ipv6|ipv4 --echo TEST_EXE --fcan FCAN --motor-node NODE

1. **Frames both ways, every kind.** fcan's ignored test `python_peer_echo` (TEST_EXE)
   opens `udp-multicast[:ipv4]` and answers each frame one identifier higher.
   python-can's own `UdpMulticastBus` sends Classical and FD frames, standard and extended
   identifiers (the extremes 0x7FF / 0x1FFFFFFE), BRS on and off, ESI set, every FD
   length, and checks each answer: identifier and its format, `is_fd`, `bitrate_switch`,
   data (an FD payload of a length FD has not, 13 bytes, comes back zero-padded to 16),
   `error_state_indicator` false (fcan has none). python-can's `recv` unpacks with
   `check=True`, so every answer also passes its own validation.
2. **Classical.** `udp-multicast:classic` against python-can with `fd=False`: an FD frame
   sent to it is ignored (no answer), Classical frames are answered.
3. **Real traffic through python-can.** An fcan node (`motor-node`) on port 43114 and a
   one-shot fcan master (`fcan --bus udp-multicast nodes`) on port 43113: only
   python-can, bridging the two ports with two `UdpMulticastBus`es, connects them. The
   master finds the node, reads its schema and lists it, so every frame each side got came
   from python-can; python-can in turn decoded every frame fcan sent (config plane on
   extended identifiers, CAN FD with BRS).

Exits non-zero on the first failed check, printing what it saw.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time

import can
from can.interfaces.udp_multicast import UdpMulticastBus

FD_LENGTHS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64]
checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"udp_multicast_peer: FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    checks += 1


def group(family):
    return UdpMulticastBus.DEFAULT_GROUP_IPv6 if family == "ipv6" else UdpMulticastBus.DEFAULT_GROUP_IPv4


def recv_not_own(bus, sent, timeout):
    """The next message from someone else: python-can hears its own datagrams (multicast
    loops them back to its socket), so a message equal to one it sent is skipped once."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        m = bus.recv(left)
        if m is None:
            return None
        key = fingerprint(m)
        if sent[key] > 0:
            sent[key] -= 1
            continue
        return m


def fingerprint(m):
    return (m.arbitration_id, m.is_extended_id, m.is_fd, m.bitrate_switch, bytes(m.data))


def start_echo(exe, spec, count):
    env = dict(os.environ, FCAN_UDPMC_SPEC=spec, FCAN_UDPMC_COUNT=str(count))
    p = subprocess.Popen(
        [exe, "--ignored", "--exact", "python_peer_echo", "--nocapture", "--test-threads=1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    for line in p.stdout:
        if line.strip().endswith("ready"):  # libtest may print "test … ... " before it
            return p
    p.wait()
    check(False, f"the fcan echo ({spec}) never became ready")


def finish(p, what):
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    print(out, end="")
    check(p.returncode == 0, f"{what} exited {p.returncode}")


def echo_every_kind(args):
    g = group(args.family)
    spec = "udp-multicast" if args.family == "ipv6" else "udp-multicast:ipv4"
    frames = [
        can.Message(arbitration_id=0x123, is_extended_id=False, data=[1, 2, 3]),
        can.Message(arbitration_id=0x000, is_extended_id=False, data=[]),
        can.Message(arbitration_id=0x7FE, is_extended_id=False, data=[0xFF] * 8),
        can.Message(arbitration_id=0x1FFFFFFE, is_extended_id=True, data=[9] * 5),
        can.Message(arbitration_id=0x18DAF110, is_extended_id=True, data=[]),
        can.Message(arbitration_id=0x100, is_extended_id=False, is_fd=True, bitrate_switch=True,
                    data=list(range(64))),
        can.Message(arbitration_id=0x100, is_extended_id=False, is_fd=True, bitrate_switch=False,
                    data=[7] * 12),
        can.Message(arbitration_id=0x1ABCDEF, is_extended_id=True, is_fd=True, bitrate_switch=True,
                    error_state_indicator=True, data=[0xA5] * 48),
        # A length FD has not: fcan pads it to 16, as a controller would.
        can.Message(arbitration_id=0x55, is_extended_id=False, is_fd=True, bitrate_switch=True,
                    data=[3] * 13),
    ]
    frames += [
        can.Message(arbitration_id=0x200 + n, is_extended_id=n % 2 == 1, is_fd=True,
                    bitrate_switch=n % 3 != 0, data=[n] * n)
        for n in FD_LENGTHS
    ]
    with UdpMulticastBus(channel=g, fd=True) as bus:
        p = start_echo(args.echo, spec, len(frames))
        sent = collections.Counter()
        for f in frames:
            sent[fingerprint(f)] += 1
            bus.send(f)
            r = recv_not_own(bus, sent, 5)
            check(r is not None, f"fcan answered {f}")
            want_len = next(n for n in FD_LENGTHS if n >= len(f.data)) if f.is_fd else len(f.data)
            check(r.arbitration_id == f.arbitration_id + 1, f"answer id {r.arbitration_id:#x} to {f}")
            check(r.is_extended_id == f.is_extended_id, f"id format of {r} (sent {f})")
            check(r.is_fd == f.is_fd, f"is_fd of {r} (sent {f})")
            check(r.bitrate_switch == (f.is_fd and f.bitrate_switch), f"BRS of {r} (sent {f})")
            check(not r.error_state_indicator, f"ESI of {r}")
            check(not r.is_remote_frame and not r.is_error_frame, f"plain data frame {r}")
            check(r.dlc == want_len == len(r.data), f"length of {r} (sent {f})")
            check(bytes(r.data) == bytes(f.data) + bytes(want_len - len(f.data)), f"data of {r} (sent {f})")
        finish(p, f"the fcan echo on {spec}")
    print(f"udp_multicast_peer: {args.family}: {len(frames)} frames of every kind both ways")


def echo_classic(args):
    g = group(args.family)
    spec = "udp-multicast:classic" if args.family == "ipv6" else "udp-multicast:ipv4,classic"
    classic = [
        can.Message(arbitration_id=0x321, is_extended_id=False, data=[1] * 8),
        can.Message(arbitration_id=0x1234567, is_extended_id=True, data=[2, 3]),
    ]
    with UdpMulticastBus(channel=g, fd=True) as sender, UdpMulticastBus(channel=g, fd=False) as bus:
        check(bus.protocol == can.CanProtocol.CAN_20, "python-can's fd=False bus is Classical")
        p = start_echo(args.echo, spec, len(classic))
        # An FD frame first: the Classical fcan link ignores it, so the first answer is
        # to the Classical frame behind it.
        sender.send(can.Message(arbitration_id=0x10, is_extended_id=False, is_fd=True, data=[0] * 16))
        sent = collections.Counter()
        for f in classic:
            sent[fingerprint(f)] += 1
            bus.send(f)
            r = recv_not_own(bus, sent, 5)
            check(r is not None, f"classic fcan answered {f}")
            check(r.arbitration_id == f.arbitration_id + 1 and not r.is_fd, f"classic answer {r} to {f}")
            check(r.is_extended_id == f.is_extended_id and bytes(r.data) == bytes(f.data), f"answer {r} to {f}")
        finish(p, f"the fcan echo on {spec}")
    print(f"udp_multicast_peer: {args.family}: Classical: FD ignored, Classical both ways")


def bridge(args):
    """fcan master on port 43113, fcan node on 43114, python-can in between."""
    g = group(args.family)
    seen = {"to node": [], "to master": []}
    stop = threading.Event()
    errors = []
    master_side = UdpMulticastBus(channel=g, port=43113, fd=True)
    node_side = UdpMulticastBus(channel=g, port=43114, fd=True)
    sent = {id(master_side): collections.Counter(), id(node_side): collections.Counter()}
    lock = threading.Lock()

    def pump(src, dst, label):
        while not stop.is_set():
            try:
                m = src.recv(0.1)
            except Exception as e:  # python-can refused a datagram: fcan sent garbage
                errors.append(f"{label}: {e!r}")
                continue
            if m is None:
                continue
            with lock:
                own = sent[id(src)]
                if own[fingerprint(m)] > 0:  # our own forward, looped back
                    own[fingerprint(m)] -= 1
                    continue
                sent[id(dst)][fingerprint(m)] += 1
            seen[label].append(m)
            dst.send(m)

    threads = [
        threading.Thread(target=pump, args=(master_side, node_side, "to node"), daemon=True),
        threading.Thread(target=pump, args=(node_side, master_side, "to master"), daemon=True),
    ]
    for t in threads:
        t.start()
    node_spec = "udp-multicast:port=43114" + (",ipv4" if args.family == "ipv4" else "")
    master_spec = "udp-multicast" if args.family == "ipv6" else "mc=udp-multicast:ipv4"
    node = subprocess.Popen([args.motor_node, "--bus", node_spec, "--node-id", "7", "--motors", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)  # the node's listen window at boot
        # --no-cache: the schema crosses python-can every run.
        out = subprocess.run([args.fcan, "--bus", master_spec, "--no-cache", "--json", "nodes"],
                             capture_output=True, text=True, timeout=60)
    finally:
        node.terminate()
        node_out, _ = node.communicate(timeout=10)
        stop.set()
        for t in threads:
            t.join()
        master_side.shutdown()
        node_side.shutdown()
    print(out.stdout + out.stderr, end="")
    check(out.returncode == 0, f"fcan nodes exited {out.returncode}; node said: {node_out}")
    check(not errors, f"python-can could not decode what fcan sent: {errors}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    check(any(r.get("id") == 7 for r in rows), f"the master found node 7 through python-can: {rows}")
    node7 = next(r for r in rows if r.get("id") == 7)
    check(node7.get("schema") is not None, f"the master read node 7's schema through python-can: {node7}")
    check(node7.get("schema_source") == "downloaded", f"the schema came through python-can: {node7}")
    for label, msgs in seen.items():
        check(len(msgs) > 0, f"python-can carried frames {label}")
        check(all(m.is_extended_id for m in msgs if m.arbitration_id > 0x7FF), f"{label}: wide ids are extended")
        check(all(m.arbitration_id < 2**29 for m in msgs), f"{label}: ids fit 29 bits")
        check(all(m.dlc == len(m.data) and (len(m.data) in FD_LENGTHS if m.is_fd else len(m.data) <= 8)
                  for m in msgs), f"{label}: lengths")
        check(all(m.is_fd or not m.bitrate_switch for m in msgs), f"{label}: BRS only on FD")
        check(any(m.is_extended_id for m in msgs), f"{label}: config plane on extended ids")
        kinds = collections.Counter(
            ("FD+BRS" if m.bitrate_switch else "FD") if m.is_fd else "Classical" for m in msgs)
        print(f"udp_multicast_peer: {label}: {dict(kinds)}, "
              f"{sum(m.is_extended_id for m in msgs)} with extended ids")
    both = seen["to node"] + seen["to master"]
    check(any(m.is_fd and m.bitrate_switch and len(m.data) > 8 for m in both),
          "long CAN FD frames with BRS crossed (the schema read on an FD bus)")
    print(f"udp_multicast_peer: {args.family}: fcan master and node talked only through python-can "
          f"({len(seen['to node'])} frames to the node, {len(seen['to master'])} to the master)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=["ipv6", "ipv4"], default="ipv6")
    ap.add_argument("--echo", required=True, help="fcan-transport's udp_multicast test binary")
    ap.add_argument("--fcan", required=True)
    ap.add_argument("--motor-node", required=True)
    args = ap.parse_args()
    print(f"udp_multicast_peer: python-can {can.__version__}, group {group(args.family)}")
    echo_every_kind(args)
    echo_classic(args)
    bridge(args)
    print(f"udp_multicast_peer: {args.family}: {checks} checks passed")


if __name__ == "__main__":
    main()
