#!/usr/bin/env python3
"""Cyclone DDS's Python binding (PyPI `cyclonedds`) as ros2_control's side of
`fcan serve --ros2 --joints examples/host/config/joints.yaml` (serve-sim's example
nodes), the way topic_based_ros2_control's TopicBasedSystem uses the topics: it reads
`/robot_joint_states` best effort (SensorDataQoS), publishes `sensor_msgs/msg/JointState`
commands on `/robot_joint_commands` reliable, keep last 1 (`rclcpp::QoS(1)`). The types
are written here by hand from ROS's definitions, not from fcan's code.

Usage: joints_dds_peer.py --fcan FCAN --connect ENDPOINT  (run by .ci/joints-dds-peer.sh)

Checks, one line each and `N passed, M failed` last:
  1. /fcan_joints/status, transient local, says `active` to a late subscriber.
  2. JointStates arrive at the configuration's 100 Hz (loosely: 60–110 over 2 s), joints
     in the file's order, every array as long as `name`, stamped with the wall time.
  3. JointState commands (velocity 2.0, -1.0 rev/s, after the gains are set through
     `fcan param set`) move the motors: the published velocities follow within 0.3.
  4. A command with arrays of the wrong length changes nothing (the daemon logs the
     refusal; the script's caller checks the log).
  5. /fcan_joints/clear_fault (std_srvs/Trigger, rmw_cyclonedds framing) answers
     `success: true, "active (no fault)"`, echoing the request's id.
"""
import argparse
import subprocess
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
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


passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def command(names, velocity):
    now = time.time()
    stamp = Time_(sec=int(now), nanosec=int((now % 1) * 1e9))
    return JointState_(header=Header_(stamp=stamp, frame_id=""), name=names,
                       position=[], velocity=velocity, effort=[])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fcan", required=True)
    ap.add_argument("--connect", required=True)
    args = ap.parse_args()

    dp = DomainParticipant(0)
    sensor = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5))
    latched = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                  Policy.Durability.TransientLocal, Policy.History.KeepLast(1))
    keep1 = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1))
    reliable = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(10))
    states = DataReader(dp, Topic(dp, "rt/robot_joint_states", JointState_, qos=sensor), qos=sensor)
    status = DataReader(dp, Topic(dp, "rt/fcan_joints/status", String_, qos=latched), qos=latched)
    commands = DataWriter(dp, Topic(dp, "rt/robot_joint_commands", JointState_, qos=keep1), qos=keep1)
    rq = DataWriter(dp, Topic(dp, "rq/fcan_joints/clear_faultRequest", Trigger_Request_, qos=reliable), qos=reliable)
    rr = DataReader(dp, Topic(dp, "rr/fcan_joints/clear_faultReply", Trigger_Response_, qos=reliable), qos=reliable)

    # 1. The status, to a subscriber that joined after it was written.
    last = None
    t0 = time.time()
    while time.time() - t0 < 10 and last != "active":
        for s in status.take(N=10):
            last = s.data
        time.sleep(0.05)
    check(last == "active", f"/fcan_joints/status says {last!r} (transient local)")

    for node in ("motor_driver1", "motor_driver2"):
        for p, v in (("kp", "0.05"), ("ki", "1.0")):
            subprocess.run([args.fcan, "--connect", args.connect, "--bus", "sim", "param", "set",
                            f"{node}.motor0.velocity.{p}", v], check=True, capture_output=True)

    # 2. The rate and the shape.
    time.sleep(0.3)
    states.take(N=10000)
    t0 = time.time()
    got = []
    while time.time() - t0 < 2.0:
        got += states.take(N=1000)
        time.sleep(0.01)
    rate = len(got) / 2.0
    s = got[-1] if got else None
    shape = s is not None and list(s.name) == ["joint1", "joint2"] and all(
        len(a) == 2 for a in (s.position, s.velocity, s.effort))
    age = time.time() - (s.header.stamp.sec + s.header.stamp.nanosec / 1e9) if s else 99
    check(60 <= rate <= 110 and shape and abs(age) < 1.0,
          f"JointStates at {rate:.1f} Hz (configured 100), names {list(s.name) if s else None}, stamp {age * 1e3:.1f} ms old")

    # 3. Commands move the joints.
    t0 = time.time()
    while time.time() - t0 < 2.0:
        commands.write(command(["joint1", "joint2"], [2.0, -1.0]))
        time.sleep(0.02)
    s = states.take(N=1000)[-1]
    v = list(s.velocity)
    check(abs(v[0] - 2.0) < 0.3 and abs(v[1] + 1.0) < 0.3,
          f"velocity commands [2.0, -1.0] followed: velocity {[round(x, 3) for x in v]}, position {[round(x, 3) for x in s.position]}")

    # 4. Arrays of the wrong length: refused, nothing changes.
    for _ in range(10):
        commands.write(command(["joint1", "joint2"], [0.0]))
        time.sleep(0.02)
    time.sleep(0.3)
    s = states.take(N=1000)[-1]
    v = list(s.velocity)
    check(abs(v[0] - 2.0) < 0.3 and abs(v[1] + 1.0) < 0.3,
          f"a command with 1 velocity for 2 names changed nothing: velocity {[round(x, 3) for x in v]}")

    # 5. clear_fault while active.
    rq.write(Trigger_Request_(client=11, seq=(1 << 33) + 1, structure_needs_at_least_one_member=0))
    ans = None
    t0 = time.time()
    while time.time() - t0 < 5 and ans is None:
        for r in rr.take(N=10):
            ans = r
        time.sleep(0.05)
    check(ans is not None and (ans.client, ans.seq, ans.success, ans.message) == (11, (1 << 33) + 1, True, "active (no fault)"),
          f"clear_fault answered {ans and (ans.client, ans.seq, ans.success, ans.message)}")

    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
