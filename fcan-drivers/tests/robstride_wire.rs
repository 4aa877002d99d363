//! RobStride private protocol: the conformance vectors in
//! `conformance/robstride/vectors.json` (from the manuals' examples or computed by hand,
//! see the README there) checked against both the encoders and the decoders, then
//! property tests for quantization, decoding robustness and unwrapping.

use fcan_core::frame::{CanId, Frame};
use fcan_drivers::robstride::model::{self, Model, ParamType};
use fcan_drivers::robstride::unwrap::Unwrap;
use fcan_drivers::robstride::wire::{self, MotionCommand, Ranges, Reply, Request, RsId};
use proptest::prelude::*;
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn word(s: &str) -> [u8; 4] {
    hex(s).try_into().expect("4 bytes")
}

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/robstride/vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read vectors.json");
    let v: Value = serde_json::from_str(&text).expect("parse vectors.json");
    v["vectors"].as_array().expect("vectors array").clone()
}

fn frame_of(v: &Value) -> Frame {
    let raw = u32::from_str_radix(v["id"].as_str().unwrap(), 16).unwrap();
    let id = if v["extended"].as_bool().unwrap_or(true) {
        CanId::Extended(raw)
    } else {
        CanId::Standard(raw as u16)
    };
    let data = hex(v["data"].as_str().unwrap());
    if v["fd"].as_bool().unwrap_or(false) {
        Frame::fd(id, &data).unwrap()
    } else {
        Frame::classic(id, &data).unwrap()
    }
}

fn u8f(v: &Value, k: &str) -> u8 {
    v[k].as_u64().unwrap_or_else(|| panic!("field {k}")) as u8
}

fn f32f(v: &Value, k: &str) -> f32 {
    v[k].as_f64().unwrap_or_else(|| panic!("field {k}")) as f32
}

fn close(name: &str, field: &str, got: f32, want: f32, tol: f32) {
    assert!(
        (got - want).abs() <= tol,
        "{name}: {field} = {got}, want {want} ± {tol}"
    );
}

/// One quantization step of `lo..hi`, plus f32 slack.
fn step(lo: f32, hi: f32) -> f32 {
    (hi - lo) / 65535.0 * 1.01 + 1e-6
}

fn check_request(name: &str, v: &Value, frame: &Frame, r: &Ranges) {
    let want = &v["request"];
    let got = wire::decode_request(frame, r).unwrap_or_else(|| panic!("{name}: no request"));
    let host = || u8f(want, "host");
    let motor = u8f(want, "motor");
    let encoded = match want["kind"].as_str().unwrap() {
        "get_id" => {
            assert_eq!(
                got,
                Request::GetId {
                    host: host(),
                    motor
                },
                "{name}"
            );
            wire::get_id(host(), motor)
        }
        "enable" => {
            assert_eq!(
                got,
                Request::Enable {
                    host: host(),
                    motor
                },
                "{name}"
            );
            wire::enable(host(), motor)
        }
        "stop" => {
            let clear_fault = want["clear_fault"].as_bool().unwrap();
            let w = Request::Stop {
                host: host(),
                motor,
                clear_fault,
            };
            assert_eq!(got, w, "{name}");
            wire::stop(host(), motor, clear_fault)
        }
        "set_zero" => {
            assert_eq!(
                got,
                Request::SetZero {
                    host: host(),
                    motor
                },
                "{name}"
            );
            wire::set_zero(host(), motor)
        }
        "set_id" => {
            let new_id = u8f(want, "new_id");
            let w = Request::SetId {
                host: host(),
                motor,
                new_id,
            };
            assert_eq!(got, w, "{name}");
            wire::set_can_id(host(), motor, new_id)
        }
        "param_read" => {
            let index = want["index"].as_u64().unwrap() as u16;
            let w = Request::ParamRead {
                host: host(),
                motor,
                index,
            };
            assert_eq!(got, w, "{name}");
            wire::param_read(host(), motor, index)
        }
        "param_write" => {
            let index = want["index"].as_u64().unwrap() as u16;
            let value = word(want["value"].as_str().unwrap());
            let w = Request::ParamWrite {
                host: host(),
                motor,
                index,
                value,
            };
            assert_eq!(got, w, "{name}");
            wire::param_write(host(), motor, index, value)
        }
        "save" => {
            assert_eq!(
                got,
                Request::Save {
                    host: host(),
                    motor
                },
                "{name}"
            );
            wire::save(host(), motor)
        }
        "active_report" => {
            let on = want["on"].as_bool().unwrap();
            let w = Request::ActiveReport {
                host: host(),
                motor,
                on,
            };
            assert_eq!(got, w, "{name}");
            wire::active_report(host(), motor, on)
        }
        "motion" => {
            let cmd = MotionCommand {
                position: f32f(want, "position"),
                velocity: f32f(want, "velocity"),
                kp: f32f(want, "kp"),
                kd: f32f(want, "kd"),
                torque: f32f(want, "torque"),
            };
            let Request::Motion { motor: m, cmd: c } = got else {
                panic!("{name}: {got:?}");
            };
            assert_eq!(m, motor, "{name}");
            // Decoded values: the inputs, unless the vector says what clamping gives.
            let d = if v["decoded"].is_object() {
                &v["decoded"]
            } else {
                want
            };
            close(
                name,
                "position",
                c.position,
                f32f(d, "position"),
                step(-r.position, r.position),
            );
            close(
                name,
                "velocity",
                c.velocity,
                f32f(d, "velocity"),
                step(-r.velocity, r.velocity),
            );
            close(name, "kp", c.kp, f32f(d, "kp"), step(0.0, r.kp));
            close(name, "kd", c.kd, f32f(d, "kd"), step(0.0, r.kd));
            close(
                name,
                "torque",
                c.torque,
                f32f(d, "torque"),
                step(-r.torque, r.torque),
            );
            wire::motion(motor, r, &cmd)
        }
        k => panic!("{name}: unknown request kind {k}"),
    };
    if v["encode"].as_bool().unwrap_or(false) {
        assert_eq!(encoded, *frame, "{name}: encoder");
    }
}

