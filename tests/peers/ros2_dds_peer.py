#!/usr/bin/env python3
"""Cyclone DDS's Python binding (PyPI `cyclonedds`), which no one here wrote, as the ROS 2
side of `fcan serve --ros2`: it speaks the ROS 2 conventions on DDS itself (topic
`rt/<name>`, type `<pkg>::msg::dds_::<Name>_`, plain CDR), with the types written here
by hand from docs/ros2.md's rules and the example schemas, not from fcan's code.

Usage: ros2_dds_peer.py --fcan FCAN --connect ENDPOINT

Checks, printing one line each and `N passed, M failed` last:
  1. /io_board3/analog/samples (generated type, int16[16] + uint16): the samples
     `fcan topic echo` prints are equal, by the node's sequence number, to the ones DDS
     delivers.
  2. /motor_driver1/motor0/feedback (custom example_msgs/msg/Feedback, fields sorted by
     name): every DDS sample equals one `fcan topic echo` printed meanwhile.
  3. A command from ROS reaches the node: example_msgs/msg/Target (setpoint, type) in
     duty mode on /motor_driver1/motor0/target makes motor0's velocity rise, seen both
     on DDS and through `fcan topic echo`.
  4. A ROS message the bridge cannot map is not sent: a Target_ of another shape (no
     `type` byte) on motor1's target leaves motor1 standing.
  5. io_board3's out0/state is a std_msgs/msg/Bool on DDS: switched on through the
     CLI's service call, DDS sees `data: true`.
  6. Services in rmw_cyclonedds's framing: std_srvs/SetBool on out2 answered with the
     client's id and 64-bit sequence number echoed; a second call while the first
     settles answered success = false with the node's BUSY reason; the state after it
     reaches a late transient-local subscriber; std_srvs/Trigger on a motor.
  7. Parameters through /motor_driver2's parameter services (rcl_interfaces, Cyclone
     framing): list with a prefix, describe (the schema's range), set (one accepted,
     one refused with the reason), get (read back; NOT_SET for an unknown name), and
     `fcan param get` agrees.
  8. The graph: ros_discovery_info names the three nodes and the bridge's own, and lists under
     motor_driver1 the writer GUID Cyclone's discovery saw on its motor0 feedback.
  9. /motor_driver1/node_info (fcan_msgs/srv/NodeInfo) agrees with `fcan nodes --json`;
     /io_board3/reprovision (std_srvs/Trigger) succeeds and the node runs again with
     the same boot id.
"""
import argparse
import json
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, bounded_str, float32, float64, int16, int64, sequence, uint8, uint16, uint32, uint64
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class AnalogSensorSamples_(IdlStruct, typename="fcan_io_board_msgs::msg::dds_::AnalogSensorSamples_"):
    raw: array[int16, 16]
    sequence: uint16


@dataclass
class Feedback_(IdlStruct, typename="example_msgs::msg::dds_::Feedback_"):
    current: float32
    position: float32
    ready: bool
    velocity: float32


@dataclass
class Target_(IdlStruct, typename="example_msgs::msg::dds_::Target_"):
    setpoint: float32
    type: uint8


@dataclass
class BadTarget(IdlStruct, typename="example_msgs::msg::dds_::Target_"):
    """Same DDS type name, another shape: no `type` byte."""
    setpoint: float32


@dataclass
class Bool_(IdlStruct, typename="std_msgs::msg::dds_::Bool_"):
    data: bool


# rmw_cyclonedds puts a request header (the client's id, a sequence number) before the
# request and reply fields; written here as two leading members.
@dataclass
class SetBool_Request_(IdlStruct, typename="std_srvs::srv::dds_::SetBool_Request_"):
    client: uint64
    seq: int64
    data: bool


@dataclass
class SetBool_Response_(IdlStruct, typename="std_srvs::srv::dds_::SetBool_Response_"):
    client: uint64
    seq: int64
    success: bool
    message: str


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


@dataclass
class ParameterValue(IdlStruct, typename="rcl_interfaces::msg::dds_::ParameterValue_"):
    type: uint8
    bool_value: bool
    integer_value: int64
    double_value: float64
    string_value: str
    byte_array_value: sequence[uint8]
    bool_array_value: sequence[bool]
    integer_array_value: sequence[int64]
    double_array_value: sequence[float64]
    string_array_value: sequence[str]


