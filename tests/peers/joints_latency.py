#!/usr/bin/env python3
"""A benchmark, not a test: the latency the ROS 2 topic path of `fcan serve --ros2 --joints`
adds, seen from ros2_control's side. Run by .ci/joints-latency.sh (which says how), against
serve-sim's example nodes and examples/host/config/joints-latency.yaml (500 Hz).

The peer is Cyclone DDS's Python binding (PyPI `cyclonedds`) behaving as ros-controls'
`joint_state_topic_hardware_interface/JointStateTopicSystem` does under a 500 Hz
controller_manager: it subscribes `/robot_joint_states` (sensor_msgs/msg/JointState) with
SensorDataQoS (best effort, keep last 5, volatile) and publishes a JointState command on
`/robot_joint_commands` every 2 ms, reliable, keep last 1 (`rclcpp::QoS(1)`), one
`velocity` per joint, stamped with the time of the write. Like the source read for this
(ros-controls/topic_based_hardware_interfaces, main: its `trigger_joint_command_threshold`
check is commented out) it publishes every cycle. Unlike a real controller, every command carries values of its own
(joint1: 1 + k/65536 rev/s, joint2 the negative; exact in the f32 the target field
holds), so each command can be found again on the bus. The types are written here by hand
from ROS's definitions, not from fcan's code.

What it measures (docs/performance.md, "ROS 2 joints: the latency the topic path adds"):

  (a) state path: wall clock when a JointState reaches the peer (a DDS listener) minus its
      `header.stamp`, which the daemon sets to the wall time the oldest value of the
      message reached the master (fcan-ros2-bridge/src/joints.rs): the age of the data as
      the hardware interface gets it, the feedback's own period included. Beside it, the
      "fresh data" latency: the daemon's frame tap (`fcan/<bus>/frames`, docs/remote.md)
      gives the time the master's link stamped each feedback frame; for each JointState
      whose joint1 position is new, the peer's arrival minus the stamp of the frame that
      carried that position (the f32 found in the frame's bytes): frame at the master →
      the loop's next tick → DDS → peer.
  (b) command path: the peer's `write` call (its monotonic clock) → the first frame the
      master sent carrying that command's value (the frame tap's `tx` lines, stamped when
      the master handed the frame to its link). The tap's clock (`t_us`, the daemon's
      monotonic clock since it started) is placed on the peer's monotonic clock (the same
      CLOCK_MONOTONIC: one machine, a network namespace has no clock of its own) by
      querying `fcan/<bus>/status`, whose `t_us` is taken while the query is answered:
      each query bounds the daemon's origin between (sent − t_us) and (answered − t_us);
      the bounds of all queries are intersected (and a tap put cannot arrive before its
      frames' `t_us`: another upper bound). That leaves ±100–150 µs, as much as the
      command path itself, so the origin is then pinned by the JointStates' stamps: the
      daemon stamps a JointState with the wall time its oldest value's frame reached the
      master, i.e. the same instant the tap reports for that rx frame (CLOCK_REALTIME −
      CLOCK_MONOTONIC is one offset for both processes, read here). Within the status
      bounds, (stamp − that offset − t_us of an rx frame) piles up at one value for the
      true origin; the pile's spread is printed, and when fewer than half the
      JointStates fall in it the status bounds' midpoint is used instead (said).
  (c) the JointState rate against the configuration's, and commands lost: published but
      never seen in a frame the master sent (dropped by DDS, refused, or superseded by a
      newer command before the master sent the batch: the cycle's writer merges batches
      and the newest wins).

Three phases of --seconds each, the commands flowing throughout:
  "baseline": DDS alone, no fcan in the path: this script started again as a second
      process (`--baseline-writer`) writes JointStates of two joints at the same rate,
      reliable, keep last 10 (the daemon's QoS for the states), stamped just before each
      write, to a SensorDataQoS reader here: arrival minus stamp is what Cyclone DDS and
      this Python peer take on this machine;
  "quiet": the joints' states and commands, no frame tap;
  "tapped": the same with the tap subscribed ((b), the fresh-data figure and the losses
      come from it). The tap costs the daemon some CPU; compare its state figures with
      the quiet phase's.

Usage: joints_latency.py --connect ENDPOINT [--bus sim] [--seconds 10] [--rate 500]
       (joints_latency.py --baseline-writer SECONDS --rate R: the baseline's writer)
Prints one line per figure and a last line `JSON {...}` with all of them.
"""
import argparse
import bisect
import json
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import zenoh
from cyclonedds.core import Listener, Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, int64, sequence, uint8, uint32, uint64
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_
    frame_id: str


