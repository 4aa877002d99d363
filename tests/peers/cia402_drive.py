"""A CANopen CiA 402 drive played by python's `canopen` package (PyPI, not written here).

The drive is `canopen.LocalNode(node_id, eds)` (the EDS beside this file: ros2_canopen's
`cia402_slave.eds`, Apache-2.0) on python-can's `udp_multicast` bus, the bus fcan serves
as `udp-multicast:`. The canopen package answers SDO (its `SdoServer`, aborting with
0x06020000 "object does not exist" for an index the EDS lacks), NMT commands and the
heartbeat producer per 0x1017 (its `NmtSlave`). This file adds what LocalNode leaves to
the application:

- **NMT**: a boot-up message at start, then pre-operational by itself (as a CiA 301 node
  does); reset node / reset communication restore the EDS's values (all, or 0x1000-0x1FFF)
  and boot again. PDOs run only in operational.
- **PDOs** as the master configured them: when the node goes operational, the
  communication objects 0x1400-0x1403 / 0x1800-0x1803 (COB-ID, bit 31 = not valid;
  transmission type) and mapping objects 0x1600-0x1603 / 0x1A00-0x1A03 are read from the
  node's own object dictionary, as the master wrote them over SDO. RPDOs write the mapped
  objects; TPDOs of transmission type 1-240 go out on every n-th SYNC (COB-ID per 0x1005),
  of type 254/255 on a change and on their event timer (sub 5).
- **CiA 402 state machine** (the drive's statusword 0x6041 from its controlword 0x6040),
  written from the CiA 402 / IEC 61800-7-201 state table:

      state                    statusword (bits 6,5,3,2,1,0)   controlword command
      Not ready to switch on   0 . 0 0 0 0                     (transient at start)
      Switch on disabled       1 . 0 0 0 0                     disable voltage: bit1 = 0
      Ready to switch on       0 1 0 0 0 1                     shutdown: 0xxx x110
      Switched on              0 1 0 0 1 1                     switch on: 0xxx 0111
      Operation enabled        0 1 0 1 1 1                     enable operation: 0xxx 1111
      Quick stop active        0 0 0 1 1 1                     quick stop: 0xxx x01x
      Fault reaction active    0 . 1 1 1 1
      Fault                    0 . 1 0 0 0                     fault reset: bit 7 0 -> 1

  Transitions 2 (SOD -> RTSO on shutdown), 3 (RTSO -> SO on switch on), 3+4 (RTSO -> OE
  on enable operation), 4, 5 (OE -> SO on disable operation), 6 (SO -> RTSO on shutdown),
  7/9/10/12 (to SOD on disable voltage), 7/10 (to SOD on quick stop), 8 (OE -> RTSO on
  shutdown), 11 (OE -> QSA on quick stop), 12 (QSA -> SOD when the quick stop is done,
  quick stop option code 0x605A 0-4; 5-8 stay in QSA), 13/14 (any -> FRA -> Fault), 15
  (Fault -> SOD on fault reset), 16 (QSA -> OE on enable operation, option codes 5-8).
  Bit 4 (voltage enabled) is set from Ready to switch on up to Quick stop active, bit 9
  (remote) always, bit 10 (target reached) when position actual equals target position
  in Operation enabled, bit 12 (CSP: follows the command value) in Operation enabled in
  CSP. Modes of operation 0x6060 is displayed in 0x6061.
- **CSP** (mode 8): in Operation enabled, position actual 0x6064 follows target position
  0x607A with a first-order lag (time constant `--lag` s), snapping to it when within one
  increment; velocity actual 0x606C is the change per second.
- **Heartbeat consumer** 0x1016 (entries: node id << 16 | time in ms): monitoring of a
  node starts at its first heartbeat; a miss sends EMCY 0x8130 (register bit 4,
  communication), applies 0x1029 sub 1 (0: pre-operational if operational, 1: nothing,
  2: stopped) and the abort connection option code 0x6007 (1 fault, 2 disable voltage,
  3 quick stop; the EDS lacks 0x6007, so `--abort-option`, 2 by default).
- **Hooks** on stdin, one command a line: `fault CODE` (EMCY CODE, e.g. 2310 overcurrent,
  register 0x03, then Fault reaction active -> Fault), `silent` (no frame sent any more:
  no heartbeat, no SDO answer, no PDO), `dump` (prints the state), `quit`.

Everything that happens is printed on stdout as one JSON object a line (`event`: boot,
nmt, sdo_write, pdo, state, emcy, heartbeat_lost, heartbeat_back, dump, silent).

    cia402_drive.py drive --eds EDS [--node-id 5] [--port 43113]     the drive alone
    cia402_drive.py test --fcan FCAN --eds EDS                        the test (.ci/cia402-peer.sh)

The test, in a network namespace with only `lo` (multicast routed to it), runs three
parts, each check able to fail, and ends with `cia402_peer: N checks passed` only when
all passed: `self` (canopen's own master, `RemoteNode`, judges the drive above: boot-up,
heartbeat, SDO, NMT, the state table, CSP, RPDO/TPDO on SYNC, heartbeat consumer, the
fault and silence hooks), `fcan` (`fcan serve --device cia402:id=5,eds=EDS,mode=csp`
drives the drive; the `fcan` CLI must see NMT operational, the PDO mapping in the drive's
OD, Operation enabled after `enable`, a status sample per SYNC, a CSP target followed in
the driver's units (rad, 4096 increments a revolution from 0x608F), quick_stop, disable,
the fault on `/drive5/cia402/emcy` and in status, fault_reset, the drive's own watchdog
when the bus owner is killed, a second bus owner, the silent drive offline, Classical
frames only), `missing` (the drive's EDS lacks 0x60C2: `fcan serve` must log a line
naming it and "object does not exist" within 10 s, and go on) and `classic` (the same on a
Classical fcan link, `udp-multicast:classic`, as a CANopen bus is). Every part runs even
when one before failed; the last line then names the parts that failed.
"""

import argparse
import os
import signal
import subprocess
import tempfile
import json
import math
import struct
import sys
import threading
import time

import can
import canopen
from canopen import objectdictionary
from can.interfaces.udp_multicast import UdpMulticastBus

# CiA 402 states and their statusword bits (6, 5, 3, 2, 1, 0) plus bit 4 (voltage enabled).
NRTSO, SOD, RTSO, SO, OE, QSA, FRA, FAULT = (
    "not_ready_to_switch_on", "switch_on_disabled", "ready_to_switch_on", "switched_on",
    "operation_enabled", "quick_stop_active", "fault_reaction_active", "fault")