def double(x):
    return ParameterValue(type=3, bool_value=False, integer_value=0, double_value=x, string_value="",
                          byte_array_value=[], bool_array_value=[], integer_array_value=[],
                          double_array_value=[], string_array_value=[])


@dataclass
class Parameter(IdlStruct, typename="rcl_interfaces::msg::dds_::Parameter_"):
    name: str
    value: ParameterValue


@dataclass
class SetParametersResult(IdlStruct, typename="rcl_interfaces::msg::dds_::SetParametersResult_"):
    successful: bool
    reason: str


@dataclass
class ListParametersResult(IdlStruct, typename="rcl_interfaces::msg::dds_::ListParametersResult_"):
    names: sequence[str]
    prefixes: sequence[str]


@dataclass
class FloatingPointRange(IdlStruct, typename="rcl_interfaces::msg::dds_::FloatingPointRange_"):
    from_value: float64
    to_value: float64
    step: float64


@dataclass
class IntegerRange(IdlStruct, typename="rcl_interfaces::msg::dds_::IntegerRange_"):
    from_value: int64
    to_value: int64
    step: uint64


@dataclass
class ParameterDescriptor(IdlStruct, typename="rcl_interfaces::msg::dds_::ParameterDescriptor_"):
    name: str
    type: uint8
    description: str
    additional_constraints: str
    read_only: bool
    dynamic_typing: bool
    floating_point_range: sequence[FloatingPointRange, 1]
    integer_range: sequence[IntegerRange, 1]


@dataclass
class ListParameters_Request_(IdlStruct, typename="rcl_interfaces::srv::dds_::ListParameters_Request_"):
    client: uint64
    seq: int64
    prefixes: sequence[str]
    depth: uint64


@dataclass
class ListParameters_Response_(IdlStruct, typename="rcl_interfaces::srv::dds_::ListParameters_Response_"):
    client: uint64
    seq: int64
    result: ListParametersResult


@dataclass
class GetParameters_Request_(IdlStruct, typename="rcl_interfaces::srv::dds_::GetParameters_Request_"):
    client: uint64
    seq: int64
    names: sequence[str]


@dataclass
class GetParameters_Response_(IdlStruct, typename="rcl_interfaces::srv::dds_::GetParameters_Response_"):
    client: uint64
    seq: int64
    values: sequence[ParameterValue]


@dataclass
class SetParameters_Request_(IdlStruct, typename="rcl_interfaces::srv::dds_::SetParameters_Request_"):
    client: uint64
    seq: int64
    parameters: sequence[Parameter]


@dataclass
class SetParameters_Response_(IdlStruct, typename="rcl_interfaces::srv::dds_::SetParameters_Response_"):
    client: uint64
    seq: int64
    results: sequence[SetParametersResult]


@dataclass
class DescribeParameters_Request_(IdlStruct, typename="rcl_interfaces::srv::dds_::DescribeParameters_Request_"):
    client: uint64
    seq: int64
    names: sequence[str]


@dataclass
class DescribeParameters_Response_(IdlStruct, typename="rcl_interfaces::srv::dds_::DescribeParameters_Response_"):
    client: uint64
    seq: int64
    descriptors: sequence[ParameterDescriptor]


# ROS 2's graph (Jazzy's rmw_dds_common): which nodes a participant has, and their
# readers' and writers' GUIDs.
@dataclass
class Gid(IdlStruct, typename="rmw_dds_common::msg::dds_::Gid_"):
    data: array[uint8, 16]


@dataclass
class NodeEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::NodeEntitiesInfo_"):
    node_namespace: bounded_str[256]
    node_name: bounded_str[256]
    reader_gid_seq: sequence[Gid]
    writer_gid_seq: sequence[Gid]


@dataclass
class ParticipantEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_"):
    gid: Gid
    node_entities_info_seq: sequence[NodeEntitiesInfo]


# fcan's own service (fcan_msgs/srv/NodeInfo, `fcan-codegen ros-package` writes it).
@dataclass
class NodeInfo_Request_(IdlStruct, typename="fcan_msgs::srv::dds_::NodeInfo_Request_"):
    client: uint64
    seq: int64
    structure_needs_at_least_one_member: uint8


