//! The RobStride's own command watchdog (`canTimeout`, 0x7028), armed by the driver
//! before every enable (issue 34): the driver and the simulated motor talk through the
//! public `Device` and `SimDevice` APIs, on a clock the test advances, and the frames on
//! the wire are checked against frames written out by hand from the manuals' layout
//! (never produced by our encoder).

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_drivers::message::Message;
use fcan_drivers::robstride::model::{Model, CAN_TIMEOUT};
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::robstride::{CONFIRM_US, WATCHDOG_MAX_MS};
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices, BusFile, DeviceSpec};
use fcan_drivers::{Device, DeviceHost, Io, Note, Served, Severity, Watchdog};

/// A frame as the manuals lay it out: extended id, 8 data bytes.
fn frame(id: u32, data: [u8; 8]) -> Frame {
    Frame::classic(CanId::Extended(id), &data).unwrap()
}

// Motor 1, host 0xFD. Type 18 (0x12) write: id (18 << 24) | (0xFD << 8) | 1; index 0x7028
// little-endian in bytes 0–1, the u32 value little-endian in bytes 4–7. canTimeout counts
// 50 µs (parameter table: 20000 = 1 s): 200 ms = 4000 = 0x0FA0, 150 ms = 3000 = 0x0BB8.
fn write_can_timeout(lo: u8, hi: u8) -> Frame {
    frame(0x1200_FD01, [0x28, 0x70, 0, 0, lo, hi, 0, 0])
}
/// Type 17 (0x11) read of 0x7028: the index in bytes 0–1, the rest zero.
fn read_can_timeout() -> Frame {
    frame(0x1100_FD01, [0x28, 0x70, 0, 0, 0, 0, 0, 0])
}
/// Its answer from motor 1: (17 << 24) | (status << 16) | (1 << 8) | 0xFD, the value in
/// bytes 4–7; status 1 = "read failed".
fn can_timeout_answer(status: u8, value: [u8; 4]) -> Frame {
    let id = 0x1100_01FD | (u32::from(status) << 16);
    let [a, b, c, d] = value;
    frame(id, [0x28, 0x70, 0, 0, a, b, c, d])
}
/// Type 3 enable: (3 << 24) | (0xFD << 8) | 1, data all zero.
fn enable_frame() -> Frame {
    frame(0x0300_FD01, [0; 8])
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Host,
    Motor,
}

/// One RobStride driver and one simulated motor (id 1) on a bus of two.
struct Bench {
    dev: Box<dyn Device>,
    motor: SimMotor,
    now: u64,
    /// Every frame on the bus, in order, with who sent it and when.
    wire: Vec<(Side, u64, Frame)>,
    notes: Vec<Note>,
    completed: Vec<(u8, Vec<u8>)>,
    /// Which of the driver's frames the motor hears (all; none: unplugged, or the test
    /// answers for it).
    hears: fn(&Frame) -> bool,
    /// The bus owner is gone: the driver runs no more, the motor does.
    host_stopped: bool,
    enable: u8,
    stop: u8,
    response: Message,
    mit: (u8, Message),
}

impl Bench {
    fn new(spec: &str) -> Bench {
        let dev = DeviceSpec::parse(spec).unwrap().device().unwrap();
        let schema = fcan_core::blob::decode(dev.blob()).unwrap();
        let ty = &schema.types[0];
        let enable = Message::service(ty, "enable").unwrap();
        let stop = Message::service(ty, "stop").unwrap();
        let response = Message::new(&ty.services[enable as usize].response);
        let mit = Message::topic(ty, "mit").unwrap();
        Bench {
            dev,
            motor: SimMotor::new(1, Model::Rs03),
            now: 0,
            wire: Vec::new(),
            notes: Vec::new(),
            completed: Vec::new(),
            hears: |_| true,
            host_stopped: false,
            enable,
            stop,
            response,
            mit,
        }
    }

    /// A bench whose motor has answered (its driver knows it is there).
    fn present(spec: &str) -> Bench {
        let mut b = Bench::new(spec);
        b.run_for(100_000, 1_000);
        assert!(b.dev.present());
        b
    }

