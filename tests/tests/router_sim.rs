//! The router between simulated buses, with the real master on the uplink and scripted
//! nodes on the downlinks. All on tokio's paused clock: deterministic, no real time.
//!
//! ```text
//!   master ── up (FD) ── router ──┬── A (FD):      n1, n2
//!                                 └── B (classic): n3
//! ```

mod scripted_node;

use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_core::msg::{BusMode, DataDirection};
use fcan_core::timing::NODE_OFFLINE_TIMEOUT_US;
use fcan_master::transport::sim::{SimBus, SimEndpoint};
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions};
use fcan_router::bridge::{Bridge, BridgeOptions, LinkEvent};
use fcan_router::{DropReason, Event, Link};
use scripted_node::*;

struct Net {
    up: SimBus,
    a: SimBus,
    b: SimBus,
    obs_up: Observer,
    obs_a: Observer,
    obs_b: Observer,
    bridge: Bridge<2>,
}

fn net(b_mtu: Mtu) -> Net {
    let up = SimBus::new(Default::default());
    let a = SimBus::new(Default::default());
    let b = SimBus::new(Default::default());
    let obs_up = Observer::spawn(up.endpoint(Mtu::Fd));
    let obs_a = Observer::spawn(a.endpoint(Mtu::Fd));
    let obs_b = Observer::spawn(b.endpoint(b_mtu));
    let bridge = Bridge::start(
        up.endpoint(Mtu::Fd),
        vec![a.endpoint(Mtu::Fd), b.endpoint(b_mtu)],
        BridgeOptions::default(),
    )
    .unwrap();
    Net {
        up,
        a,
        b,
        obs_up,
        obs_a,
        obs_b,
        bridge,
    }
}

fn node_on(bus: &SimBus, id: u8, boot_id: u32, fd: bool) -> NodeHandle {
    let mtu = if fd { Mtu::Fd } else { Mtu::Classic };
    let ep: SimEndpoint = bus.endpoint(mtu);
    spawn_node(ep, NodeSpec { id, boot_id, fd }, blob())
}

async fn master_on(up: &SimBus) -> Master {
    Master::start(up.endpoint(Mtu::Fd), MasterOptions::default())
        .await
        .expect("master starts")
}

fn cmd(vel: f64, torque: f64) -> Value {
    Value::Struct(vec![
        ("vel".into(), Value::Float(vel)),
        ("torque".into(), Value::Float(torque)),
    ])
}

/// Frames on a bus that concern `node`: unicast configuration frames to it, frames from
/// it, and data frames with the identifiers of its plan.
fn frames_of(frames: &[Frame], node: u8, plan: &[(u16, DataDirection)]) -> usize {
    let id = NodeId::new(node).unwrap();
    frames
        .iter()
        .filter(|f| {
            config_dest(f) == Some(id)
                || config_source(f) == Some(id)
                || std_id(f).is_some_and(|s| plan.iter().any(|(p, _)| *p == s))
        })
        .count()
}

async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

