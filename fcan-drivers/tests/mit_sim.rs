//! The simulated MIT motor answers like the real ones and moves under the MIT law.

use fcan_core::frame::{CanId, Frame};
use fcan_drivers::mit::sim::SimMit;
use fcan_drivers::mit::wire::{self, Command, Feedback, Layout, Ranges};
use fcan_drivers::sim::SimDevice;

const ID: u16 = 3;
const MASTER: u16 = 0x010;

fn send(sim: &mut SimMit, now_us: u64, frame: &Frame) -> Vec<Frame> {
    let mut out = Vec::new();
    sim.receive(now_us, frame, &mut out);
    out
}

fn one_reply(sim: &mut SimMit, now_us: u64, frame: &Frame, layout: Layout) -> Feedback {
    let out = send(sim, now_us, frame);
    assert_eq!(out.len(), 1, "one reply per frame: {out:?}");
    assert_eq!(
        out[0].id(),
        CanId::Standard(MASTER),
        "replies go to the master id"
    );
    wire::decode_reply(&out[0], layout, &Ranges::default()).expect("a reply")
}

fn hold(position: f32) -> Command {
    Command {
        position,
        velocity: 0.0,
        kp: 20.0,
        kd: 1.0,
        torque: 0.0,
    }
}

#[test]
fn answers_its_own_id_only() {
    let r = Ranges::default();
    let mut sim = SimMit::new(ID, MASTER, Layout::CubeMars, r);
    assert!(send(&mut sim, 0, &wire::enter(ID + 1)).is_empty());
    assert!(!sim.enabled(), "another motor's enter frame");
    let ext = Frame::classic(CanId::Extended(u32::from(ID)), &[0xFF; 8]).unwrap();
    assert!(send(&mut sim, 0, &ext).is_empty());
    let short = Frame::classic(CanId::Standard(ID), &[0xFF; 6]).unwrap();
    assert!(send(&mut sim, 0, &short).is_empty());
    let fb = one_reply(&mut sim, 0, &wire::enter(ID), Layout::CubeMars);
    assert_eq!(fb.motor, ID as u8);
    assert_eq!(fb.temperature, Some(25.0));
    assert!(sim.enabled());
    assert_eq!(sim.poll_at(), None);
    assert!(sim.describe().contains("cubemars"));
}

#[test]
fn enter_exit_and_zero() {
    let r = Ranges::default();
    let mut sim = SimMit::new(ID, MASTER, Layout::CubeMars, r);
    // Commands before entering motor mode are answered but not obeyed.
    one_reply(
        &mut sim,
        0,
        &wire::command(ID, &r, &hold(2.0)),
        Layout::CubeMars,
    );
    one_reply(
        &mut sim,
        1_000_000,
        &wire::command(ID, &r, &hold(2.0)),
        Layout::CubeMars,
    );
    assert_eq!(sim.position(), 0.0, "moved while out of motor mode");

    one_reply(&mut sim, 1_000_000, &wire::enter(ID), Layout::CubeMars);
    assert!(sim.enabled());
    one_reply(
        &mut sim,
        1_000_000,
        &wire::command(ID, &r, &hold(2.0)),
        Layout::CubeMars,
    );
    one_reply(&mut sim, 1_500_000, &wire::exit(ID), Layout::CubeMars);
    assert!(!sim.enabled());
    let stopped_at = sim.position();
    assert!(stopped_at > 0.1, "did not move while entered: {stopped_at}");
    // Out of motor mode no torque: friction stops the shaft, it does not go on to 2.
    let fb = one_reply(&mut sim, 5_000_000, &wire::set_zero(ID), Layout::CubeMars);
    assert!(fb.torque.abs() < 0.01, "{fb:?}");
    assert_eq!(sim.position(), 0.0, "set zero");
    sim.set_position(1.25);
    let fb = one_reply(&mut sim, 5_000_000, &wire::exit(ID), Layout::CubeMars);
    assert!((fb.position - 1.25).abs() < 0.001, "{fb:?}");
}

#[test]
fn a_position_command_moves_toward_the_target() {
    let r = Ranges::default();
    let mut sim = SimMit::new(ID, MASTER, Layout::CubeMars, r);
    one_reply(&mut sim, 0, &wire::enter(ID), Layout::CubeMars);
    let target = 1.5;
    let mut errors = Vec::new();
    let mut fb = None;
    // A 100 Hz control loop for 2 s, noting the distance every 20 ms.
    for i in 1..=200u64 {
        let now = i * 10_000;
        fb = Some(one_reply(
            &mut sim,
            now,
            &wire::command(ID, &r, &hold(target)),
            Layout::CubeMars,
        ));
        if i % 2 == 0 {
            errors.push((sim.position() - target).abs());
        }
    }
    // Closing in from the start (the first 100 ms strictly), never drifting away.
    assert!(errors[..5].windows(2).all(|w| w[1] < w[0]), "{errors:?}");
    assert!(errors.windows(2).all(|w| w[1] <= w[0] + 1e-4), "{errors:?}");
    let last_error = *errors.last().unwrap();
    assert!(last_error < 0.01, "did not settle: {last_error}");
    let fb = fb.unwrap();
    assert!((fb.position - target).abs() < 0.01, "the reply says {fb:?}");
    assert!(fb.velocity.abs() < 0.1, "{fb:?}");
}

#[test]
fn errors_stop_the_motor_and_are_reported() {
    let r = Ranges::DM_J4310;
    let mut sim = SimMit::new(ID, MASTER, Layout::Damiao, r);
    let decode = |f: &Frame| wire::decode_reply(f, Layout::Damiao, &r).unwrap();
    let out = send(&mut sim, 0, &wire::exit(ID));
    assert_eq!(decode(&out[0]).error, 0, "Damiao state: disabled");
    let out = send(&mut sim, 0, &wire::enter(ID));
    assert_eq!(decode(&out[0]).error, 1, "Damiao state: enabled");
    assert_eq!(decode(&out[0]).motor, ID as u8);
    sim.set_error(0xA);
    let out = send(&mut sim, 1_000_000, &wire::command(ID, &r, &hold(1.0)));
    assert_eq!(decode(&out[0]).error, 0xA);
    assert!(Layout::Damiao.is_fault(decode(&out[0]).error));
    send(&mut sim, 2_000_000, &wire::command(ID, &r, &hold(1.0)));
    assert_eq!(sim.position(), 0.0, "moved while in error");
    let out = send(&mut sim, 2_000_000, &wire::clear_error(ID));
    assert_eq!(decode(&out[0]).error, 1);
    assert_eq!(sim.error(), 0);
    send(&mut sim, 3_000_000, &wire::command(ID, &r, &hold(1.0)));
    assert!(
        sim.position() > 0.5,
        "error cleared, still not moving: {}",
        sim.position()
    );
}

#[test]
fn large_gains_and_time_jumps_stay_bounded() {
    let r = Ranges::default();
    let mut sim = SimMit::new(ID, MASTER, Layout::CubeMars, r);
    send(&mut sim, 0, &wire::enter(ID));
    let stiff = Command {
        position: -3.0,
        velocity: 0.0,
        kp: 500.0,
        kd: 0.0,
        torque: 0.0,
    };
    send(&mut sim, 0, &wire::command(ID, &r, &stiff));
    // An hour later in one jump: the model must neither stall nor blow up.
    send(&mut sim, 3_600_000_000, &wire::command(ID, &r, &stiff));
    assert!(
        sim.position().is_finite() && sim.position().abs() < 10.0,
        "{}",
        sim.position()
    );
    assert!(sim.torque().abs() <= r.t_max);
}
