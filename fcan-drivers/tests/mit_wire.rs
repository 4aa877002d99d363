//! The MIT codec against the hand-written vectors of `conformance/mit/vectors.json`,
//! and properties of the mapping and the codec.

use fcan_core::frame::{CanId, Frame};
use fcan_drivers::mit::wire::{self, Command, Feedback, Layout, Ranges, Request};
use proptest::prelude::*;
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/mit/vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("conformance/mit/vectors.json");
    serde_json::from_str(&text).expect("vectors.json is JSON")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex byte"))
        .collect()
}

/// 3 hex digits: standard identifier; 8: extended (the `candump -L` convention).
fn frame(v: &Value) -> Frame {
    let id = v["id"].as_str().unwrap();
    let raw = u32::from_str_radix(id, 16).unwrap();
    let can_id = match id.len() {
        3 => CanId::Standard(raw as u16),
        8 => CanId::Extended(raw),
        n => panic!("id of {n} digits"),
    };
    Frame::classic(can_id, &hex(v["data"].as_str().unwrap())).unwrap()
}

fn ranges(all: &Value, v: &Value) -> Ranges {
    let r = &all["ranges"][v["ranges"].as_str().unwrap_or("ak80-9")];
    let f = |k: &str| r[k].as_f64().unwrap() as f32;
    Ranges::symmetric(f("p"), f("v"), f("kp"), f("kd"), f("t"))
}

fn f(v: &Value, k: &str) -> f32 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k}")) as f32
}

fn command_of(v: &Value) -> Command {
    Command {
        position: f(v, "position"),
        velocity: f(v, "velocity"),
        kp: f(v, "kp"),
        kd: f(v, "kd"),
        torque: f(v, "torque"),
    }
}

/// One quantization step, with a little room for `f32` rounding.
fn step(min: f32, max: f32, bits: u32) -> f32 {
    (max - min) / ((1u32 << bits) - 1) as f32 * 1.001 + 1e-6
}

fn near(name: &str, what: &str, got: f32, want: f32, tol: f32) {
    assert!(
        (got - want).abs() <= tol,
        "{name}: {what} = {got}, expected {want} ± {tol}"
    );
}

#[test]
fn the_vectors_encode_and_decode() {
    let all = vectors();
    let list = all["vectors"].as_array().unwrap();
    assert!(list.len() >= 20, "vectors went missing");
    for v in list {
        let name = v["name"].as_str().unwrap();
        let frame = frame(v);
        let id = match frame.id() {
            CanId::Standard(id) => id,
            CanId::Extended(_) => 0,
        };
        let r = ranges(&all, v);
        let encode = v["encode"].as_bool().unwrap_or(true);
        let decode = v["decode"].as_bool().unwrap_or(true);
        let kind = v["kind"].as_str().unwrap();
        let special = match kind {
            "enter" => Some((wire::enter(id), Request::Enter)),
            "exit" => Some((wire::exit(id), Request::Exit)),
            "set_zero" => Some((wire::set_zero(id), Request::SetZero)),
            "clear_error" => Some((wire::clear_error(id), Request::ClearError)),
            _ => None,
        };
        if let Some((built, request)) = special {
            assert_eq!(built, frame, "{name}: encode");
            assert_eq!(
                wire::decode_request(&frame, &r),
                Some((id, request)),
                "{name}"
            );
            continue;
        }
        match kind {
            "command" => {
                let cmd = command_of(&v["values"]);
                if encode {
                    assert_eq!(wire::command(id, &r, &cmd), frame, "{name}: encode");
                }
                let want = if v["decoded"].is_object() {
                    command_of(&v["decoded"])
                } else {
                    cmd
                };
                let Some((got_id, Request::Command(got))) = wire::decode_request(&frame, &r) else {
                    panic!("{name}: not decoded as a command");
                };
                assert_eq!(got_id, id, "{name}");
                if decode {
                    near(
                        name,
                        "position",
                        got.position,
                        want.position,
                        step(r.p_min, r.p_max, 16),
                    );
                    near(
                        name,
                        "velocity",
                        got.velocity,
                        want.velocity,
                        step(r.v_min, r.v_max, 12),
                    );
                    near(name, "kp", got.kp, want.kp, step(r.kp_min, r.kp_max, 12));
                    near(name, "kd", got.kd, want.kd, step(r.kd_min, r.kd_max, 12));
                    near(
                        name,
                        "torque",
                        got.torque,
                        want.torque,
                        step(r.t_min, r.t_max, 12),
                    );
                }
            }
            "reply" => {
                let layout: Layout = v["layout"].as_str().unwrap().parse().unwrap();
                let w = &v["values"];
                let fb = Feedback {
                    motor: w["motor"].as_u64().unwrap() as u8,
                    position: f(w, "position"),
                    velocity: f(w, "velocity"),
                    torque: f(w, "torque"),
                    temperature: w["temperature"].as_f64().map(|t| t as f32),
                    error: w["error"].as_u64().unwrap() as u8,
                };
                if encode {
                    assert_eq!(wire::reply(id, layout, &r, &fb), frame, "{name}: encode");
                }
                let got = wire::decode_reply(&frame, layout, &r)
                    .unwrap_or_else(|| panic!("{name}: not decoded"));
                assert_eq!(got.motor, fb.motor, "{name}: motor");
                assert_eq!(got.error, fb.error, "{name}: error");
                assert_eq!(got.temperature, fb.temperature, "{name}: temperature");
                near(
                    name,
                    "position",
                    got.position,
                    fb.position,
                    step(r.p_min, r.p_max, 16),
                );
                near(
                    name,
                    "velocity",
                    got.velocity,
                    fb.velocity,
                    step(r.v_min, r.v_max, 12),
                );
                near(
                    name,
                    "torque",
                    got.torque,
                    fb.torque,
                    step(r.t_min, r.t_max, 12),
                );
                if let Some(mos) = v["mos_temperature"].as_f64() {
                    let temps = wire::damiao_temperatures(&frame).unwrap();
                    assert_eq!(temps, (mos as f32, fb.temperature.unwrap()), "{name}");
                }
            }
            "not_reply" => {
                let layout: Layout = v["layout"].as_str().unwrap().parse().unwrap();
                assert_eq!(wire::decode_reply(&frame, layout, &r), None, "{name}");
            }
            "not_request" => {
                assert_eq!(wire::decode_request(&frame, &r), None, "{name}");
            }
            other => panic!("{name}: unknown kind {other}"),
        }
    }
}

