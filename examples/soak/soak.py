#!/usr/bin/env python3
"""Soak the fcan daemon under loss: an hour (by default) of client churn and node reboots
on a simulated bus that loses 1 % of the frames each endpoint receives.

    python3 examples/soak/soak.py                      # 60 min, 1 % loss
    python3 examples/soak/soak.py --minutes 5 --out /tmp/soak-smoke
    nohup python3 examples/soak/soak.py --out /tmp/soak-1h > /tmp/soak-1h.out 2>&1 &

The daemon is `fcan fake` with two motor drivers (schema/examples/motor_driver.yaml, two
motors wired each, commands mirrored into feedback, taking firmware updates) on
`--bus sim:drop=1%,seed=N`: the bus owner serves them over Zenoh exactly as
`fcan serve` does (the same code), faults at every endpoint (docs/cli.md "Bus specs").
Python 3 standard library only; every client is the real `fcan` command attached to the
daemon (the Zenoh face), run as a separate process each time (client churn):

* params:   `param set` a value, then `param get` it: it must read back what was set
            (also after the node was rebooted meanwhile: the master restores it).
* commands: `topic pub` a value no one else sends (it encodes node, motor and a
            sequence number) to a motor's target, then `topic echo` its feedback until
            the mirror shows it (lost if it never does within 3 s).
* echo:     `topic echo` a feedback for 20 samples: every position must be 0 (a node
            just booted) or a value sent to *that* motor (else: invented).
* services: `service call` reset_encoder and clear_fault (a fake node answers OK).
* listing:  `nodes`, `topic list`, `param list`, `service list`, `schema show`.
* reboots:  every --reboot-every s, `fcan update` of a node (its firmware is its schema:
            it reboots with a new boot id and version; the master provisions it again).
* sampler:  every 30 s the daemon's RSS (/proc/PID/status VmRSS) and `fcan monitor`.

A call that fails is counted (with its error); one that takes longer than its bound
(20 s, 90 s for an update) is killed and counted hung. Foxglove and ROS 2 (DDS) are not
exercised: `fcan fake` serves neither, and scripting them needs a WebSocket client and a
ROS 2 installation.

Everything goes to --out DIR (default /tmp/fcan-soak-<time>): progress.log (a line a
minute), daemon.log (the daemon's stderr), samples.jsonl (RSS and monitor), failures.log
(every failed, hung, lost or invented thing, with the command), summary.json and
summary.txt at the end. Exit status 1 if a value was lost or invented, a call hung, or
the daemon died.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCHEMA = os.path.join(ROOT, "schema", "examples", "motor_driver.yaml")
NODES = (1, 2)
MOTORS = (0, 1)
PARAMS = (  # (name under motorM., max): values k/8, exact in f32
    ("velocity.kp", 100.0),
    ("velocity.ki", 100.0),
    ("position.kp", 100.0),
    ("position.limit", 1000.0),
    ("filter_alpha", 1.0),
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Soak:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.fcan = args.fcan_copy
        self.ep = f"tcp/127.0.0.1:{args.port}"
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.calls = defaultdict(lambda: {"made": 0, "failed": 0, "hung": 0, "max_s": 0.0})
        self.errors = defaultdict(int)  # error text (first line) -> count
        self.lost = []
        self.forgotten = []  # commands not applied because the node was suspended/rebooted
        self.invented = []
        self.sent = defaultdict(set)  # (node, motor) -> values sent to its target
        self.seq = 0
        self.param_checks = 0
        self.command_checks = 0
        self.echo_values = 0
        self.reboots = 0
        self.failures = open(os.path.join(self.out, "failures.log"), "a", buffering=1)
        self.samples = open(os.path.join(self.out, "samples.jsonl"), "a", buffering=1)
        self.progress = open(os.path.join(self.out, "progress.log"), "a", buffering=1)
        self.daemon = None
        # The clients' environment: no FCAN_BUS / FCAN_CONNECT of the caller's.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FCAN_")}
        # Per node: (monotonic time, event) of the daemon's log (MasterLost, Started,
        # rebooted), to tell a value lost on a running node from one a node forgot.
        self.node_events = defaultdict(list)

    # -- plumbing -------------------------------------------------------------------

    def log(self, text):
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        self.progress.write(line + "\n")

    def fail(self, text):
        self.failures.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")

    def run(self, kind, args, timeout=20.0):
        """One `fcan` client: (ok, stdout) ; counted under `kind`."""
        cmd = [self.fcan, "--connect", self.ep, "--bus", "sim"] + args
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env)
        except subprocess.TimeoutExpired:
            with self.lock:
                c = self.calls[kind]
                c["made"] += 1
                c["hung"] += 1
            self.fail(f"HUNG ({timeout:.0f} s) {kind}: {' '.join(args)}")
            return False, ""
        dt = time.monotonic() - t0
        with self.lock:
            c = self.calls[kind]
            c["made"] += 1
            c["max_s"] = max(c["max_s"], dt)
            if p.returncode != 0:
                c["failed"] += 1
                first = (p.stderr.strip().splitlines() or ["(no message)"])[-1][:200]
                self.errors[f"{kind}: {first}"] += 1
        if p.returncode != 0:
            self.fail(f"FAILED {kind}: {' '.join(args)}: {p.stderr.strip()[:500]}")
            return False, p.stdout
        return True, p.stdout

    def pause(self, seconds):
        self.stop.wait(seconds)

    def json_lines(self, text):
        out = []
        for line in text.splitlines():
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    # -- the daemon -----------------------------------------------------------------

    def start_daemon(self):
        spec = f"sim:drop={self.args.loss}"
        if self.args.seed is not None:
            spec += f",seed={self.args.seed}"
        cmd = [self.fcan, "fake", "--schema", SCHEMA, "--no-cache", "--listen", self.ep,
               "--count", "motor*=2", "--mirror", "motor*/target.value=motor*/feedback.position",
               "--firmware", "1.0.0", "--bus", spec]
        for n in NODES:
            cmd += ["--node-id", str(n)]
        self.daemon_log = open(os.path.join(self.out, "daemon.log"), "a", buffering=1)
        self.log("daemon: " + " ".join(cmd))
        self.daemon = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, env=self.env)
        self.reader = threading.Thread(target=self.read_daemon, daemon=True)
        self.reader.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            ok, out = self.run("setup", ["--json", "nodes"], timeout=10)
            nodes = self.json_lines(out) if ok else []
            if len([n for n in nodes if n.get("phase") == "running"]) == len(NODES):
                return
            if self.daemon.poll() is not None:
                raise SystemExit(f"the daemon exited ({self.daemon.returncode}): see {self.out}/daemon.log")
            time.sleep(0.5)
        raise SystemExit("the nodes were not running after 60 s: see daemon.log")

    def read_daemon(self):
        """The daemon's stderr into daemon.log, each line timestamped; node events noted."""
        for line in self.daemon.stderr:
            now = time.monotonic()
            self.daemon_log.write(f"{time.strftime('%H:%M:%S')} {line}")
            for n in NODES:
                if f"[motor_driver{n}]:" in line:
                    for ev in ("MasterLost", "Started", "rebooted"):
                        if ev in line:
                            with self.lock:
                                self.node_events[n].append((now, ev))

    def disturbed(self, n, since, until):
        """What happened to node n between two times (its log's events), as text."""
        with self.lock:
            evs = [ev for t, ev in self.node_events[n] if since - 0.5 <= t <= until + 0.5]
        return ", ".join(evs) if evs else ""

    def rss_kib(self):
        try:
            with open(f"/proc/{self.daemon.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    # -- the workers ----------------------------------------------------------------

    def params(self):
        expected = {}  # param -> set of values it may hold (one after a successful set)
        while not self.stop.is_set():
            n, m = random.choice(NODES), random.choice(MOTORS)
            name, top = random.choice(PARAMS)
            param = f"motor_driver{n}.motor{m}.{name}"
            value = random.randint(0, int(top * 8)) / 8.0
            t_set = time.monotonic()
            ok, _ = self.run("param set", ["param", "set", param, repr(value)])
            if ok:
                expected[param] = {value}
            elif param in expected:
                # Failed: it may or may not have been applied.
                expected[param].add(value)
            # Read back this one and an earlier one.
            others = [p for p in expected if p != param]
            for p in [param] + ([random.choice(others)] if others else []):
                if p not in expected:
                    continue
                ok, out = self.run("param get", ["--json", "param", "get", p])
                if not ok:
                    continue
                got = self.json_lines(out)
                v = got[0].get("value") if got else None
                with self.lock:
                    self.param_checks += 1
                if v not in expected[p]:
                    node = int(p.split(".")[0].removeprefix("motor_driver"))
                    why = self.disturbed(node, t_set, time.monotonic())
                    text = f"param {p}: read {v}, set {sorted(expected[p])}" + (f" (node: {why})" if why else "")
                    with self.lock:
                        self.lost.append(text)
                    self.fail("LOST " + text)
                    expected[p] = {v}
            self.pause(0.2)

    def next_value(self, n, m):
        with self.lock:
            self.seq += 1
            # Encodes the motor: value % 100 == 10 n + m. Exact in f32 below 2^24.
            v = float(self.seq * 100 + n * 10 + m)
            self.sent[(n, m)].add(v)
            return v

    def check_positions(self, n, m, values, where):
        with self.lock:
            allowed = self.sent[(n, m)]
            self.echo_values += len(values)
            bad = [v for v in values if v != 0.0 and v not in allowed]
            for v in bad:
                self.invented.append(f"{where}: motor_driver{n}/motor{m} showed {v}")
        for v in bad:
            self.fail(f"INVENTED {where}: /motor_driver{n}/motor{m}/feedback position {v}, never sent to it")

    def commands(self):
        while not self.stop.is_set():
            n, m = random.choice(NODES), random.choice(MOTORS)
            v = self.next_value(n, m)
            t_pub = time.monotonic()
            ok, _ = self.run("topic pub", ["topic", "pub", f"/motor_driver{n}/motor{m}/target",
                                           f"{{type: 2, value: {v}}}", "--count", "3", "--rate", "50"])
            if ok:
                seen = False
                t0 = time.monotonic()
                while not seen and time.monotonic() - t0 < 3.0 and not self.stop.is_set():
                    ok2, out = self.run("topic echo", ["--json", "topic", "echo",
                                                       f"/motor_driver{n}/motor{m}/feedback",
                                                       "--count", "5", "--timeout", "2"])
                    vals = [l["value"]["position"] for l in self.json_lines(out)]
                    self.check_positions(n, m, vals, "commands")
                    seen = v in vals
                with self.lock:
                    self.command_checks += 1
                if not seen and not self.stop.is_set():
                    why = self.disturbed(n, t_pub, time.monotonic())
                    text = f"command {v} to /motor_driver{n}/motor{m}/target not in its feedback within 3 s"
                    with self.lock:
                        if why:
                            # The node was suspended or rebooted meanwhile: it forgot, or
                            # the master withdrew the command; counted apart.
                            self.forgotten.append(f"{text} (node: {why})")
                        else:
                            self.lost.append(text)
                    self.fail(("FORGOTTEN " if why else "LOST ") + text + (f" (node: {why})" if why else ""))
            self.pause(0.2)

    def echo(self):
        while not self.stop.is_set():
            n, m = random.choice(NODES), random.choice(MOTORS)
            ok, out = self.run("topic echo", ["--json", "topic", "echo", f"/motor_driver{n}/motor{m}/feedback",
                                              "--count", "20", "--timeout", "3"])
            vals = [l["value"]["position"] for l in self.json_lines(out)]
            self.check_positions(n, m, vals, "echo")
            self.pause(0.3)

    def services(self):
        while not self.stop.is_set():
            n, m = random.choice(NODES), random.choice(MOTORS)
            if random.random() < 0.5:
                self.run("service call", ["--json", "service", "call", f"/motor_driver{n}/motor{m}/reset_encoder",
                                          "{offset: false, value: 0}"])
            else:
                self.run("service call", ["--json", "service", "call", f"/motor_driver{n}/motor{m}/clear_fault", "{}"])
            self.pause(0.5)

    def listing(self):
        cmds = [["nodes"], ["topic", "list"], ["param", "list"], ["service", "list"],
                ["schema", "show", "motor_driver1"]]
        while not self.stop.is_set():
            c = random.choice(cmds)
            self.run(" ".join(c[:2]) if c[0] != "nodes" else "nodes", ["--json"] + c)
            self.pause(1.0)

    def reboots_worker(self):
        k = 0
        while not self.stop.is_set():
            self.pause(self.args.reboot_every)
            if self.stop.is_set():
                break
            k += 1
            n = NODES[k % len(NODES)]
            ok, _ = self.run("update (reboot)", ["--json", "update", f"motor_driver{n}", "--schema", SCHEMA,
                                                 "--version", f"1.0.{k}"], timeout=90)
            if ok:
                with self.lock:
                    self.reboots += 1

    def sampler(self):
        while True:
            rss = self.rss_kib()
            ok, out = self.run("monitor", ["--json", "monitor", "--count", "1", "--interval-ms", "1000"])
            mon = self.json_lines(out)[0] if ok and self.json_lines(out) else None
            ok, out = self.run("nodes", ["--json", "nodes"])
            nodes = self.json_lines(out) if ok else []
            s = {"t": round(time.monotonic() - self.t0, 1), "rss_kib": rss,
                 "retries": mon and mon.get("retries"), "rx_frames": mon and mon.get("rx_frames"),
                 "tx_frames": mon and mon.get("tx_frames"), "rates_hz": mon and mon.get("rates_hz"),
                 "nodes": [{k: x.get(k) for k in ("id", "phase", "boot_id", "firmware", "errors")} for x in nodes]}
            self.samples.write(json.dumps(s) + "\n")
            self.last_sample = s
            if self.stop.wait(30):
                return

    # -- the run --------------------------------------------------------------------

    def counts(self):
        with self.lock:
            # The start-up polls are not the soak's calls.
            calls = [c for k, c in self.calls.items() if k != "setup"]
            made = sum(c["made"] for c in calls)
            failed = sum(c["failed"] for c in calls)
            hung = sum(c["hung"] for c in calls)
            return made, failed, hung, len(self.lost), len(self.invented)

    def main(self):
        self.t0 = time.monotonic()
        self.start_daemon()
        time.sleep(2)  # the first feedback flowing, RSS settled
        self.rss_start = self.rss_kib()
        self.log(f"nodes running; daemon pid {self.daemon.pid}, RSS {self.rss_start} KiB; "
                 f"soaking {self.args.minutes} min on {self.ep}")
        workers = [self.params, self.commands, self.echo, self.services, self.listing,
                   self.reboots_worker]
        threads = [threading.Thread(target=w, daemon=True) for w in workers]
        sampler = threading.Thread(target=self.sampler, daemon=True)
        sampler.start()
        for t in threads:
            t.start()
        end = time.monotonic() + self.args.minutes * 60
        died = False
        while time.monotonic() < end:
            time.sleep(min(60, max(0.1, end - time.monotonic())))
            made, failed, hung, lost, invented = self.counts()
            self.log(f"calls {made} failed {failed} hung {hung}; lost {lost} invented {invented}; "
                     f"reboots {self.reboots}; RSS {self.rss_kib()} KiB")
            if self.daemon.poll() is not None:
                self.log(f"the daemon died ({self.daemon.returncode})")
                died = True
                break
        self.stop.set()
        for t in threads:
            t.join(timeout=120)
        sampler.join(timeout=60)
        rss_end = self.rss_kib()
        ok, out = self.run("monitor", ["--json", "monitor", "--count", "1", "--interval-ms", "1000"])
        mon = self.json_lines(out)[0] if ok and self.json_lines(out) else {}
        if not died:
            self.daemon.send_signal(signal.SIGINT)
            try:
                self.daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.fail("the daemon did not stop within 30 s of Ctrl-C")
        self.reader.join(timeout=10)
        self.daemon_log.flush()
        with open(os.path.join(self.out, "daemon.log")) as f:
            dlog = f.read()
        made, failed, hung, lost, invented = self.counts()
        summary = {
            "minutes": round((time.monotonic() - self.t0) / 60, 1),
            "bus": f"sim:drop={self.args.loss}",
            "seed": next((l.split("seed=")[1].split()[0] for l in dlog.splitlines()
                          if "serving sim:" in l and "seed=" in l), None),
            "rss_kib_start": self.rss_start,
            "rss_kib_end": rss_end,
            "daemon_died": died,
            "calls": {"made": made, "failed": failed, "hung": hung},
            "by_kind": dict(self.calls),
            "errors": dict(sorted(((e, n) for e, n in self.errors.items() if not e.startswith("setup:")),
                                  key=lambda x: -x[1])),
            "values": {"param_read_backs": self.param_checks, "commands_checked": self.command_checks,
                       "feedback_values_checked": self.echo_values, "lost": lost, "invented": invented,
                       "forgotten_in_suspension_or_reboot": len(self.forgotten)},
            "lost": self.lost[:50],
            "forgotten": self.forgotten[:50],
            "invented": self.invented[:50],
            "reboots": self.reboots,
            "master": {k: mon.get(k) for k in ("retries", "rx_frames", "tx_frames", "rx_malformed")},
            "node_master_lost": dlog.count(": MasterLost"),
            "node_started": dlog.count(": Started"),
        }
        with open(os.path.join(self.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        lines = [
            f"soak: {summary['minutes']} min, fcan fake (2 nodes) on {summary['bus']} seed {summary['seed']}",
            f"daemon RSS: {self.rss_start} KiB at start, {rss_end} KiB at end",
            f"calls: {made} made, {failed} failed, {hung} hung",
        ]
        for kind, c in sorted(self.calls.items()):
            if kind == "setup":
                continue
            lines.append(f"  {kind:16} {c['made']:6} made {c['failed']:5} failed {c['hung']:3} hung, slowest {c['max_s']:.2f} s")
        lines += [
            f"values: {self.param_checks} parameter read-backs, {self.command_checks} commands followed to "
            f"the feedback, {self.echo_values} feedback values checked: {lost} lost, {invented} invented "
            f"(and {len(self.forgotten)} commands not applied while their node was suspended or rebooting)",
            f"reboots (fcan update): {self.reboots}; node suspensions (MasterLost): {summary['node_master_lost']}, "
            f"starts: {summary['node_started']}",
            f"master: retries {summary['master']['retries']}, rx {summary['master']['rx_frames']} frames, "
            f"tx {summary['master']['tx_frames']}",
        ]
        if self.errors:
            lines.append("errors (most frequent first):")
            lines += [f"  {n:5} x {e}" for e, n in list(summary["errors"].items())[:15]]
        text = "\n".join(lines)
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.write(text + "\n")
        self.log("done\n" + text)
        return 1 if (lost or invented or hung or died) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60, help="how long to soak (default 60)")
    ap.add_argument("--loss", default="1%", help="loss at every endpoint, as the spec takes it (default 1%%)")
    ap.add_argument("--seed", type=int, help="the fault seed (default: drawn by the daemon, in summary)")
    ap.add_argument("--reboot-every", type=float, default=60, help="seconds between node reboots (default 60)")
    ap.add_argument("--fcan", default=os.path.join(ROOT, "target", "debug", "fcan"),
                    help="the fcan binary (copied into --out first, so a rebuild cannot swap it mid-run)")
    ap.add_argument("--port", type=int, default=0, help="the daemon's loopback port (default: a free one)")
    ap.add_argument("--out", help="output directory (default /tmp/fcan-soak-YYYYmmdd-HHMMSS)")
    args = ap.parse_args()
    args.out = args.out or time.strftime("/tmp/fcan-soak-%Y%m%d-%H%M%S")
    os.makedirs(args.out, exist_ok=True)
    if not os.path.exists(args.fcan):
        raise SystemExit(f"{args.fcan}: no such binary (cargo build -p fcan-cli, or --fcan PATH)")
    args.fcan_copy = os.path.join(args.out, "fcan")
    shutil.copy2(args.fcan, args.fcan_copy)
    args.port = args.port or free_port()
    soak = Soak(args)
    try:
        code = soak.main()
    finally:
        if soak.daemon and soak.daemon.poll() is None:
            soak.daemon.kill()
    sys.exit(code)


if __name__ == "__main__":
    main()