@dataclass
class JointState_(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header_
    name: sequence[str]
    position: sequence[float64]
    velocity: sequence[float64]
    effort: sequence[float64]


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


# rmw_cyclonedds's request header (the client's id, a sequence number) as two members.
@dataclass
class Trigger_Request_(IdlStruct, typename="std_srvs::srv::dds_::Trigger_Request_"):
    client: uint64
    seq: int64
    structure_needs_at_least_one_member: uint8


@dataclass
class Trigger_Response_(IdlStruct, typename="std_srvs::srv::dds_::Trigger_Response_"):
    client: uint64
    seq: int64
    success: bool
    message: str


class Status:
    """/fcan_joints/status (transient local): the last one, and every one seen."""

    def __init__(self, dp):
        latched = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                      Policy.Durability.TransientLocal, Policy.History.KeepLast(1))
        self.reader = DataReader(dp, Topic(dp, "rt/fcan_joints/status", String_, qos=latched), qos=latched)
        self.last = None
        self.seen = []

    def poll(self):
        for s in self.reader.take(N=10):
            if isinstance(s, String_):
                self.last = s.data
                self.seen.append(s.data)
        return self.last

    def wait_active(self, seconds):
        t0 = time.time()
        while time.time() - t0 < seconds and self.poll() != "active":
            time.sleep(0.05)
        return self.last == "active"


class ClearFault:
    """/fcan_joints/clear_fault (std_srvs/Trigger, rmw_cyclonedds framing)."""

    def __init__(self, dp):
        reliable = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(10))
        self.rq = DataWriter(dp, Topic(dp, "rq/fcan_joints/clear_faultRequest", Trigger_Request_, qos=reliable),
                             qos=reliable)
        self.rr = DataReader(dp, Topic(dp, "rr/fcan_joints/clear_faultReply", Trigger_Response_, qos=reliable),
                             qos=reliable)
        self.seq = 0

    def call(self):
        self.seq += 1
        self.rq.write(Trigger_Request_(client=7, seq=self.seq, structure_needs_at_least_one_member=0))
        t0 = time.time()
        while time.time() - t0 < 5:
            for r in self.rr.take(N=10):
                if isinstance(r, Trigger_Response_) and r.seq == self.seq:
                    return r.success, r.message
            time.sleep(0.05)
        return False, "no answer"


def f32(v):
    return struct.pack("<f", v)


def command_value(k):
    return 1.0 + k / 65536.0


def pct(xs, p):
    """Nearest-rank percentile of `xs` (sorted here)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    i = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[i]


def summary(xs):
    """p50/p99/max/min of seconds, in µs."""
    if not xs:
        return {"n": 0, "p50_us": None, "p99_us": None, "max_us": None, "min_us": None}
    return {"n": len(xs), "p50_us": round(pct(xs, 50) * 1e6), "p99_us": round(pct(xs, 99) * 1e6),
            "max_us": round(max(xs) * 1e6) if xs else None, "min_us": round(min(xs) * 1e6) if xs else None}


def fmt(s):
    return f"n {s['n']}, p50 {s['p50_us']} µs, p99 {s['p99_us']} µs, max {s['max_us']} µs, min {s['min_us']} µs"


class States:
    """The states' subscription: each JointState with the peer's clocks at its arrival."""

    def __init__(self):
        self.lock = threading.Lock()
        self.got = []  # (arrival wall, arrival monotonic, stamp, joint1 position)
        self.recording = False

    def on_data_available(self, reader):
        wall, mono = time.time(), time.monotonic()
        if reader is None:  # the reader is being deleted
            return
        for s in reader.take(N=64):
            if not isinstance(s, JointState_):
                continue
            if self.recording:
                stamp = s.header.stamp.sec + s.header.stamp.nanosec * 1e-9
                with self.lock:
                    self.got.append((wall, mono, stamp, s.position[0] if s.position else None))

    def take(self):
        with self.lock:
            g, self.got = self.got, []
        return g


class Frames:
    """The daemon's frame tap: each put's text, kept as it came, parsed afterwards."""

    def __init__(self):
        self.puts = []

    def on_sample(self, sample):
        self.puts.append((time.monotonic(), sample.payload.to_bytes()))

    def parse(self):
        """tx and rx frames (t, data) on the daemon's clock, frames the tap lost, and the
        smallest (arrival of a put − t of its frames): the daemon's origin is below it."""
        tx, rx, lost, bound = [], [], 0, float("inf")
        for arrival, p in self.puts:
            for line in p.decode().splitlines():
                parts = line.split(" ")
                if len(parts) < 3:
                    continue
                t = int(parts[0]) * 1e-6
                bound = min(bound, arrival - t)
                if parts[1] == "lost":
                    lost += int(parts[2])
                    continue
                frame = parts[2]
                if "##" in frame:
                    data = bytes.fromhex(frame.split("##", 1)[1][1:])
                else:
                    data = bytes.fromhex(frame.split("#", 1)[1]) if "#" in frame else b""
                (tx if parts[1] == "tx" else rx).append((t, data))
        return tx, rx, lost, bound


