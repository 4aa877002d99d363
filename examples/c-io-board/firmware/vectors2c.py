#!/usr/bin/env python3
"""Converts the project's I/O-board conformance transcripts into C arrays for the
firmware self-test (selftest.c replays them on the target).

    vectors2c.py CONFORMANCE_DIR OUT.c

Reads every CONFORMANCE_DIR/*.txt whose header says `firmware io_board` (the boot
transcripts and the node-only ones; format: conformance/README.md) and writes OUT.c,
which defines the tables declared in vectors.h. Parsing follows tests/tests/conformance.rs:
a comment is a line starting with `#` or anything after whitespace + `#`; a frame is
`ID#HEX` (Classical) or `ID##<flags>HEX` (FD, flags bit 0 = BRS); a 3-digit ID is
standard, a longer one extended. `publish` lines are the master's (not replayed against
a node) and are dropped; `M`, `N` and `topic` lines are kept, in time order, in file
order within a time (the Rust test's BTreeMap of time -> events).

Refuses (exit 1) an event that is not on the tick grid or past end_us (the Rust replay
would skip it silently), an illegal frame length, and a directory without io_board
transcripts.
"""
import os
import sys

FD_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
KIND = {"M": "VEC_MASTER", "N": "VEC_NODE", "topic": "VEC_TOPIC"}


def fail(msg):
    sys.exit("vectors2c.py: " + msg)


def strip_comment(line):
    t = line.lstrip()
    if t.startswith("#"):
        return ""
    cut = [i for i in (line.find(" #"), line.find("\t#")) if i >= 0]
    if cut:
        line = line[: min(cut)]
    return line.rstrip()


def unhex(s, where):
    if s == "-":
        return b""
    if len(s) % 2:
        fail(f"{where}: odd hex {s}")
    try:
        return bytes.fromhex(s)
    except ValueError:
        fail(f"{where}: bad hex {s}")


def parse_frame(text, where):
    """-> (id, extended, fd, brs, data)"""
    if "##" in text:
        ident, rest = text.split("##", 1)
        if not rest:
            fail(f"{where}: FD frame without its flags digit: {text}")
        flags = int(rest[0], 16)
        fd, brs, data = True, bool(flags & 1), unhex(rest[1:], where)
        if len(data) not in FD_LENGTHS:
            fail(f"{where}: {len(data)} bytes is not an FD length: {text}")
    elif "#" in text:
        ident, rest = text.split("#", 1)
        fd, brs, data = False, False, unhex(rest, where)
        if len(data) > 8:
            fail(f"{where}: a Classical frame of {len(data)} bytes: {text}")
    else:
        fail(f"{where}: not a frame: {text}")
    raw = int(ident, 16)
    extended = len(ident) != 3
    if raw >= (1 << 29 if extended else 1 << 11):
        fail(f"{where}: identifier out of range: {text}")
    return raw, extended, fd, brs, data


def parse_u32(s):
    return int(s, 16) if s.startswith("0x") else int(s)


def parse(path):
    name = os.path.basename(path)
    header, events = {}, []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            w = strip_comment(raw.rstrip("\n")).split()
            if not w:
                continue
            where = f"{name}:{n}"
            if not w[0].isdigit():
                header[w[0]] = " ".join(w[1:])
                continue
            t = int(w[0])
            if w[1] in ("M", "N"):
                events.append((t, w[1], parse_frame(w[2], where), n))
            elif w[1] == "topic":
                block, topic = int(w[2]), int(w[3])
                events.append((t, "topic", (block, topic, unhex(w[4], where)), n))
            elif w[1] == "publish":
                pass
            else:
                fail(f"{where}: unknown event {w[1]}")
    return name, header, events


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    vectors = []
    for fname in sorted(os.listdir(src)):
        if not fname.endswith(".txt"):
            continue
        name, h, events = parse(os.path.join(src, fname))
        if h.get("firmware") != "io_board":
            continue
        for key in ("node_id", "boot_id", "fd_capable", "wired", "tick_us", "end_us"):
            if key not in h:
                fail(f"{name}: header needs `{key}`")
        tick, end = int(h["tick_us"]), int(h["end_us"])
        if tick <= 0 or end >= 1 << 32:
            fail(f"{name}: tick_us {tick}, end_us {end}")
        for t, _, _, line in events:
            if t % tick or t > end:
                fail(f"{name}:{line}: time {t} is not a tick of 0..={end} step {tick}")
        events.sort(key=lambda e: e[0])  # stable: file order within a time
        wired = [int(x) for x in h["wired"].split()]
        if len(wired) != 3:
            fail(f"{name}: the I/O board has 3 instance arrays, `wired` has {len(wired)}")
        vectors.append((name, h, wired, events))
    if not vectors:
        fail(f"no io_board transcript in {src}")

    pool = bytearray()
    ev_rows, vec_rows = [], []
    for name, h, wired, events in vectors:
        first = len(ev_rows)
        for t, kind, body, line in events:
            if kind == "topic":
                block, topic, data = body
                ident, flags = (block << 8) | topic, "0"
            else:
                ident, extended, fd, brs, data = body
                bits = []
                if extended:
                    bits.append("FCAN_FRAME_EXTENDED")
                if fd:
                    bits.append("FCAN_FRAME_FD")
                if brs:
                    bits.append("FCAN_FRAME_BRS")
                flags = " | ".join(bits) or "0"
            ev_rows.append(
                f"    {{{t}u, 0x{ident:08X}u, {len(pool)}u, {line}u, {len(data)}u, "
                f"{flags}, {KIND[kind]}}},"
            )
            pool += data
        controller = "FCAN_CONTROLLER_FD" if h["fd_capable"] == "true" else "FCAN_CONTROLLER_CLASSIC"
        vec_rows.append(
            f'    {{"{name}", {first}u, {len(ev_rows) - first}u, 0x{parse_u32(h["boot_id"]):08X}u, '
            f'{int(h["tick_us"])}u, {int(h["end_us"])}u, {int(h["node_id"])}u, {controller}, '
            f'{{{", ".join(str(x) for x in wired)}}}}},'
        )

    with open(out, "w", encoding="utf-8") as f:
        f.write("/* Generated by vectors2c.py from the conformance transcripts (firmware io_board). "
                "Do not edit. */\n")
        f.write('#include "vectors.h"\n\n')
        f.write(f"const uint32_t vec_count = {len(vec_rows)}u;\n\n")
        f.write("const vec_vector_t vec_vectors[] = {\n" + "\n".join(vec_rows) + "\n};\n\n")
        f.write("const vec_event_t vec_events[] = {\n" + "\n".join(ev_rows) + "\n};\n\n")
        f.write("const uint8_t vec_bytes[] = {\n")
        for i in range(0, len(pool), 16):
            f.write("    " + " ".join(f"0x{b:02X}," for b in pool[i : i + 16]) + "\n")
        if not pool:
            f.write("    0\n")
        f.write("};\n")
    print(f"vectors2c.py: {len(vec_rows)} vectors, {len(ev_rows)} events, "
          f"{len(pool)} bytes of payload -> {out}")


if __name__ == "__main__":
    main()