@dataclass
class NodeInfo_Response_(IdlStruct, typename="fcan_msgs::srv::dds_::NodeInfo_Response_"):
    client: uint64
    seq: int64
    node_id: uint8
    name: str
    phase: str
    state: str
    boot_id: uint32
    schema_sha256: str
    schema_source: str
    errors: uint16
    bus_mode: str
    frames: uint32


passed = 0
failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


class Reader:
    """Takes samples in a thread, with their arrival time."""

    def __init__(self, dp, name, cls, qos):
        self.samples = []
        # (source timestamp, arrival), both ns since the epoch.
        self.stamps = []
        self.lock = threading.Lock()
        self.reader = DataReader(dp, Topic(dp, name, cls, qos=qos), qos=qos)
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            got = self.reader.take(N=100)
            if got:
                now = time.time_ns()
                with self.lock:
                    self.samples.extend(got)
                    self.stamps.extend((g.sample_info.source_timestamp, now) for g in got)
            else:
                time.sleep(0.002)

    def snapshot(self):
        with self.lock:
            return list(self.samples)


def echo(args, topic, n):
    out = subprocess.run(
        [args.fcan, "--connect", args.connect, "--bus", "sim", "--json", "topic", "echo", topic, "-n", str(n)],
        capture_output=True, text=True, timeout=60,
    )
    if out.returncode != 0:
        raise RuntimeError(f"fcan topic echo {topic}: {out.stderr}")
    return [json.loads(line)["value"] for line in out.stdout.splitlines() if line.strip()]


