//! The simulated RobStride motor answers as the manuals describe (see
//! `fcan_drivers::robstride::sim` for the behaviour it promises).

use std::f64::consts::PI;

use fcan_core::frame::Frame;
use fcan_drivers::robstride::model::{self, Model};
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::robstride::wire::{self, Feedback, MotionCommand, Reply, RsId};
use fcan_drivers::sim::SimDevice;

const HOST: u8 = wire::DEFAULT_HOST_ID;
const ID: u8 = 0x7F;

fn send(m: &mut SimMotor, now: u64, f: Frame) -> Vec<Frame> {
    let mut out = Vec::new();
    m.receive(now, &f, &mut out);
    out
}

fn only(frames: &[Frame]) -> Reply {
    assert_eq!(frames.len(), 1, "{frames:?}");
    wire::decode(&frames[0], &Model::Rs03.ranges())
        .unwrap_or_else(|| panic!("undecodable {:?}", frames[0]))
}

fn feedback(frames: &[Frame]) -> Feedback {
    match only(frames) {
        Reply::Feedback(fb) => fb,
        r => panic!("expected a feedback, got {r:?}"),
    }
}

fn rs03() -> SimMotor {
    SimMotor::new(ID, Model::Rs03)
}

#[test]
fn get_id_answers_with_the_uid() {
    let mut m = rs03();
    let out = send(&mut m, 0, wire::get_id(HOST, ID));
    assert_eq!(RsId::of(&out[0]).unwrap().raw(), 0x0000_7FFE);
    assert_eq!(
        only(&out),
        Reply::DeviceId {
            motor: ID,
            uid: m.uid()
        }
    );
    assert_ne!(SimMotor::new(1, Model::Rs03).uid(), m.uid());
}

#[test]
fn ignores_frames_for_other_motors() {
    let mut m = rs03();
    assert!(send(&mut m, 0, wire::enable(HOST, ID + 1)).is_empty());
    assert!(send(&mut m, 0, wire::get_id(HOST, 1)).is_empty());
    assert!(!m.enabled());
    // Nor its own answers or garbage.
    assert!(send(&mut m, 0, wire::device_id_reply(ID, 5)).is_empty());
}

#[test]
fn enable_stop_and_modes() {
    let mut m = rs03();
    let fb = feedback(&send(&mut m, 0, wire::enable(HOST, ID)));
    assert!(m.enabled());
    assert_eq!((fb.motor, fb.host, fb.mode, fb.faults), (ID, HOST, 2, 0));
    assert_eq!(fb.temperature, Some(30.0));
    let fb = feedback(&send(&mut m, 1000, wire::stop(HOST, ID, false)));
    assert!(!m.enabled());
    assert_eq!(fb.mode, 0);
}

#[test]
fn replies_go_to_the_requesting_host() {
    let mut m = rs03().with_host(0x00);
    let fb = feedback(&send(&mut m, 0, wire::enable(0x22, ID)));
    assert_eq!(fb.host, 0x22);
}

