//! Damiao's own command watchdog (register 9, `TIMEOUT`), armed by the `mit` driver for
//! `layout=damiao` before every enable (issue 34): the driver and the simulated motor talk
//! through the public `Device` and `SimDevice` APIs on a clock the test advances, and the
//! register frames on the wire are checked against frames written out by hand from the
//! public documents (never produced by our encoder).
//!
//! # Where the vectors come from
//!
//! - **Register write**: standard id `0x7FF`, `[CAN_ID_L, CAN_ID_H, 0x55, RID, value]`
//!   (`enactic/openarm_can`, `include/openarm/damiao_motor/dm_motor_control.hpp`, the
//!   table in the comment of `pack_write_param_data`, whose body puts the value's four
//!   bytes little-endian in D[4..8]; `cmjang/DM_Control_Python`, `DM_CAN.py`,
//!   `__write_motor_param`: `data_to_uint8s` of a uint32 register, little-endian).
//! - **Register read**: `0x7FF`, `[CAN_ID_L, CAN_ID_H, 0x33, RID, 0, 0, 0, 0]` (the table
//!   in the comment of openarm_can's `pack_query_param_data`; `DM_CAN.py`,
//!   `__read_RID_param`).
//! - **The answer**: on the motor's master id, `[CAN_ID_L, CAN_ID_H, 0x33 or 0x55, RID,
//!   value LE]` (openarm_can `dm_motor_control.cpp`, `parse_motor_param_data`: byte 2
//!   `0x33` or `0x55`, RID in byte 3, the value in bytes 4–7; `DM_CAN.py`,
//!   `__process_set_param_packet`, the same test, and the motor id from bytes 0–1).
//! - **RID 9 = `TIMEOUT`**, a uint32 in `[0, 2^32-1]` (`DM_CAN.py`, `DM_variable.TIMEOUT
//!   = 9`, and its README's register table "Timeout Alarm Time"; openarm_can
//!   `dm_motor_constants.hpp`, `RID::TIMEOUT = 9`).
//! - **Its unit**: unsettled by a Damiao document we could read. 50 µs per count in
//!   `jia-xie/python-damiao-driver` (`damiao_motor/core/motor.py`: "1 unit = 50
//!   microseconds", `set_can_timeout` writes `timeout_ms × 20`) and in a summary of
//!   Synria's Gloria-M documentation; milliseconds in another Damiao driver's table;
//!   no unit in DM_Control_Python or openarm_can. The driver writes the 50 µs reading
//!   (× 20): a firmware counting 1 ms then times out 20 times later than asked, never
//!   sooner. So 200 ms = 4000 = `0x00000FA0` → `A0 0F 00 00`; 150 ms = 3000 =
//!   `0x00000BB8` → `B8 0B 00 00`; 50 ms = 1000 = `0x000003E8` → `E8 03 00 00`.
//! - **Enable** `FF FF FF FF FF FF FF FC` on the motor's id, **clear error** `… FB`
//!   (openarm_can `pack_command_data`; DM_CAN.py `__control_cmd`).
//! - **State `0xD`, lost communication**, in the high nibble of a reply's byte 0
//!   (python-damiao-driver `DM_MOTOR_LOST_COMM = 0xD`; conformance/mit/README.md): motor
//!   1 → byte 0 `0xD1`.
//!
//! Ids as OpenArm's README: motor (send) id `0x01`, master (receive) id `0x11`.

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_drivers::message::Message;
use fcan_drivers::mit::sim::SimMit;
use fcan_drivers::mit::wire::{self, Framing, Layout, Ranges};
use fcan_drivers::mit::{CONFIRM_US, WATCHDOG_MAX_MS};
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices, BusFile, DeviceSpec};
use fcan_drivers::{Device, DeviceHost, Io, Note, Served, Severity, Watchdog};

const ID: u16 = 0x01;
const MASTER: u16 = 0x11;

fn classic(id: u16, data: [u8; 8]) -> Frame {
    Frame::classic(CanId::Standard(id), &data).unwrap()
}