#[test]
fn the_mapping_clamps_and_handles_nan() {
    assert_eq!(wire::float_to_uint(f32::NAN, -1.0, 1.0, 12), 0);
    assert_eq!(wire::float_to_uint(f32::INFINITY, -1.0, 1.0, 12), 0xFFF);
    assert_eq!(wire::float_to_uint(f32::NEG_INFINITY, -1.0, 1.0, 16), 0);
    assert_eq!(wire::float_to_uint(5.0, 1.0, 1.0, 12), 0, "empty range");
    assert_eq!(wire::float_to_uint(5.0, 2.0, 1.0, 12), 0, "reversed range");
    assert_eq!(
        wire::uint_to_float(0xFFFF, -1.0, 1.0, 12),
        1.0,
        "above the top code"
    );
    assert_eq!(wire::uint_to_float(0, -3.0, 7.0, 16), -3.0);
}

#[test]
fn layouts_parse_and_print() {
    assert_eq!("cubemars".parse::<Layout>(), Ok(Layout::CubeMars));
    assert_eq!("Damiao".parse::<Layout>(), Ok(Layout::Damiao));
    let err = "odrive".parse::<Layout>().unwrap_err();
    assert!(err.contains("cubemars") && err.contains("damiao"), "{err}");
    assert_eq!(Layout::default(), Layout::CubeMars);
    assert_eq!(Layout::Damiao.to_string(), "damiao");
    assert_eq!(Ranges::default(), Ranges::AK80_9);
    assert!(!Layout::Damiao.is_fault(1) && Layout::Damiao.is_fault(0xA));
    assert!(Layout::CubeMars.is_fault(1) && !Layout::CubeMars.is_fault(0));
}

fn any_range() -> impl Strategy<Value = (f32, f32)> {
    (-1000.0f32..1000.0, 0.01f32..1000.0).prop_map(|(min, span)| (min, min + span))
}

fn any_frame() -> impl Strategy<Value = Frame> {
    (
        any::<bool>(),
        any::<u32>(),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..=64),
    )
        .prop_map(|(ext, raw, fd, data)| {
            let id = if ext {
                CanId::Extended(raw & CanId::EXTENDED_MAX)
            } else {
                CanId::Standard(raw as u16 & CanId::STANDARD_MAX)
            };
            if fd {
                let len = fcan_core::frame::fd_padded_len(data.len()).unwrap();
                let mut d = data.clone();
                d.resize(len, 0);
                Frame::fd(id, &d).unwrap()
            } else {
                Frame::classic(id, &data[..data.len().min(8)]).unwrap()
            }
        })
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::CubeMars), Just(Layout::Damiao)]
}

