//! MIT-mode motors on CAN FD (Damiao): the frames against vectors written by hand from
//! the public documents, the `fd`/`brs` keys and the link check, the simulated motor and
//! the offline decoder on FD frames.
//!
//! # Where the vectors come from
//!
//! Every vector below was written by hand; each integer code is worked out in its
//! comment, none was produced by fcan's encoder.
//!
//! - **The frames are the Classical ones, unchanged, in FD frames of DLC 8 with BRS**:
//!   `enactic/openarm_can` (OpenArm's Damiao driver), `src/openarm/damiao_motor/
//!   dm_motor_device.cpp`, `create_canfd_frame`: `len` = the 8 payload bytes,
//!   `flags = CANFD_BRS`; the payloads come from `dm_motor_control.cpp`
//!   (`pack_command_data`, `pack_mit_control_data`), sent to the motor's send id.
//! - **The reply**: the same file's FD `callback` hands the FD frame's bytes to the same
//!   `parse_motor_state_data` as a Classical one (byte 0 = state << 4 | id, p16 v12 t12,
//!   byte 6 T_MOS, byte 7 T_rotor: the Damiao DM-J4310-2EC manual's feedback frame, which
//!   OpenArm's motor-CAN page links), on the motor's receive (master) id.
//! - **Ids**: OpenArm's README example: send ids `0x01, 0x02`, receive ids `0x11, 0x12`.
//! - **Ranges** (DM4310): P ±12.5 rad, V ±30 rad/s, T ±10 N·m
//!   (`include/openarm/damiao_motor/dm_motor_constants.hpp`, `MOTOR_LIMIT_PARAMS`,
//!   DM4310), KP 0..500 and KD 0..5 (`pack_mit_control_data`).
//! - **Bus rates**: OpenArm's README and `setup/cli/openarm_cli.cpp` (`can_configure`
//!   default: 1 Mbit/s nominal, 5 Mbit/s data, FD); Damiao's manuals (DM-H3510 V1.0,
//!   `dmBots/DM-H3510`, "supports CAN FD, up to 5 Mbps").
//! - Corroboration, not a vector source: `umeow0716/damiao_firmware` (a reconstruction of
//!   DM4310 firmware) sends every frame with FDF and BRS set once its CAN is in FD mode
//!   (`board/src/board_mcan_hc32f448.c`, `board_mcan_send`).
//!
//! Integer codes: `trunc((x − min)·(2^bits − 1)/(max − min))` after clamping, position 16
//! bits, the rest 12 (conformance/mit/README.md).

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_drivers::decode::Decoder;
use fcan_drivers::mit::sim::SimMit;
use fcan_drivers::mit::wire::{self, Command, Framing, Layout, Ranges, Request};
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{check_link, devices, devices_on, link_needed, BusFile, DeviceSpec};
use fcan_drivers::DeviceHost;
use fcan_drivers::{Device, Io, Served};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex byte"))
        .collect()
}

/// An FD frame as the documents have it: standard id, the payload, BRS as given.
fn fd(id: u16, data: &str, brs: bool) -> Frame {
    let f = Frame::fd(CanId::Standard(id), &hex(data)).expect("an FD length");
    if brs {
        f
    } else {
        f.without_brs()
    }
}

/// Checks `got` is exactly the FD frame of the documents (id, FD, BRS, DLC 8, bytes).
fn same(name: &str, got: &Frame, id: u16, data: &str, brs: bool) {
    assert_eq!(got.id(), CanId::Standard(id), "{name}: id");
    assert!(got.is_fd(), "{name}: an FD frame");
    assert_eq!(got.is_brs(), brs, "{name}: BRS");
    assert_eq!(got.len(), 8, "{name}: DLC 8");
    assert_eq!(got.data(), hex(data).as_slice(), "{name}: payload");
    assert_eq!(*got, fd(id, data, brs), "{name}");
}

const DM4310: Ranges = Ranges::DM_J4310;
const BRS: Framing = Framing::Fd { brs: true };