/// `0x7FF`: write TIMEOUT (RID 9) of motor 1, the value's bytes little-endian.
fn write_timeout(v: [u8; 4]) -> Frame {
    classic(0x7FF, [0x01, 0x00, 0x55, 0x09, v[0], v[1], v[2], v[3]])
}
/// `0x7FF`: read TIMEOUT of motor 1.
fn read_timeout() -> Frame {
    classic(0x7FF, [0x01, 0x00, 0x33, 0x09, 0, 0, 0, 0])
}
/// Motor 1's answer to a read of TIMEOUT, on its master id.
fn timeout_answer(v: [u8; 4]) -> Frame {
    classic(MASTER, [0x01, 0x00, 0x33, 0x09, v[0], v[1], v[2], v[3]])
}
/// Its answer to a write.
fn write_echo(v: [u8; 4]) -> Frame {
    classic(MASTER, [0x01, 0x00, 0x55, 0x09, v[0], v[1], v[2], v[3]])
}
fn enable_frame() -> Frame {
    classic(ID, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC])
}
fn clear_error_frame() -> Frame {
    classic(ID, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFB])
}

const MS200: [u8; 4] = [0xA0, 0x0F, 0x00, 0x00];
const MS150: [u8; 4] = [0xB8, 0x0B, 0x00, 0x00];
const MS50: [u8; 4] = [0xE8, 0x03, 0x00, 0x00];
const OFF: [u8; 4] = [0; 4];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Host,
    Motor,
}

/// One `mit` driver and one simulated Damiao (id 1, master 0x11) on a bus of two.
struct Bench {
    dev: Box<dyn Device>,
    motor: SimMit,
    now: u64,
    wire: Vec<(Side, u64, Frame)>,
    notes: Vec<Note>,
    completed: Vec<(u8, Vec<u8>)>,
    published: Vec<(u8, Vec<u8>)>,
    /// Which of the driver's frames the motor hears.
    hears: fn(&Frame) -> bool,
    /// The bus owner is gone: the driver runs no more, the motor does.
    host_stopped: bool,
    enable: u8,
    disable: u8,
    response: Message,
    mit: (u8, Message),
    feedback: (u8, Message),
}

impl Bench {
    fn new(spec: &str) -> Bench {
        let spec = DeviceSpec::parse(spec).unwrap();
        let dev = spec.device().unwrap();
        let framing = if spec.keys.iter().any(|(k, v)| k == "fd" && v == "true") {
            Framing::Fd { brs: true }
        } else {
            Framing::Classic
        };
        let schema = fcan_core::blob::decode(dev.blob()).unwrap();
        let ty = &schema.types[0];
        let enable = Message::service(ty, "enable").unwrap();
        let disable = Message::service(ty, "disable").unwrap();
        let response = Message::new(&ty.services[enable as usize].response);
        let mut b = Bench {
            dev,
            motor: SimMit::new(ID, MASTER, Layout::Damiao, Ranges::DM_J4310).with_framing(framing),
            now: 0,
            wire: Vec::new(),
            notes: Vec::new(),
            completed: Vec::new(),
            published: Vec::new(),
            hears: |_| true,
            host_stopped: false,
            enable,
            disable,
            response,
            mit: Message::topic(ty, "mit").unwrap(),
            feedback: Message::topic(ty, "feedback").unwrap(),
        };
        // The driver's first poll (it writes TIMEOUT from the start).
        b.run_for(10_000, 1_000);
        b
    }

    fn handle(&mut self, io: Io) {
        self.notes.extend(io.notes().iter().cloned());
        self.completed.extend(io.completed().iter().cloned());
        self.published.extend(io.published().iter().cloned());
        for f in io.frames().to_vec() {
            self.wire.push((Side::Host, self.now, f));
            if !(self.hears)(&f) {
                continue;
            }
            let mut out = Vec::new();
            self.motor.receive(self.now, &f, &mut out);
            self.motor_sent(out);
        }
    }

    fn motor_sent(&mut self, out: Vec<Frame>) {
        for r in out {
            self.wire.push((Side::Motor, self.now, r));
            self.driver_hears(&r);
        }
    }

    fn driver_hears(&mut self, f: &Frame) {
        if self.host_stopped || !self.dev.claims(f) {
            return;
        }
        let mut io = Io::default();
        self.dev.on_frame(self.now, f, &mut io);
        self.handle(io);
    }