STATUS_BITS = {
    NRTSO: 0x0000,
    SOD: 0x0040,
    RTSO: 0x0021 | 0x0010,
    SO: 0x0023 | 0x0010,
    OE: 0x0027 | 0x0010,
    QSA: 0x0007 | 0x0010,
    FRA: 0x000F,
    FAULT: 0x0008,
}
CSP = 8
ENCODER_INCREMENTS = 4096
STATE_CODES = {NRTSO: 0, SOD: 1, RTSO: 2, SO: 3, OE: 4, QSA: 5, FRA: 6, FAULT: 7}  # the driver's status.state
OPERATIONAL, PRE_OPERATIONAL, STOPPED = 5, 127, 4
SYNC_DEFAULT = 0x80


def emit(**event):
    print(json.dumps(event), flush=True)


class QuietableNetwork(canopen.Network):
    """A canopen Network that sends nothing once `silent` is set (the drive went mute)."""

    silent = False

    def send_message(self, can_id, data, remote=False):
        if self.silent:
            return
        super().send_message(can_id, data, remote)

    def send_periodic(self, can_id, data, period, remote=False):
        task = super().send_periodic(can_id, data, period, remote)
        if self.silent:
            task.stop()
        return task


class Drive:
    def __init__(self, args):
        self.args = args
        self.id = args.node_id
        self.lock = threading.RLock()
        self.node = canopen.LocalNode(self.id, args.eds)
        self.od = self.node.object_dictionary
        self.net = QuietableNetwork()
        # CANopen is Classical CAN on 11-bit identifiers: fcan's own extended-id frames
        # (its configuration plane) are no CANopen service and must not reach canopen's
        # dispatch, which looks at the identifier only.
        self.net.connect(interface="udp_multicast", channel=args.group, port=args.port, fd=True,
                         can_filters=[{"can_id": 0, "can_mask": 0, "extended": False}])
        self.net.add_node(self.node)
        # What kind of frame each CANopen service came in: a CiA 301 drive speaks
        # Classical CAN (an FD frame is an error frame to it). fcan's data plane
        # (0x100-0x3FF) is fcan's own business.
        self.fd_ids = set()
        self.net.notifier.add_listener(self)
        self.node.add_write_callback(self.on_write)
        self.net.subscribe(0, self.on_nmt)  # after NmtSlave's own, which changes the state
        self.sync_cob = None
        self.rpdo_cobs = []
        self.tpdos = []
        self.state = NRTSO
        self.quick_stop_until = None
        self.last_cw = 0
        self.from_pdo = False
        self.hb_seen = {}       # node id -> monotonic time of its last heartbeat
        self.hb_lost = set()
        for nid in range(1, 128):
            if nid != self.id:
                self.net.subscribe(0x700 + nid, self.on_heartbeat)
        self.reset_application()

    def on_message_received(self, msg):  # a python-can Listener, beside canopen's
        if msg.is_fd and not msg.is_extended_id and not 0x100 <= msg.arbitration_id <= 0x3FF:
            if msg.arbitration_id not in self.fd_ids:
                self.fd_ids.add(msg.arbitration_id)
                emit(event="fd_frame", id=msg.arbitration_id, len=len(msg.data), brs=msg.bitrate_switch)

    __call__ = on_message_received  # python-can's Notifier calls its listeners

    def stop(self):
        pass

    # -- object dictionary -------------------------------------------------------------

    def obj(self, index, sub=0):
        o = self.od[index]
        return o if isinstance(o, objectdictionary.ODVariable) else o[sub]

    def get(self, index, sub=0):
        return self.obj(index, sub).decode_raw(self.node.get_data(index, sub))

    def put(self, index, sub, value):
        """Sets a value the drive produces (no write callbacks, as a device updates its own)."""
        if index in self.od:
            self.node.data_store.setdefault(index, {})[sub] = self.obj(index, sub).encode_raw(value)

    def has(self, index):
        return index in self.od

    def reset_application(self):
        with self.lock:
            self.node.data_store.clear()
            self.put(0x6041, 0, 0)
            self.put(0x6040, 0, 0)
            self.put(0x6064, 0, self.args.start_position)
            self.put(0x606C, 0, 0)
            self.put(0x6077, 0, 0)  # torque actual, if the EDS has it
            self.put(0x6061, 0, self.get(0x6060) if self.has(0x6060) else 0)
            self.put(0x1001, 0, 0)
            # The EDS gives the encoder resolution no value (it is the device's): ours.
            if self.has(0x608F):
                self.put(0x608F, 1, self.args.encoder_increments)
            self.state = NRTSO
            self.update_statusword()
            self.set_state(SOD, "transition 1 (automatic)")

    def reset_communication(self):
        with self.lock:
            for index in [i for i in self.node.data_store if 0x1000 <= i <= 0x1FFF and i != 0x1001]:
                del self.node.data_store[index]

    # -- NMT ---------------------------------------------------------------------------

    def boot(self):
        self.node.nmt.send_command(0x81)   # INITIALISING: the boot-up message 0x700+id [0]
        emit(event="boot", node_id=self.id)
        self.node.nmt.send_command(0x80)   # to PRE-OPERATIONAL; heartbeat per 0x1017 starts
        emit(event="nmt", state=self.node.nmt.state)

    def on_nmt(self, can_id, data, timestamp):
        if len(data) < 2 or data[1] not in (0, self.id):
            return
        cmd = data[0]
        with self.lock:
            if cmd in (0x81, 0x82):
                self.stop_pdos()
                if cmd == 0x81:
                    self.reset_application()
                else:
                    self.reset_communication()
                self.hb_seen.clear()
                self.hb_lost.clear()
                emit(event="nmt", command=cmd, state="INITIALISING")
                # NmtSlave only took the state: the boot-up message, then pre-operational
                # by itself (CiA 301), the heartbeat per 0x1017 as it is after the reset.
                self.node.nmt.send_command(cmd)
                self.node.nmt.send_command(0x80)
            elif cmd == 0x01:
                self.start_pdos()
            else:
                self.stop_pdos()
            emit(event="nmt", command=cmd, state=self.node.nmt.state)

    def on_write(self, index, subindex, od, data):
        """Every write into the OD: by SDO (the master) or by an RPDO."""
        try:
            value = od.decode_raw(data)
        except Exception:
            value = bytes(data)
        if isinstance(value, (bytes, bytearray)):
            value = value.hex()
        if not self.from_pdo:
            emit(event="sdo_write", index=index, sub=subindex, value=value)
        with self.lock:
            if index == 0x6040:
                self.controlword(value)
            elif index == 0x6060:
                self.put(0x6061, 0, value)

    # -- PDOs --------------------------------------------------------------------------

    def pdo_config(self, comm, mapping):
        cob = self.get(comm, 1)
        ttype = self.get(comm, 2)
        count = self.get(mapping, 0)
        entries = []
        for k in range(1, count + 1):
            e = self.get(mapping, k)
            entries.append([e >> 16, (e >> 8) & 0xFF, e & 0xFF])
        timer = 0
        if comm >= 0x1800 and 5 in self.od[comm]:
            try:
                timer = self.get(comm, 5)
            except canopen.SdoAbortedError:
                timer = 0
        return {"n": (comm & 0xFF) + 1, "cob_id": cob & 0x7FF, "raw_cob_id": cob,
                "valid": not cob & 0x80000000, "type": ttype, "event_timer_ms": timer,
                "map": entries}

    def start_pdos(self):
        self.stop_pdos()
        rpdos = [self.pdo_config(0x1400 + n, 0x1600 + n) for n in range(4) if self.has(0x1400 + n)]
        tpdos = [self.pdo_config(0x1800 + n, 0x1A00 + n) for n in range(4) if self.has(0x1800 + n)]
        emit(event="pdo", rpdo=rpdos, tpdo=tpdos)
        for r in rpdos:
            if r["valid"]:
                cb = (lambda rr: lambda can_id, data, ts: self.on_rpdo(rr, data))(r)
                self.net.subscribe(r["cob_id"], cb)
                self.rpdo_cobs.append((r["cob_id"], cb))
        self.tpdos = [dict(t, count=0, last=None, sent_at=0.0) for t in tpdos if t["valid"]]
        self.sync_cob = (self.get(0x1005) & 0x7FF) if self.has(0x1005) else SYNC_DEFAULT
        self.net.subscribe(self.sync_cob, self.on_sync)

    def stop_pdos(self):
        for cob, cb in self.rpdo_cobs:
            self.net.unsubscribe(cob, cb)
        self.rpdo_cobs = []
        self.tpdos = []
        if self.sync_cob is not None:
            self.net.unsubscribe(self.sync_cob, self.on_sync)
            self.sync_cob = None

    def on_rpdo(self, r, data):
        if self.node.nmt.state != "OPERATIONAL":
            return
        with self.lock:
            offset = 0
            self.from_pdo = True
            try:
                for index, sub, bits in r["map"]:
                    n = bits // 8
                    chunk = bytes(data[offset:offset + n])
                    offset += n
                    if len(chunk) == n and index not in range(1, 8):  # 1-7: dummy entries
                        self.node.set_data(index, sub, chunk)
            except Exception as e:
                emit(event="rpdo_error", cob_id=r["cob_id"], error=str(e))
            finally:
                self.from_pdo = False

    def tpdo_payload(self, t):
        out = b""
        for index, sub, bits in t["map"]:
            out += self.node.get_data(index, sub)[: bits // 8]
        return out

    def on_sync(self, can_id, data, timestamp):
        with self.lock:
            if self.node.nmt.state != "OPERATIONAL":
                return
            for t in self.tpdos:
                if 1 <= t["type"] <= 240:
                    t["count"] += 1
                    if t["count"] >= t["type"]:
                        t["count"] = 0
                        self.net.send_message(t["cob_id"], self.tpdo_payload(t))

    def event_tpdos(self, now):
        for t in self.tpdos:
            if t["type"] in (254, 255):
                payload = self.tpdo_payload(t)
                timer = t["event_timer_ms"] / 1000.0
                if payload != t["last"] or (timer > 0 and now - t["sent_at"] >= timer):
                    t["last"] = payload
                    t["sent_at"] = now
                    self.net.send_message(t["cob_id"], payload)

    # -- CiA 402 -----------------------------------------------------------------------

    def set_state(self, state, why):
        if state != self.state:
            self.state = state
            self.update_statusword()
            emit(event="state", state=state, statusword=self.get(0x6041), why=why)

    def update_statusword(self):
        sw = STATUS_BITS[self.state] | 0x0200  # bit 9: remote
        if self.state == OE:
            mode = self.get(0x6061) if self.has(0x6061) else 0
            if self.get(0x6064) == self.get(0x607A):
                sw |= 0x0400  # bit 10: target reached
            if mode == CSP:
                sw |= 0x1000  # bit 12: drive follows the command value
        self.put(0x6041, 0, sw)

    def controlword(self, cw):
        rising_reset = (cw & 0x80) and not (self.last_cw & 0x80)
        self.last_cw = cw
        s = self.state
        if s == FAULT:
            if rising_reset:
                self.put(0x1001, 0, 0)
                self.net.send_message(0x80 + self.id, struct.pack("<HB5s", 0, 0, b""))  # EMCY reset
                self.set_state(SOD, "transition 15 (fault reset)")
            return
        if s in (FRA, NRTSO) or cw & 0x80:
            return
        enable_voltage, quick_stop, switch_on, enable_op = cw & 2, cw & 4, cw & 1, cw & 8
        if not enable_voltage:
            if s != SOD:
                self.set_state(SOD, "transition 7/9/10/12 (disable voltage)")
            return
        if not quick_stop:  # 0xxx x01x
            if s in (RTSO, SO):
                self.set_state(SOD, "transition 7/10 (quick stop)")
            elif s == OE:
                self.quick_stop("transition 11 (quick stop)")
            return
        if not switch_on:  # shutdown 0xxx x110
            if s in (SOD, SO, OE):
                self.set_state(RTSO, "transition 2/6/8 (shutdown)")
            return
        if not enable_op:  # switch on / disable operation 0xxx 0111
            if s == RTSO:
                self.set_state(SO, "transition 3 (switch on)")
            elif s == OE:
                self.set_state(SO, "transition 5 (disable operation)")
            return
        # enable operation 0xxx 1111
        if s == RTSO:
            self.set_state(OE, "transition 3+4 (switch on, enable operation)")
        elif s == SO:
            self.set_state(OE, "transition 4 (enable operation)")
        elif s == QSA and self.quick_stop_code() >= 5:
            self.set_state(OE, "transition 16 (enable operation)")

    def quick_stop_code(self):
        return self.get(0x605A) if self.has(0x605A) else 2

    def quick_stop(self, why):
        """Transition 11; with option codes 0-4 the drive leaves by itself (transition 12)
        once stopped: here after `--quick-stop-s` of ramp, position held."""
        self.set_state(QSA, why)
        self.quick_stop_until = time.monotonic() + self.args.quick_stop_s

    def fault(self, code, register=0x03, why="fault"):
        self.put(0x1001, 0, register)
        if self.has(0x603F):
            self.put(0x603F, 0, code)
        self.net.send_message(0x80 + self.id, struct.pack("<HB5s", code, register, b""))
        emit(event="emcy", code=code, register=register)
        self.set_state(FRA, f"transition 13 ({why})")
        self.set_state(FAULT, "transition 14 (fault reaction done)")

    # -- heartbeat consumer --------------------------------------------------------------

    def on_heartbeat(self, can_id, data, timestamp):
        nid = can_id - 0x700
        with self.lock:
            self.hb_seen[nid] = time.monotonic()
            if nid in self.hb_lost:
                self.hb_lost.discard(nid)
                emit(event="heartbeat_back", node_id=nid)

    def consumer_entries(self):
        if not self.has(0x1016):
            return []
        out = []
        for sub in range(1, self.get(0x1016, 0) + 1):
            v = self.get(0x1016, sub)
            nid, ms = (v >> 16) & 0x7F, v & 0xFFFF
            if nid and ms:
                out.append((nid, ms))
        return out

    def check_heartbeats(self, now):
        for nid, ms in self.consumer_entries():
            seen = self.hb_seen.get(nid)
            if seen is None or nid in self.hb_lost or now - seen <= ms / 1000.0:
                continue
            self.hb_lost.add(nid)
            self.put(0x1001, 0, self.get(0x1001) | 0x11)
            self.net.send_message(0x80 + self.id, struct.pack("<HB5s", 0x8130, 0x11, b""))
            emit(event="heartbeat_lost", node_id=nid, timeout_ms=ms)
            emit(event="emcy", code=0x8130, register=0x11)
            behaviour = self.get(0x1029, 1) if self.has(0x1029) else 0
            if behaviour == 0 and self.node.nmt.state == "OPERATIONAL":
                self.node.nmt.send_command(0x80)
                self.stop_pdos()
                emit(event="nmt", state=self.node.nmt.state, why="heartbeat lost (0x1029)")
            elif behaviour == 2:
                self.node.nmt.send_command(0x02)
                self.stop_pdos()
                emit(event="nmt", state=self.node.nmt.state, why="heartbeat lost (0x1029)")
            option = self.get(0x6007) if self.has(0x6007) else self.args.abort_option
            if self.state in (OE, SO, RTSO, QSA):
                if option == 1:
                    self.fault(0x8130, 0x11, "heartbeat lost, 0x6007 = 1")
                elif option == 2:
                    self.set_state(SOD, "heartbeat lost, 0x6007 = 2 (disable voltage)")
                elif option == 3 and self.state == OE:
                    self.quick_stop("heartbeat lost, 0x6007 = 3 (quick stop)")

    # -- the drive's own time ----------------------------------------------------------

    def tick(self, dt, now):
        with self.lock:
            if self.net.silent:
                return
            actual = self.get(0x6064)
            if self.state == QSA and self.quick_stop_until is not None and now >= self.quick_stop_until:
                self.quick_stop_until = None
                if self.quick_stop_code() <= 4:
                    self.set_state(SOD, "transition 12 (quick stop done)")
            if self.state == OE and self.get(0x6061) == CSP:
                diff = self.get(0x607A) - actual
                step = diff if abs(diff) <= 1 else int(diff * min(1.0, dt / self.args.lag))
                if step == 0 and diff != 0:
                    step = 1 if diff > 0 else -1
                self.put(0x6064, 0, actual + step)
                self.put(0x606C, 0, int(step / dt))
            else:
                self.put(0x606C, 0, 0)
            self.update_statusword()
            self.check_heartbeats(now)
            if self.node.nmt.state == "OPERATIONAL":
                self.event_tpdos(now)

    def run_ticks(self, stop):
        period = 0.005
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(period)
            now = time.monotonic()
            try:
                self.tick(now - last, now)
            except Exception as e:  # keep the drive alive; say what went wrong
                emit(event="tick_error", error=repr(e))
            last = now

    def dump(self):
        with self.lock:
            emit(event="dump", state=self.state, nmt=self.node.nmt.state,
                 statusword=self.get(0x6041), controlword=self.get(0x6040),
                 mode=self.get(0x6061), position=self.get(0x6064), target=self.get(0x607A),
                 velocity=self.get(0x606C), heartbeat_ms=self.get(0x1017),
                 consumers=self.consumer_entries(), silent=self.net.silent, fd_ids=sorted(self.fd_ids))

    def go_silent(self):
        with self.lock:
            self.net.silent = True
            self.node.nmt.stop_heartbeat()
            emit(event="silent")


def run_drive(args):
    drive = Drive(args)
    stop = threading.Event()
    ticker = threading.Thread(target=drive.run_ticks, args=(stop,), daemon=True)
    ticker.start()
    drive.boot()
    emit(event="ready", python_can=can.__version__, canopen=canopen.__version__, group=args.group,
         port=args.port)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "fault":
            with drive.lock:
                drive.fault(int(words[1], 16) if len(words) > 1 else 0x2310)
        elif words[0] == "silent":
            drive.go_silent()
        elif words[0] == "dump":
            drive.dump()
        elif words[0] == "quit":
            break
        else:
            emit(event="unknown_command", line=line.strip())
    stop.set()
    drive.net.disconnect()


# ======================================================================================
# The test: the drive above, judged first by canopen's own master (RemoteNode), then
# driven by fcan's bus owner (`fcan serve --device cia402:…`) through the `fcan` CLI.
# ======================================================================================

checks = 0


class CheckFailed(Exception):
    pass


def check(cond, what, detail=""):
    global checks
    if not cond:
        print(f"cia402_peer: FAILED: {what}" + (f"\n  saw: {detail}" if detail else ""), flush=True)
        raise CheckFailed(what)
    checks += 1
    print(f"cia402_peer: ok: {what}", flush=True)


class DriveProcess:
    """The drive as a child process: its JSON events collected, commands on its stdin."""

    def __init__(self, eds, port, group, extra=()):
        self.events = []
        self.cond = threading.Condition()
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "drive", "--eds", eds, "--port", str(port),
             "--group", group, *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "text", "line": line.rstrip()}
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()

    def wait(self, pred, timeout, since=0):
        """The first event from index `since` on that `pred` accepts, or None at the timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ev in self.events[since:]:
                    if pred(ev):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None and not self._pending(pred, since):
                    return None
                self.cond.wait(min(left, 0.1))

    def _pending(self, pred, since):
        return any(pred(ev) for ev in self.events[since:])

    def mark(self):
        with self.cond:
            return len(self.events)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def dump(self):
        since = self.mark()
        self.send("dump")
        return self.wait(lambda e: e["event"] == "dump", 5, since)

    def stop(self):
        if self.p.poll() is None:
            try:
                self.send("quit")
                self.p.wait(5)
            except Exception:
                self.p.kill()
                self.p.wait()

    def tail(self, n=15):
        return "\n  ".join(json.dumps(e) for e in self.events[-n:])


def self_check(args):
    """canopen's own master (RemoteNode, SDO client, NMT master) against the drive."""
    port = args.port + 7  # a port of its own: nothing else hears this part
    net = canopen.Network()
    net.connect(interface="udp_multicast", channel=args.group, port=port, fd=True,
                can_filters=[{"can_id": 0, "can_mask": 0, "extended": False}])
    frames = []
    lock = threading.Lock()

    def spy(can_id):
        def record(cid, data, ts):
            with lock:
                frames.append((time.monotonic(), cid, bytes(data)))
        net.subscribe(can_id, record)
    for cob in (0x705, 0x85, 0x585):
        spy(cob)
    node = canopen.RemoteNode(5, args.eds)
    net.add_node(node)
    drive = DriveProcess(args.eds, port, args.group)
    try:
        check(drive.wait(lambda e: e["event"] == "ready", 15) is not None, "self-check: the drive started",
              drive.tail())
        time.sleep(0.3)
        with lock:
            boot = [f for f in frames if f[1] == 0x705]
        check(boot and boot[0][2] == b"\x00", "self-check: boot-up message 0x705 [00]", boot)
        od_type = canopen.import_od(args.eds, 5)[0x1000].default
        check(node.sdo[0x1000].raw == od_type, f"self-check: SDO upload of 0x1000 = {od_type:#x} (the EDS's)")
        node.sdo[0x1017].raw = 100
        time.sleep(1.05)
        t0 = time.monotonic()
        time.sleep(1.0)
        with lock:
            beats = [f for f in frames if f[1] == 0x705 and t0 <= f[0]]
        check(7 <= len(beats) <= 13 and all(b[2] == bytes([0x7F]) for b in beats),
              "self-check: heartbeat every 100 ms (0x1017) in pre-operational", beats)
        t_reset = time.monotonic()
        node.nmt.send_command(0x81)
        time.sleep(0.5)
        with lock:
            after = [f for f in frames if f[1] == 0x705 and f[0] > t_reset]
        check(after and after[0][2] == b"\x00" and len(after) == 1 and node.sdo[0x1017].raw == 0,
              "self-check: NMT reset node -> boot-up, 0x1017 back to the EDS's 0 (no heartbeat)", after)
        node.sdo[0x1017].raw = 100
        node.nmt.state = "OPERATIONAL"
        check(node.nmt.wait_for_heartbeat(1) == "OPERATIONAL", "self-check: NMT start -> heartbeat 05")
        try:
            node.sdo.upload(0x60C3, 0)
            aborted = None
        except canopen.SdoAbortedError as e:
            aborted = e.code
        check(aborted == 0x06020000, "self-check: SDO of a missing object aborts 0x06020000", aborted)
        node.sdo[0x6060].raw = CSP
        check(node.sdo[0x6061].raw == CSP, "self-check: modes of operation 8 displayed in 0x6061")
        seen = []
        for cw in (0x06, 0x07, 0x0F):
            node.sdo[0x6040].raw = cw
            seen.append(node.sdo[0x6041].raw)
        check([sw & 0x6F for sw in seen] == [0x21, 0x23, 0x27],
              "self-check: shutdown, switch on, enable operation -> statusword 0x21, 0x23, 0x27 (CiA 402)",
              [hex(s) for s in seen])
        node.sdo[0x607A].raw = 5000
        time.sleep(1.0)
        check(node.sdo[0x6064].raw == 5000 and node.sdo[0x6041].raw & 0x0400,
              "self-check: CSP position actual reached target 5000 (target reached bit)")
        # RPDO/TPDO as configured over SDO, TPDO on SYNC.
        node.sdo[0x1400][1].raw = 0x80000000 | 0x505
        node.sdo[0x1600][0].raw = 0
        node.sdo[0x1600][1].raw = 0x60400010
        node.sdo[0x1600][2].raw = 0x607A0020
        node.sdo[0x1600][0].raw = 2
        node.sdo[0x1400][1].raw = 0x505
        node.sdo[0x1800][1].raw = 0x485
        node.sdo[0x1800][2].raw = 1
        node.sdo[0x1A00][0].raw = 0
        node.sdo[0x1A00][1].raw = 0x60410010
        node.sdo[0x1A00][2].raw = 0x60640020
        node.sdo[0x1A00][0].raw = 2
        node.nmt.state = "PRE-OPERATIONAL"
        node.nmt.state = "OPERATIONAL"
        time.sleep(0.2)
        spy(0x485)
        net.send_message(0x505, struct.pack("<Hi", 0x0F, -3000))
        time.sleep(0.6)
        net.send_message(0x080, b"")
        time.sleep(0.2)
        with lock:
            tp = [f for f in frames if f[1] == 0x485]
        check(len(tp) == 1 and struct.unpack("<Hi", tp[0][2])[1] == -3000 and tp[0][2][0] & 0x6F == 0x27,
              "self-check: RPDO 0x505 (controlword, target -3000) moved the drive; TPDO 0x485 on SYNC "
              "carries statusword and position actual -3000", tp)
        # Heartbeat consumer: node 0x7F beats, then stops.
        node.sdo[0x1016][1].raw = (0x7F << 16) | 200
        since = drive.mark()
        beat = net.send_periodic(0x77F, [5], 0.05)
        time.sleep(0.6)
        check(drive.wait(lambda e: e["event"] == "heartbeat_lost", 0.01, since) is None,
              "self-check: no heartbeat error while node 127 beats")
        beat.stop()
        t_stop = time.monotonic()
        lost = drive.wait(lambda e: e["event"] == "heartbeat_lost", 2, since)
        time.sleep(0.1)
        with lock:
            emcy = [f for f in frames if f[1] == 0x85 and f[0] > t_stop]
        check(lost is not None and emcy and struct.unpack_from("<H", emcy[0][2])[0] == 0x8130,
              "self-check: master heartbeat lost -> EMCY 0x8130", (lost, emcy))
        st = drive.dump()
        check(st["state"] == SOD and st["nmt"] == "PRE-OPERATIONAL",
              "self-check: ... and disable voltage (0x6007 default 2), pre-operational (0x1029 sub 1 = 0)", st)
        # Fault hook.
        for cw in (0x06, 0x0F):
            node.sdo[0x6040].raw = cw
        t_fault = time.monotonic()
        drive.send("fault 2310")
        time.sleep(0.3)
        with lock:
            emcy = [f for f in frames if f[1] == 0x85 and f[0] > t_fault]
        check(emcy and emcy[0][2][:3] == bytes([0x10, 0x23, 0x03]) and node.sdo[0x6041].raw & 0x4F == 0x08,
              "self-check: fault hook -> EMCY 0x2310 register 0x03, statusword Fault", emcy)
        node.sdo[0x6040].raw = 0x80
        check(node.sdo[0x6041].raw & 0x4F == 0x40, "self-check: fault reset -> switch on disabled")
        # Silence.
        drive.send("silent")
        drive.wait(lambda e: e["event"] == "silent", 2)
        t_silent = time.monotonic()
        try:
            node.sdo[0x1000].raw
            answered = True
        except Exception:
            answered = False
        with lock:
            after = [f for f in frames if f[0] > t_silent + 0.05]
        check(not answered and not after, "self-check: silent drive sends nothing", after)
    finally:
        drive.stop()
        net.disconnect()