fn check_reply(name: &str, v: &Value, frame: &Frame, r: &Ranges) {
    let want = &v["reply"];
    let got = wire::decode(frame, r).unwrap_or_else(|| panic!("{name}: no reply"));
    match want["kind"].as_str().unwrap() {
        "device_id" => {
            let uid = u64::from_str_radix(want["uid"].as_str().unwrap(), 16).unwrap();
            let motor = u8f(want, "motor");
            assert_eq!(got, Reply::DeviceId { motor, uid }, "{name}");
            assert_eq!(wire::device_id_reply(motor, uid), *frame, "{name}: encoder");
        }
        "param" => {
            let (motor, host) = (u8f(want, "motor"), u8f(want, "host"));
            let index = want["index"].as_u64().unwrap() as u16;
            let value = word(want["value"].as_str().unwrap());
            let ok = want["ok"].as_bool().unwrap();
            let w = Reply::Param {
                motor,
                host,
                index,
                value,
                ok,
            };
            assert_eq!(got, w, "{name}");
            if let Some(x) = want["f32"].as_f64() {
                assert_eq!(f32::from_le_bytes(value), x as f32, "{name}");
                let p = model::param(index).unwrap();
                assert_eq!(p.ty, ParamType::F32);
                assert_eq!(p.decode_value(value), x, "{name}");
            }
            let enc = wire::param_reply(motor, host, index, value, ok);
            assert_eq!(enc, *frame, "{name}: encoder");
        }
        "faults" => {
            let (motor, host) = (u8f(want, "motor"), u8f(want, "host"));
            let fault = want["fault"].as_u64().unwrap() as u32;
            let warning = want["warning"].as_u64().unwrap() as u32;
            let w = Reply::Faults {
                motor,
                host,
                fault,
                warning,
            };
            assert_eq!(got, w, "{name}");
            if let Some(names) = want["names"].as_array() {
                let got: Vec<String> = wire::fault_word_names(fault).collect();
                let want: Vec<&str> = names.iter().map(|n| n.as_str().unwrap()).collect();
                assert_eq!(got, want, "{name}");
            }
            let enc = wire::fault_frame(motor, host, fault, warning);
            assert_eq!(enc, *frame, "{name}: encoder");
        }
        "feedback" => {
            let Reply::Feedback(fb) = got else {
                panic!("{name}: {got:?}");
            };
            assert_eq!(fb.motor, u8f(want, "motor"), "{name}");
            assert_eq!(fb.host, u8f(want, "host"), "{name}");
            assert_eq!(fb.mode, u8f(want, "mode"), "{name}");
            assert_eq!(fb.faults, u8f(want, "faults"), "{name}");
            // Far tighter than a quantization step: the hand-computed values have 6
            // decimals and f32 cancellation costs about 1e-6.
            close(name, "position", fb.position, f32f(want, "position"), 1e-5);
            close(name, "velocity", fb.velocity, f32f(want, "velocity"), 1e-5);
            close(name, "torque", fb.torque, f32f(want, "torque"), 1e-5);
            match want["temperature"].as_f64() {
                Some(t) => close(name, "temperature", fb.temperature.unwrap(), t as f32, 1e-4),
                None => assert_eq!(fb.temperature, None, "{name}"),
            }
            if let Some(names) = want["names"].as_array() {
                let got: Vec<&str> = wire::fault_bits_names(fb.faults).collect();
                let want: Vec<&str> = names.iter().map(|n| n.as_str().unwrap()).collect();
                assert_eq!(got, want, "{name}");
            }
            // Re-encoding the decoded feedback gives the same frame (8-byte ones).
            if frame.len() == 8 {
                let comm = RsId::of(frame).unwrap().comm;
                assert_eq!(wire::feedback(comm, &fb, r), *frame, "{name}: encoder");
            }
        }
        k => panic!("{name}: unknown reply kind {k}"),
    }
}