/// One quantization step of `bits` over `[min, max]`, with a little room for rounding.
fn step(min: f32, max: f32, bits: u32) -> f32 {
    (max - min) / ((1u32 << bits) - 1) as f32 * 1.001 + 1e-6
}

fn near(name: &str, got: f32, want: f32, tol: f32) {
    assert!(
        (got - want).abs() <= tol,
        "{name}: {got}, expected {want} ± {tol}"
    );
}

// ---- the vectors ----

/// Enable (`…FC`) to motor 0x01, FD + BRS, DLC 8: openarm_can `create_enable_command`
/// (`pack_command_data(0xFC)` on the send id) in `create_canfd_frame`.
const ENABLE: (u16, &str) = (0x001, "FFFFFFFFFFFFFFFC");
/// Disable (`…FD`) to motor 0x02: `create_disable_command`.
const DISABLE: (u16, &str) = (0x002, "FFFFFFFFFFFFFFFD");
/// Set zero (`…FE`) to motor 0x01: `create_set_zero_command`.
const SET_ZERO: (u16, &str) = (0x001, "FFFFFFFFFFFFFFFE");

/// MIT command to motor 0x01, DM4310: q = 1.0, dq = 0, kp = 20, kd = 1, tau = 0.
/// p = trunc(13.5·65535/25) = trunc(35388.9) = 35388 = 0x8A3C; v = trunc(30·4095/60)
/// = trunc(2047.5) = 0x7FF; kp = trunc(20·4095/500) = trunc(163.8) = 163 = 0x0A3;
/// kd = trunc(1·4095/5) = 819 = 0x333; t = trunc(10·4095/20) = 0x7FF.
/// Bytes (`pack_mit_control_data`): 8A 3C | 7F | F0 (v low nibble, kp >> 8) | A3 | 33 |
/// 37 (kd low nibble, t >> 8) | FF.
const COMMAND: (u16, &str) = (0x001, "8A3C7FF0A33337FF");
const COMMAND_VALUES: Command = Command {
    position: 1.0,
    velocity: 0.0,
    kp: 20.0,
    kd: 1.0,
    torque: 0.0,
};

/// MIT command to motor 0x02, DM4310: q = −0.5, dq = 2, kp = 0, kd = 0.5, tau = −1.5.
/// p = trunc(12·65535/25) = trunc(31456.8) = 31456 = 0x7AE0; v = 32·4095/60 = 2184
/// (exact) = 0x888; kp = 0; kd = trunc(0.5·4095/5) = trunc(409.5) = 409 = 0x199;
/// t = trunc(8.5·4095/20) = trunc(1740.375) = 1740 = 0x6CC.
/// Bytes: 7A E0 | 88 | 80 | 00 | 19 | 96 | CC.
const COMMAND2: (u16, &str) = (0x002, "7AE08880001996CC");
const COMMAND2_VALUES: Command = Command {
    position: -0.5,
    velocity: 2.0,
    kp: 0.0,
    kd: 0.5,
    torque: -1.5,
};

/// Reply of motor 0x01 (enabled) on its master id 0x11, FD + BRS: byte 0 = 1 << 4 | 1 =
/// 0x11; p = 0x8A3C → 35388·25/65535 − 12.5 = 0.99983 rad; v = 0x7FF → 2047·60/4095 − 30
/// = −0.00733 rad/s; t = 0x7FF → 2047·20/4095 − 10 = −0.00244 N·m; T_MOS 0x1E = 30 °C,
/// T_rotor 0x20 = 32 °C. Bytes: 11 | 8A 3C | 7F | F7 (v low nibble, t >> 8) | FF | 1E | 20.
const REPLY: (u16, &str) = (0x011, "118A3C7FF7FF1E20");

/// Reply of motor 0x02 in state 0xD (communication lost) on master id 0x12: byte 0 =
/// 0xD << 4 | 2 = 0xD2; p = 0x8000 → 32768·25/65535 − 12.5 = 0.00019 rad; v = 0x800 →
/// 0.00733 rad/s; t = 0x800 → 0.00244 N·m; T_MOS 0x28 = 40 °C, T_rotor 0x2D = 45 °C.
/// Bytes: D2 | 80 00 | 80 | 08 | 00 | 28 | 2D.
const REPLY_LOST: (u16, &str) = (0x012, "D28000800800282D");