def fcan_cli(args, *argv, timeout=20):
    cmd = [args.fcan, "--connect", args.endpoint, *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class Serve:
    """`fcan serve` with its log (stderr and stdout) collected."""

    def __init__(self, args, eds, bus=None):
        spec = f"cia402:id=5,eds={eds},mode=csp"
        self.lines = []
        self.lock = threading.Lock()
        self.p = subprocess.Popen(
            [args.fcan, "serve", "--bus", bus or args.bus, "--device", spec, "--listen", args.endpoint, "--no-cache"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info")))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.lock:
                self.lines.append(line.rstrip())

    def wait_line(self, pred, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for line in self.lines:
                    if pred(line):
                        return line
            if self.p.poll() is not None:
                time.sleep(0.2)
                with self.lock:
                    return next((l for l in self.lines if pred(l)), None)
            time.sleep(0.1)
        return None

    def log(self, n=40):
        with self.lock:
            return "\n  ".join(self.lines[-n:])

    def stop(self):
        """Ctrl-C; True when it exits within 10 s."""
        if self.p.poll() is not None:
            return True
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(10)
            return True
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return False


def find_node(args, want, timeout):
    """`fcan nodes --json` until node 5 satisfies `want` (or the timeout); the last row."""
    deadline = time.monotonic() + timeout
    row = None
    while time.monotonic() < deadline:
        r = fcan_cli(args, "--json", "nodes")
        rows = [x for x in json_lines(r.stdout) if x.get("id") == 5]
        row = rows[0] if rows else {"stdout": r.stdout, "stderr": r.stderr[-2000:]}
        if rows and want(row):
            return True, row
        time.sleep(0.5)
    return False, row


def status_samples(args, name, n, timeout=10):
    r = fcan_cli(args, "--json", "topic", "echo", f"/{name}/cia402/status", "-n", str(n), "--timeout", str(timeout),
                 timeout=timeout + 20)
    return r, [x["value"] for x in json_lines(r.stdout) if "value" in x]


def call(args, name, service):
    r = fcan_cli(args, "--json", "service", "call", f"/{name}/cia402/{service}", "{}", timeout=30)
    rows = json_lines(r.stdout)
    ok = r.returncode == 0 and rows and (rows[0].get("response") or {}).get("success") is True
    return ok, r.stdout + r.stderr


def wait_running(args, drive, serve, since, what):
    op = drive.wait(lambda e: e["event"] == "nmt" and e.get("state") == "OPERATIONAL", 30, since)
    check(op is not None, f"fcan: {what}: the driver took the drive to NMT operational",
          drive.tail() + "\n  serve: " + serve.log())
    ok, row = find_node(args, lambda r: r.get("phase") == "running", 20)
    check(ok and row.get("driver") == "cia402", f"fcan: {what}: `fcan nodes` lists node 5 running, driver cia402",
          row)
    return row


def fcan_run(args):
    """fcan's bus owner drives the drive over the bus; the CLI says what it sees."""
    drive = DriveProcess(args.eds, args.port, args.group)
    serve = None
    stopped = True
    rad_per_inc = 2 * math.pi / ENCODER_INCREMENTS  # the driver's documented conversion, gear 1
    try:
        check(drive.wait(lambda e: e["event"] == "ready", 15) is not None, "fcan: the drive started", drive.tail())
        serve = Serve(args, args.eds)
        row = wait_running(args, drive, serve, 0, "first bus owner")
        name = row.get("name")
        check(name == "drive5", "fcan: the node is named drive5", name)
        pdo = [e for e in drive.events if e["event"] == "pdo"][-1]
        mapped_r = {m[0] for r in pdo["rpdo"] if r["valid"] for m in r["map"]}
        mapped_t = {m[0] for t in pdo["tpdo"] if t["valid"] for m in t["map"]}
        check({0x6040, 0x607A} <= mapped_r and {0x6041, 0x6064} <= mapped_t,
              "fcan: the PDO mapping written into the drive's OD maps 0x6040, 0x607A (RPDO) and "
              "0x6041, 0x6064 (TPDO)", json.dumps(pdo))
        cobs = [r["cob_id"] for r in pdo["rpdo"] + pdo["tpdo"] if r["valid"]]
        check(all(not 0x100 <= c <= 0x3FF for c in cobs),
              "fcan: every valid PDO COB-ID is outside fcan's data plane 0x100-0x3FF", [hex(c) for c in cobs])
        sync_types = [t["type"] for t in pdo["tpdo"] if t["valid"] and {0x6041, 0x6064} & {m[0] for m in t["map"]}]
        check(sync_types and all(1 <= t <= 240 for t in sync_types),
              "fcan: the TPDOs carrying statusword/position are synchronous (type 1-240)", sync_types)
        st = drive.dump()
        check(st["heartbeat_ms"] > 0 and st["consumers"] and st["consumers"][0][1] > 0,
              "fcan: the driver set the drive's heartbeat producer (0x1017) and consumer (0x1016)", st)
        # Enable -> Operation enabled.
        ok, out = call(args, name, "enable")
        check(ok, "fcan: service call enable answered success", out)
        st = drive.dump()
        check(st["state"] == OE and st["statusword"] & 0x6F == 0x27,
              "fcan: the drive is in Operation enabled (statusword xx1x 0111) after enable", st)
        check(st["mode"] == CSP, "fcan: the drive is in CSP (0x6061 = 8)", st)
        r, samples = status_samples(args, name, 3)
        check(r.returncode == 0 and len(samples) == 3, "fcan: /drive5/cia402/status has samples", r.stdout + r.stderr)
        check(all(x.get("statusword", 0) & 0x6F == 0x27 and x.get("state") == STATE_CODES[OE] and x.get("mode") == CSP
                  for x in samples),
              "fcan: status samples say Operation enabled (statusword, state 4) in CSP (mode 8)", samples)
        r = fcan_cli(args, "--json", "topic", "hz", f"/{name}/cia402/status", "--window", "2", timeout=30)
        hz = json_lines(r.stdout)
        check(hz and 50 <= hz[0].get("rate_hz", 0) <= 150,
              "fcan: a status sample per SYNC: ~100 Hz (sync_ms 10; the drive's TPDOs answer each SYNC)",
              r.stdout + r.stderr)
        start_pos = st["position"]
        # CSP target: position actual follows.
        target = float(args.target)
        want_inc = target / rad_per_inc
        r = fcan_cli(args, "topic", "pub", f"/{name}/cia402/command",
                     json.dumps({"position": target, "velocity": 0, "torque": 0}))
        check(r.returncode == 0, "fcan: topic pub command accepted", r.stdout + r.stderr)
        time.sleep(1.5)
        st2 = drive.dump()
        check(st2["target"] != start_pos and abs(st2["target"] - want_inc) <= 1,
              f"fcan: the driver wrote target position {target} rad as {st2['target']} increments "
              f"(4096 increments/rev: {want_inc:.1f})", (st, st2))
        check(st2["position"] == st2["target"], "fcan: the drive's position actual moved and settled on it", st2)
        r, samples = status_samples(args, name, 2)
        want_rad = st2["position"] * rad_per_inc
        check(samples and all(abs(x["position"] - want_rad) <= 1e-6 for x in samples),
              f"fcan: /drive5/cia402/status position is the drive's {st2['position']} increments in rad "
              f"({want_rad:.6f})", samples)
        # Quick stop and disable (services), enable again.
        ok, out = call(args, name, "quick_stop")
        st_q = drive.dump()
        qs = [e for e in drive.events if e["event"] == "state" and e["state"] == QSA]
        check(ok and qs and st_q["state"] in (QSA, SOD),
              "fcan: quick_stop answered success, the drive went through Quick stop active "
              "(0x605A = 2: then Switch on disabled)", (out, st_q))
        time.sleep(0.5)
        ok, out = call(args, name, "enable")
        check(ok and drive.dump()["state"] == OE, "fcan: enable after quick stop reaches Operation enabled", out)
        ok, out = call(args, name, "disable")
        st_d = drive.dump()
        check(ok and st_d["state"] == SOD and st_d["statusword"] & 0x4F == 0x40,
              "fcan: disable answered success, the drive is in Switch on disabled", (out, st_d))
        r, samples = status_samples(args, name, 1)
        check(samples and samples[0].get("state") == STATE_CODES[SOD], "fcan: status says Switch on disabled (1)",
              samples)
        ok, out = call(args, name, "enable")
        check(ok and drive.dump()["state"] == OE, "fcan: enable again reaches Operation enabled", out)
        # Fault.
        echo = subprocess.Popen([args.fcan, "--connect", args.endpoint, "--json", "topic", "echo",
                                 f"/{name}/cia402/emcy", "-n", "1", "--timeout", "15"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        drive.send("fault 2310")
        out, err = echo.communicate(timeout=30)
        emcys = [x["value"] for x in json_lines(out) if "value" in x]
        check(echo.returncode == 0 and emcys and emcys[0].get("code") == 0x2310 and emcys[0].get("register") == 3,
              "fcan: the raised fault appears on /drive5/cia402/emcy: code 0x2310, register 3", out + err)
        time.sleep(0.3)
        r, samples = status_samples(args, name, 1)
        check(samples and samples[0].get("statusword", 0) & 0x4F == 0x08 and samples[0].get("state") == STATE_CODES[FAULT]
              and samples[0].get("error_code") == 0x2310,
              "fcan: status says Fault (statusword, state 7) with error_code 0x2310", samples)
        r = fcan_cli(args, "--json", "nodes")
        print("cia402_peer: `fcan nodes` in fault: " + r.stdout.strip(), flush=True)
        ok, out = call(args, name, "enable")
        check(not ok and drive.dump()["state"] == FAULT, "fcan: enable in Fault is refused", out)
        ok, out = call(args, name, "fault_reset")
        st3 = drive.dump()
        check(ok and st3["state"] == SOD, "fcan: fault_reset takes the drive out of Fault (switch on disabled)",
              (out, st3))
        r, samples = status_samples(args, name, 1)
        check(samples and samples[0].get("error_code") == 0, "fcan: error_code cleared after fault_reset", samples)
        # The command watchdog: the bus owner dies, the drive's heartbeat consumer acts.
        ok, out = call(args, name, "enable")
        check(ok and drive.dump()["state"] == OE, "fcan: enabled again", out)
        since = drive.mark()
        serve.p.kill()
        serve.p.wait()
        lost = drive.wait(lambda e: e["event"] == "heartbeat_lost", 3, since)
        check(lost is not None and lost["node_id"] == 127,
              "fcan: bus owner killed -> the drive's heartbeat consumer misses node 127 (EMCY 0x8130)", drive.tail())
        st4 = drive.dump()
        check(st4["state"] == SOD, "fcan: ... and applied its abort connection option (the EDS lacks 0x6007: the drive's own, disable voltage): switch on disabled", st4)
        print("cia402_peer: the killed fcan serve's log (last lines):\n  " + serve.log(40), flush=True)
        # A new bus owner brings it up again.
        since = drive.mark()
        serve = Serve(args, args.eds)
        wait_running(args, drive, serve, since, "second bus owner")
        ok, out = call(args, name, "enable")
        check(ok and drive.dump()["state"] == OE, "fcan: the second bus owner enables the drive", out)
        # Silence.
        drive.send("silent")
        ok, row = find_node(args, lambda r: r.get("phase") == "offline", 15)
        check(ok, "fcan: the silent drive is offline in `fcan nodes`", row)
        check(serve.p.poll() is None, "fcan: fcan serve still runs", serve.log())
        fd = [e for e in drive.events if e["event"] == "fd_frame"]
        check(not fd, "fcan: every CANopen frame the driver sent the drive (NMT, SYNC, SDO, RPDO, heartbeat) "
              "was Classical CAN", fd)
    finally:
        if serve is not None:
            stopped = serve.stop()
            print("cia402_peer: fcan serve's log (last lines):\n  " + serve.log(60), flush=True)
        drive.stop()
    check(stopped, "fcan: fcan serve exits on SIGINT")


def missing_object_run(args):
    """The drive's EDS lacks 0x60C2, which the driver writes: fcan serve names it, at once."""
    text = open(args.eds).read().splitlines()
    out, skip = [], False
    for line in text:
        if line.startswith("["):
            skip = line.strip().upper().startswith("[60C2")
        if not skip:
            out.append(line)
    lacking = os.path.join(tempfile.mkdtemp(), "cia402_slave_without_60C2.eds")
    open(lacking, "w").write("\n".join(out) + "\n")
    check(0x60C2 not in canopen.import_od(lacking, 5) and 0x60C2 in canopen.import_od(args.eds, 5),
          "missing: the drive's copy of the EDS lacks 0x60C2, fcan's has it")
    drive = DriveProcess(lacking, args.port, args.group)
    serve = None
    try:
        check(drive.wait(lambda e: e["event"] == "ready", 15) is not None, "missing: the drive started")
        t0 = time.monotonic()
        serve = Serve(args, args.eds)
        line = serve.wait_line(lambda l: "60c2" in l.lower() and "object does not exist" in l.lower(), 10)
        check(line is not None, "missing: within 10 s fcan serve logs a line naming 0x60C2 and \"object does not exist\"",
              serve.log())
        print(f"cia402_peer: after {time.monotonic() - t0:.1f} s: {line}", flush=True)
        # 0x60C2 is optional to the driver (docs/drivers.md): the bring-up goes on.
        ok, row = find_node(args, lambda r: r.get("phase") == "running", 20)
        check(ok, "missing: fcan serve still answers and the bring-up went on without 0x60C2 (node 5 running)", row)
    finally:
        stopped = serve.stop() if serve is not None else True
        drive.stop()
    check(stopped, "missing: fcan serve exits on SIGINT afterwards (it never hangs)")


def classic_run(args):
    """CANopen is Classical CAN: the same drive on a Classical fcan link (`udp-multicast:classic`)."""
    drive = DriveProcess(args.eds, args.port, args.group)
    serve = None
    try:
        check(drive.wait(lambda e: e["event"] == "ready", 15) is not None, "classic: the drive started")
        serve = Serve(args, args.eds, bus=args.classic_bus)
        op = drive.wait(lambda e: e["event"] == "nmt" and e.get("state") == "OPERATIONAL", 30)
        check(op is not None, f"classic: on {args.classic_bus} the driver took the drive to NMT operational",
              serve.log())
        ok, row = find_node(args, lambda r: r.get("phase") == "running", 20)
        check(ok, f"classic: on {args.classic_bus} `fcan nodes` lists node 5 running", row)
        ok, out = call(args, row.get("name"), "enable")
        check(ok and drive.dump()["state"] == OE, f"classic: on {args.classic_bus} enable reaches Operation enabled",
              out)
    finally:
        stopped = serve.stop() if serve is not None else True
        if serve is not None:
            print("cia402_peer: classic: fcan serve's log (last lines):\n  " + serve.log(30), flush=True)
        drive.stop()
    check(stopped, "classic: fcan serve exits on SIGINT")


def run_test(args):
    print(f"cia402_peer: python-can {can.__version__}, canopen {canopen.__version__}, group {args.group}, "
          f"port {args.port}", flush=True)
    # Each part runs even when one before failed (a failure ends its own part only), so
    # one run says everything that is wrong; any failure fails the run.
    failed = []
    parts = {"self": self_check, "fcan": fcan_run, "missing": missing_object_run, "classic": classic_run}
    for name, part in parts.items():
        if name not in args.parts.split(","):
            continue
        try:
            part(args)
        except CheckFailed as e:
            failed.append(f"{name} ({e})")
        except Exception:
            import traceback
            traceback.print_exc(file=sys.stdout)
            failed.append(f"{name} (an exception, above)")
    if failed:
        print(f"cia402_peer: {checks} checks passed, then FAILED in: " + "; ".join(failed), flush=True)
        raise SystemExit(1)
    print(f"cia402_peer: {checks} checks passed", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive", help="run the drive")
    d.add_argument("--node-id", type=int, default=5)
    d.add_argument("--eds", required=True)
    d.add_argument("--group", default=UdpMulticastBus.DEFAULT_GROUP_IPv6)
    d.add_argument("--port", type=int, default=43113)
    d.add_argument("--lag", type=float, default=0.05, help="CSP following time constant, s")
    d.add_argument("--start-position", type=int, default=0)
    d.add_argument("--quick-stop-s", type=float, default=0.2, help="time in Quick stop active before 0x605A 0-4 leave it")
    d.add_argument("--encoder-increments", type=int, default=ENCODER_INCREMENTS,
                   help="0x608F sub 1, increments per motor revolution (the EDS has no value)")
    d.add_argument("--abort-option", type=int, default=2,
                   help="0x6007 when the EDS lacks it: 0 none, 1 fault, 2 disable voltage, 3 quick stop")
    t = sub.add_parser("test", help="the test: self-check, then fcan serve drives the drive")
    t.add_argument("--fcan", required=True)
    t.add_argument("--eds", required=True)
    t.add_argument("--group", default=UdpMulticastBus.DEFAULT_GROUP_IPv6)
    t.add_argument("--port", type=int, default=43113)
    t.add_argument("--bus", default="udp-multicast", help="the fcan link of parts self/fcan/missing")
    t.add_argument("--classic-bus", default="udp-multicast:classic", help="the fcan link of part classic")
    t.add_argument("--endpoint", default="tcp/127.0.0.1:7447")
    t.add_argument("--target", default="1.0", help="the CSP position commanded, in the driver's units")
    t.add_argument("--parts", default="self,fcan,missing,classic")
    args = ap.parse_args()
    if args.cmd == "drive":
        run_drive(args)
    else:
        run_test(args)


if __name__ == "__main__":
    main()
