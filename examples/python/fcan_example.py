#!/usr/bin/env python3
"""fcan from Python: talk to the motors behind an fcan daemon (or the demo) over Zenoh.

Needs only the Zenoh Python package:

    pip install eclipse-zenoh

Start the demo (it serves the remote API on tcp/127.0.0.1:7447), then run this:

    cargo run -p fcan-examples --bin demo          # terminal 1
    python3 examples/python/fcan_example.py         # terminal 2

What it does, in order (each step is a function below, a few lines of Zenoh each):

1. lists the nodes (a query on ``fcan/*/node/*``);
2. reads a motor's feedback (a subscriber on ``fcan/<bus>/topic/<node>/<ns>/feedback``)
   and prints each value with its attachment (receive time, boot id, schema digest);
3. sets the velocity loop's gains and reads one back (queries on
   ``fcan/<bus>/param/<node>/<ns>/velocity/kp``);
4. streams a velocity command at ``--rate`` Hz for ``--duration`` seconds (puts on
   ``fcan/<bus>/topic/<node>/<ns>/target``), watching the motor follow, then stops
   streaming: the node's own command timeout stops the motor;
5. calls a service (``reset_encoder``);
6. tries an out-of-range parameter and prints the error the daemon answers.

The key space and every payload are described in docs/remote.md. Nothing here is
generated from a schema: topics, services and parameters are plain keys and JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import deque

import zenoh

# The default endpoint of `fcan serve` and of the demo: loopback only.
DEFAULT_ENDPOINT = "tcp/127.0.0.1:7447"


def open_session(endpoint: str = DEFAULT_ENDPOINT) -> zenoh.Session:
    """Opens a Zenoh session connected to the daemon at `endpoint`.

    Scouting (multicast and gossip) is off and the session listens on nothing: it talks
    to the daemon it was told about and to no one else.
    """
    conf = zenoh.Config.from_json5(
        json.dumps(
            {
                "mode": "peer",
                "connect": {"endpoints": [endpoint]},
                "listen": {"endpoints": []},
                "scouting": {
                    "multicast": {"enabled": False},
                    "gossip": {"enabled": False},
                },
            }
        )
    )
    return zenoh.open(conf)


def printable(text: str) -> str:
    """Text from the bus (node names, messages) with control characters escaped, so a
    node cannot move the cursor or clear the terminal."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)


class RemoteError(Exception):
    """An error reply from the daemon: `kind` is one of unknown_name, bad_value,
    not_running, timeout, refused, busy, internal; `message` says why."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class Fcan:
    """A thin helper over one Zenoh session and one bus: the key space of
    docs/remote.md as methods. Copy what you need; each method is a few lines."""

    def __init__(self, session: zenoh.Session, bus: str, timeout: float = 5.0):
        self.session = session
        self.bus = bus
        self.timeout = timeout

    def key(self, kind: str, name: str) -> str:
        """`fcan/<bus>/<kind>/<name>`; `name` is `<node>/<ns>/<topic|service|param>`."""
        return f"fcan/{self.bus}/{kind}/{name}"

    def _query(self, key: str, payload=None) -> object:
        """One GET that expects one answer: the JSON reply, or RemoteError."""
        args = {"timeout": self.timeout}
        if payload is not None:
            args["payload"] = json.dumps(payload)
        for reply in self.session.get(key, **args):
            if reply.ok is not None:
                return json.loads(reply.ok.payload.to_string())
            text = reply.err.payload.to_string()
            try:
                err = json.loads(text)
            except ValueError:
                err = {"error": "internal", "message": text}
            raise RemoteError(err.get("error", "?"), err.get("message", ""))
        raise RemoteError("timeout", f"no answer on {key} (is the daemon running?)")

    def param_get(self, param: str) -> object:
        """Reads a parameter from the node: `param` is `<node>/<ns>/<name>`."""
        return self._query(self.key("param", param))["value"]

    def param_set(self, param: str, value) -> object:
        """Writes a parameter (checked by the daemon against the schema, then by the node);
        returns the value the node holds then, read back from it."""
        return self._query(self.key("param", param), value)["value"]

    def call(self, service: str, request: dict) -> object:
        """Calls a service and returns its response."""
        return self._query(self.key("service", service), request)

    def status(self) -> dict:
        """The bus status: nodes, load, counters."""
        return self._query(f"fcan/{self.bus}/status")


def list_nodes(session: zenoh.Session, timeout: float = 5.0) -> list[tuple[str, dict]]:
    """Every node of every bus every reachable daemon serves: (bus, node info) pairs."""
    nodes = []
    for reply in session.get("fcan/*/node/*", timeout=timeout):
        if reply.ok is not None:
            bus = str(reply.ok.key_expr).split("/")[1]
            nodes.append((bus, json.loads(reply.ok.payload.to_string())))
    return sorted(nodes, key=lambda n: (n[0], n[1]["id"]))


class Topic:
    """Keeps the latest samples of an s2m topic as (value, attachment) pairs.

    The subscriber runs a callback on Zenoh's thread; a bounded deque keeps the newest
    `keep` samples, so a slow reader never makes memory grow.
    """

    def __init__(self, session: zenoh.Session, key: str, keep: int = 1000):
        self.samples: deque = deque(maxlen=keep)
        self.arrived = threading.Condition()
        self.sub = session.declare_subscriber(key, self._on_sample)

    def _on_sample(self, sample: zenoh.Sample) -> None:
        value = json.loads(sample.payload.to_string())
        att = json.loads(sample.attachment.to_string()) if sample.attachment else None
        with self.arrived:
            self.samples.append((value, att))
            self.arrived.notify_all()

    def wait(self, n: int = 1, timeout: float = 5.0) -> list:
        """Waits until at least `n` samples are held; returns them (maybe fewer)."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.samples) < n and time.monotonic() < deadline:
                self.arrived.wait(deadline - time.monotonic())
            return list(self.samples)

    def take(self) -> list:
        """Returns and forgets the samples held."""
        with self.arrived:
            out = list(self.samples)
            self.samples.clear()
            return out

    def close(self) -> None:
        self.sub.undeclare()