#[test]
fn special_frames_go_as_fd_frames_of_dlc_8_with_brs() {
    same(
        "enable",
        &BRS.apply(wire::enter(1)),
        ENABLE.0,
        ENABLE.1,
        true,
    );
    same(
        "disable",
        &BRS.apply(wire::exit(2)),
        DISABLE.0,
        DISABLE.1,
        true,
    );
    same(
        "set zero",
        &BRS.apply(wire::set_zero(1)),
        SET_ZERO.0,
        SET_ZERO.1,
        true,
    );
    // Without BRS (`brs=false`): the same frame at the nominal rate throughout.
    let slow = Framing::Fd { brs: false };
    same(
        "enable, no BRS",
        &slow.apply(wire::enter(1)),
        0x001,
        ENABLE.1,
        false,
    );
    // Classical framing leaves the frame as it was.
    assert_eq!(Framing::Classic.apply(wire::enter(1)), wire::enter(1));
    assert!(!Framing::Classic.apply(wire::enter(1)).is_fd());
    // The motor reads them back as what they are.
    for (f, want) in [
        (fd(ENABLE.0, ENABLE.1, true), Request::Enter),
        (fd(DISABLE.0, DISABLE.1, true), Request::Exit),
        (fd(SET_ZERO.0, SET_ZERO.1, false), Request::SetZero),
    ] {
        let (_, got) = wire::decode_request(&f, &DM4310).expect("a request");
        assert_eq!(got, want, "{f:?}");
    }
}

#[test]
fn mit_commands_are_the_classic_payload_in_an_fd_frame() {
    for (name, (id, data), values) in [
        ("command", COMMAND, COMMAND_VALUES),
        ("command 2", COMMAND2, COMMAND2_VALUES),
    ] {
        let got = BRS.apply(wire::command(id, &DM4310, &values));
        same(name, &got, id, data, true);
        // And back, within a step.
        let (got_id, req) = wire::decode_request(&fd(id, data, true), &DM4310).expect(name);
        assert_eq!(got_id, id, "{name}");
        let Request::Command(c) = req else {
            panic!("{name}: {req:?}")
        };
        let r = DM4310;
        near(
            name,
            c.position,
            values.position,
            step(r.p_min, r.p_max, 16),
        );
        near(
            name,
            c.velocity,
            values.velocity,
            step(r.v_min, r.v_max, 12),
        );
        near(name, c.kp, values.kp, step(r.kp_min, r.kp_max, 12));
        near(name, c.kd, values.kd, step(r.kd_min, r.kd_max, 12));
        near(name, c.torque, values.torque, step(r.t_min, r.t_max, 12));
    }
}