    fn run_for(&mut self, us: u64, step: u64) {
        let end = self.now + us;
        while self.now < end {
            self.now = (self.now + step).min(end);
            let mut out = Vec::new();
            self.motor.poll(self.now, &mut out);
            self.motor_sent(out);
            if !self.host_stopped && self.dev.poll_at().is_some_and(|t| t <= self.now) {
                let mut io = Io::default();
                self.dev.poll(self.now, &mut io);
                self.handle(io);
            }
        }
    }

    fn call(&mut self, service: u8) {
        let mut io = Io::default();
        let served = self.dev.on_service(self.now, service, &[], &mut io);
        assert_eq!(served, Served::Pending);
        self.handle(io);
    }

    fn result(&self, service: u8) -> Option<bool> {
        let slot = self.response.slot("success").unwrap();
        self.completed
            .iter()
            .rev()
            .find(|(s, _)| *s == service)
            .map(|(_, r)| slot.get(r) == 1.0)
    }

    /// An MIT velocity command: `kd·(velocity − v)`, nothing else.
    fn command(&mut self, velocity: f64) {
        let (topic, m) = &self.mit;
        let mut bytes = m.zeroed();
        for (field, v) in [
            ("position", 0.0),
            ("velocity", velocity),
            ("kp", 0.0),
            ("kd", 2.0),
            ("torque", 0.0),
        ] {
            m.slot(field).unwrap().set(&mut bytes, v);
        }
        let topic = *topic;
        let mut io = Io::default();
        self.dev.on_command(self.now, topic, &bytes, &mut io);
        self.handle(io);
    }

    fn drive(&mut self, velocity: f64, us: u64) {
        for _ in 0..us / 10_000 {
            self.command(velocity);
            self.run_for(10_000, 1_000);
        }
    }

    /// The `error` field of the last feedback the driver published.
    fn last_error(&self) -> Option<f64> {
        let (topic, m) = &self.feedback;
        let slot = m.slot("error").unwrap();
        self.published
            .iter()
            .rev()
            .find(|(t, _)| t == topic)
            .map(|(_, b)| slot.get(b))
    }

    fn find(&self, from: usize, side: Side, f: &Frame) -> Option<usize> {
        self.wire[from..]
            .iter()
            .position(|(s, _, g)| *s == side && g == f)
            .map(|i| i + from)
    }

    fn count(&self, from: usize, side: Side, f: &Frame) -> usize {
        self.wire[from..]
            .iter()
            .filter(|(s, _, g)| *s == side && g == f)
            .count()
    }

    fn warned(&self, what: &str) -> bool {
        self.notes
            .iter()
            .any(|n| n.severity == Severity::Warn && n.text.contains(what))
    }
}

/// The arming sequence on the wire from `from`: the write of `value`, the read-back, the
/// motor's answer with the same value, and only then the enable. Returns the enable's
/// position.
fn armed_then_enabled(b: &Bench, from: usize, value: [u8; 4]) -> usize {
    let enable = b
        .find(from, Side::Host, &enable_frame())
        .unwrap_or_else(|| panic!("no enable on the wire: {:#?}", &b.wire[from..]));
    let write = b
        .find(from, Side::Host, &write_timeout(value))
        .expect("TIMEOUT written");
    let read = b
        .find(write, Side::Host, &read_timeout())
        .expect("and read back");
    let answer = b
        .find(read, Side::Motor, &timeout_answer(value))
        .expect("the motor answers the value written");
    assert!(
        write < read && read < answer && answer < enable,
        "write {write}, read {read}, answer {answer}, enable {enable}"
    );
    enable
}