#[test]
fn conformance_vectors() {
    let vs = vectors();
    assert!(vs.len() >= 30, "only {} vectors", vs.len());
    let mut models_seen = std::collections::HashSet::new();
    for v in &vs {
        let name = v["name"].as_str().unwrap();
        let model: Model = v["model"].as_str().unwrap().parse().unwrap();
        let r = model.ranges();
        let frame = frame_of(v);
        let mut checked = false;
        if v["request"].is_object() {
            check_request(name, v, &frame, &r);
            checked = true;
            if v["request"]["kind"] == "motion" {
                models_seen.insert(model);
            }
        }
        if v["reply"].is_object() {
            check_reply(name, v, &frame, &r);
            checked = true;
            if v["reply"]["kind"] == "feedback" {
                models_seen.insert(model);
            }
        }
        if v["decode_none"].as_bool().unwrap_or(false) {
            assert_eq!(wire::decode(&frame, &r), None, "{name}");
            checked = true;
        }
        if v["request_none"].as_bool().unwrap_or(false) {
            assert_eq!(wire::decode_request(&frame, &r), None, "{name}");
            checked = true;
        }
        assert!(checked, "{name}: vector checks nothing");
    }
    for m in Model::ALL {
        assert!(models_seen.contains(&m), "no vector uses {m} ranges");
    }
}

#[test]
fn documented_model_ranges() {
    // RobStride manuals §4.1.2 / §4.4 (RS00..RS06 User Manual 260428).
    let table = [
        ("RS00", 33.0, 14.0, 500.0, 5.0),
        ("RS01", 44.0, 17.0, 500.0, 5.0),
        ("RS02", 44.0, 17.0, 500.0, 5.0),
        ("RS03", 20.0, 60.0, 5000.0, 100.0),
        ("RS04", 15.0, 120.0, 5000.0, 100.0),
        ("RS05", 50.0, 5.5, 500.0, 5.0),
        ("RS06", 50.0, 36.0, 5000.0, 100.0),
    ];
    for (name, v, t, kp, kd) in table {
        let m: Model = name.to_lowercase().parse().unwrap();
        assert_eq!(m.name(), name);
        assert_eq!(
            m.ranges(),
            Ranges {
                position: 12.57,
                velocity: v,
                torque: t,
                kp,
                kd
            }
        );
    }
    let err = "RS07".parse::<Model>().unwrap_err();
    assert!(err.contains("RS00") && err.contains("RS06"), "{err}");
}

#[test]
fn parameter_table() {
    let p = model::param(0x7019).unwrap();
    assert_eq!(
        (p.name, p.ty, p.writable),
        ("mechPos", ParamType::F32, false)
    );
    assert_eq!(model::param_named("run_mode").unwrap().index, 0x7005);
    assert_eq!(model::param_named("vbus").unwrap().index, 0x701C);
    assert_eq!(
        model::param_named("EPScan_time").unwrap().ty,
        ParamType::U16
    );
    assert_eq!(model::param_named("canTimeout").unwrap().ty, ParamType::U32);
    assert!(model::param(0x7000).is_none());
    // Sorted and unique, so a lookup cannot hit a duplicate.
    assert!(model::PARAMS.windows(2).all(|w| w[0].index < w[1].index));
    let spd = model::param(0x700A).unwrap();
    assert_eq!(Model::Rs03.param_range(spd), (-20.0, 20.0));
    let lim = model::param(0x700B).unwrap();
    assert_eq!(Model::Rs04.param_range(lim), (0.0, 120.0));
    let iq = model::param(0x7006).unwrap();
    assert_eq!(Model::Rs03.param_range(iq), (-43.0, 43.0));
    // run_mode's value sits in byte 4 alone.
    let rm = model::param(0x7005).unwrap();
    assert_eq!(rm.encode_value(5.0), [5, 0, 0, 0]);
    assert_eq!(rm.decode_value([1, 0xAA, 0xBB, 0xCC]), 1.0);
}