def wall_minus_monotonic():
    """CLOCK_REALTIME − CLOCK_MONOTONIC, from the tightest of many reads."""
    best = None
    for _ in range(2000):
        a = time.monotonic()
        w = time.time()
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) / 2)
    return best[1]


def stamp_anchor(got, rx, lo, hi, wm):
    """The daemon's origin from the JointStates' stamps (see the top): the value most
    (stamp − wm − t of an rx frame) fall on within [lo, hi], the share of JointStates
    that give it, and the spread (p10–p90, s) of those."""
    rx_t = [t for t, _ in rx]
    ds = []
    for (_w, _m, stamp, _p) in got:
        x = stamp - wm
        i = bisect.bisect_left(rx_t, x - hi - 50e-6)
        while i < len(rx_t) and rx_t[i] <= x - lo + 50e-6:
            ds.append(x - rx_t[i])
            i += 1
    if not ds:
        return None
    ds.sort()
    width, best, j = 20e-6, (0, 0), 0
    for i in range(len(ds)):
        while ds[i] - ds[j] > width:
            j += 1
        if i - j + 1 > best[0]:
            best = (i - j + 1, j)
    n, j = best
    pile = ds[j:j + n]
    return pile[len(pile) // 2], n / max(1, len(got)), (pct(pile, 10), pct(pile, 90))


def status(session, bus):
    for r in session.get(f"fcan/{bus}/status", timeout=5):
        if r.ok:
            return json.loads(r.ok.payload.to_string())
    raise RuntimeError("no answer from fcan/<bus>/status")


def anchor(session, bus, n=100):
    """The daemon's clock origin on the peer's monotonic clock: (low, high) bounds."""
    lo, hi = float("-inf"), float("inf")
    for _ in range(n):
        t0 = time.monotonic()
        st = status(session, bus)
        t1 = time.monotonic()
        d = st["t_us"] * 1e-6
        lo, hi = max(lo, t0 - d), min(hi, t1 - d)
        time.sleep(0.002)
    return lo, hi


def param(session, bus, name, value):
    key = f"fcan/{bus}/param/" + name.replace(".", "/")
    for r in session.get(key, payload=json.dumps(value), timeout=5):
        if r.ok:
            return
        raise RuntimeError(f"{key}: {r.err.payload.to_string()}")


class Commander(threading.Thread):
    """The hardware interface's write(): one JointState command every period."""

    def __init__(self, writer, rate):
        super().__init__(daemon=True)
        self.writer, self.period = writer, 1.0 / rate
        self.k = 0
        self.sent = []  # (k, monotonic at write)
        self.late = 0
        self.stop = threading.Event()

    def run(self):
        nxt = time.monotonic()
        while not self.stop.is_set():
            self.k += 1
            v = command_value(self.k)
            now = time.time()
            msg = JointState_(header=Header_(stamp=Time_(sec=int(now), nanosec=int((now % 1) * 1e9)), frame_id=""),
                              name=["joint1", "joint2"], position=[], velocity=[v, -v], effort=[])
            t = time.monotonic()
            self.writer.write(msg)
            self.sent.append((self.k, t))
            nxt += self.period
            wait = nxt - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            elif wait < -self.period:
                # Behind by more than a period (the machine is busy): no burst to catch up,
                # as controller_manager's loop does not burst either.
                self.late += 1
                nxt = time.monotonic()


def state_figures(got, seconds, rate):
    lat = [w - s for (w, _m, s, _p) in got]
    gaps = [b[1] - a[1] for a, b in zip(got, got[1:])]
    return {"states": summary(lat), "rate_hz": round(len(got) / seconds, 1), "configured_hz": rate,
            "max_gap_ms": round(max(gaps) * 1e3, 1) if gaps else None}


BASELINE_TOPIC = "rt/joints_latency_baseline"


def baseline_writer(seconds, rate):
    """The baseline's second process: JointStates stamped when written, at `rate`."""
    dp = DomainParticipant(0)
    qos = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(10),
              Policy.Durability.Volatile)
    w = DataWriter(dp, Topic(dp, BASELINE_TOPIC, JointState_, qos=qos), qos=qos)
    time.sleep(1.0)  # discovery
    period, nxt, end = 1.0 / rate, time.monotonic(), time.monotonic() + seconds
    while time.monotonic() < end:
        now = time.time()
        w.write(JointState_(header=Header_(stamp=Time_(sec=int(now), nanosec=int((now % 1) * 1e9)), frame_id=""),
                            name=["joint1", "joint2"], position=[1.0, 2.0], velocity=[0.5, 0.5], effort=[0.1, 0.1]))
        nxt += period
        wait = nxt - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        elif wait < -period:
            nxt = time.monotonic()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", help="the daemon's Zenoh endpoint")
    ap.add_argument("--baseline-writer", type=float, metavar="SECONDS", help=argparse.SUPPRESS)
    ap.add_argument("--bus", default="sim")
    ap.add_argument("--seconds", type=float, default=10.0, help="each phase's length")
    ap.add_argument("--rate", type=float, default=500.0, help="the command rate (controller_manager's)")
    args = ap.parse_args()
    if args.baseline_writer is not None:
        return baseline_writer(args.baseline_writer, args.rate)
    if not args.connect:
        ap.error("--connect is required")

    conf = zenoh.Config.from_json5(json.dumps({
        "mode": "peer", "connect": {"endpoints": [args.connect]}, "listen": {"endpoints": []},
        "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": False}}}))
    session = zenoh.open(conf)

    dp = DomainParticipant(0)
    sensor = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5), Policy.Durability.Volatile)
    keep1 = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1),
                Policy.Durability.Volatile)
    states = States()
    # Kept: a reader nobody holds is deleted, and its listener with it.
    states_reader = DataReader(dp, Topic(dp, "rt/robot_joint_states", JointState_, qos=sensor), qos=sensor,
               listener=Listener(on_data_available=states.on_data_available))
    joints_status = Status(dp)
    clear_fault = ClearFault(dp)
    writer = DataWriter(dp, Topic(dp, "rt/robot_joint_commands", JointState_, qos=keep1), qos=keep1)

    def ensure_active(when):
        """Active before a phase: a fault before it (a stall while the daemon started) is
        cleared through /fcan_joints/clear_fault and said; one during a phase is reported."""
        if joints_status.wait_active(20):
            return True
        print(f"joints-latency: {when}: /fcan_joints/status says {joints_status.last!r}; calling clear_fault",
              flush=True)
        ok, message = clear_fault.call()
        print(f"joints-latency: clear_fault answered {ok}, {message!r}", flush=True)
        return joints_status.wait_active(10)

    if not ensure_active("start"):
        print(f"joints-latency: the joints are not active: {joints_status.last!r}", flush=True)
        return 1
    # The example motors follow a velocity only with gains (they default to 0): with them,
    # the positions move and each feedback frame carries positions of its own.
    for node in ("motor_driver1", "motor_driver2"):
        param(session, args.bus, f"{node}.motor0.velocity.kp", 0.05)
        param(session, args.bus, f"{node}.motor0.velocity.ki", 1.0)

    commander = Commander(writer, args.rate)
    commander.start()
    time.sleep(1.5)  # warm-up: matching, the motors spinning up
    results = {"rate_hz_configured": args.rate, "seconds": args.seconds}

    # Phase 0: the baseline (DDS alone), the joints running meanwhile.
    base = States()
    base_reader = DataReader(dp, Topic(dp, BASELINE_TOPIC, JointState_, qos=sensor), qos=sensor,
                             listener=Listener(on_data_available=base.on_data_available))
    writer_proc = subprocess.Popen([sys.executable, __file__, "--baseline-writer", str(args.seconds + 2.0),
                                    "--rate", str(args.rate)])
    time.sleep(1.5)
    base.take()
    base.recording = True
    time.sleep(args.seconds)
    base.recording = False
    writer_proc.wait()
    baseline = state_figures(base.take(), args.seconds, args.rate)
    del base_reader
    results["baseline"] = baseline
    print(f"baseline (Cyclone DDS, Python → Python, no fcan): JointState at {baseline['rate_hz']} Hz, "
          f"max gap {baseline['max_gap_ms']} ms; arrival - stamp: {fmt(baseline['states'])}", flush=True)

    # Phase 1: quiet (no frame tap).
    if not ensure_active("before the quiet phase"):
        return 1
    joints_status.seen.clear()
    stats0 = status(session, args.bus)["stats"]
    states.take()
    states.recording = True
    k0 = commander.k
    time.sleep(args.seconds)
    states.recording = False
    quiet = state_figures(states.take(), args.seconds, args.rate)
    quiet["commands_published_hz"] = round((commander.k - k0) / args.seconds, 1)
    joints_status.poll()
    quiet["statuses_during"] = list(joints_status.seen)
    results["quiet"] = quiet
    print(f"quiet:  JointState at {quiet['rate_hz']} Hz (configured {args.rate:g}), max gap {quiet['max_gap_ms']} ms; "
          f"arrival - header.stamp: {fmt(quiet['states'])}; commands published at {quiet['commands_published_hz']} Hz",
          flush=True)

    # Phase 2: the frame tap subscribed.
    frames = Frames()
    sub = session.declare_subscriber(f"fcan/{args.bus}/frames", frames.on_sample)
    time.sleep(0.5)
    lo, hi = anchor(session, args.bus)
    if not ensure_active("before the tapped phase"):
        return 1
    joints_status.seen.clear()
    states.take()
    states.recording = True
    k_first = commander.k + 1
    time.sleep(args.seconds)
    k_last = commander.k
    states.recording = False
    got = states.take()
    time.sleep(0.3)  # the last commands' frames
    lo2, hi2 = anchor(session, args.bus)
    commander.stop.set()
    commander.join()
    sub.undeclare()
    stats1 = status(session, args.bus)["stats"]
    tx, rx, lost_frames, tap_bound = frames.parse()
    # Status queries bound the origin from both sides; a frame cannot reach the peer
    # before the daemon stamped it, which bounds it from above too (often tighter).
    lo, hi = max(lo, lo2), min(hi, hi2, tap_bound)
    results["anchor_bounds_width_us"] = round((hi - lo) * 1e6)
    results["late_periods"] = commander.late
    if hi < lo:
        print(f"joints-latency: the clock anchor is inconsistent (bounds {lo:.6f} > {hi:.6f})", flush=True)
    rx_sorted = sorted(rx, key=lambda f: f[0])
    pinned = stamp_anchor(got, rx_sorted, lo, hi, wall_minus_monotonic())
    if pinned is not None and pinned[1] >= 0.5:
        origin = pinned[0]
        results["anchor"] = {"by": "stamps", "share": round(pinned[1], 3),
                             "spread_us": [round((d - origin) * 1e6, 1) for d in pinned[2]],
                             "within_bounds_us": [round((lo - origin) * 1e6), round((hi - origin) * 1e6)]}
    else:
        origin = (lo + hi) / 2
        results["anchor"] = {"by": "status bounds", "share": round(pinned[1], 3) if pinned else 0,
                             "within_bounds_us": [round((lo - origin) * 1e6), round((hi - origin) * 1e6)]}
    tx.sort(key=lambda f: f[0])
    rx.sort(key=lambda f: f[0])
    tapped = state_figures(got, args.seconds, args.rate)
    joints_status.poll()
    tapped["statuses_during"] = list(joints_status.seen)

    # (a') fresh data: a JointState whose joint1 position is new → the rx frame holding it.
    rx_t = [t for t, _ in rx]
    fresh = []
    unmatched = 0
    prev = None
    for (_w, mono, _s, p1) in got:
        if p1 is None or p1 == prev:
            continue
        prev = p1
        pat = f32(p1)
        arrival = mono - origin
        i = bisect.bisect_right(rx_t, arrival) - 1
        found = None
        while i >= 0 and arrival - rx[i][0] < 0.1:
            if pat in rx[i][1]:
                found = rx[i][0]
                break
            i -= 1
        if found is None:
            unmatched += 1
        else:
            fresh.append(arrival - found)
    tapped["fresh"] = summary(fresh)
    tapped["fresh_unmatched"] = unmatched

    # (b) commands: the peer's write → the first tx frame with the value (joint1 and joint2).
    sent = {k: t for k, t in commander.sent if k_first <= k <= k_last}
    pats = {}
    for k in sent:
        pats[f32(command_value(k))] = (k, 0)
        pats[f32(-command_value(k))] = (k, 1)
    first = {}
    for t, data in tx:
        for off in range(0, len(data) - 3):
            hit = pats.get(data[off:off + 4])
            if hit is not None and hit not in first:
                first[hit] = t
    cmd = {0: [], 1: []}
    for (k, j), t in first.items():
        cmd[j].append(t - (sent[k] - origin))
    lost = {j: len(sent) - len(cmd[j]) for j in (0, 1)}
    # A lost command the peer wrote less than a period before the next one (the
    # commander caught up after a late wake-up) was most likely superseded (merged).
    order = sorted(sent)
    close = sum(1 for a, b in zip(order, order[1:])
                if (a, 0) not in first and sent[b] - sent[a] < 0.5 / args.rate)
    tapped["commands_lost_next_within_half_period"] = close
    tapped["commands_published"] = len(sent)
    tapped["commands_published_hz"] = round(len(sent) / args.seconds, 1)
    tapped["command_joint1"] = summary(cmd[0])
    tapped["command_joint2"] = summary(cmd[1])
    tapped["commands_lost"] = lost
    tapped["tx_frames"] = len(tx)
    tapped["rx_frames"] = len(rx)
    tapped["tap_lost_frames"] = lost_frames
    results["tapped"] = tapped
    results["master"] = {k: stats1.get(k, 0) - stats0.get(k, 0) for k in ("publish_busy", "tx_withdrawn")}

    print(f"tapped: JointState at {tapped['rate_hz']} Hz (configured {args.rate:g}), max gap {tapped['max_gap_ms']} ms; "
          f"arrival - header.stamp: {fmt(tapped['states'])}", flush=True)
    print(f"tapped: fresh data (feedback frame at the master → JointState at the peer): {fmt(tapped['fresh'])}"
          f" ({unmatched} new positions not found in a frame)", flush=True)
    for j, name in ((0, "joint1"), (1, "joint2")):
        print(f"tapped: command {name}, peer write → frame sent by the master: {fmt(tapped['command_' + name])}; "
              f"{lost[j]} of {len(sent)} never seen on the bus", flush=True)
    print(f"tapped: of the joint1 commands lost, {close} were followed by the next within half a period", flush=True)
    print(f"tapped: {len(tx)} frames sent, {len(rx)} received in the window, {lost_frames} lost by the tap; "
          f"clock anchor {results['anchor']}; master publish_busy +{results['master']['publish_busy']}, "
          f"tx_withdrawn +{results['master']['tx_withdrawn']}; commander behind {commander.late} times", flush=True)
    for phase in ("quiet", "tapped"):
        if results[phase]["statuses_during"]:
            print(f"{phase}: NOT VALID: the joints' status changed during the phase: {results[phase]['statuses_during']}",
                  flush=True)
    print("JSON " + json.dumps(results), flush=True)
    del states_reader
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