#[test]
fn the_register_frames_are_the_documents() {
    assert_eq!(
        wire::register_write(ID, wire::RID_TIMEOUT, 4000),
        write_timeout(MS200)
    );
    assert_eq!(wire::register_read(ID, wire::RID_TIMEOUT), read_timeout());
    assert_eq!(wire::REGISTER_ID, 0x7FF);
    // 0x7FF is not fcan's: data identifiers are 0x100..=0x3FF (docs/protocol.md §2).
    const { assert!(wire::REGISTER_ID > 0x3FF) };
    // A motor id above 0xFF puts its high byte in byte 1.
    assert_eq!(
        wire::register_read(0x123, 9).data(),
        &[0x23, 0x01, 0x33, 0x09, 0, 0, 0, 0]
    );
    let r = wire::decode_register_reply(&timeout_answer(MS150)).unwrap();
    assert_eq!(
        (r.motor, r.op, r.rid, r.value_u32()),
        (1, wire::REGISTER_READ, 9, 3000)
    );
    let r = wire::decode_register_reply(&write_echo(MS200)).unwrap();
    assert_eq!((r.op, r.value_u32()), (wire::REGISTER_WRITE, 4000));
    let r = wire::decode_register_request(&write_timeout(MS50)).unwrap();
    assert_eq!((r.motor, r.rid, r.value_u32()), (1, 9, 1000));
    // Not register frames: another identifier, byte 2 neither 0x33 nor 0x55, 7 bytes.
    assert!(wire::decode_register_request(&enable_frame()).is_none());
    assert!(wire::decode_register_reply(&classic(MASTER, [1, 0, 0x44, 9, 0, 0, 0, 0])).is_none());
    let short = Frame::classic(CanId::Standard(0x7FF), &[1, 0, 0x33, 9, 0, 0, 0]).unwrap();
    assert!(wire::decode_register_request(&short).is_none());
    // The unit: 20 counts a millisecond, the 50 µs reading.
    assert_eq!(wire::TIMEOUT_COUNTS_PER_MS, 20);
    assert_eq!(wire::LOST_COMMUNICATION, 0xD);
}

#[test]
fn the_watchdog_is_written_and_confirmed_before_the_enable() {
    for (spec, value, ms) in [
        ("mit:id=1,master=0x11,layout=damiao", MS200, 200),
        (
            "mit:id=1,master=0x11,layout=damiao,watchdog_ms=150",
            MS150,
            150,
        ),
    ] {
        let mut b = Bench::new(spec);
        assert_eq!(b.dev.watchdog(), Watchdog::Armed { ms });
        // Written from the start, before any enable.
        assert_eq!(b.motor.timeout_register(), u32::from_le_bytes(value));
        let mark = b.wire.len();
        b.call(b.enable);
        b.run_for(10_000, 1_000);
        assert_eq!(b.result(b.enable), Some(true), "{spec}");
        armed_then_enabled(&b, mark, value);
        assert_eq!(b.count(mark, Side::Host, &enable_frame()), 1);
        assert!(b.motor.enabled());
        // The register answers were not taken as feedback: the only feedback published
        // since is the enable's reply (state 1).
        assert_eq!(b.last_error(), Some(1.0));
    }
}

#[test]
fn on_can_fd_the_register_frames_go_as_fd_frames_too() {
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao,fd=true");
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.result(b.enable), Some(true));
    let fd = |f: Frame| Frame::fd(f.id(), f.data()).unwrap();
    let w = b
        .find(mark, Side::Host, &fd(write_timeout(MS200)))
        .expect("an FD write");
    let r = b
        .find(w, Side::Host, &fd(read_timeout()))
        .expect("an FD read");
    let a = b
        .find(r, Side::Motor, &fd(timeout_answer(MS200)))
        .expect("an FD answer");
    let e = b
        .find(a, Side::Host, &fd(enable_frame()))
        .expect("then the enable");
    assert!(w < r && r < a && a < e);
    assert!(b.wire.iter().all(|(_, _, f)| f.is_fd() && f.is_brs()));
}

