//! Topics both ways (single- and multi-frame, periodic and on-commit), services
//! (immediate, deferred, empty, multi-frame, timing out), parameters accepted and
//! refused, with the reason reaching the caller — checked against the firmware's own view.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::msg::{ConfigMessage, ParamSet, ResultCode};
use fcan_e2e::*;
use fcan_master::engine::CallError;
use fcan_master::value::Value;
use fcan_master::MasterError;
use fcan_master::MasterEvent;
use tokio::time::Instant;

async fn topics_both_ways(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;

    // m2s, single frame: a duty command reaches motor 3's control loop.
    let mut fb = m.subscribe("/motor_driver1/motor3/feedback").await.unwrap();
    m.publish("/motor_driver1/motor3/target", val("{type: 0, value: 0.4}"))
        .await
        .unwrap();
    eventually("motor3 duty 0.4", Duration::from_millis(5), || async {
        let d = w.motor(MD1).with(|f| f.axis(3).unwrap().duty);
        ((d - 0.4).abs() < 1e-6).then_some(())
    })
    .await;
    // Other motors are untouched.
    assert_eq!(w.motor(MD1).with(|f| f.axis(2).unwrap().duty), 0.0);
    // s2m, periodic (5 ms): feedback shows the motor ready and turning.
    let (v, _) = eventually("feedback shows motion", Duration::from_millis(50), || {
        let s = fb.try_recv().ok();
        async move {
            let s = s?;
            (field(&s.value, "ready") == &Value::Bool(true)
                && num(field(&s.value, "velocity")) > 0.0)
                .then_some(s.value)
        }
    })
    .await;
    assert!(num(field(&v, "current")).is_finite());

    // m2s, 33 bytes (5 frames on Classical CAN, staged whole): thresholds.
    m.publish(
        "/io_board3/analog/thresholds",
        val(
            "{low: [-1, -2, -3, -4, -5, -6, -7, -8], high: [1, 2, 3, 4, 5, 6, 7, 8], enable: true}",
        ),
    )
    .await
    .unwrap();
    eventually(
        "thresholds arrive whole",
        Duration::from_millis(10),
        || async {
            w.io(IO3).with(|f| {
                let t = f.node.analog(0)?.thresholds()?;
                (t.value.low == [-1, -2, -3, -4, -5, -6, -7, -8]
                    && t.value.high == [1, 2, 3, 4, 5, 6, 7, 8]
                    && t.value.enable)
                    .then_some(())
            })
        },
    )
    .await;

    // s2m, 34 bytes (a sequenced group on Classical CAN), every 10 ms, whole.
    let mut samples = m.subscribe("/io_board3/analog/samples").await.unwrap();
    let start = Instant::now();
    let mut seqs = Vec::new();
    while seqs.len() < 5 {
        let s = tokio::time::timeout(Duration::from_millis(50), samples.recv())
            .await
            .expect("samples flow")
            .unwrap();
        let Value::Array(raw) = field(&s.value, "raw") else {
            panic!("raw is an array")
        };
        assert_eq!(raw.len(), 16);
        seqs.push(num(field(&s.value, "sequence")) as u64);
    }
    assert!(seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");
    assert!(start.elapsed() >= Duration::from_millis(30));

    // s2m on commit: input 0 toggles every 250 ms; one frame per change.
    let mut edges = m.subscribe("/io_board3/in0/edge").await.unwrap();
    let a = tokio::time::timeout(Duration::from_millis(300), edges.recv())
        .await
        .unwrap()
        .unwrap();
    let b = tokio::time::timeout(Duration::from_millis(300), edges.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        num(field(&b.value, "count")),
        num(field(&a.value, "count")) + 1.0
    );
    assert_ne!(field(&a.value, "level"), field(&b.value, "level"));
    let gap = b.at.duration_since(a.at);
    assert!(
        gap >= Duration::from_millis(249) && gap <= Duration::from_millis(252),
        "{gap:?}"
    );

    // Wrong direction and unknown names are refused with a reason.
    let e = m
        .publish(
            "/motor_driver1/motor3/feedback",
            val("{ready: true, position: 0, velocity: 0, current: 0}"),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("s2m"), "{e}");
    let e = m
        .subscribe("/motor_driver1/motor3/feedbak")
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("did you mean `/motor_driver1/motor3/feedback`"),
        "{e}"
    );
    // A type error names the field.
    let e = m
        .publish("/motor_driver1/motor3/target", val("{type: 300, value: 1}"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("type"), "{e}");
    let e = m
        .publish("/motor_driver1/motor3/target", val("{type: 1}"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("value"), "{e}");
}

async fn services(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;

    // Immediate, with a request body.
    let r = m
        .call(
            "/motor_driver1/motor2/reset_encoder",
            val("{offset: false, value: 1.5}"),
        )
        .await
        .unwrap();
    assert_eq!(r, val("{success: true}"));
    let pos = w.motor(MD1).with(|f| f.axis(2).unwrap().position);
    assert!((pos - 1.5).abs() < 1e-6, "{pos}");

    // Empty request, empty response.
    let r = m
        .call("/io_board3/analog/calibrate", val("{}"))
        .await
        .unwrap();
    assert_eq!(r, Value::Struct(vec![]));
    assert_eq!(w.io(IO3).with(|f| f.app.calibrations), 1);

    // A 15-byte request: two frames on Classical CAN, into the node's service buffer.
    let r = m
        .call(
            "/io_board3/analog/configure",
            val("{channel_mask: 5, averaging: 4, label: [104, 105, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}"),
        )
        .await
        .unwrap();
    assert_eq!(r, val("{accepted: true}"));
    assert_eq!(w.io(IO3).with(|f| f.app.channel_mask), 5);

    // Deferred: ACCEPTED now, OK when the relay has settled (20 ms).
    let mut state = m.subscribe("/io_board3/out0/state").await.unwrap();
    let t0 = Instant::now();
    let r = m
        .call("/io_board3/out0/set", val("{on: true}"))
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(r, val("{success: true, settle_ms: 20}"));
    assert!(took >= Duration::from_millis(20), "{took:?}");
    assert!(took < Duration::from_millis(40), "{took:?}");
    assert_eq!(w.io(IO3).with(|f| f.output(0)), Some(true));
    // On-commit topics share frames, so a neighbour's commit also repeats out0's last
    // value: wait for the sample that reports the switch.
    eventually("out0 state reports on", Duration::from_millis(10), || {
        let s = state.try_recv().ok();
        async move { (field(&s?.value, "on") == &Value::Bool(true)).then_some(()) }
    })
    .await;

    // The handler reads the output's own `min_on_ms` through its handle: a new value
    // is the settling time of the next switch.
    m.param_set("io_board3.out1.min_on_ms", Value::UInt(35))
        .await
        .unwrap();
    let r = m
        .call("/io_board3/out1/set", val("{on: true}"))
        .await
        .unwrap();
    assert_eq!(r, val("{success: true, settle_ms: 35}"));
    assert_eq!(w.io(IO3).with(|f| f.output(1)), Some(true));

    // Unknown names: "did you mean".
    let e = m
        .call("/io_board3/out0/sett", val("{on: true}"))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("did you mean `/io_board3/out0/set`"),
        "{e}"
    );
    // A request field of the wrong type is named.
    let e = m
        .call("/io_board3/out0/set", val("{on: 3}"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("on"), "{e}");
}

/// A node that never answers: the call times out after the service timeout (1.5 s)
/// while the master keeps serving the other nodes.
async fn service_timeout_and_others_keep_working(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let mut fb = m.subscribe("/motor_driver1/motor0/feedback").await.unwrap();
    w.io(IO3).stop();
    let t0 = Instant::now();
    let call = {
        let m = m.clone();
        tokio::spawn(async move { m.call("/io_board3/out1/set", val("{on: true}")).await })
    };
    // Meanwhile the motor driver is served as usual.
    m.param_set("motor_driver1.motor0.velocity.kp", Value::Float(0.25))
        .await
        .unwrap();
    assert_eq!(
        m.param_get("motor_driver1.motor0.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.25)
    );
    let e = call.await.unwrap().unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(e, MasterError::Call(CallError::Timeout(n)) if n.get() == IO3),
        "{e:?}"
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(1600),
        "{took:?}"
    );
    // Feedback kept flowing the whole time (5 ms period).
    let mut n = 0;
    while fb.try_recv().is_ok() {
        n += 1;
    }
    assert!(n >= 290, "only {n} feedback samples in {took:?}");
    // The silent node is marked offline after 3 s without a frame.
    eventually("io_board3 offline", Duration::from_millis(3100), || async {
        (node_info(&m, IO3).await?.phase == fcan_master::Phase::Offline).then_some(())
    })
    .await;
    assert_eq!(
        node_info(&m, MD1).await.unwrap().phase,
        fcan_master::Phase::Running
    );
}

async fn params(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let kp = "motor_driver1.motor0.velocity.kp";

    // Accepted: read back from the node, and in the firmware's parameter storage.
    m.param_set(kp, Value::Float(0.75)).await.unwrap();
    assert_eq!(m.param_get(kp).await.unwrap(), Value::Float(0.75));
    let fw = w
        .motor(MD1)
        .with(|f| f.node.motor(0).unwrap().params().unwrap().velocity_kp);
    assert_eq!(fw, 0.75);
    // Other motors keep their default.
    assert_eq!(
        m.param_get("motor_driver1.motor1.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.5)
    );

    // Refused by the master's check, with the reason; nothing changes on the node.
    let e = m.param_set(kp, Value::Float(200.0)).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("kp") && msg.contains("max") && msg.contains("100"),
        "{msg}"
    );
    let e = m.param_set(kp, Value::Float(f64::NAN)).await.unwrap_err();
    assert!(e.to_string().contains("finite"), "{e}");
    let e = m.param_set(kp, Value::Float(-1.0)).await.unwrap_err();
    assert!(e.to_string().contains("min"), "{e}");
    let e = m.param_set(kp, val("[1, 2]")).await.unwrap_err();
    assert!(e.to_string().contains("kp"), "{e}");
    let e = m
        .param_set("io_board3.in0.debounce_ms", Value::UInt(250))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("debounce_ms") && e.to_string().contains("200"),
        "{e}"
    );
    assert_eq!(m.param_get(kp).await.unwrap(), Value::Float(0.75));
    assert_eq!(
        w.motor(MD1)
            .with(|f| f.node.motor(0).unwrap().params().unwrap().velocity_kp),
        0.75
    );

    // Unknown names get a suggestion.
    let e = m
        .param_get("motor_driver1.motor0.velocity.kpp")
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("did you mean `motor_driver1.motor0.velocity.kp`"),
        "{e}"
    );

    // Array parameter (64 bytes: several frames on Classical CAN) both ways.
    let gains = val("[2, 2, 2, 2, 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, -1, -1, -1, -1]");
    m.param_set("io_board3.analog.gain", gains.clone())
        .await
        .unwrap();
    let back = m.param_get("io_board3.analog.gain").await.unwrap();
    let (Value::Array(a), Value::Array(b)) = (&back, &gains) else {
        panic!("arrays")
    };
    assert_eq!(
        a.iter().map(num).collect::<Vec<_>>(),
        b.iter().map(num).collect::<Vec<_>>()
    );
    assert_eq!(
        w.io(IO3)
            .with(|f| f.node.analog(0).unwrap().params().unwrap().gain[12]),
        -1.0
    );
    // u16 / bool params.
    m.param_set("motor_driver2.motor3.command_timeout_ms", Value::UInt(250))
        .await
        .unwrap();
    assert_eq!(
        w.motor(MD2).with(|f| f
            .node
            .motor(3)
            .unwrap()
            .params()
            .unwrap()
            .command_timeout_ms),
        250
    );
    m.param_set("io_board3.out2.active_low", Value::Bool(true))
        .await
        .unwrap();
    assert_eq!(
        m.param_get("io_board3.out2.active_low").await.unwrap(),
        Value::Bool(true)
    );
}