#[test]
fn to_u16_edges() {
    assert_eq!(wire::to_u16(f32::NAN, 0.0, 500.0), 0);
    assert_eq!(wire::to_u16(f32::NAN, -12.57, 12.57), 32767);
    assert_eq!(wire::to_u16(f32::INFINITY, -1.0, 1.0), 65535);
    assert_eq!(wire::to_u16(f32::NEG_INFINITY, -1.0, 1.0), 0);
    assert_eq!(wire::to_u16(1.0, 1.0, 1.0), 0);
    assert_eq!(wire::from_u16(0, -20.0, 20.0), -20.0);
    assert_eq!(wire::from_u16(65535, -20.0, 20.0), 20.0);
}

#[test]
fn rsid_fields() {
    let id = RsId::from_raw(0x1100_FD7F);
    assert_eq!(
        id,
        RsId {
            comm: 17,
            data: 0x00FD,
            dest: 0x7F
        }
    );
    assert_eq!(id.raw(), 0x1100_FD7F);
    assert_eq!(RsId::from_raw(0x0241_05FD).status(), 0x41);
    assert_eq!(RsId::from_raw(0x0241_05FD).source(), 5);
    let std = Frame::classic(CanId::Standard(0x123), &[]).unwrap();
    assert_eq!(RsId::of(&std), None);
}

fn any_model() -> impl Strategy<Value = Model> {
    prop::sample::select(Model::ALL.to_vec())
}