    /// What the driver handed back: its frames go to the motor, whose answers go back to
    /// the driver, until nothing more moves.
    fn handle(&mut self, io: Io) {
        self.notes.extend(io.notes().iter().cloned());
        self.completed.extend(io.completed().iter().cloned());
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

    /// A frame from the bus reaches the driver (if the bus owner still runs).
    fn driver_hears(&mut self, f: &Frame) {
        if self.host_stopped || !self.dev.claims(f) {
            return;
        }
        let mut io = Io::default();
        self.dev.on_frame(self.now, f, &mut io);
        self.handle(io);
    }

    /// Runs both sides for `us`, looking every `step`.
    fn run_for(&mut self, us: u64, step: u64) {
        let end = self.now + us;
        while self.now < end {
            self.now = (self.now + step).min(end);
            // Polled every step, due or not: that also moves its model on.
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

    /// How the last enable call was answered, if it was.
    fn enable_result(&self) -> Option<bool> {
        let slot = self.response.slot("success").unwrap();
        self.completed
            .iter()
            .rev()
            .find(|(s, _)| *s == self.enable)
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
            ("kd", 5.0),
            ("torque", 0.0),
        ] {
            m.slot(field).unwrap().set(&mut bytes, v);
        }
        let topic = *topic;
        let mut io = Io::default();
        self.dev.on_command(self.now, topic, &bytes, &mut io);
        self.handle(io);
    }

    /// Commands `velocity` every 10 ms for `us`.
    fn drive(&mut self, velocity: f64, us: u64) {
        for _ in 0..us / 10_000 {
            self.command(velocity);
            self.run_for(10_000, 1_000);
        }
    }

    /// Where `f` is on the wire from position `from` on, sent by `side`.
    fn find(&self, from: usize, side: Side, f: &Frame) -> Option<usize> {
        self.wire[from..]
            .iter()
            .position(|(s, _, g)| *s == side && g == f)
            .map(|i| i + from)
    }

    fn warned(&self, what: &str) -> bool {
        self.notes
            .iter()
            .any(|n| n.severity == Severity::Warn && n.text.contains(what))
    }
}

/// Checks the arming sequence on the wire from `from`: the write of `written`, the
/// read-back, the motor's answer with the same value, and only then the enable.
/// Returns the enable's position.
fn armed_then_enabled(b: &Bench, from: usize, written: Frame, value: [u8; 4]) -> usize {
    let enable = b
        .find(from, Side::Host, &enable_frame())
        .unwrap_or_else(|| panic!("no enable on the wire: {:#?}", &b.wire[from..]));
    let write = b
        .find(from, Side::Host, &written)
        .expect("canTimeout written");
    let read = b
        .find(write, Side::Host, &read_can_timeout())
        .expect("and read back");
    let answer = b
        .find(read, Side::Motor, &can_timeout_answer(0, value))
        .expect("the motor answers the value written");
    assert!(
        write < read && read < answer && answer < enable,
        "write {write}, read {read}, answer {answer}, enable {enable}"
    );
    enable
}

#[test]
fn the_watchdog_is_written_and_confirmed_before_the_first_enable() {
    for (spec, lo, hi, ms) in [
        ("robstride:id=1,model=RS03", 0xA0, 0x0F, 200),
        ("robstride:id=1,model=RS03,watchdog_ms=150", 0xB8, 0x0B, 150),
    ] {
        let mut b = Bench::present(spec);
        assert_eq!(b.dev.watchdog(), Watchdog::Armed { ms });
        let mark = b.wire.len();
        b.call(b.enable);
        b.run_for(20_000, 1_000);
        assert_eq!(b.enable_result(), Some(true), "{spec}");
        armed_then_enabled(&b, mark, write_can_timeout(lo, hi), [lo, hi, 0, 0]);
        assert!(b.motor.enabled());
        assert_eq!(b.motor.param_value(CAN_TIMEOUT), Some([lo, hi, 0, 0]));
        // Exactly one enable frame.
        let enables = b.wire[mark..]
            .iter()
            .filter(|(s, _, f)| *s == Side::Host && *f == enable_frame())
            .count();
        assert_eq!(enables, 1);
    }
}

#[test]
fn no_enable_goes_out_unless_the_motor_confirms_its_watchdog() {
    // A motor that answers nothing: the write and the read go out, the enable never;
    // the call is refused at its deadline with a reason.
    let mut b = Bench::present("robstride:id=1,model=RS03");
    b.hears = |_| false;
    let mark = b.wire.len();
    b.call(b.enable);
    assert!(b
        .find(mark, Side::Host, &write_can_timeout(0xA0, 0x0F))
        .is_some());
    b.run_for(CONFIRM_US - 10_000, 1_000);
    assert_eq!(b.enable_result(), None, "still waiting");
    b.run_for(20_000, 1_000);
    assert_eq!(b.enable_result(), Some(false));
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
    assert!(
        b.warned("did not confirm its command watchdog"),
        "{:?}",
        b.notes
    );

    // A motor that does not take the write (it reads back 0): refused at the deadline,
    // naming what it answered.
    let mut b = Bench::new("robstride:id=1,model=RS03");
    b.hears = |f| *f != write_can_timeout(0xA0, 0x0F);
    b.run_for(100_000, 1_000);
    assert!(b.dev.present());
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(CONFIRM_US + 10_000, 1_000);
    assert_eq!(b.enable_result(), Some(false));
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
    assert!(b.warned("(it answered 0)"), "{:?}", b.notes);

    // It refuses the read (status 1: no such parameter): refused at once.
    let mut b = Bench::present("robstride:id=1,model=RS03");
    b.hears = |_| false;
    let mark = b.wire.len();
    b.call(b.enable);
    b.driver_hears(&can_timeout_answer(1, [0; 4]));
    assert_eq!(b.enable_result(), Some(false));
    assert!(b.warned("refused to read back"), "{:?}", b.notes);
    b.run_for(CONFIRM_US + 10_000, 1_000);
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());

    // A stop asked while the enable is arming: the enable must not follow the stop, even
    // when the confirmation comes after it.
    let mut b = Bench::present("robstride:id=1,model=RS03");
    b.hears = |_| false;
    let mark = b.wire.len();
    b.call(b.enable);
    b.call(b.stop);
    assert_eq!(b.enable_result(), Some(false));
    b.driver_hears(&can_timeout_answer(0, [0xA0, 0x0F, 0, 0]));
    b.run_for(CONFIRM_US + 10_000, 1_000);
    assert!(b.find(mark, Side::Host, &enable_frame()).is_none());
}

#[test]
fn after_a_reboot_the_watchdog_is_written_again_before_the_next_enable() {
    let mut b = Bench::present("robstride:id=1,model=RS03");
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.enable_result(), Some(true));
    b.drive(3.0, 200_000);
    assert!(b.motor.velocity() > 1.0, "moving: {}", b.motor.velocity());

