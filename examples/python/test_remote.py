#!/usr/bin/env python3
"""The peer test: checks an fcan daemon (or the demo) from a Zenoh client no one here
wrote (eclipse-zenoh from PyPI), through the key space of docs/remote.md only.

    python3 examples/python/test_remote.py [--connect tcp/127.0.0.1:7447]
        [--node motor_driver2] [--ns motor0]

The motor it uses must be one nobody else commands (the demo commands motor_driver1's
motor0 and motor1; motor_driver2 is left alone). Every check prints one line; the last
line is `N passed, M failed`. The exit status is 0 only if every check passed and there
was at least one. .ci/python-peer.sh runs it against the demo.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import struct
import sys
import time
import traceback

import zenoh

import fcan_example as fx


class Checks:
    """Counts checks; a failed check is reported and the run goes on."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: object = "") -> bool:
        if ok:
            self.passed += 1
            print(f"ok   {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}: {fx.printable(str(detail))}")
        return ok


def find_key(obj, name):
    """The first value of key `name` anywhere in a JSON tree, or None."""
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for c in children:
        found = find_key(c, name)
        if found is not None:
            return found
    return None


def wait_for_node(session, name: str, seconds: float):
    """Polls `fcan/*/node/*` until node `name` is running (the daemon may still be
    starting); returns (bus, info) or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for bus, info in fx.list_nodes(session, timeout=2.0):
            if info.get("name") == name and info.get("phase") == "running":
                return bus, info
        time.sleep(0.2)
    return None


def run(args, c: Checks) -> None:
    session = fx.open_session(args.connect)
    try:
        found = wait_for_node(session, args.node, args.wait)
        if not c.check(found is not None, f"node {args.node} is listed and running", "not found"):
            return
        bus, info = found
        fcan = fx.Fcan(session, bus)
        motor = f"{args.node}/{args.ns}"
        nodes = fx.list_nodes(session)
        c.check(
            all(
                isinstance(n.get("id"), int)
                and isinstance(n.get("boot_id"), int)
                and re.fullmatch(r"[0-9a-f]{64}", n.get("schema") or "")
                for _, n in nodes
            ),
            f"every node info has an id, a boot id and a schema digest ({len(nodes)} nodes)",
            nodes,
        )

        # Liveliness: one token per running node.
        alive = [
            str(r.ok.key_expr)
            for r in session.liveliness().get(f"fcan/{bus}/alive/*", timeout=5.0)
            if r.ok is not None
        ]
        c.check(
            f"fcan/{bus}/alive/{args.node}" in alive, "the node has a liveliness token", alive
        )

        # The schema blob, by its SHA-256: the bytes hash to the key.
        digest = info["schema"]
        blob = None
        for r in session.get(f"fcan/{bus}/schema/{digest}", timeout=5.0):
            if r.ok is not None:
                blob = r.ok.payload.to_bytes()
        c.check(
            blob is not None and hashlib.sha256(blob).hexdigest() == digest,
            "the schema blob hashes to its key",
            "no blob" if blob is None else hashlib.sha256(blob).hexdigest(),
        )

        # Feedback: well-formed values, attachments that match the node info.
        feedback = fx.Topic(session, fcan.key("topic", f"{motor}/feedback"))
        samples = feedback.wait(10, timeout=5.0)
        c.check(len(samples) >= 10, "feedback arrives (10 samples within 5 s)", len(samples))
        c.check(
            all(
                isinstance(v.get("ready"), bool)
                and all(isinstance(v.get(f), (int, float)) for f in ("position", "velocity", "current"))
                for v, _ in samples
            ),
            "every feedback value has ready (bool) and position, velocity, current (numbers)",
            samples[:2],
        )
        atts = [a for _, a in samples]
        c.check(
            all(
                a is not None
                and a.get("boot_id") == info["boot_id"]
                and a.get("digest") == digest
                and isinstance(a.get("t_us"), int)
                for a in atts
            ),
            "every attachment carries t_us, the node's boot id and its schema digest",
            atts[:2],
        )
        # A node's samples a frame at a time: objects of topic -> value, several per put.
        grouped = fx.Topic(session, f"fcan/{bus}/samples/{args.node}")
        groups = grouped.wait(20, timeout=5.0)
        grouped.sub.undeclare()
        members = [(t, v) for g, _ in groups for t, v in g.items()]
        c.check(
            len(groups) >= 20
            and all(t.startswith(f"/{args.node}/") for t, _ in members)
            and any(t == f"/{motor}/feedback" for t, _ in members)
            and all(isinstance(v, dict) and "ready" in v for t, v in members if t.endswith("/feedback")),
            "samples/<node> puts objects of topic -> value of that node, the feedback among them",
            groups[:1],
        )
        c.check(
            len(members) > len(groups) and all(a and a.get("boot_id") == info["boot_id"] for _, a in groups),
            "a samples/<node> put carries several samples of one frame, with the attachment",
            f"{len(members)} samples in {len(groups)} puts",
        )
        times = [a["t_us"] for a in atts if a and isinstance(a.get("t_us"), int)]
        c.check(
            # Two samples read in one batch may share a receive time; never backwards.
            len(times) >= 2 and all(b >= a for a, b in zip(times, times[1:])) and times[-1] > times[0],
            "t_us goes forward from sample to sample",
            times[:10],
        )

        # Parameters: set, read back; the value is an f32 on the node.
        events = fx.Topic(session, f"fcan/{bus}/events", keep=100)
        echoed = fcan.param_set(f"{motor}/velocity/kp", 0.05)
        c.check(math.isclose(echoed, 0.05, rel_tol=1e-6), "param set echoes the value", echoed)
        kp_name = f"{motor}.velocity.kp".replace("/", ".")

        def kp_changed():
            return [
                e for e, _ in events.wait(1, timeout=0.2)
                if e.get("kind") == "param_changed" and e.get("name") == kp_name
            ]

        deadline = time.monotonic() + 5.0
        while not kp_changed() and time.monotonic() < deadline:
            time.sleep(0.05)
        changed = kp_changed()
        c.check(
            len(changed) == 1 and changed[0].get("node") == info["id"]
            and math.isclose(changed[0].get("value", 0), 0.05, rel_tol=1e-6),
            "fcan/<bus>/events: the write as one param_changed event (node, name, value)",
            changed or [e for e, _ in events.take()][:5],
        )
        events.close()
        fcan.param_set(f"{motor}/velocity/ki", 1.0)
        got = fcan.param_get(f"{motor}/velocity/kp")
        c.check(math.isclose(got, 0.05, rel_tol=1e-6), "param get reads back what was set", got)

        # Out of range: refused with the bound, and the node keeps its value.
        try:
            fcan.param_set(f"{motor}/velocity/kp", 500.0)
            c.check(False, "velocity/kp 500 is refused", "accepted")
        except fx.RemoteError as e:
            c.check(
                e.kind in ("bad_value", "refused") and "100" in e.message,
                "velocity/kp 500 is refused, the error names the bound 100",
                f"{e.kind}: {e.message}",
            )
        got = fcan.param_get(f"{motor}/velocity/kp")
        c.check(math.isclose(got, 0.05, rel_tol=1e-6), "the refused value was not applied", got)
        try:
            fcan.param_get(f"{motor}/no/such/param")
            c.check(False, "an unknown parameter is an error", "answered")
        except fx.RemoteError as e:
            c.check(e.kind == "unknown_name", "an unknown parameter is unknown_name", e.kind)

        # Firmware update (docs/remote.md): the payloads built here from the page alone.
        # The example boards take no updates: the daemon parses what was sent and the
        # master refuses it for the capability; a manifest that lies is a bad value.
        c.check(info.get("firmware", "absent") is None, "a board without updates reports no firmware version", info)
        update_key = f"fcan/{bus}/update/{args.node}"

        def update_reply(payload: bytes):
            for r in session.get(update_key, payload=payload, timeout=10.0):
                if r.ok is not None:
                    return ("ok", r.ok.payload.to_string())
                err = json.loads(r.err.payload.to_string())
                return (err.get("error"), err.get("message", ""))
            return ("no answer", "")

        def framed(opts: dict, file: bytes = b"") -> bytes:
            o = json.dumps(opts).encode()
            return struct.pack("<I", len(o)) + o + file

        image = bytes((i * 31 + 7) % 256 for i in range(1000))
        manifest = {
            "node": "motor_driver{i}",
            "version": "9.9.9",
            "schema": digest,
            "sha256": hashlib.sha256(image).hexdigest(),
            "size": len(image),
        }

        def image_file(m: dict) -> bytes:
            text = json.dumps(m).encode()
            return b"FCANIMG1" + struct.pack("<I", len(text)) + text + image

        kind, msg = update_reply(framed({"abort": True}))
        c.check(kind == "refused" and "firmware updates" in msg, "an update abort to a board without updates is refused for the capability", f"{kind}: {msg}")
        kind, msg = update_reply(framed({"share": 0.25}, image_file(manifest)))
        c.check(kind == "refused" and "firmware updates" in msg, "an image file written here is parsed, then refused for the capability", f"{kind}: {msg}")
        kind, msg = update_reply(framed({"share": 0.25}, image_file({**manifest, "sha256": "00" * 32})))
        c.check(kind == "bad_value" and "SHA-256" in msg, "a manifest whose SHA-256 does not match its bytes is a bad value", f"{kind}: {msg}")

        # Streamed commands: the motor follows while they flow and stops when they cease.
        feedback.take()
        target = fcan.key("topic", f"{motor}/target")
        sent = fx.stream_command(session, target, {"type": 1, "value": 5.0}, 100.0, 1.5)
        during = [v for v, _ in feedback.take()]
        c.check(
            any(v["ready"] for v in during),
            f"the motor is ready while commands flow ({sent} sent)",
            [v["ready"] for v in during][-10:],
        )
        top = max((v["velocity"] for v in during), default=float("nan"))
        c.check(top > 2.5, "the commanded velocity (5 rev/s) shows up in feedback", top)
        time.sleep(0.5)
        after = [v for v, _ in feedback.wait(1, timeout=2.0)]
        c.check(
            bool(after) and not after[-1]["ready"],
            "0.5 s after the last command the node's command timeout has stopped it",
            after[-1:] or "no sample",
        )

        # A service call, and its effect: the encoder now reads 42 where the motor is.
        resp = fcan.call(f"{motor}/reset_encoder", {"offset": False, "value": 42.0})
        c.check(resp == {"success": True}, "reset_encoder answers success", resp)
        feedback.take()
        late = [v["position"] for v, _ in feedback.wait(5, timeout=3.0)]
        c.check(
            bool(late) and all(abs(p - 42.0) < 0.1 for p in late),
            "after reset_encoder the position reads 42",
            late[:5],
        )
        try:
            fcan.call(f"{motor}/reset_encoder", {"offset": "yes"})
            c.check(False, "a malformed request is refused", "answered")
        except fx.RemoteError as e:
            c.check(e.kind == "bad_value", "a malformed service request is bad_value", e.kind)

        # The registry describes the node's entities as its schema declares them.
        reg = fcan._query(f"fcan/{bus}/registry")
        topic = next((t for t in reg.get("topics", []) if t.get("name") == f"/{motor}/feedback"), None)
        c.check(
            topic is not None and topic.get("dir") == "s2m" and topic.get("period_us") == 5000
            and [f.get("name") for f in topic.get("fields", [])] == ["ready", "position", "velocity", "current"],
            "the registry lists feedback: s2m, every 5 ms, its four fields",
            topic,
        )
        kp = next(
            (p for p in reg.get("params", []) if p.get("name") == f"{args.node}.{args.ns}.velocity.kp"), None
        )
        c.check(
            kp is not None and kp.get("type") == "f32" and kp.get("min") == 0.0 and kp.get("max") == 100.0,
            "the registry lists velocity.kp: f32, bounds 0 and 100",
            kp,
        )

        # The status is also put every second.
        status_puts = fx.Topic(session, f"fcan/{bus}/status", keep=4)
        got = status_puts.wait(1, timeout=5.0)
        status_puts.close()
        c.check(
            bool(got) and got[0][0].get("bus") == bus and isinstance(got[0][0].get("nodes"), list),
            "the status is put periodically (one within 5 s), naming its bus and nodes",
            got[:1],
        )

        # A bad put to an m2s topic has no reply: the status counts it.
        before = find_key(fcan.status(), "rejected_puts")
        c.check(isinstance(before, int), "status has rejected_puts", before)
        session.put(target, json.dumps({"type": "fast"}))
        counted = None
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            counted = find_key(fcan.status(), "rejected_puts")
            if isinstance(before, int) and isinstance(counted, int) and counted > before:
                break
            time.sleep(0.1)
        c.check(
            isinstance(before, int) and counted == before + 1,
            "a bad put is counted in status.rejected_puts",
            f"{before} -> {counted}",
        )

        # A batch of commands, one put on fcan/<bus>/publish: streamed, the motor
        # follows; with one bad item the whole batch is refused, counted once per put.
        batch_key = f"fcan/{bus}/publish"
        good = {f"/{motor}/target": {"type": 1, "value": 5.0}}
        feedback.take()
        sent = fx.stream_command(session, batch_key, good, 100.0, 1.0)
        top = max((v["velocity"] for v, _ in feedback.take()), default=float("nan"))
        c.check(top > 2.5, f"streamed batches command the motor ({sent} sent)", top)
        time.sleep(0.5)
        before = find_key(fcan.status(), "rejected_puts")
        bad = dict(good)
        bad[f"/{motor}/targt"] = {"type": 1, "value": 5.0}
        feedback.take()
        sent = fx.stream_command(session, batch_key, bad, 100.0, 0.5)
        during = [v for v, _ in feedback.take()]
        c.check(
            bool(during) and not any(v["ready"] for v in during),
            "a batch with one bad item commands nothing (the motor stays stopped)",
            [v["ready"] for v in during][-10:],
        )
        counted = None
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            counted = find_key(fcan.status(), "rejected_puts")
            if isinstance(before, int) and isinstance(counted, int) and counted >= before + sent:
                break
            time.sleep(0.1)
        c.check(
            isinstance(before, int) and counted == before + sent,
            f"each refused batch is counted once in status.rejected_puts ({sent} sent)",
            f"{before} -> {counted}",
        )
        feedback.close()

        # The example a user copies runs too, start to end.
        rc = fx.main(["--connect", args.connect, "--node", args.node, "--ns", args.ns])
        c.check(rc == 0, "fcan_example.py runs to the end", rc)
    finally:
        session.close()


def main() -> int:
    p = argparse.ArgumentParser(description="fcan remote API peer test")
    p.add_argument("--connect", default=fx.DEFAULT_ENDPOINT)
    p.add_argument("--node", default="motor_driver2")
    p.add_argument("--ns", default="motor0")
    p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the node")
    args = p.parse_args()
    c = Checks()
    try:
        run(args, c)
    except Exception:  # a crash is a failure, reported with the checks so far
        traceback.print_exc()
        c.check(False, "the test ran without an exception", "see the traceback")
    print(f"{c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 and c.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