/// Every write the node acknowledged is an `MasterEvent::ParamChanged` with its name and value
/// (what faces that announce parameter changes listen to, whoever wrote it); a refused
/// write is none, and neither are the restores after a reboot.
async fn acknowledged_writes_are_announced(mtu: Mtu) {
    let (mut w, m) = World::standard(mtu).await;
    let mut events = m.events();
    let kp = "motor_driver1.motor0.velocity.kp";
    m.param_set(kp, Value::Float(0.75)).await.unwrap();
    m.param_set(kp, Value::Float(200.0)).await.unwrap_err();
    m.param_set("io_board3.out2.active_low", Value::Bool(true))
        .await
        .unwrap();
    let changed = |events: &mut tokio::sync::broadcast::Receiver<MasterEvent>| {
        let mut v = Vec::new();
        while let Ok(e) = events.try_recv() {
            if let MasterEvent::ParamChanged { node, name, value } = e {
                v.push((node.get(), name, value));
            }
        }
        v
    };
    assert_eq!(
        changed(&mut events),
        vec![
            (MD1, kp.to_string(), Value::Float(0.75)),
            (IO3, "io_board3.out2.active_low".into(), Value::Bool(true)),
        ]
    );
    // The reboot's restore writes 0.75 again: nothing new to announce.
    let new = w.reboot_motor(MD1);
    eventually("md1 running again", Duration::from_secs(2), || async {
        let n = node_info(&m, MD1).await?;
        (n.boot_id == new && n.phase == fcan_master::Phase::Running).then_some(())
    })
    .await;
    assert_eq!(m.param_get(kp).await.unwrap(), Value::Float(0.75));
    assert_eq!(changed(&mut events), vec![]);
}

