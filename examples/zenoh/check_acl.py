#!/usr/bin/env python3
"""Checks what the example TLS + ACL config (serve-tls-acl.json5) lets through, on
loopback: a throw-away CA and certificates (openssl), a Zenoh router with that config
standing in for the daemon (the ACL is Zenoh's, whoever declares the queryables), and
three clients built from client-tls.json5 — an operator (CN=fcan-operator), a viewer
(CN=fcan-viewer), and a plain-TCP local program.

    python3 examples/zenoh/check_acl.py      # needs eclipse-zenoh and openssl

Prints one line per check and `N passed, M failed`; exits non-zero on any failure.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import zenoh

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(d: str) -> None:
    """A CA, and certificates for the daemon (localhost) and two clients."""
    def run(*args):
        subprocess.run(args, cwd=d, check=True, capture_output=True)

    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
        "-out", "ca.crt", "-days", "1", "-subj", "/CN=fcan-test-ca")
    for name, cn in [("daemon", "localhost"), ("operator", "fcan-operator"), ("viewer", "fcan-viewer")]:
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")


def main() -> int:
    if os.environ.get("RUST_LOG"):
        zenoh.try_init_log_from_env()
    passed = failed = 0

    def check(ok: bool, what: str, detail="") -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {what}")
        else:
            failed += 1
            print(f"FAIL {what}: {detail}")

    with tempfile.TemporaryDirectory() as d:
        make_certs(d)
        tcp, tls = free_port(), free_port()
        # The example config as written, on free loopback ports and these certificates.
        conf = zenoh.Config.from_file(os.path.join(HERE, "serve-tls-acl.json5"))
        conf.insert_json5("listen/endpoints", json.dumps([f"tcp/127.0.0.1:{tcp}", f"tls/127.0.0.1:{tls}"]))
        for k, f in [("root_ca_certificate", "ca.crt"), ("listen_private_key", "daemon.key"),
                     ("listen_certificate", "daemon.crt")]:
            conf.insert_json5(f"transport/link/tls/{k}", json.dumps(os.path.join(d, f)))
        daemon = zenoh.open(conf)
        puts = []
        qs = [
            daemon.declare_queryable("fcan/sim/param/**", lambda q: q.reply(q.key_expr, '{"value": 1}')),
            daemon.declare_queryable("fcan/sim/node/md1", lambda q: q.reply("fcan/sim/node/md1", '{"id": 1}')),
            daemon.declare_subscriber("fcan/sim/topic/*/*/target", lambda s: puts.append(s.payload.to_string())),
        ]
        feedback = daemon.declare_publisher("fcan/sim/topic/md1/motor0/feedback")

        def client(who):
            if who == "local":
                c = zenoh.Config.from_json5(json.dumps({
                    "mode": "peer", "connect": {"endpoints": [f"tcp/127.0.0.1:{tcp}"]},
                    "listen": {"endpoints": []},
                    "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": False}}}))
            else:
                c = zenoh.Config.from_file(os.path.join(HERE, "client-tls.json5"))
                c.insert_json5("connect/endpoints", json.dumps([f"tls/localhost:{tls}"]))
                for k, f in [("root_ca_certificate", "ca.crt"), ("connect_private_key", f"{who}.key"),
                             ("connect_certificate", f"{who}.crt")]:
                    c.insert_json5(f"transport/link/tls/{k}", json.dumps(os.path.join(d, f)))
            return zenoh.open(c)

        def answers(session, key, payload=None):
            return [r.ok.payload.to_string() for r in session.get(key, payload=payload, timeout=3) if r.ok]

        def feedback_seen(session):
            """Publishes feedback until the client has some, for at most 3 s."""
            got = []
            sub = session.declare_subscriber("fcan/sim/topic/md1/motor0/feedback", lambda s: got.append(1))
            deadline = time.monotonic() + 3.0
            while not got and time.monotonic() < deadline:
                feedback.put("{}")
                time.sleep(0.05)
            sub.undeclare()
            return len(got)

        def put_arrives(session, tag, wait):
            """Whether the client's put reaches the daemon within `wait` seconds."""
            session.put("fcan/sim/topic/md1/motor0/target", tag)
            deadline = time.monotonic() + wait
            while tag not in puts and time.monotonic() < deadline:
                time.sleep(0.05)
            return tag in puts

        for who, operate in [("operator", True), ("local", True), ("viewer", False)]:
            s = client(who)
            # Every client may read node info: poll it while the link comes up (10 s).
            deadline, info = time.monotonic() + 10.0, []
            while not info and time.monotonic() < deadline:
                info = answers(s, "fcan/sim/node/md1")
                if not info:
                    time.sleep(0.1)
            check(info == ['{"id": 1}'], f"{who}: reads node info", info)
            check(feedback_seen(s) > 0, f"{who}: receives samples")
            # A refused message never arrives: the "may not" checks wait their full time.
            got = answers(s, "fcan/sim/param/md1/motor0/kp", payload="0.5")
            check(bool(got) == operate, f"{who}: {'may' if operate else 'may not'} query a parameter", got)
            check(put_arrives(s, f"cmd-{who}", 3.0) == operate, f"{who}: {'may' if operate else 'may not'} put a command", puts)
            s.close()

        # No certificate, no TLS link: a client without one reaches nothing.
        c = zenoh.Config.from_file(os.path.join(HERE, "client-tls.json5"))
        c.insert_json5("connect/endpoints", json.dumps([f"tls/localhost:{tls}"]))
        c.insert_json5("transport/link/tls/root_ca_certificate", json.dumps(os.path.join(d, "ca.crt")))
        c.insert_json5("transport/link/tls/connect_private_key", "null")
        c.insert_json5("transport/link/tls/connect_certificate", "null")
        s = zenoh.open(c)
        time.sleep(1.0)  # time for a link, were one accepted
        check(answers(s, "fcan/sim/node/md1") == [], "a client without a certificate reads nothing")
        s.close()
        for q in qs:
            q.undeclare()
        daemon.close()

    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