    // A power cycle the driver has not noticed yet (no time passes): canTimeout is the
    // factory 0 again, yet the next enable writes and confirms it first.
    b.motor.reboot();
    assert_eq!(b.motor.param_value(CAN_TIMEOUT), Some([0; 4]));
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.enable_result(), Some(true));
    armed_then_enabled(&b, mark, write_can_timeout(0xA0, 0x0F), [0xA0, 0x0F, 0, 0]);
    assert_eq!(b.motor.param_value(CAN_TIMEOUT), Some([0xA0, 0x0F, 0, 0]));

    // A power cycle the driver notices: the running motor's watchdog is read back (the
    // keepalive) and holds 0: a restart, said as a warning; the motor is written again
    // as soon as it answers, and again before the next enable.
    b.motor.reboot();
    let reboot = b.wire.len();
    b.run_for(300_000, 1_000);
    assert!(b.warned("no longer holds"), "{:?}", b.notes);
    let rewritten = b
        .find(reboot, Side::Host, &write_can_timeout(0xA0, 0x0F))
        .expect("written again when the motor answers after its restart");
    assert!(b.find(reboot, Side::Host, &enable_frame()).is_none());
    assert_eq!(b.motor.param_value(CAN_TIMEOUT), Some([0xA0, 0x0F, 0, 0]));
    let mark = b.wire.len();
    assert!(mark > rewritten);
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.enable_result(), Some(true));
    armed_then_enabled(&b, mark, write_can_timeout(0xA0, 0x0F), [0xA0, 0x0F, 0, 0]);
}