#[test]
fn fd_replies_decode_as_classic_ones() {
    let r = DM4310;
    let (sp, sv, st) = (
        step(r.p_min, r.p_max, 16),
        step(r.v_min, r.v_max, 12),
        step(r.t_min, r.t_max, 12),
    );
    for brs in [true, false] {
        let fb = wire::decode_reply(&fd(REPLY.0, REPLY.1, brs), Layout::Damiao, &r).unwrap();
        assert_eq!((fb.motor, fb.error), (1, 1), "motor 1, enabled");
        near("position", fb.position, 0.99983, sp);
        near("velocity", fb.velocity, -0.00733, sv);
        near("torque", fb.torque, -0.00244, st);
        assert_eq!(fb.temperature, Some(32.0), "the rotor's");
        assert_eq!(
            wire::damiao_temperatures(&fd(REPLY.0, REPLY.1, brs)),
            Some((30.0, 32.0))
        );
        assert!(!Layout::Damiao.is_fault(fb.error));
    }
    let fb = wire::decode_reply(&fd(REPLY_LOST.0, REPLY_LOST.1, true), Layout::Damiao, &r).unwrap();
    assert_eq!(
        (fb.motor, fb.error),
        (2, 0xD),
        "motor 2, communication lost"
    );
    assert!(Layout::Damiao.is_fault(fb.error));
    near("position", fb.position, 0.00019, sp);
    near("velocity", fb.velocity, 0.00733, sv);
    near("torque", fb.torque, 0.00244, st);
    assert_eq!(fb.temperature, Some(45.0));
    // The same payload as a Classical frame decodes the same (a driver set to FD takes
    // both kinds).
    let classic = Frame::classic(CanId::Standard(REPLY.0), &hex(REPLY.1)).unwrap();
    assert_eq!(
        wire::decode_reply(&classic, Layout::Damiao, &r),
        wire::decode_reply(&fd(REPLY.0, REPLY.1, true), Layout::Damiao, &r)
    );
    // Damiao replies are DLC 8: an FD frame padded to 12 bytes, or one on an extended
    // id, is none.
    let mut long = hex(REPLY.1);
    long.extend([0; 4]);
    let long = Frame::fd(CanId::Standard(REPLY.0), &long).unwrap();
    assert_eq!(wire::decode_reply(&long, Layout::Damiao, &r), None);
    let ext = Frame::fd(CanId::Extended(0x11), &hex(REPLY.1)).unwrap();
    assert_eq!(wire::decode_reply(&ext, Layout::Damiao, &r), None);
}

// ---- the keys ----

fn spec(text: &str) -> DeviceSpec {
    DeviceSpec::parse(text).unwrap()
}

fn err(text: &str) -> String {
    match DeviceSpec::parse(text).and_then(|s| s.device()) {
        Ok(_) => panic!("{text} was taken"),
        Err(e) => e.0,
    }
}

#[test]
fn fd_and_brs_keys() {
    let d = devices(&[spec("mit:id=1,master=0x11,layout=damiao,fd=true")]).unwrap();
    assert_eq!(d[0].describe(), "mit id 0x001 (fd)");
    let d = devices(&[spec("mit:id=1,layout=damiao,fd=TRUE,brs=false")]).unwrap();
    assert_eq!(d[0].describe(), "mit id 0x001 (fd without brs)");
    let d = devices(&[spec("mit:id=1,layout=damiao,fd=false")]).unwrap();
    assert_eq!(
        d[0].describe(),
        "mit id 0x001",
        "Classical, as without `fd`"
    );
    assert_eq!(
        link_needed(&spec("mit:id=1,layout=damiao,fd=true")),
        Ok(Mtu::Fd)
    );
    assert_eq!(link_needed(&spec("mit:id=1")), Ok(Mtu::Classic));
    assert_eq!(link_needed(&spec("robstride:id=1")), Ok(Mtu::Classic));

    let e = err("mit:id=1,layout=damiao,fd=yes");
    assert!(e.contains("`fd` = yes is not `true` or `false`"), "{e}");
    let e = err("mit:id=1,layout=damiao,brs=true");
    assert!(e.contains("`brs` needs `fd=true`"), "{e}");
    let e = err("mit:id=1,layout=damiao,fd=false,brs=false");
    assert!(e.contains("`brs` needs `fd=true`"), "{e}");
    let e = err("mit:id=1,fd=true");
    assert!(
        e.contains("`fd` = true needs `layout=damiao`") && e.contains("`cubemars`"),
        "{e}"
    );
    let e = err("mit:id=1,layout=damiao,fd=true,fd=true");
    assert!(e.contains("`fd` is given twice"), "{e}");
    // A typo is refused by name, and the keys listed include the new ones.
    let e = err("mit:id=1,layout=damiao,canfd=true");
    assert!(
        e.contains("unknown key `canfd`") && e.contains("brs") && e.contains("fd,"),
        "{e}"
    );
    // RobStride motors are Classical: the key is unknown there.
    let e = err("robstride:id=1,fd=true");
    assert!(e.contains("unknown key `fd`"), "{e}");
    // A bus file's YAML booleans.
    let f = BusFile::parse(
        "robot.yaml",
        "devices:\n  - { driver: mit, id: 1, master: 0x11, layout: damiao, fd: true, brs: false }\n",
    )
    .unwrap();
    assert_eq!(
        devices(&f.devices).unwrap()[0].describe(),
        "mit id 0x001 (fd without brs)"
    );
    // The simulated motor takes the same keys.
    let sim = spec("mit:id=1,master=0x11,layout=damiao,fd=true")
        .simulated()
        .unwrap();
    assert_eq!(sim.describe(), "mit damiao id 1 (fd)");
    assert!(spec("mit:id=1,fd=true").simulated().is_err());
}

