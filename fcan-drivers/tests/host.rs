//! The device host without I/O: devices come and go as their answers say, a wedged bus is
//! not a silent motor, and the routing keeps device nodes' frames off the bus.

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_drivers::robstride::{wire, LOST_US};
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::{DeviceHost, Note, Route, Severity};

fn host() -> DeviceHost {
    let spec = DeviceSpec::parse("robstride:id=1,model=RS03").unwrap();
    DeviceHost::new(Mtu::Classic, devices(&[spec]).unwrap()).unwrap()
}

/// Runs the host from `from` to `to` (µs) in 10 ms steps, calling `each` at every step.
fn run(h: &mut DeviceHost, from: u64, to: u64, mut each: impl FnMut(&mut DeviceHost, u64)) {
    let mut t = from;
    while t <= to {
        each(h, t);
        h.poll(t);
        while h.pop_to_master().is_some() {}
        while h.peek_to_bus().is_some() {
            h.sent_to_bus();
        }
        t += 10_000;
    }
}

fn answer(h: &mut DeviceHost, t: u64) {
    assert!(h.from_bus(t, &wire::device_id_reply(1, 0x1234)), "claimed");
}

/// The host said the device is gone, as a warning (an operator must see it).
fn gone(notes: &[Note]) -> bool {
    notes
        .iter()
        .any(|n| n.text.contains("stopped answering") && n.severity == Severity::Warn)
}

#[test]
fn a_silent_motor_is_gone_after_a_second_but_not_while_the_bus_is_wedged() {
    // Silent on a working bus: gone after LOST_US.
    let mut h = host();
    run(&mut h, 0, 0, answer);
    assert_eq!(h.stats().boots, 1, "the answer boots its node");
    let notes = h.take_notes();
    assert!(
        notes
            .iter()
            .any(|n| n.text.contains("answers") && n.severity == Severity::Info),
        "{notes:?}"
    );
    run(&mut h, 10_000, LOST_US - 50_000, |_, _| {});
    assert!(!gone(&h.take_notes()), "not yet");
    run(&mut h, LOST_US, LOST_US + 100_000, |_, _| {});
    assert!(gone(&h.take_notes()), "silent for a second: gone");

    // Silent while every send is refused (a full queue, bus-off): never gone; once the
    // bus moves again, a full second of silence is needed.
    let mut h = host();
    run(&mut h, 0, 0, answer);
    run(&mut h, 10_000, 3 * LOST_US, |h, t| h.bus_wedged(t));
    assert!(!gone(&h.take_notes()), "a wedged bus is not a silent motor");
    let end = 3 * LOST_US;
    run(&mut h, end + 10_000, end + LOST_US - 50_000, |_, _| {});
    assert!(!gone(&h.take_notes()));
    run(
        &mut h,
        end + LOST_US + 10_000,
        end + LOST_US + 100_000,
        |_, _| {},
    );
    assert!(
        gone(&h.take_notes()),
        "silent for a second after the bus came back"
    );
    // It answers again: a new boot of its node.
    run(&mut h, end + 2 * LOST_US, end + 2 * LOST_US, answer);
    assert_eq!(h.stats().boots, 2);
}

#[test]
fn device_nodes_frames_stay_off_the_bus() {
    let mut h = host();
    run(&mut h, 0, 0, answer);
    let to = |node: NodeId| {
        let id = ConfigId::single(Opcode::Discover, Direction::ToNode, node, 0);
        Frame::classic(id.can_id(), &[0; 8]).unwrap()
    };
    // A DISCOVER broadcast: the device's node and the bus.
    let discover = to(NodeId::BROADCAST);
    assert_eq!(h.from_master(20_000, &discover), Route::Both);
    // Addressed to the device's node (node 1): its node only.
    let to_node1 = to(NodeId::new(1).unwrap());
    assert_eq!(h.from_master(20_000, &to_node1), Route::Devices);
    // To another node: the bus only.
    let to_node2 = to(NodeId::new(2).unwrap());
    assert_eq!(h.from_master(20_000, &to_node2), Route::Bus);
    // A data frame no device node's plan takes: the bus.
    let data = Frame::classic(CanId::Standard(0x123), &[1, 2]).unwrap();
    assert_eq!(h.from_master(20_000, &data), Route::Bus);
    // The node answers the DISCOVER (after its listen window): to the master only.
    let mut to_master = 0;
    let mut t = 30_000;
    while t < 1_000_000 && to_master == 0 {
        h.poll(t);
        while let Some(f) = h.pop_to_master() {
            let CanId::Extended(raw) = f.id() else {
                panic!("{f:?}")
            };
            let id = ConfigId::from_raw(raw).unwrap();
            assert_eq!((id.node.get(), id.dir), (1, Direction::ToMaster), "{id:?}");
            to_master += 1;
        }
        while let Some(f) = h.peek_to_bus().copied() {
            // Only the driver's own frames (RobStride requests) go to the bus.
            assert!(wire::RsId::of(&f).is_some_and(|id| id.dest == 1), "{f:?}");
            h.sent_to_bus();
        }
        t += 10_000;
    }
    assert!(to_master > 0, "the device's node announced");
}

/// A command with a NaN or an infinity never becomes a frame (a NaN quantized is an
/// arbitrary torque), and the first refusal is one warning for the log (not one per
/// command); a finite one becomes exactly one frame for the motor.
#[test]
fn a_non_finite_command_is_never_sent() {
    use fcan_drivers::message::{Message, MitSlots};
    use fcan_drivers::Io;
    for spec in ["robstride:id=1,model=RS03", "mit:id=0x20"] {
        let mut dev = DeviceSpec::parse(spec).unwrap().device().unwrap();
        let schema = fcan_core::blob::decode(dev.blob()).unwrap();
        let (topic, m) = Message::topic(&schema.types[0], "mit").unwrap();
        let slots = ["position", "velocity", "kp", "kd", "torque"].map(|f| m.slot(f).unwrap());
        let command = |values: [f64; 5]| {
            let mut b = m.zeroed();
            for (s, v) in slots.iter().zip(values) {
                s.set(&mut b, v);
            }
            b
        };
        let mut warnings = 0;
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for field in 0..5 {
                let mut v = [0.5, 0.0, 10.0, 1.0, 0.0];
                v[field] = bad;
                let mut io = Io::default();
                dev.on_command(0, topic, &command(v), &mut io);
                assert!(io.frames().is_empty(), "{spec}: {v:?} was sent");
                for n in io.notes() {
                    assert_eq!(n.severity, Severity::Warn, "{spec}: {n}");
                    warnings += 1;
                }
            }
        }
        assert_eq!(warnings, 1, "{spec}: one warning for fifteen refusals");
        let mut io = Io::default();
        let good = command([0.5, 0.0, 10.0, 1.0, 0.0]);
        assert_eq!(
            MitSlots::of(&m).unwrap().read(&good),
            Some([0.5, 0.0, 10.0, 1.0, 0.0])
        );
        dev.on_command(0, topic, &good, &mut io);
        assert_eq!(io.frames().len(), 1, "{spec}");
    }
}