#[test]
fn no_enable_goes_out_unless_the_motor_confirms_its_watchdog() {
    // A motor that answers nothing: the write and the read go out, the enable never.
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.hears = |_| false;
    let mark = b.wire.len();
    b.call(b.enable);
    assert!(b.find(mark, Side::Host, &write_timeout(MS200)).is_some());
    b.run_for(CONFIRM_US - 10_000, 1_000);
    assert_eq!(b.result(b.enable), None, "still waiting");
    b.run_for(20_000, 1_000);
    assert_eq!(b.result(b.enable), Some(false));
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
    assert!(
        b.warned("did not confirm its command watchdog (TIMEOUT, register 9 = 4000, 200 ms) within 800 ms"),
        "{:?}",
        b.notes
    );

    // A motor that does not take the write (it reads back 0): refused at the deadline,
    // naming what it answered; its feedback in between did not answer the call.
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.hears = |f| *f != write_timeout(MS200);
    // (It took the driver's first write, before it stopped taking them.)
    b.motor.reboot();
    let mark = b.wire.len();
    b.call(b.enable);
    b.command(0.0);
    b.run_for(CONFIRM_US + 10_000, 1_000);
    assert_eq!(b.result(b.enable), Some(false));
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
    assert!(b.warned("(it answered 0)"), "{:?}", b.notes);
    assert!(!b.motor.enabled());

    // A disable asked while the enable is arming: the enable must not follow it, even
    // when the confirmation comes after it.
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.hears = |f| f.id() != CanId::Standard(0x7FF);
    let mark = b.wire.len();
    b.call(b.enable);
    b.call(b.disable);
    assert_eq!(b.result(b.enable), Some(false));
    assert!(b.warned("a disable was asked"), "{:?}", b.notes);
    b.driver_hears(&timeout_answer(MS200));
    b.run_for(CONFIRM_US + 10_000, 1_000);
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
}

/// A reply whose byte 2 happens to be 0x33 and byte 3 9 (position code 0x0033, the
/// velocity's high byte 9) from motor 1 while it is disabled (byte 0 = 0x01, byte 1 =
/// 0x00) has the register answer's layout: outside a register wait it is feedback.
#[test]
fn a_reply_shaped_like_a_register_answer_is_feedback_when_none_is_awaited() {
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.run_for(CONFIRM_US + 10_000, 10_000);
    let before = b.published.len();
    let wire = b.wire.len();
    b.driver_hears(&timeout_answer([0x80, 0x00, 0x19, 0x19]));
    assert_eq!(b.published.len(), before + 1, "published as feedback");
    assert_eq!(b.last_error(), Some(0.0));
    assert_eq!(b.wire.len(), wire, "and nothing rewritten");
}

#[test]
fn a_motor_whose_bus_owner_stops_drops_within_the_watchdog_and_reports_0xd() {
    for (spec, ms) in [
        ("mit:id=1,master=0x11,layout=damiao,vmax=30,tmax=10", 200u64),
        (
            "mit:id=1,master=0x11,layout=damiao,vmax=30,tmax=10,watchdog_ms=50",
            50,
        ),
    ] {
        let mut b = Bench::new(spec);
        b.call(b.enable);
        b.run_for(10_000, 1_000);
        assert_eq!(b.result(b.enable), Some(true));
        b.drive(5.0, 1_000_000);
        let v = b.motor.velocity();
        assert!((v - 5.0).abs() < 0.3, "{spec}: spinning at 5 rad/s: {v}");

        // The bus owner dies: nothing reaches the motor from now on.
        b.host_stopped = true;
        let last = b
            .wire
            .iter()
            .rev()
            .find(|(s, ..)| *s == Side::Host)
            .unwrap()
            .1;
        let mut off_at = None;
        for _ in 0..1000 {
            b.run_for(1_000, 1_000);
            if !b.motor.enabled() {
                off_at = Some(b.now);
                break;
            }
        }
        let off_at = off_at.unwrap_or_else(|| panic!("{spec}: still enabled after 1 s"));
        let after = off_at - last;
        assert!(
            after <= ms * 1000 + 1_000,
            "{spec}: out of motor mode {after} µs after the last frame"
        );
        assert_eq!(b.motor.error(), 0xD, "lost communication");
        b.run_for(3_000_000, 10_000);
        assert!(
            b.motor.velocity().abs() < 0.5,
            "coasts: {}",
            b.motor.velocity()
        );

        // A bus owner that comes back sees 0xD in the next reply (feedback.error, the
        // cycle API's `watchdog_codes: [13]`), and its enable clears it first.
        b.host_stopped = false;
        b.command(0.0);
        assert_eq!(b.last_error(), Some(13.0));
        let mark = b.wire.len();
        b.call(b.enable);
        b.run_for(10_000, 1_000);
        assert_eq!(b.result(b.enable), Some(true));
        let clear = b
            .find(mark, Side::Host, &clear_error_frame())
            .expect("cleared");
        let enable = armed_then_enabled(&b, mark, if ms == 50 { MS50 } else { MS200 });
        assert!(clear < enable);
        assert!(b.motor.enabled() && b.motor.error() == 0);
    }
}