proptest! {
    #[test]
    fn quantization_round_trip(m in any_model(), a in -1.0f32..1.0, b in 0.0f32..1.0) {
        let r = m.ranges();
        for (x, lo, hi) in [
            (a * r.position, -r.position, r.position),
            (a * r.velocity, -r.velocity, r.velocity),
            (a * r.torque, -r.torque, r.torque),
            (b * r.kp, 0.0, r.kp),
            (b * r.kd, 0.0, r.kd),
        ] {
            let back = wire::from_u16(wire::to_u16(x, lo, hi), lo, hi);
            prop_assert!((back - x).abs() <= step(lo, hi), "{m}: {x} -> {back}");
            // Truncation: never above the input by more than rounding.
            prop_assert!(back <= x + 1e-5 * (hi - lo), "{m}: {x} -> {back}");
        }
    }

    #[test]
    fn decoders_never_panic(
        raw in any::<u32>(),
        data in prop::collection::vec(any::<u8>(), 0..=8),
        extended in any::<bool>(),
        m in any_model(),
    ) {
        let id = if extended {
            CanId::Extended(raw & 0x1FFF_FFFF)
        } else {
            CanId::Standard((raw & 0x7FF) as u16)
        };
        let f = Frame::classic(id, &data).unwrap();
        let r = m.ranges();
        let _ = wire::decode(&f, &r);
        let _ = wire::decode_request(&f, &r);
        if !extended {
            prop_assert_eq!(wire::decode(&f, &r), None);
            prop_assert_eq!(wire::decode_request(&f, &r), None);
        }
        if let Some(Reply::Feedback(fb)) = wire::decode(&f, &r) {
            prop_assert_eq!(fb.temperature.is_some(), data.len() >= 8);
            prop_assert!(fb.faults < 64 && fb.mode < 4);
        }
    }

    #[test]
    fn motion_encode_decode(
        m in any_model(),
        motor in any::<u8>(),
        p in -1.0f32..1.0, v in -1.0f32..1.0, t in -1.0f32..1.0,
        kp in 0.0f32..1.0, kd in 0.0f32..1.0,
    ) {
        let r = m.ranges();
        let cmd = MotionCommand {
            position: p * r.position,
            velocity: v * r.velocity,
            kp: kp * r.kp,
            kd: kd * r.kd,
            torque: t * r.torque,
        };
        let f = wire::motion(motor, &r, &cmd);
        prop_assert_eq!(f.len(), 8);
        prop_assert!(!f.is_fd());
        let Some(Request::Motion { motor: got_motor, cmd: c }) = wire::decode_request(&f, &r) else {
            return Err(TestCaseError::fail("not a motion request"));
        };
        prop_assert_eq!(got_motor, motor);
        prop_assert!((c.position - cmd.position).abs() <= step(-r.position, r.position));
        prop_assert!((c.velocity - cmd.velocity).abs() <= step(-r.velocity, r.velocity));
        prop_assert!((c.torque - cmd.torque).abs() <= step(-r.torque, r.torque));
        prop_assert!((c.kp - cmd.kp).abs() <= step(0.0, r.kp));
        prop_assert!((c.kd - cmd.kd).abs() <= step(0.0, r.kd));
    }

    #[test]
    fn other_requests_round_trip(
        host in any::<u8>(), motor in 0u8..0xFE, index in any::<u16>(),
        value in any::<[u8; 4]>(), flag in any::<bool>(), new_id in any::<u8>(),
    ) {
        let r = Model::Rs03.ranges();
        let cases = [
            (wire::get_id(host, motor), Request::GetId { host, motor }),
            (wire::enable(host, motor), Request::Enable { host, motor }),
            (wire::stop(host, motor, flag), Request::Stop { host, motor, clear_fault: flag }),
            (wire::set_zero(host, motor), Request::SetZero { host, motor }),
            (wire::set_can_id(host, motor, new_id), Request::SetId { host, motor, new_id }),
            (wire::param_read(host, motor, index), Request::ParamRead { host, motor, index }),
            (wire::param_write(host, motor, index, value), Request::ParamWrite { host, motor, index, value }),
            (wire::save(host, motor), Request::Save { host, motor }),
            (wire::active_report(host, motor, flag), Request::ActiveReport { host, motor, on: flag }),
        ];
        for (f, want) in cases {
            prop_assert_eq!(wire::decode_request(&f, &r), Some(want));
        }
    }

    #[test]
    fn unwrap_follows_a_continuous_trajectory(
        start in -100.0f64..100.0,
        steps in prop::collection::vec(-12.0f64..12.0, 1..200),
    ) {
        // Steps below half the span (4π ≈ 12.57) in magnitude, 10 ms apart.
        let r = Model::Rs03.ranges();
        let mut u = Unwrap::default();
        let mut truth = start;
        let mut t = 0u64;
        // The first sample can only be known modulo the span: compare differences.
        let first = u.update(quantized(truth, &r), t);
        let offset = truth - first;
        for s in steps {
            truth += s;
            t += 10_000;
            let out = u.update(quantized(truth, &r), t);
            let err = (out + offset - truth).abs();
            prop_assert!(err <= 2.0 * f64::from(step(-r.position, r.position)), "err {err}");
        }
    }

    #[test]
    fn unwrap_restarts_after_a_gap(a in -12.0f32..12.0, b in -12.0f32..12.0, gap in 1_000_001u64..10_000_000) {
        let mut u = Unwrap::new(8.0 * std::f32::consts::PI, 1_000_000);
        u.update(a, 0);
        // A jump over half a span would be taken as a wrap without the gap.
        let out = u.update(b, gap);
        prop_assert_eq!(out, f64::from(b));
    }
}

/// The angle `x` as a motor reports it: wrapped into ±4π, then quantized.
fn quantized(x: f64, r: &Ranges) -> f32 {
    let w = fcan_drivers::robstride::sim::wrap_feedback_angle(x) as f32;
    wire::from_u16(
        wire::to_u16(w, -r.position, r.position),
        -r.position,
        r.position,
    )
}

#[test]
fn unwrap_counts_wraps_and_resets() {
    let span = 8.0 * std::f64::consts::PI;
    let mut u = Unwrap::default();
    assert_eq!(u.update(12.0, 0), 12.0);
    // 12.0 -> -12.0 raw is +0.566 rad the short way round (through +4π).
    let out = u.update(-12.0, 1000);
    assert!((out - (-12.0 + span)).abs() < 1e-5, "{out}");
    let out = u.update(-11.0, 2000);
    assert!((out - (-11.0 + span)).abs() < 1e-5, "{out}");
    u.reset();
    assert_eq!(u.update(0.5, 3000), 0.5);
    // A NaN sample is skipped.
    assert_eq!(u.update(f32::NAN, 4000), 0.5);
}