#[test]
fn faults_show_in_feedback_and_type_21() {
    let mut m = rs03();
    send(&mut m, 0, wire::enable(HOST, ID));
    // Undervoltage: fault word bit 2, feedback bit 0 (id bit 16).
    m.inject_fault(1 << 2, 1);
    assert!(!m.enabled(), "a fault drops the motor to reset mode");
    let due = m.poll_at().expect("a fault frame is due");
    let mut out = Vec::new();
    m.poll(due, &mut out);
    assert_eq!(RsId::of(&out[0]).unwrap().raw(), 0x1500_7FFD);
    assert_eq!(out[0].data(), &[4, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        only(&out),
        Reply::Faults {
            motor: ID,
            host: HOST,
            fault: 4,
            warning: 0
        }
    );
    // Sent once.
    assert_eq!(m.poll_at(), None);
    // Enable is refused while the fault stands; the feedback carries the bit.
    let fb = feedback(&send(&mut m, 10, wire::enable(HOST, ID)));
    assert_eq!((fb.mode, fb.faults), (0, 1));
    assert_eq!(
        wire::fault_bits_names(fb.faults).collect::<Vec<_>>(),
        ["undervoltage"]
    );
    // A plain stop keeps it; stop with data[0] = 1 clears it.
    let fb = feedback(&send(&mut m, 20, wire::stop(HOST, ID, false)));
    assert_eq!(fb.faults, 1);
    let fb = feedback(&send(&mut m, 30, wire::stop(HOST, ID, true)));
    assert_eq!(fb.faults, 0);
    send(&mut m, 40, wire::enable(HOST, ID));
    assert!(m.enabled());
}

#[test]
fn set_zero_makes_the_present_angle_zero() {
    let mut m = rs03();
    m.set_position(3.0);
    let fb = feedback(&send(&mut m, 0, wire::set_zero(HOST, ID)));
    assert_eq!(m.position(), 0.0);
    assert!(fb.position.abs() < 0.001, "{fb:?}");
}

#[test]
fn set_zero_is_ignored_in_pp_mode() {
    let mut m = rs03();
    send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::RUN_MODE, wire::value_u8(1)),
    );
    m.set_position(3.0);
    send(&mut m, 1, wire::set_zero(HOST, ID));
    assert_eq!(m.position(), 3.0);
}

#[test]
fn set_can_id_answers_from_the_new_id() {
    let mut m = rs03();
    let out = send(&mut m, 0, wire::set_can_id(HOST, ID, 9));
    assert_eq!(
        only(&out),
        Reply::DeviceId {
            motor: 9,
            uid: m.uid()
        }
    );
    assert_eq!(m.id(), 9);
    assert!(send(&mut m, 1, wire::enable(HOST, ID)).is_empty());
    assert_eq!(send(&mut m, 2, wire::enable(HOST, 9)).len(), 1);
}

fn read(m: &mut SimMotor, now: u64, index: u16) -> ([u8; 4], bool) {
    let out = send(m, now, wire::param_read(HOST, ID, index));
    match only(&out) {
        Reply::Param {
            motor,
            host,
            index: i,
            value,
            ok,
        } => {
            assert_eq!((motor, host, i), (ID, HOST, index));
            (value, ok)
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn parameters_read_and_write() {
    let mut m = rs03();
    assert_eq!(read(&mut m, 0, model::VBUS), (wire::value_f32(24.0), true));
    assert_eq!(read(&mut m, 0, model::RUN_MODE), ([0; 4], true));
    // The manuals' read example answers loc_kp = 30.
    assert_eq!(read(&mut m, 0, 0x701E), (wire::value_f32(30.0), true));
    assert_eq!(read(&mut m, 0, 0x1234), ([0; 4], false));

    // A write is answered with a feedback and then reads back.
    let out = send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::RUN_MODE, wire::value_u8(2)),
    );
    feedback(&out);
    assert_eq!(read(&mut m, 0, model::RUN_MODE), ([2, 0, 0, 0], true));
    assert_eq!(m.param_value(model::RUN_MODE), Some([2, 0, 0, 0]));

    // Read-only and unknown indices are refused silently: still a feedback.
    let out = send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::VBUS, wire::value_f32(48.0)),
    );
    feedback(&out);
    assert_eq!(read(&mut m, 0, model::VBUS), (wire::value_f32(24.0), true));
    let out = send(&mut m, 0, wire::param_write(HOST, ID, 0x1234, [1; 4]));
    feedback(&out);
    assert_eq!(m.param_value(0x1234), None);

    // mechPos is the continuous angle.
    m.set_position(20.0);
    assert_eq!(
        read(&mut m, 0, model::MECH_POS),
        (wire::value_f32(20.0), true)
    );
}

#[test]
fn reboot_forgets_ram_parameters() {
    let mut m = rs03();
    send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::RUN_MODE, wire::value_u8(5)),
    );
    send(&mut m, 0, wire::enable(HOST, ID));
    m.set_position(-7.0);
    m.reboot();
    assert!(!m.enabled());
    assert_eq!(m.param_value(model::RUN_MODE), Some([0, 0, 0, 0]));
    // Power-on angle within 0..2π (zero_sta 0), the same physical angle.
    let p = m.position();
    assert!((0.0..2.0 * PI).contains(&p), "{p}");
    assert!(((p - -7.0) / (2.0 * PI)).fract().abs() < 1e-9);
}