#[test]
fn with_the_watchdog_off_the_motor_keeps_moving_and_that_was_a_warning() {
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao,vmax=30,tmax=10,watchdog=off");
    assert_eq!(b.dev.watchdog(), Watchdog::Off);
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.result(b.enable), Some(true));
    // Written as off (0), confirmed, then enabled: whatever the motor held before.
    armed_then_enabled(&b, mark, OFF);
    assert!(b.warned("watchdog off"), "{:?}", b.notes);
    b.drive(5.0, 1_000_000);
    b.host_stopped = true;
    b.run_for(3_000_000, 1_000);
    assert!(b.motor.enabled(), "nothing stops it");
    let v = b.motor.velocity();
    assert!((v - 5.0).abs() < 0.3, "still at 5 rad/s: {v}");
    // Every enable warns again.
    b.host_stopped = false;
    let warnings = b.notes.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert!(b.notes[warnings..]
        .iter()
        .any(|n| n.severity == Severity::Warn && n.text.contains("watchdog off")));
}

#[test]
fn after_a_reboot_or_a_silence_the_watchdog_is_written_again() {
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.result(b.enable), Some(true));
    b.drive(3.0, 200_000);

    // A power cycle the driver has not noticed yet: TIMEOUT is 0 again, yet the next
    // enable writes and confirms it first.
    b.motor.reboot();
    assert_eq!(b.motor.timeout_register(), 0);
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.result(b.enable), Some(true));
    armed_then_enabled(&b, mark, MS200);
    assert_eq!(b.motor.timeout_register(), 4000);

    // A power cycle the driver notices while the motor runs: the keepalive read answers
    // 0, a warning, and it is written again.
    b.motor.reboot();
    let mark = b.wire.len();
    b.run_for(300_000, 1_000);
    assert!(b.warned("holds 0, not the 4000 written"), "{:?}", b.notes);
    assert!(b.find(mark, Side::Host, &write_timeout(MS200)).is_some());
    assert_eq!(b.motor.timeout_register(), 4000);

    // A motor that answers after more than a second of silence is written again at once.
    b.call(b.disable);
    b.run_for(2_000_000, 10_000);
    b.motor.reboot();
    let mark = b.wire.len();
    b.command(0.0);
    let write = b
        .find(mark, Side::Host, &write_timeout(MS200))
        .expect("written again when it answers after silence");
    assert!(b.find(write, Side::Host, &read_timeout()).is_some());
    assert_eq!(b.motor.timeout_register(), 4000);
}

/// While the bus owner lives, its own silence never trips the watchdog: a running motor
/// nobody commands is fed by reads of TIMEOUT (polled at 7 ms steps here).
#[test]
fn a_running_motor_stays_enabled_while_the_bus_owner_lives() {
    let mut b = Bench::new("mit:id=1,master=0x11,layout=damiao");
    b.call(b.enable);
    b.run_for(7_000, 7_000);
    assert_eq!(b.result(b.enable), Some(true));
    let mark = b.wire.len();
    b.run_for(3_000_000, 7_000);
    assert!(b.motor.enabled(), "tripped by the host's own silence");
    let times: Vec<u64> = b.wire[mark..]
        .iter()
        .filter(|(s, ..)| *s == Side::Host)
        .map(|(_, t, _)| *t)
        .collect();
    let widest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(widest < 200_000, "{widest} µs without a frame");
    assert!(b.wire[mark..]
        .iter()
        .all(|(s, _, f)| *s == Side::Motor || *f == read_timeout()));
    // The keepalive answers are register answers, not feedback: the last feedback is
    // still the enable's.
    assert_eq!(b.last_error(), Some(1.0));
}