/// The node's own check, reached by a raw PARAM_SET that bypasses the master's: NaN and
/// out-of-range values are refused with the reason, and change nothing.
async fn node_side_param_checks(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let kp = "motor_driver1.motor5.velocity.kp";
    m.param_set(kp, Value::Float(0.75)).await.unwrap();
    let reg = m.registry().await.unwrap();
    let p = reg.param(kp).unwrap().clone();
    let mut peer = RawPeer::new(&w);
    let cases = [
        (f32::NAN, ResultCode::NotFinite),
        (f32::INFINITY, ResultCode::NotFinite),
        (200.0, ResultCode::AboveMax),
        (-0.5, ResultCode::BelowMin),
    ];
    for (i, (v, want)) in cases.into_iter().enumerate() {
        let transfer = 0xE0 + i as u8;
        let bytes = v.to_le_bytes();
        let msg = ConfigMessage::ParamSet(ParamSet {
            block: p.block,
            param: p.param,
            commit: true,
            value: &bytes,
        });
        peer.send(MD1, transfer, &msg).await;
        let r = peer.result(MD1, transfer, Duration::from_millis(20)).await;
        assert_eq!(r.opcode, fcan_core::id::Opcode::ParamSet);
        assert_eq!(r.code, want, "{v}");
    }
    // A valid raw write is taken (the check is not just "refuse everything").
    let bytes = 0.125f32.to_le_bytes();
    let msg = ConfigMessage::ParamSet(ParamSet {
        block: p.block,
        param: p.param,
        commit: true,
        value: &bytes,
    });
    peer.send(MD1, 0xF0, &msg).await;
    assert_eq!(
        peer.result(MD1, 0xF0, Duration::from_millis(20)).await.code,
        ResultCode::Ok
    );
    assert_eq!(
        w.motor(MD1)
            .with(|f| f.node.motor(5).unwrap().params().unwrap().velocity_kp),
        0.125
    );
    // The node NAKs a counted-wrong length too.
    let msg = ConfigMessage::ParamSet(ParamSet {
        block: p.block,
        param: p.param,
        commit: true,
        value: &[1, 2],
    });
    peer.send(MD1, 0xF1, &msg).await;
    assert_eq!(
        peer.result(MD1, 0xF1, Duration::from_millis(20)).await.code,
        ResultCode::BadLength
    );
    assert_eq!(
        w.motor(MD1)
            .with(|f| f.node.motor(5).unwrap().params().unwrap().velocity_kp),
        0.125
    );
    // The master, which did not send those, is undisturbed.
    assert_eq!(
        node_info(&m, MD1).await.unwrap().phase,
        fcan_master::Phase::Running
    );
}