fn ranges_strategy() -> impl Strategy<Value = Ranges> {
    (
        0.5f32..100.0,
        0.5f32..100.0,
        1.0f32..1000.0,
        0.1f32..50.0,
        0.5f32..200.0,
    )
        .prop_map(|(p, v, kp, kd, t)| Ranges::symmetric(p, v, kp, kd, t))
}

proptest! {
    #[test]
    fn the_mapping_round_trips_within_one_step(
        (min, max) in any_range(),
        frac in 0.0f32..=1.0,
        bits in prop_oneof![Just(12u32), Just(16u32)],
    ) {
        let x = min + (max - min) * frac;
        let code = wire::float_to_uint(x, min, max, bits);
        prop_assert!(code < (1 << bits));
        let back = wire::uint_to_float(code, min, max, bits);
        let tol = step(min, max, bits) + x.abs().max(max.abs()) * 1e-6;
        prop_assert!((back - x.clamp(min, max)).abs() <= tol, "{x} -> {code} -> {back}");
    }

    #[test]
    fn decoding_never_panics(frame in any_frame(), layout in layout(), r in ranges_strategy()) {
        let _ = wire::decode_reply(&frame, layout, &r);
        let _ = wire::decode_request(&frame, &r);
        let _ = wire::damiao_temperatures(&frame);
    }

    #[test]
    fn a_command_decodes_to_itself(
        id in 0u16..=0x7FF,
        r in ranges_strategy(),
        f in proptest::array::uniform5(0.0f32..=1.0),
    ) {
        let cmd = Command {
            position: r.p_min + (r.p_max - r.p_min) * f[0],
            velocity: r.v_min + (r.v_max - r.v_min) * f[1],
            kp: r.kp_min + (r.kp_max - r.kp_min) * f[2],
            kd: r.kd_min + (r.kd_max - r.kd_min) * f[3],
            torque: r.t_min + (r.t_max - r.t_min) * f[4],
        };
        let frame = wire::command(id, &r, &cmd);
        prop_assert_eq!(frame.len(), 8);
        match wire::decode_request(&frame, &r) {
            Some((got_id, Request::Command(got))) => {
                prop_assert_eq!(got_id, id);
                prop_assert!((got.position - cmd.position).abs() <= step(r.p_min, r.p_max, 16));
                prop_assert!((got.velocity - cmd.velocity).abs() <= step(r.v_min, r.v_max, 12));
                prop_assert!((got.kp - cmd.kp).abs() <= step(r.kp_min, r.kp_max, 12));
                prop_assert!((got.kd - cmd.kd).abs() <= step(r.kd_min, r.kd_max, 12));
                prop_assert!((got.torque - cmd.torque).abs() <= step(r.t_min, r.t_max, 12));
            }
            // The few commands whose bytes are a special frame (every code at its top).
            Some((_, _)) => prop_assert!(frame.data()[..7].iter().all(|&b| b == 0xFF)),
            None => prop_assert!(false, "not decoded"),
        }
    }

    #[test]
    fn a_reply_decodes_to_itself(
        master in 0u16..=0x7FF,
        layout in layout(),
        r in ranges_strategy(),
        f in proptest::array::uniform3(0.0f32..=1.0),
        motor in any::<u8>(),
        temperature in proptest::option::of(-40i32..=215),
        error in any::<u8>(),
    ) {
        // What each layout can carry: Damiao has 4 bits of id and of state, and
        // unsigned temperatures; CubeMars needs a temperature to carry an error.
        let (motor, error, temperature) = match layout {
            Layout::Damiao => (motor & 0xF, error & 0xF, Some(temperature.unwrap_or(0).max(0))),
            _ => (motor, error, if error != 0 { Some(temperature.unwrap_or(0)) } else { temperature }),
        };
        let fb = Feedback {
            motor,
            position: r.p_min + (r.p_max - r.p_min) * f[0],
            velocity: r.v_min + (r.v_max - r.v_min) * f[1],
            torque: r.t_min + (r.t_max - r.t_min) * f[2],
            temperature: temperature.map(|t| t as f32),
            error,
        };
        let frame = wire::reply(master, layout, &r, &fb);
        prop_assert_eq!(frame.id(), CanId::Standard(master));
        let got = wire::decode_reply(&frame, layout, &r).expect("decoded");
        prop_assert_eq!(got.motor, fb.motor);
        prop_assert_eq!(got.error, fb.error);
        prop_assert_eq!(got.temperature, fb.temperature);
        prop_assert!((got.position - fb.position).abs() <= step(r.p_min, r.p_max, 16));
        prop_assert!((got.velocity - fb.velocity).abs() <= step(r.v_min, r.v_max, 12));
        prop_assert!((got.torque - fb.torque).abs() <= step(r.t_min, r.t_max, 12));
    }
}