#[test]
fn active_reporting_every_10_ms() {
    let mut m = rs03();
    assert_eq!(m.poll_at(), None);
    let out = send(&mut m, 1_000, wire::active_report(HOST, ID, true));
    feedback(&out);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = m.poll_at().expect("reporting");
        let mut out = Vec::new();
        m.poll(t, &mut out);
        let fb = feedback(&out);
        assert_eq!(RsId::of(&out[0]).unwrap().comm, wire::COMM_FEEDBACK);
        assert_eq!(fb.motor, ID);
        times.push(t);
    }
    assert_eq!(times, [11_000, 21_000, 31_000, 41_000, 51_000]);
    // A poll before the time sends nothing.
    let mut out = Vec::new();
    m.poll(52_000, &mut out);
    assert!(out.is_empty());
    send(&mut m, 53_000, wire::active_report(HOST, ID, false));
    assert_eq!(m.poll_at(), None);
}

#[test]
fn reporting_period_follows_epscan_time() {
    // EPScan_time 3: 10 ms + 2 × 5 ms.
    let mut m = rs03().with_report_comm(wire::COMM_ACTIVE_REPORT);
    send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::EPSCAN_TIME, wire::value_u16(3)),
    );
    let out = send(&mut m, 0, wire::active_report(HOST, ID, true));
    assert_eq!(RsId::of(&out[0]).unwrap().comm, wire::COMM_ACTIVE_REPORT);
    feedback(&out);
    assert_eq!(m.poll_at(), Some(20_000));
}

#[test]
fn feedback_wraps_within_4pi_while_position_is_continuous() {
    let r = Model::Rs03.ranges();
    let mut m = rs03();
    send(&mut m, 0, wire::enable(HOST, ID));
    // Velocity command: kd only, v_ref 10 rad/s, no load.
    let cmd = MotionCommand {
        position: 0.0,
        velocity: 10.0,
        kp: 0.0,
        kd: 5.0,
        torque: 0.0,
    };
    let mut unwrap = fcan_drivers::robstride::unwrap::Unwrap::default();
    let mut wrapped_seen = false;
    let mut t = 0;
    for _ in 0..400 {
        t += 10_000;
        let out = send(&mut m, t, wire::motion(ID, &r, &cmd));
        let fb = feedback(&out);
        assert!(fb.position.abs() <= 12.57);
        let cont = unwrap.update(fb.position, t);
        if (f64::from(fb.position) - m.position()).abs() > 1.0 {
            wrapped_seen = true;
        }
        // The unwrapped feedback follows the continuous angle to a quantization step.
        assert!(
            (cont - m.position()).abs() < 1e-3,
            "{cont} vs {}",
            m.position()
        );
    }
    assert!(wrapped_seen, "never wrapped: {}", m.position());
    // 4 s at ~10 rad/s.
    assert!(
        m.position() > 35.0 && m.position() < 41.0,
        "{}",
        m.position()
    );
    assert!((m.velocity() - 10.0).abs() < 0.1, "{}", m.velocity());
}

#[test]
fn position_control_settles_and_torque_is_clamped() {
    let r = Model::Rs05.ranges();
    let mut m = SimMotor::new(1, Model::Rs05);
    send(&mut m, 0, wire::enable(HOST, 1));
    let cmd = MotionCommand {
        position: 2.0,
        velocity: 0.0,
        kp: 50.0,
        kd: 1.0,
        torque: 0.0,
    };
    let out = send(&mut m, 0, wire::motion(1, &r, &cmd));
    feedback(&out);
    // Right after the step the PD torque (50 · 2 = 100 N·m) is clamped to 5.5.
    let out = send(&mut m, 1_000, wire::motion(1, &r, &cmd));
    let Some(Reply::Feedback(fb)) = wire::decode(&out[0], &r) else {
        panic!("{out:?}");
    };
    assert!((fb.torque - 5.5).abs() < 0.01, "{fb:?}");
    let mut t = 1_000;
    for _ in 0..300 {
        t += 10_000;
        send(&mut m, t, wire::motion(1, &r, &cmd));
    }
    assert!((m.position() - 2.0).abs() < 0.01, "{}", m.position());
}