def stream_command(
    session: zenoh.Session, key: str, value: dict, rate_hz: float, seconds: float
) -> int:
    """Puts `value` on the m2s topic `key` at `rate_hz` for `seconds`; returns how many.

    A motor acts on a command only while it is fresh (its `command_timeout_ms`, 100 ms
    by default): stop putting and it stops by itself.
    """
    publisher = session.declare_publisher(key)
    payload = json.dumps(value)
    period = 1.0 / rate_hz
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < seconds:
        publisher.put(payload)
        sent += 1
        # Sleep to the next slot of the schedule, not `period` after this put.
        time.sleep(max(0.0, start + sent * period - time.monotonic()))
    publisher.undeclare()
    return sent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connect", default=DEFAULT_ENDPOINT, help="the daemon's endpoint")
    p.add_argument("--bus", help="bus name (default: the bus the node is on)")
    p.add_argument("--node", default="motor_driver2", help="a motor driver node")
    p.add_argument("--ns", default="motor0", help="the motor's block")
    p.add_argument("--velocity", type=float, default=5.0, help="rev/s to command")
    p.add_argument("--rate", type=float, default=100.0, help="command rate, Hz")
    p.add_argument("--duration", type=float, default=1.5, help="seconds of commands")
    args = p.parse_args(argv)

    session = open_session(args.connect)
    try:
        # 1. Nodes: one query reaches every daemon and every bus.
        nodes = list_nodes(session)
        if not nodes:
            print(f"no fcan daemon answered at {args.connect}", file=sys.stderr)
            return 1
        print("nodes:")
        for bus, n in nodes:
            name, phase = printable(f"{bus}/{n['name']}"), printable(n["phase"])
            print(f"  {name:<20} id {n['id']:<3} {phase:<10} boot {n['boot_id']:#010x}")
        bus = args.bus or next((b for b, n in nodes if n["name"] == args.node), None)
        if bus is None:
            print(f"no node named {args.node}; try --node", file=sys.stderr)
            return 1
        fcan = Fcan(session, bus)
        motor = f"{args.node}/{args.ns}"

        # 2. Feedback: JSON values, with the daemon's receive time in the attachment.
        feedback = Topic(session, fcan.key("topic", f"{motor}/feedback"))
        for value, att in feedback.wait(3)[:3]:
            print(f"feedback {value}  t_us={att['t_us']} boot_id={att['boot_id']:#010x}")

        # 3. Parameters: GET with a value writes, GET without reads.
        fcan.param_set(f"{motor}/velocity/kp", 0.05)
        fcan.param_set(f"{motor}/velocity/ki", 1.0)
        print(f"velocity/kp is now {fcan.param_get(f'{motor}/velocity/kp')}")

        # 4. Stream a velocity command; the motor follows, then stops by itself.
        feedback.take()
        target = fcan.key("topic", f"{motor}/target")
        sent = stream_command(
            session, target, {"type": 1, "value": args.velocity}, args.rate, args.duration
        )
        during = feedback.take()
        top = max((v["velocity"] for v, _ in during), default=float("nan"))
        print(f"sent {sent} commands of {args.velocity} rev/s; motor reached {top:.2f} rev/s")
        time.sleep(0.3)
        last = feedback.take()[-1][0]
        print(f"0.3 s after the last command: ready={last['ready']} velocity={last['velocity']:.2f}")

        # 5. A service call: make the encoder read 0 here.
        print("reset_encoder:", fcan.call(f"{motor}/reset_encoder", {"offset": False, "value": 0.0}))

        # 6. An out-of-range value is refused, with the bound in the message.
        try:
            fcan.param_set(f"{motor}/velocity/kp", 500.0)
            print("velocity/kp 500 was accepted?!", file=sys.stderr)
            return 1
        except RemoteError as e:
            print(f"velocity/kp 500 refused: {e.kind}: {printable(e.message)}")
        feedback.close()
        return 0
    except RemoteError as e:
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1
    finally:
        session.close()


if __name__ == "__main__":
    sys.exit(main())
