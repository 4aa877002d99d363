#!/usr/bin/env python3
"""Writes the engine_frames seed programs (see fuzz_targets/engine_frames.rs for the ops).

Each boots nodes through announce, schema download (or cache), provisioning and START by
answering the engine's requests, then makes user requests to every block and answers them,
publishes, sends data frames and heartbeats, lets time pass, and reboots a node. The
update_*.bin programs update a node's firmware (see `update` below).

Run it after changing the harness's op encoding, and check with
`FCAN_FUZZ_TRACE=1 <target dir>/engine_frames SEED` that each still gets where it says.
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


# Firmware updates. libFuzzer, from the seeds above alone, took minutes to reach an
# update that moves at all. Node id 1 (node byte 0) announces the I/O board (blob 1) with
# the update capability (flags bit 6; bits 4 and 5: FD and BRS), its blob already cached,
# and is provisioned; then an update of it starts with the I/O board's blob as the image
# (op 15 then 249: flags 0x11, the whole bus, `window + 1` chunks in flight, 3 retries).
# Answers with v 0x20 accept commands and the OFFER (which reads one more byte: the chunk
# size - 1); with v 0x00 they acknowledge DATA and answer COMMIT "Verified". The node then
# reboots (boot id 0x2222) announcing the image's schema: UpdateDone Ok.
def update_prog(setup, caps, chunk, window, rounds, abort=False):
    announce = lambda boot: [6, 0, 1, caps, boot, 0, 0]
    ans = lambda v=0x20: [8, 0, 0, v]
    provision = lambda n: ([2] + ans() + [0, 20]) * n           # poll, answer, 2 ms
    transfer = lambda n: ([2] + ans(0x00) + [0, 10]) * n        # poll, answer, 1 ms
    start = [15, 249, 0, 0x11, 255, window, 3]
    p = [setup] + announce(0) + provision(rounds)
    if abort:
        # The same image asked twice (the second joins), aborted after five chunks
        # (op 15 then 254: UpdateDone Aborted), then started again.
        p += start + start + [2] + ans() + [chunk - 1] + transfer(5)
        p += [15, 254, 0, 2] + ans(0x00)
    p += start + [2] + ans() + [chunk - 1] + transfer(200)
    p += announce(1) + provision(60)
    return bytes(p)


# One chunk in flight (window 0 + 1): the node answers its newest request, which is then
# the chunk it waits for.
for name, prog_bytes in [
    ("update_fd.bin", update_prog(4 | 8, 0x70, chunk=60, window=0, rounds=150)),
    ("update_classic.bin", update_prog(1 | 4 | 8, 0x40, chunk=6, window=0, rounds=200)),
    ("update_abort_fd.bin", update_prog(4 | 8, 0x70, chunk=60, window=0, rounds=150, abort=True)),
]:
    with open(os.path.join(here, name), "wb") as f:
        f.write(prog_bytes)