#[test]
fn an_fd_device_on_a_classical_link_is_refused_by_name() {
    let specs = [
        spec("mit:id=2,layout=damiao"),
        spec("mit:id=1,layout=damiao,fd=true"),
    ];
    let e = check_link(&specs, Mtu::Classic).unwrap_err().0;
    assert!(
        e.contains("device `mit:id=1,layout=damiao,fd=true`")
            && e.contains("`fd=true` sends CAN FD frames, but this bus is Classical CAN"),
        "{e}"
    );
    assert!(devices_on(&specs, Mtu::Classic).is_err());
    assert_eq!(devices_on(&specs, Mtu::Fd).map(|d| d.len()).unwrap(), 2);
    // Classical devices go on either link.
    assert!(check_link(&specs[..1], Mtu::Classic).is_ok());
    assert!(check_link(&specs, Mtu::Fd).is_ok());
    // A spec whose framing keys are wrong is refused here too.
    assert!(check_link(&[spec("mit:id=1,brs=true")], Mtu::Classic).is_err());
    // The device host refuses it too, whoever built the devices (`fcan serve`, `fcan
    // fake`, an application): its frames would all be refused by the link.
    let e = match DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an FD device hosted on a Classical link"),
    };
    assert!(
        e.contains("mit id 0x001 (fd)") && e.contains("this bus is Classical CAN"),
        "{e}"
    );
    assert!(DeviceHost::new(Mtu::Fd, devices(&specs).unwrap()).is_ok());
    assert!(DeviceHost::new(Mtu::Classic, devices(&specs[..1]).unwrap()).is_ok());
}

// ---- the driver, the simulated motor, the decoder ----

fn fd_driver(brs: bool) -> Box<dyn Device> {
    let text = format!("mit:id=1,master=0x11,layout=damiao,vmax=30,tmax=10,fd=true,brs={brs}");
    devices(&[spec(&text)]).unwrap().remove(0)
}

#[test]
fn the_driver_sends_fd_frames_and_takes_fd_replies() {
    let mut d = fd_driver(true);
    // The enable service: first the command watchdog (Damiao's TIMEOUT, register 9,
    // 200 ms = 4000 counts = A0 0F 00 00) written and read back through 0x7FF, in FD
    // frames too (tests/mit_watchdog.rs has the register vectors' sources) …
    let mut io = Io::default();
    assert_eq!(d.on_service(0, 0, &[], &mut io), Served::Pending);
    assert_eq!(io.frames().len(), 2);
    same(
        "TIMEOUT write",
        &io.frames()[0],
        0x7FF,
        "01005509A00F0000",
        true,
    );
    same(
        "TIMEOUT read",
        &io.frames()[1],
        0x7FF,
        "0100330900000000",
        true,
    );
    // … then, once the motor's FD answer holds the value, the documents' enable frame.
    let mut io = Io::default();
    d.on_frame(500, &fd(0x11, "01003309A00F0000", true), &mut io);
    assert_eq!(io.frames().len(), 1);
    same("enable", &io.frames()[0], ENABLE.0, ENABLE.1, true);
    assert!(
        io.published().is_empty(),
        "a register answer is not feedback"
    );
    // The motor's FD reply answers it and is the feedback.
    let reply = fd(REPLY.0, REPLY.1, true);
    assert!(d.claims(&reply));
    let mut io = Io::default();
    d.on_frame(1_000, &reply, &mut io);
    assert_eq!(io.completed().len(), 1, "enable answered");
    assert_eq!(io.published().len(), 1, "feedback published");
    // A Classical reply with the same payload is its too; another motor's is not.
    assert!(d.claims(&Frame::classic(CanId::Standard(0x11), &hex(REPLY.1)).unwrap()));
    assert!(!d.claims(&fd(REPLY_LOST.0, REPLY_LOST.1, true)));
    // Frames to it (another tool's) are its traffic, in either kind.
    assert!(d.owns(&fd(COMMAND.0, COMMAND.1, true)));

    // brs=false: FD frames at the nominal rate.
    let mut d = fd_driver(false);
    let mut io = Io::default();
    let _ = d.on_service(0, 1, &[], &mut io);
    same(
        "disable, no BRS",
        &io.frames()[0],
        0x001,
        "FFFFFFFFFFFFFFFD",
        false,
    );
}