#[test]
fn a_motor_whose_bus_owner_stops_drops_to_reset_within_the_watchdog() {
    for (spec, ms) in [
        ("robstride:id=1,model=RS03", 200u64),
        ("robstride:id=1,model=RS03,watchdog_ms=50", 50),
    ] {
        let mut b = Bench::present(spec);
        b.call(b.enable);
        b.run_for(10_000, 1_000);
        assert_eq!(b.enable_result(), Some(true));
        b.drive(5.0, 1_000_000);
        let v = b.motor.velocity();
        assert!((v - 5.0).abs() < 0.2, "{spec}: spinning at 5 rad/s: {v}");

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
            "{spec}: in reset mode {after} µs after the last frame"
        );
        // Unpowered, it coasts down (friction, no torque).
        b.run_for(3_000_000, 10_000);
        assert!(b.motor.velocity().abs() < 0.5, "{}", b.motor.velocity());
    }
}

#[test]
fn with_the_watchdog_off_the_motor_keeps_moving_and_that_was_a_warning() {
    let mut b = Bench::present("robstride:id=1,model=RS03,watchdog=off");
    assert_eq!(b.dev.watchdog(), Watchdog::Off);
    let mark = b.wire.len();
    b.call(b.enable);
    b.run_for(10_000, 1_000);
    assert_eq!(b.enable_result(), Some(true));
    // Written as off (0), confirmed, then enabled: whatever the motor held before.
    armed_then_enabled(&b, mark, write_can_timeout(0, 0), [0; 4]);
    assert!(b.warned("watchdog off"), "{:?}", b.notes);
    b.drive(5.0, 1_000_000);
    b.host_stopped = true;
    b.run_for(3_000_000, 1_000);
    assert!(b.motor.enabled(), "nothing stops it");
    let v = b.motor.velocity();
    assert!((v - 5.0).abs() < 0.2, "still at 5 rad/s: {v}");
}

/// While the bus owner lives, its own silence never trips the watchdog: a running motor
/// nobody commands is fed (here polled at 7 ms steps, so the 200 ms status reads alone
/// would arrive up to 206 ms apart).
#[test]
fn a_running_motor_stays_enabled_while_the_bus_owner_lives() {
    let mut b = Bench::present("robstride:id=1,model=RS03");
    b.call(b.enable);
    b.run_for(7_000, 7_000);
    assert_eq!(b.enable_result(), Some(true));
    assert_eq!(b.motor.param_value(CAN_TIMEOUT), Some([0xA0, 0x0F, 0, 0]));
    let mark = b.wire.len();
    b.run_for(3_000_000, 7_000);
    assert!(b.motor.enabled(), "tripped by the host's own silence");
    // The gaps between the driver's frames stay under the watchdog.
    let times: Vec<u64> = b.wire[mark..]
        .iter()
        .filter(|(s, ..)| *s == Side::Host)
        .map(|(_, t, _)| *t)
        .collect();
    let widest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(widest < 200_000, "{widest} µs without a frame");
}

