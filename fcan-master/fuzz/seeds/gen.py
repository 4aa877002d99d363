#!/usr/bin/env python3
"""Writes the engine_frames seed programs (see fuzz_targets/engine_frames.rs for the ops).

Each boots nodes through announce, schema download (or cache), provisioning and START by
answering the engine's requests, then makes user requests to every block and answers them,
publishes, sends data frames and heartbeats, lets time pass, and reboots a node.
"""
import os

def prog(setup, nodes):
    p = [setup]
    for nb, which in nodes:
        # announce: node, blob, flags (caps FD|BRS, true counts/hash/len), boot 0x1111,
        # state Unprovisioned, transfer 0
        p += [6, nb, which, 0x30, 0, 0, 0]
    ans = lambda nb: [8, nb, 0, 0x20]            # answer the newest request correctly
    for _ in range(60):
        for nb, _ in nodes:
            p += ans(nb)
    p += [2]                                      # poll
    for nb, _ in nodes:
        for blk in range(6):
            for prm in range(2):
                p += [13, nb, blk, prm, 0, 0, 0, 0] + ans(nb)          # set_param, value 0s
                p += [13, nb, blk, prm, 1] + ans(nb) + [0, 7]          # get_param
            p += [12, nb, blk, 0, 0, 0, 0] + ans(nb) + [0, 3]          # call_service 0
            p += [14, nb, blk, 0, 0, 0, 1]                             # publish topic 0
            p += [15, 1, nb, blk, 0, 2]                                # data frame
        p += [11, nb, 1, 0, 0]                                         # heartbeat, right boot
    p += [0, 200, 2, 1, 0x10, 0x27, 2]            # 20 ms, poll, 10 s, poll
    p += [6, nodes[0][0], nodes[0][1], 0x30, 1, 0, 0]                  # reboot (boot 0x2222)
    for _ in range(60):
        p += ans(nodes[0][0])
    p += [1, 0xff, 0xff, 2, 1, 0xff, 0xff, 2]
    return bytes(p)

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_frames")
for name, setup, nodes in [
    ("fd_two_nodes.bin", 0, [(0, 0), (1, 1)]),          # FD+BRS link, download both
    ("classic_cached.bin", 1 | 4 | 8, [(0, 0), (1, 1)]),  # classic link, both in the cache
    ("fd_nobrs_one.bin", 2 | 4, [(2, 1)]),              # FD without BRS, node 3
]:
    with open(os.path.join(here, name), "wb") as f:
        f.write(prog(setup, nodes))


# The reproducer of the 8-bit transfer-id keying bug of pending calls (docs/fuzzing.md),
# fixed since: one motor driver booted, then 300 calls to one service with no answer (44
# never ended before the fix).
p = [0, 6, 0, 0, 0x30, 0, 0, 0] + [8, 0, 0, 0x20] * 60
p += [15, 3, 0, 0, 0] + list((300).to_bytes(2, "little")) + [0, 0, 0]
with open(os.path.join(here, "calls_300.bin"), "wb") as f:
    f.write(bytes(p))
