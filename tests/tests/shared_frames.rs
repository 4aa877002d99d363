//! Frames shared by several m2s or on-commit topics (`docs/protocol.md` §4.2), through
//! the master's public API with the example firmwares on the simulated bus: a command
//! reaches a node only when someone published it, and an on-commit topic arrives once
//! per commit — never because a frame mate was published or committed.

use std::collections::BTreeMap;
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::value::Value;

/// Generation of every m2s topic (0 target, 1 trajectory) of motor_driver1's 8 motors.
fn m2s_generations(w: &World) -> BTreeMap<(u8, u8), u32> {
    w.motor(MD1).with(|f| {
        let mut out = BTreeMap::new();
        for block in 0..8u8 {
            for topic in [0u8, 1] {
                let g = f.node.raw().topic(block, topic).unwrap().generation;
                out.insert((block, topic), g);
            }
        }
        out
    })
}

async fn publishing_one_target_reaches_only_that_target(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let before = m2s_generations(&w);
    for k in 0..20 {
        m.publish(
            "/motor_driver1/motor0/target",
            val(&format!("{{type: 0, value: 0.0{k}}}")),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let after = m2s_generations(&w);
    for (key, g) in &after {
        let want = before[key] + if *key == (0, 0) { 20 } else { 0 };
        assert_eq!(*g, want, "generation of (block, topic) {key:?}");
    }
    // No motor runs a trajectory nobody sent: every other axis is still at rest.
    for i in 1..8 {
        let duty = w.motor(MD1).with(|f| f.axis(i).unwrap().duty);
        assert_eq!(duty, 0.0, "motor {i}");
    }
}

async fn on_commit_topics_arrive_once_per_commit(mtu: Mtu) {
    let (_w, m) = World::standard(mtu).await;
    let mut subs = Vec::new();
    for i in 0..8 {
        subs.push((
            format!("out{i}"),
            m.subscribe(&format!("/io_board3/out{i}/state"))
                .await
                .unwrap(),
        ));
        subs.push((
            format!("in{i}"),
            m.subscribe(&format!("/io_board3/in{i}/edge"))
                .await
                .unwrap(),
        ));
    }
    // Inputs toggle on their own; outputs change only when switched.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    m.call("/io_board3/out0/set", val("{on: true}"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut got: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (name, rx) in &mut subs {
        while let Ok(s) = rx.try_recv() {
            got.entry(name.clone()).or_default().push(s.value);
        }
    }
    // One commit of out0 (switched on), none of the other outputs.
    for i in 0..8 {
        let states = got.get(&format!("out{i}")).cloned().unwrap_or_default();
        if i == 0 {
            assert_eq!(states.len(), 1, "out0: {states:?}");
            assert_eq!(field(&states[0], "on"), &Value::Bool(true));
        } else {
            assert!(states.is_empty(), "out{i} never changed: {states:?}");
        }
    }
    // Each edge of each input once: its count goes up by exactly one per sample.
    for i in 0..8 {
        let counts: Vec<f64> = got
            .get(&format!("in{i}"))
            .map(|v| v.iter().map(|s| num(field(s, "count"))).collect())
            .unwrap_or_default();
        assert!(!counts.is_empty(), "in{i} toggles at least once in 2.1 s");
        assert!(
            counts.windows(2).all(|c| c[1] == c[0] + 1.0),
            "in{i}: {counts:?}"
        );
    }
}

both_links!(
    publishing_one_target_reaches_only_that_target,
    on_commit_topics_arrive_once_per_commit
);