#[test]
fn watchdog_keys() {
    let wd = |s: &str| DeviceSpec::parse(s).unwrap().device().map(|d| d.watchdog());
    let err = |s: &str| wd(s).unwrap_err().to_string();
    assert_eq!(wd("robstride:id=1").unwrap(), Watchdog::Armed { ms: 200 });
    assert_eq!(
        wd("robstride:id=1,model=RS03,watchdog_ms=150").unwrap(),
        Watchdog::Armed { ms: 150 }
    );
    assert_eq!(
        wd("robstride:id=1,watchdog_ms=1").unwrap(),
        Watchdog::Armed { ms: 1 }
    );
    // canTimeout is a u32 of 50 µs: 4294967295 / 20 = 214748364 ms at most.
    assert_eq!(WATCHDOG_MAX_MS, 214_748_364);
    assert_eq!(
        wd("robstride:id=1,watchdog_ms=214748364").unwrap(),
        Watchdog::Armed { ms: 214_748_364 }
    );
    for big in ["214748365", "4294967296", "99999999999999999999"] {
        let e = err(&format!("robstride:id=1,watchdog_ms={big}"));
        assert!(
            e.contains("`watchdog_ms`") && e.contains(big) && e.contains("1–214748364 ms"),
            "{e}"
        );
    }
    // Zero is not off: off is said by name.
    let e = err("robstride:id=1,watchdog_ms=0");
    assert!(
        e.contains("`watchdog_ms` = 0") && e.contains("watchdog=off"),
        "{e}"
    );
    for bad in ["-5", "0.5", "200ms", "0x10"] {
        let e = err(&format!("robstride:id=1,watchdog_ms={bad}"));
        assert!(
            e.contains("`watchdog_ms`") && e.contains("not a whole number"),
            "{e}"
        );
    }
    assert_eq!(wd("robstride:id=1,watchdog=off").unwrap(), Watchdog::Off);
    assert_eq!(wd("robstride:id=1,watchdog=OFF").unwrap(), Watchdog::Off);
    for bad in ["on", "0", "false", "none"] {
        let e = err(&format!("robstride:id=1,watchdog={bad}"));
        assert!(
            e.contains("`watchdog`") && e.contains("only `watchdog=off`"),
            "{e}"
        );
    }
    let e = err("robstride:id=1,watchdog=off,watchdog_ms=100");
    assert!(e.contains("both given"), "{e}");
    // The simulated motor takes the same spec (`fcan fake --device …`), and checks it.
    let spec = DeviceSpec::parse("robstride:id=1,watchdog_ms=150").unwrap();
    assert!(spec.simulated().is_ok());
    let spec = DeviceSpec::parse("robstride:id=1,watchdog_ms=0").unwrap();
    assert!(spec.simulated().is_err());
    // The bus file form (YAML's `off` is a string, not a boolean, in serde_yaml).
    let f = BusFile::parse(
        "robot.yaml",
        "devices:\n  - { driver: robstride, id: 1, watchdog_ms: 150 }\n  - { driver: robstride, id: 2, watchdog: off }\n",
    )
    .unwrap();
    let d = devices(&f.devices).unwrap();
    assert_eq!(d[0].watchdog(), Watchdog::Armed { ms: 150 });
    assert_eq!(d[1].watchdog(), Watchdog::Off);
    // MIT-mode devices have no watchdog the driver arms, and take no such key.
    assert_eq!(
        DeviceSpec::parse("mit:id=3")
            .unwrap()
            .device()
            .unwrap()
            .watchdog(),
        Watchdog::None
    );
    let e = DeviceSpec::parse("mit:id=3,watchdog_ms=100")
        .unwrap()
        .device()
        .map(|_| ())
        .unwrap_err();
    assert!(e.0.contains("unknown key `watchdog_ms`"), "{e}");
}

/// What node info and the log say about each device's watchdog.
#[test]
fn the_host_says_what_each_watchdog_is() {
    let specs = [
        DeviceSpec::parse("robstride:id=1").unwrap(),
        DeviceSpec::parse("robstride:id=2,watchdog=off").unwrap(),
        DeviceSpec::parse("mit:id=3").unwrap(),
    ];
    let mut h = DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()).unwrap();
    let node = |n| NodeId::new(n).unwrap();
    assert_eq!(h.watchdog(node(1)), Some(Watchdog::Armed { ms: 200 }));
    assert_eq!(h.watchdog(node(2)), Some(Watchdog::Off));
    assert_eq!(h.watchdog(node(3)), Some(Watchdog::None));
    assert_eq!(h.watchdog(node(4)), None);
    assert_eq!(Watchdog::Armed { ms: 200 }.to_string(), "200 ms");
    h.poll(0);
    assert!(
        h.from_bus(1_000, &frame(0x0000_01FE, [0; 8])),
        "motor 1 answers"
    );
    h.poll(1_000);
    let notes = h.take_notes();
    let said = |what: &str| notes.iter().any(|n| n.text.contains(what));
    assert!(
        said("presented as fcan node 1 (watchdog: 200 ms)"),
        "{notes:?}"
    );
    assert!(
        said("presented as fcan node 3 (watchdog: none)"),
        "{notes:?}"
    );
}