#[test]
fn motion_needs_enable_and_run_mode_0() {
    let r = Model::Rs03.ranges();
    let cmd = MotionCommand {
        position: 0.0,
        velocity: 5.0,
        kp: 0.0,
        kd: 5.0,
        torque: 0.0,
    };
    let mut m = rs03();
    let fb = feedback(&send(&mut m, 0, wire::motion(ID, &r, &cmd)));
    assert_eq!(fb.mode, 0);
    send(&mut m, 1_000_000, wire::motion(ID, &r, &cmd));
    assert_eq!(m.position(), 0.0, "disabled: no motion");
    send(
        &mut m,
        1_000_000,
        wire::param_write(HOST, ID, model::RUN_MODE, wire::value_u8(2)),
    );
    send(&mut m, 1_000_000, wire::enable(HOST, ID));
    send(&mut m, 1_000_000, wire::motion(ID, &r, &cmd));
    send(&mut m, 2_000_000, wire::motion(ID, &r, &cmd));
    assert_eq!(m.position(), 0.0, "velocity mode, spd_ref 0: no motion");
}

#[test]
fn can_timeout_drops_to_reset_mode() {
    let mut m = rs03();
    // 2000 × 50 µs = 100 ms.
    send(
        &mut m,
        0,
        wire::param_write(HOST, ID, model::CAN_TIMEOUT, wire::value_u32(2000)),
    );
    send(&mut m, 0, wire::enable(HOST, ID));
    assert_eq!(m.poll_at(), Some(100_000));
    let mut out = Vec::new();
    m.poll(100_001, &mut out);
    assert!(!m.enabled());
    assert_eq!(m.poll_at(), None);
}

#[test]
fn describe_names_model_and_id() {
    assert_eq!(rs03().describe(), "robstride RS03 id 127");
}

/// What the driver takes off the bus: the motor's answers and the requests sent to it —
/// never an fcan configuration frame whose bits happen to look like a RobStride one.
#[test]
fn the_driver_owns_its_motors_traffic_and_no_fcan_frame() {
    use fcan_core::frame::{CanId, Frame};
    use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
    use fcan_drivers::robstride::wire;
    use fcan_drivers::spec::DeviceSpec;

    let dev = DeviceSpec::parse("robstride:id=5,model=RS03")
        .unwrap()
        .device()
        .unwrap();
    let host = wire::DEFAULT_HOST_ID;
    // Requests to motor 5 (this host's or another tool's) and its answers.
    for f in [
        wire::get_id(host, 5),
        wire::enable(host, 5),
        wire::param_read(0x00, 5, 0x7019),
        wire::param_write(host, 5, 0x7005, [2, 0, 0, 0]),
        wire::active_report(host, 5, true),
    ] {
        assert!(dev.owns(&f), "{f:?}");
        assert!(!dev.claims(&f), "a request is not an answer: {f:?}");
    }
    assert!(!dev.owns(&wire::enable(host, 6)), "another motor's");
    // fcan configuration frames with every opcode RobStride's high types alias
    // (HEARTBEAT 17, START 18, RESULT 22, FRAME_DEFINE 24), segment index 5 = the motor's
    // id, to and from nodes 1..=0x7E: none is the motor's.
    for op in [
        Opcode::Heartbeat,
        Opcode::Start,
        Opcode::Result,
        Opcode::FrameDefine,
    ] {
        for dir in [Direction::ToNode, Direction::ToMaster] {
            for node in 1..=0x7E {
                let id = ConfigId {
                    opcode: op,
                    dir,
                    node: NodeId::new(node).unwrap(),
                    transfer: 0,
                    eot: false,
                    segment: 5,
                };
                let f = Frame::classic(CanId::Extended(id.to_raw()), &[0; 8]).unwrap();
                assert!(
                    !dev.owns(&f) && !dev.claims(&f),
                    "{op:?} {dir:?} node {node}"
                );
            }
        }
    }
}