#[test]
fn the_simulated_motor_speaks_fd_when_set_to() {
    let mut sim = SimMit::new(1, 0x11, Layout::Damiao, DM4310).with_framing(BRS);
    let mut out = Vec::new();
    sim.receive(0, &fd(ENABLE.0, ENABLE.1, true), &mut out);
    assert!(sim.enabled());
    assert_eq!(out.len(), 1);
    let r = &out[0];
    assert!(r.is_fd() && r.is_brs() && r.len() == 8, "{r:?}");
    assert_eq!(r.id(), CanId::Standard(0x11));
    let fb = wire::decode_reply(r, Layout::Damiao, &DM4310).unwrap();
    assert_eq!((fb.motor, fb.error), (1, 1));
    // An FD controller receives Classical frames too; it answers in FD.
    out.clear();
    sim.receive(0, &wire::exit(1), &mut out);
    assert!(!sim.enabled());
    assert!(out[0].is_fd());
    // Set to Classical CAN, it cannot receive FD frames at all.
    let mut classic = SimMit::new(1, 0x11, Layout::Damiao, DM4310);
    out.clear();
    classic.receive(0, &fd(ENABLE.0, ENABLE.1, true), &mut out);
    assert!(out.is_empty() && !classic.enabled());
    classic.receive(0, &wire::enter(1), &mut out);
    assert!(classic.enabled() && !out[0].is_fd());
}

#[test]
fn a_capture_of_fd_frames_decodes() {
    let mut dec = Decoder::new(vec![fd_driver(true)]);
    let got = dec.push(0, &fd(REPLY.0, REPLY.1, true)).expect("its reply");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].topic, "/mit1/motor/feedback");
    // The command to it is its traffic, carrying no value.
    assert_eq!(
        dec.push(1, &fd(COMMAND.0, COMMAND.1, true)),
        Some(Vec::new())
    );
    // Another motor's reply is not.
    assert_eq!(dec.push(2, &fd(REPLY_LOST.0, REPLY_LOST.1, true)), None);
}

#[test]
fn a_candump_capture_of_fd_frames_decodes() {
    // What `candump -L` writes for the documents' frames on an FD bus (`##5`: FD + BRS;
    // `##4`: FD without BRS), as `fcan decode --device mit:…,fd=true` reads it.
    let capture = "\
(1700000000.000000) can0 001##5FFFFFFFFFFFFFFFC
(1700000000.000200) can0 011##5118A3C7FF7FF1E20
(1700000000.001000) can0 001##48A3C7FF0A33337FF
(1700000000.001200) can0 011##4118A3C7FF7FF1E20
";
    let records = fcan_transport::candump::parse_log(capture).expect("a capture");
    let mut dec = Decoder::new(vec![fd_driver(true)]);
    let mut samples = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        let fcan_transport::candump::LogEntry::Frame(f) = &rec.entry else {
            panic!("{rec:?}")
        };
        assert!(f.is_fd(), "{f:?}");
        samples.push(dec.push(i as u64, f).expect("the motor's traffic"));
    }
    let counts: Vec<usize> = samples.iter().map(Vec::len).collect();
    assert_eq!(counts, [0, 1, 0, 1], "a value per reply, none per request");
    assert_eq!(samples[1], samples[3], "with BRS or without, one value");
}