#[test]
fn watchdog_keys() {
    let wd = |s: &str| DeviceSpec::parse(s).unwrap().device().map(|d| d.watchdog());
    let err = |s: &str| wd(s).unwrap_err().to_string();
    assert_eq!(
        wd("mit:id=1,layout=damiao").unwrap(),
        Watchdog::Armed { ms: 200 }
    );
    assert_eq!(
        wd("mit:id=1,layout=damiao,watchdog_ms=1").unwrap(),
        Watchdog::Armed { ms: 1 }
    );
    // TIMEOUT is a u32, written as 50 µs counts: 4294967295 / 20 = 214748364 ms at most.
    assert_eq!(WATCHDOG_MAX_MS, 214_748_364);
    assert_eq!(
        wd("mit:id=1,layout=damiao,watchdog_ms=214748364").unwrap(),
        Watchdog::Armed { ms: 214_748_364 }
    );
    let e = err("mit:id=1,layout=damiao,watchdog_ms=214748365");
    assert!(
        e.contains("`watchdog_ms`") && e.contains("1–214748364 ms") && e.contains("TIMEOUT"),
        "{e}"
    );
    let e = err("mit:id=1,layout=damiao,watchdog_ms=0");
    assert!(
        e.contains("`watchdog_ms` = 0") && e.contains("watchdog=off"),
        "{e}"
    );
    assert_eq!(
        wd("mit:id=1,layout=damiao,watchdog=off").unwrap(),
        Watchdog::Off
    );
    let e = err("mit:id=1,layout=damiao,watchdog=none");
    assert!(e.contains("only `watchdog=off`"), "{e}");
    // The CubeMars layout has no timeout register: no watchdog, and no such keys.
    assert_eq!(wd("mit:id=1").unwrap(), Watchdog::None);
    let e = err("mit:id=1,layout=cubemars,watchdog_ms=100");
    assert!(e.contains("unknown key `watchdog_ms`"), "{e}");
    // The simulated motor takes the same spec and checks it.
    assert!(DeviceSpec::parse("mit:id=1,layout=damiao,watchdog_ms=150")
        .unwrap()
        .simulated()
        .is_ok());
    assert!(DeviceSpec::parse("mit:id=1,layout=damiao,watchdog_ms=0")
        .unwrap()
        .simulated()
        .is_err());
    let f = BusFile::parse(
        "robot.yaml",
        "devices:\n  - { driver: mit, id: 1, layout: damiao, watchdog_ms: 150 }\n  - { driver: mit, id: 2, layout: damiao, watchdog: off }\n",
    )
    .unwrap();
    let d = devices(&f.devices).unwrap();
    assert_eq!(d[0].watchdog(), Watchdog::Armed { ms: 150 });
    assert_eq!(d[1].watchdog(), Watchdog::Off);
}

/// What node info and the log say: the watchdog, and how the count was written.
#[test]
fn the_host_says_what_the_watchdog_is_and_in_which_unit_it_was_written() {
    let specs = [
        DeviceSpec::parse("mit:id=1,master=0x11,layout=damiao").unwrap(),
        DeviceSpec::parse("mit:id=2,master=0x12,layout=damiao,watchdog=off").unwrap(),
        DeviceSpec::parse("mit:id=3,master=0x13").unwrap(),
    ];
    let mut h = DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()).unwrap();
    let node = |n| NodeId::new(n).unwrap();
    assert_eq!(h.watchdog(node(1)), Some(Watchdog::Armed { ms: 200 }));
    assert_eq!(h.watchdog(node(2)), Some(Watchdog::Off));
    assert_eq!(h.watchdog(node(3)), Some(Watchdog::None));
    h.poll(0);
    h.poll(1_000);
    let notes = h.take_notes();
    let said = |what: &str| notes.iter().any(|n| n.text.contains(what));
    assert!(
        said("presented as fcan node 1 (watchdog: 200 ms)"),
        "{notes:?}"
    );
    assert!(
        said("presented as fcan node 2 (watchdog: off)"),
        "{notes:?}"
    );
    assert!(
        said("presented as fcan node 3 (watchdog: none)"),
        "{notes:?}"
    );
    assert!(
        said("command watchdog 200 ms written as TIMEOUT (register 9) = 4000 counts of 50 µs")
            && said("if this firmware counts 1 ms, the motor times out after 4000 ms, 20 times later than asked (still armed, never sooner)"),
        "{notes:?}"
    );
}