/// Data frames the master sent in a window: m2s frames use the fast identifier band
/// (below 0x200), where this schema has no s2m topic.
fn m2s_frames(w: &World, from: Duration) -> usize {
    w.bus
        .history()
        .iter()
        .filter(|r| r.start >= from)
        .filter(|r| matches!(r.frame.id(), fcan_core::frame::CanId::Standard(id) if id < 0x200))
        .count()
}

async fn batched_publish_sends_shared_frames_once(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let targets = |duty: f64| -> Vec<(String, Value)> {
        (0..8)
            .map(|i| {
                (
                    format!("/motor_driver1/motor{i}/target"),
                    val(&format!("{{type: 0, value: {duty}}}")),
                )
            })
            .collect()
    };
    // One publish per motor: every publish sends the frame(s) carrying that target.
    let from = w.bus.now();
    for (name, v) in targets(0.25) {
        m.publish(&name, v).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(3)).await;
    let one_by_one = m2s_frames(&w, from);
    assert_eq!(one_by_one, 8, "eight publishes, eight frames");
    // One batch: a frame carrying several targets goes out once.
    let from = w.bus.now();
    m.publish_many(targets(0.5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    let batched = m2s_frames(&w, from);
    if mtu == Mtu::Fd {
        // The 8 five-byte targets share at most two 64-byte frames.
        assert!(
            (1..=2).contains(&batched),
            "{batched} frames for a batch of 8 on CAN FD"
        );
    } else {
        // Nothing shares an 8-byte frame with a 5-byte target.
        assert_eq!(batched, 8);
    }
    // And every motor got its command.
    eventually(
        "all 8 motors at duty 0.5",
        Duration::from_millis(5),
        || async {
            (0..8)
                .all(|i| (w.motor(MD1).with(|f| f.axis(i).unwrap().duty) - 0.5).abs() < 1e-6)
                .then_some(())
        },
    )
    .await;
    // A batch with one bad item publishes nothing.
    let mut bad = targets(0.75);
    bad.push((
        "/motor_driver1/motor0/targt".into(),
        val("{type: 0, value: 0.1}"),
    ));
    let err = m.publish_many(bad).await.unwrap_err();
    assert!(err.to_string().contains("did you mean"), "{err}");
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!((w.motor(MD1).with(|f| f.axis(0).unwrap().duty) - 0.5).abs() < 1e-6);
    // So does one whose last item is an s2m topic with a value that packs: refused
    // before the targets ahead of it are staged, not after (they would go out).
    let mut bad = targets(0.75);
    bad.push((
        "/motor_driver1/motor0/feedback".into(),
        val("{ready: true, position: 0, velocity: 0, current: 0}"),
    ));
    let err = m.publish_many(bad).await.unwrap_err();
    assert!(err.to_string().contains("s2m"), "{err}");
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!((w.motor(MD1).with(|f| f.axis(0).unwrap().duty) - 0.5).abs() < 1e-6);
}

both_links!(
    batched_publish_sends_shared_frames_once,
    topics_both_ways,
    services,
    service_timeout_and_others_keep_working,
    params,
    acknowledged_writes_are_announced,
    node_side_param_checks
);