#[tokio::test(start_paused = true)]
async fn master_sees_one_bus_and_each_downlink_keeps_its_traffic() {
    let net = net(Mtu::Classic);
    let n1 = node_on(&net.a, 1, 0x1111, true);
    let n2 = node_on(&net.a, 2, 0x2222, true);
    let n3 = node_on(&net.b, 3, 0x3333, false);
    let master = master_on(&net.up).await;

    // Discovery and provisioning through the router.
    let nodes = master
        .wait_for_nodes(3, Duration::from_secs(30))
        .await
        .expect("all three nodes running");
    assert_eq!(nodes.len(), 3);
    let mode = |id: u8| nodes.iter().find(|n| n.id.get() == id).unwrap().mode;
    assert_eq!(mode(1), BusMode::FdBrs);
    assert_eq!(mode(3), BusMode::Classic, "n3 is on a classic downlink");
    for n in [&n1, &n2, &n3] {
        let log = n.log();
        assert!(!log.plan.is_empty(), "node {} has a plan", n.spec.id);
        assert_eq!(log.state, Some(fcan_core::msg::NodeState::Running));
    }

    // Topics: s2m from every node, m2s to one.
    for id in [1, 2, 3] {
        let mut sub = master
            .subscribe(&format!("/n{id}/motor/feedback"))
            .await
            .unwrap();
        let s = tokio::time::timeout(Duration::from_secs(1), sub.recv())
            .await
            .expect("a feedback sample")
            .unwrap();
        assert!(
            matches!(&s.value, Value::Struct(f) if f.len() == 2),
            "{s:?}"
        );
    }
    master
        .publish("/n1/motor/cmd", cmd(1.5, -2.0))
        .await
        .unwrap();
    master
        .publish("/n3/motor/cmd", cmd(3.0, 4.0))
        .await
        .unwrap();
    settle(Duration::from_millis(50)).await;
    let mut want = Vec::new();
    want.extend_from_slice(&1.5f32.to_le_bytes());
    want.extend_from_slice(&(-2.0f32).to_le_bytes());
    assert_eq!(n1.log().cmd, want);
    assert_eq!(n1.log().m2s.len(), 1);
    assert_eq!(n3.log().m2s.len(), 1);
    assert!(n2.log().m2s.is_empty(), "n2 got no command");

    // Services and parameters.
    let y = master
        .call(
            "/n3/motor/ping",
            Value::Struct(vec![("x".into(), Value::UInt(41))]),
        )
        .await
        .expect("service through the router");
    assert_eq!(y, Value::Struct(vec![("y".into(), Value::UInt(42))]));
    master
        .param_set("n2.motor.gain", Value::Float(2.5))
        .await
        .expect("param_set through the router");
    assert_eq!(
        master.param_get("n2.motor.gain").await.unwrap(),
        Value::Float(2.5)
    );
    assert_eq!(
        n2.log().params.get(&(0, 0)),
        Some(&2.5f32.to_le_bytes().to_vec())
    );
    assert!(master
        .param_set("n2.motor.gain", Value::Float(11.0))
        .await
        .is_err());

    // Let data flow a while, then count.
    for i in 0..20 {
        master
            .publish("/n2/motor/cmd", cmd(i as f64, 0.0))
            .await
            .unwrap();
        settle(Duration::from_millis(10)).await;
    }
    settle(Duration::from_millis(500)).await;
    assert_eq!(n2.log().m2s.len(), 20);

    let up = net.obs_up.frames();
    let a = net.obs_a.frames();
    let b = net.obs_b.frames();
    let plan = |n: &NodeHandle| n.log().plan;
    let (p1, p2, p3) = (plan(&n1), plan(&n2), plan(&n3));
    let on_a_for_3 = frames_of(&a, 3, &p3);
    let on_b_for_1 = frames_of(&b, 1, &p1);
    let on_b_for_2 = frames_of(&b, 2, &p2);
    let on_a_for_1 = frames_of(&a, 1, &p1);
    let on_b_for_3 = frames_of(&b, 3, &p3);
    println!(
        "frames: up {} A {} B {}; A for n1 {} / for n3 {}; B for n3 {} / for n1 {} n2 {}",
        up.len(),
        a.len(),
        b.len(),
        on_a_for_1,
        on_a_for_3,
        on_b_for_3,
        on_b_for_1,
        on_b_for_2
    );
    assert!(on_a_for_1 > 50 && on_b_for_3 > 50, "traffic flowed");
    assert_eq!(on_a_for_3, 0, "nothing of n3 (downlink B) on downlink A");
    assert_eq!(
        on_b_for_1 + on_b_for_2,
        0,
        "nothing of n1/n2 (downlink A) on B"
    );
    // No node saw a unicast for a node of the other downlink, nor another's m2s data.
    assert_eq!(n3.log().foreign_unicast, 0);
    assert_eq!(n3.log().foreign_data, 0);
    // n1 and n2 share downlink A, so they do hear each other's traffic.
    assert!(n1.log().foreign_unicast > 0);

    let c = net.bridge.counters();
    println!(
        "{}",
        fcan_router::bridge::format_counters(&c, net.bridge.names())
    );
    assert_eq!(c.dropped.get(DropReason::Mtu), 0);
    assert_eq!(c.dropped.get(DropReason::UnknownStdId), 0);
    assert_eq!(c.collisions, 0);
    assert_eq!(c.learned.nodes, 3);
    assert_eq!(
        c.learned.std_ids as usize,
        p1.len() + p2.len() + p3.len(),
        "every planned identifier learned once"
    );
    // What the master sees: everything the nodes sent.
    assert_eq!(c.up.sent, c.down[0].forwarded + c.down[1].forwarded);
    net.bridge.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_node_id_on_two_downlinks_is_reported_not_merged() {
    let net = net(Mtu::Fd);
    let mut events = net.bridge.events();
    let n5 = node_on(&net.a, 5, 0xAAAA, true);
    let master = master_on(&net.up).await;
    master
        .wait_for_nodes(1, Duration::from_secs(10))
        .await
        .unwrap();
    // A second node 5 boots on downlink B.
    let twin = node_on(&net.b, 5, 0xBBBB, true);
    settle(Duration::from_secs(3)).await;

    let mut collisions = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let LinkEvent::Router(Event::Collision {
            node, owner, other, ..
        }) = e
        {
            collisions.push((node.get(), owner, other));
        }
    }
    assert!(!collisions.is_empty(), "collision reported");
    assert!(collisions
        .iter()
        .all(|c| *c == (5, Link::Down(0), Link::Down(1))));
    let c = net.bridge.counters();
    assert!(c.collisions >= 1);
    // Not merged: node 5 still routes to A, and the original keeps running.
    let now = net.bridge.now_us();
    assert_eq!(
        net.bridge
            .with_router(|r| r.node_link(NodeId::new(5).unwrap(), now)),
        Some(Link::Down(0))
    );
    // The twin never got an ANNOUNCE_ACK: the master's answers went to A only.
    assert_eq!(twin.log().acks, 0);
    assert!(n5.log().acks >= 1);
    master
        .publish("/n5/motor/cmd", cmd(7.0, 7.0))
        .await
        .unwrap();
    settle(Duration::from_millis(20)).await;
    assert_eq!(n5.log().m2s.len(), 1);
    assert!(twin.log().m2s.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_node_moved_to_another_downlink_recovers() {
    let net = net(Mtu::Fd);
    let mut events = net.bridge.events();
    let n4 = node_on(&net.a, 4, 0x4444, true);
    let n6 = node_on(&net.b, 6, 0x6666, true);
    let master = master_on(&net.up).await;
    master
        .wait_for_nodes(2, Duration::from_secs(10))
        .await
        .unwrap();
    master
        .publish("/n4/motor/cmd", cmd(1.0, 1.0))
        .await
        .unwrap();
    settle(Duration::from_millis(20)).await;
    assert_eq!(n4.log().m2s.len(), 1);

    // Unplug n4 from A; after a while it boots (new boot_id) on B.
    n4.kill().await;
    settle(Duration::from_micros(
        NODE_OFFLINE_TIMEOUT_US as u64 + 500_000,
    ))
    .await;
    let moved = node_on(&net.b, 4, 0x4445, true);
    // The master sees the reboot and re-provisions it through the router.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let nodes = master.nodes().await.unwrap();
        let n = nodes.iter().find(|n| n.id.get() == 4).unwrap();
        if n.boot_id == 0x4445 && n.phase == fcan_master::Phase::Running {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "n4 not back: {n:?}");
        settle(Duration::from_millis(50)).await;
    }
    master
        .publish("/n4/motor/cmd", cmd(2.0, 2.0))
        .await
        .unwrap();
    settle(Duration::from_millis(20)).await;
    let log = moved.log();
    assert_eq!(
        log.m2s.len(),
        1,
        "the command reached n4 on its new downlink"
    );
    let mut sub = master.subscribe("/n4/motor/feedback").await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), sub.recv())
        .await
        .expect("feedback from the moved node")
        .unwrap();
    assert!(n6.log().m2s.is_empty());

    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let LinkEvent::Router(e) = e {
            seen.push(e);
        }
    }
    let n4id = NodeId::new(4).unwrap();
    assert!(seen.contains(&Event::NodeForgotten {
        node: n4id,
        link: Link::Down(0)
    }));
    assert!(seen.contains(&Event::NodeMoved {
        node: n4id,
        from: Link::Down(0),
        to: Link::Down(1)
    }));
    let c = net.bridge.counters();
    assert_eq!(c.learned.nodes_moved, 1);
    assert_eq!(c.collisions, 0);
    let _ = (&net.up, &net.a, &net.b);
}