def wait_for(pred, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fcan", required=True)
    ap.add_argument("--connect", required=True)
    args = ap.parse_args()

    reliable = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(50))
    dp = DomainParticipant(0)
    samples = Reader(dp, "rt/io_board3/analog/samples", AnalogSensorSamples_, reliable)
    feedback = Reader(dp, "rt/motor_driver1/motor0/feedback", Feedback_, reliable)
    feedback1 = Reader(dp, "rt/motor_driver1/motor1/feedback", Feedback_, reliable)
    state = Reader(dp, "rt/io_board3/out0/state", Bool_,
                   Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1)))
    target = DataWriter(dp, Topic(dp, "rt/motor_driver1/motor0/target", Target_, qos=reliable), qos=reliable)
    bad = DataWriter(dp, Topic(dp, "rt/motor_driver1/motor1/target", BadTarget, qos=reliable), qos=reliable)

    check(wait_for(lambda: len(samples.snapshot()) >= 5 and len(feedback.snapshot()) >= 5, 20),
          "DDS discovers the bridge and receives analog samples and motor feedback",
          f"({len(samples.snapshot())} samples, {len(feedback.snapshot())} feedback)")

    # 0. Source timestamps: when the frame reached the master, moments before arrival.
    ages = [(now - src) / 1e6 for src, now in feedback.stamps[:200]]
    check(ages and all(0 <= a < 1000 for a in ages),
          "every feedback sample carries a source timestamp under a second before it arrived",
          f"(ages in ms: min {min(ages, default=None)}, max {max(ages, default=None)})")

    # 1. Numbered samples: equal by sequence number.
    echoed = echo(args, "/io_board3/analog/samples", 40)
    time.sleep(0.3)
    dds = {s.sequence: list(s.raw) for s in samples.snapshot()}
    matched = [e for e in echoed if e["sequence"] in dds]
    same = [e for e in matched if dds[e["sequence"]] == e["raw"]]
    check(len(echoed) == 40 and len(matched) == 40 and len(same) == 40,
          "every analog sample fcan topic echo printed arrived on DDS, equal in every field",
          f"(echoed {len(echoed)}, on DDS {len(matched)}, equal {len(same)})")

    # 2 and 3. Drive motor0 in duty mode from ROS while echo watches its feedback.
    stop = threading.Event()

    def drive():
        while not stop.is_set():
            target.write(Target_(setpoint=0.5, type=0))
            time.sleep(0.02)

    before = [f.velocity for f in feedback.snapshot()[-5:]]
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    echoed_fb = echo(args, "/motor_driver1/motor0/feedback", 60)
    time.sleep(0.3)
    moving = wait_for(lambda: feedback.snapshot()[-1].velocity > 0.05, 5)
    stop.set()
    driver.join()
    # The fields are float32 on both sides: compared as float32. fcan prints an f32 as
    # its shortest decimal (0.7, not 0.699999988079071), which reads back as the same
    # f32; rounding both to 6 places disagreed at the rounding boundary.
    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]

    seen = {(f32(f.position), f32(f.velocity), f32(f.current), f.ready) for f in feedback.snapshot()}
    in_dds = [e for e in echoed_fb
              if (f32(e["position"]), f32(e["velocity"]), f32(e["current"]), e["ready"]) in seen]
    check(len(echoed_fb) == 60 and len(in_dds) == 60,
          "every motor0 feedback fcan topic echo printed arrived on DDS with the same values",
          f"(echoed {len(echoed_fb)}, found on DDS {len(in_dds)})")
    check(all(abs(v) < 1e-6 for v in before) and moving,
          "a Target published from ROS (duty 0.5) reached motor0: its velocity rose from 0",
          f"(before {before}, last {feedback.snapshot()[-1].velocity})")
    check(any(e["velocity"] > 0.05 for e in echoed_fb),
          "the same motion shows through fcan topic echo",
          f"(max {max((e['velocity'] for e in echoed_fb), default=None)})")

    # 4. Same type name, another shape: not mappable, never sent.
    n0 = len(feedback1.snapshot())
    end = time.time() + 1.0
    while time.time() < end:
        bad.write(BadTarget(setpoint=0.9))
        time.sleep(0.02)
    time.sleep(0.3)
    fb1 = feedback1.snapshot()[n0:]
    check(len(fb1) > 20 and all(abs(f.velocity) < 1e-6 for f in fb1),
          "a Target of another shape (no type byte) on motor1 did not move it",
          f"({len(fb1)} feedback, max velocity {max((abs(f.velocity) for f in fb1), default=None)})")

    # 5. An on-commit topic as std_msgs/Bool: switch out0 on through the CLI.
    out = subprocess.run(
        [args.fcan, "--connect", args.connect, "--bus", "sim", "--json", "service", "call",
         "/io_board3/out0/set", '{"on": true}'],
        capture_output=True, text=True, timeout=60,
    )
    check(out.returncode == 0, "fcan service call /io_board3/out0/set on", out.stderr)
    check(wait_for(lambda: any(s.data is True for s in state.snapshot()), 5),
          "io_board3/out0/state arrives as std_msgs/msg/Bool, on",
          f"({state.snapshot()[-3:]})")

    # 6. Services in the Cyclone framing: SetBool on out2, then a second call while the
    #    first settles is the node's BUSY, answered as success = false with the reason.
    rq = DataWriter(dp, Topic(dp, "rq/io_board3/out2/setRequest", SetBool_Request_, qos=reliable), qos=reliable)
    rr = Reader(dp, "rr/io_board3/out2/setReply", SetBool_Response_, reliable)
    client = 0x5eed_0000_0000_0001
    # out2's relay settles for 500 ms, so the second call comes while the first settles.
    out = subprocess.run(
        [args.fcan, "--connect", args.connect, "--bus", "sim", "param", "set", "io_board3.out2.min_on_ms", "500"],
        capture_output=True, text=True, timeout=60,
    )
    check(out.returncode == 0, "fcan param set io_board3.out2.min_on_ms 500", out.stderr)
    wait_for(lambda: False, 1.0)  # discovery of the new endpoints
    rq.write(SetBool_Request_(client=client, seq=(3 << 32) + 1, data=True))
    time.sleep(0.05)
    rq.write(SetBool_Request_(client=client, seq=(3 << 32) + 2, data=False))
    got = wait_for(lambda: len(rr.snapshot()) >= 2, 10)
    replies = {r.seq: r for r in rr.snapshot() if r.client == client}
    first = replies.get((3 << 32) + 1)
    second = replies.get((3 << 32) + 2)
    check(got and first is not None and first.success,
          "SetBool on /io_board3/out2/set answered success (Cyclone framing, 64-bit sequence number echoed)",
          f"({rr.snapshot()})")
    check(second is not None and not second.success and "busy" in second.message.lower(),
          "a second SetBool while the first settles: success = false with the node's reason",
          f"({second})")
    state2 = Reader(dp, "rt/io_board3/out2/state", Bool_,
                    Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                        Policy.Durability.TransientLocal, Policy.History.KeepLast(1)))
    check(wait_for(lambda: any(s.data is True for s in state2.snapshot()), 5),
          "out2 is on: its state (transient local) reaches a subscriber that joined after the call",
          f"({state2.snapshot()})")
    # Trigger: motor_driver1 motor0's clear_fault, an empty request.
    tq = DataWriter(dp, Topic(dp, "rq/motor_driver1/motor0/clear_faultRequest", Trigger_Request_, qos=reliable), qos=reliable)
    tr = Reader(dp, "rr/motor_driver1/motor0/clear_faultReply", Trigger_Response_, reliable)
    wait_for(lambda: False, 1.0)
    tq.write(Trigger_Request_(client=7, seq=1, structure_needs_at_least_one_member=0))
    check(wait_for(lambda: any(r.client == 7 and r.seq == 1 for r in tr.snapshot()), 10),
          "Trigger on /motor_driver1/motor0/clear_fault answered",
          f"({tr.snapshot()})")

    # 7. Parameters: /motor_driver2's parameter services, as `ros2 param` uses them.
    def call(svc, req_cls, resp_cls, request, seconds=10):
        w = DataWriter(dp, Topic(dp, f"rq/motor_driver2/{svc}Request", req_cls, qos=reliable), qos=reliable)
        r = Reader(dp, f"rr/motor_driver2/{svc}Reply", resp_cls, reliable)
        wait_for(lambda: False, 1.0)
        w.write(request)
        wait_for(lambda: any(x.client == request.client and x.seq == request.seq for x in r.snapshot()), seconds)
        r.stop = True
        got = [x for x in r.snapshot() if x.client == request.client and x.seq == request.seq]
        return got[0] if got else None

    listed = call("list_parameters", ListParameters_Request_, ListParameters_Response_,
                  ListParameters_Request_(client=11, seq=1, prefixes=["motor1"], depth=0))
    names = list(listed.result.names) if listed else []
    check("motor1.velocity.kp" in names and all(n.startswith("motor1.") for n in names),
          "list_parameters with prefix motor1 lists motor1's parameters by their ROS names", f"({names})")
    desc = call("describe_parameters", DescribeParameters_Request_, DescribeParameters_Response_,
                DescribeParameters_Request_(client=11, seq=2, names=["motor1.velocity.kp"]))
    rng = list(desc.descriptors[0].floating_point_range) if desc and desc.descriptors else []
    check(desc is not None and desc.descriptors[0].type == 3 and len(rng) == 1
          and rng[0].from_value == 0.0 and rng[0].to_value == 100.0,
          "describe_parameters: a double with the schema's range [0, 100]", f"({desc})")
    setr = call("set_parameters", SetParameters_Request_, SetParameters_Response_,
                SetParameters_Request_(client=11, seq=3, parameters=[
                    Parameter(name="motor1.velocity.kp", value=double(2.5)),
                    Parameter(name="motor1.velocity.kp", value=double(250.0)),
                ]))
    results = list(setr.results) if setr else []
    check(len(results) == 2 and results[0].successful and not results[1].successful
          and "100" in results[1].reason,
          "set_parameters: 2.5 accepted, 250 refused with the reason (above the maximum 100)", f"({results})")
    got = call("get_parameters", GetParameters_Request_, GetParameters_Response_,
               GetParameters_Request_(client=11, seq=4, names=["motor1.velocity.kp", "motor1.nope"]))
    values = list(got.values) if got else []
    check(len(values) == 2 and values[0].type == 3 and values[0].double_value == 2.5 and values[1].type == 0,
          "get_parameters reads 2.5 back from the node, and NOT_SET for an unknown name", f"({values})")
    out = subprocess.run(
        [args.fcan, "--connect", args.connect, "--bus", "sim", "--json", "param", "get", "motor_driver2.motor1.velocity.kp"],
        capture_output=True, text=True, timeout=60,
    )
    check(out.returncode == 0 and "2.5" in out.stdout,
          "fcan param get sees the value set from ROS", f"({out.stdout} {out.stderr})")

    # 8. The graph: ros_discovery_info (transient local, as `ros2 node list` reads it)
    #    names the three nodes and the bridge's own (fcan_sim, which publishes /rosout and
    #    /parameter_events), and the writer GUIDs it lists for motor_driver1 include
    #    the one Cyclone's own discovery saw publishing its motor0 feedback.
    latched = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                  Policy.Durability.TransientLocal, Policy.History.KeepLast(1))
    graph = Reader(dp, "ros_discovery_info", ParticipantEntitiesInfo, latched)
    pubs = BuiltinDataReader(dp, BuiltinTopicDcpsPublication)
    got_graph = wait_for(lambda: any(len(g.node_entities_info_seq) >= 4 for g in graph.snapshot()), 10)
    latest = graph.snapshot()[-1] if graph.snapshot() else None
    names = sorted(n.node_name for n in latest.node_entities_info_seq) if latest else []
    check(got_graph and names == ["fcan_sim", "io_board3", "motor_driver1", "motor_driver2"]
          and all(n.node_namespace == "/" for n in latest.node_entities_info_seq),
          "ros_discovery_info names /motor_driver1, /motor_driver2, /io_board3 and the bridge's /fcan_sim",
          f"({names})")
    feedback_writers = {p.key.bytes for p in pubs.take(N=1000) if p.topic_name == "rt/motor_driver1/motor0/feedback"}
    md1 = [n for n in latest.node_entities_info_seq if n.node_name == "motor_driver1"] if latest else []
    listed = {bytes(g.data) for g in md1[0].writer_gid_seq} if md1 else set()
    check(len(feedback_writers) == 1 and feedback_writers <= listed,
          "the graph lists the GUID of motor0/feedback's writer (as Cyclone discovered it) under motor_driver1",
          f"(discovered {[k.hex() for k in feedback_writers]}, listed {len(listed)})")
    graph.stop = True

    # 9. The node's info and reprovisioning (the ancestor's NodeInfo, ReprovisionNode).
    def node_call(node, svc, req_cls, resp_cls, request):
        w = DataWriter(dp, Topic(dp, f"rq/{node}/{svc}Request", req_cls, qos=reliable), qos=reliable)
        r = Reader(dp, f"rr/{node}/{svc}Reply", resp_cls, reliable)
        wait_for(lambda: False, 1.0)
        w.write(request)
        wait_for(lambda: any(x.client == request.client and x.seq == request.seq for x in r.snapshot()), 10)
        r.stop = True
        got = [x for x in r.snapshot() if x.client == request.client and x.seq == request.seq]
        return got[0] if got else None

    out = subprocess.run([args.fcan, "--connect", args.connect, "--bus", "sim", "--json", "nodes"],
                         capture_output=True, text=True, timeout=60)
    cli = {j["name"]: j for j in map(json.loads, out.stdout.splitlines()) if j}
    info = node_call("motor_driver1", "node_info", NodeInfo_Request_, NodeInfo_Response_,
                     NodeInfo_Request_(client=21, seq=1, structure_needs_at_least_one_member=0))
    md1 = cli.get("motor_driver1", {})
    check(info is not None and info.node_id == 1 and info.name == "motor_driver1" and info.phase == "running"
          and info.boot_id == md1.get("boot_id") and info.schema_sha256 == md1.get("schema")
          and info.bus_mode == md1.get("mode") and info.frames == md1.get("frames"),
          "/motor_driver1/node_info agrees with fcan nodes --json", f"({info} vs {md1})")
    re = node_call("io_board3", "reprovision", Trigger_Request_, Trigger_Response_,
                   Trigger_Request_(client=21, seq=2, structure_needs_at_least_one_member=0))
    check(re is not None and re.success, "/io_board3/reprovision answered success", f"({re})")
    def io3_running_again():
        o = subprocess.run([args.fcan, "--connect", args.connect, "--bus", "sim", "--json", "nodes"],
                           capture_output=True, text=True, timeout=60)
        nodes = {j["name"]: j for j in map(json.loads, o.stdout.splitlines()) if j}
        n = nodes.get("io_board3", {})
        return n.get("phase") == "running" and n.get("boot_id") == cli.get("io_board3", {}).get("boot_id")
    check(wait_for(io3_running_again, 10), "io_board3 runs again after reprovisioning, same boot id")

    for r in (samples, feedback, feedback1, state, rr, state2, tr):
        r.stop = True
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
