//! The router between simulated buses with the real example firmwares behind it: the
//! same `no_std` motor-driver code that runs on a microcontroller, built FD-capable, on
//! a CAN FD downlink and on a Classical CAN downlink. All on tokio's paused clock.
//!
//! ```text
//!   master ── up (FD) ── router ──┬── A (FD):      motor_driver1 (FD controller)
//!                                 └── B (classic): motor_driver2 (FD controller)
//! ```
//!
//! motor_driver2 announces CAN FD; the router clears that capability as the ANNOUNCE
//! leaves the classic downlink, so the master acknowledges it in Classical CAN mode and
//! plans only Classical frames for it. Without the masking the master would pick
//! `FdBrs`, the node's heartbeats in FD frames would be destroyed on bus B and its
//! FD frame plan dropped by the router: it would never run.

mod scripted_node;

use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_core::msg::{BusMode, NodeState};
use fcan_e2e::*;
use fcan_examples::{motor_driver, run_node_shared};
use fcan_master::transport::sim::SimBus;
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions};
use fcan_router::bridge::{Bridge, BridgeOptions};
use fcan_router::{DropReason, Link};
use scripted_node::{config_dest, config_source, std_id, Observer};

/// The motor driver on the FD downlink.
const ON_FD: u8 = 1;
/// The FD-capable motor driver on the classic downlink.
const ON_CLASSIC: u8 = 2;

/// Frames on a bus that concern `node`: configuration frames to or from it, and data
/// frames with the identifiers of its plan.
fn frames_of<'a>(frames: &'a [Frame], node: u8, plan: &'a [u16]) -> Vec<&'a Frame> {
    let id = NodeId::new(node).unwrap();
    frames
        .iter()
        .filter(|f| {
            config_dest(f) == Some(id)
                || config_source(f) == Some(id)
                || std_id(f).is_some_and(|s| plan.contains(&s))
        })
        .collect()
}

/// Checks the whole public surface of one motor driver through the router: its
/// feedback reaches a subscriber, a published target reaches its control loop, a
/// parameter is set and read back, a service answers.
async fn exercise(
    m: &Master,
    node: &fcan_examples::SharedNode<fcan_example_motor_driver::MotorDriver>,
    id: u8,
) {
    let name = format!("motor_driver{id}");
    let mut fb = m
        .subscribe(&format!("/{name}/motor0/feedback"))
        .await
        .unwrap();
    let s = tokio::time::timeout(Duration::from_secs(1), fb.recv())
        .await
        .unwrap_or_else(|_| panic!("{name}: no feedback within 1 s"))
        .unwrap();
    assert!(num(field(&s.value, "current")).is_finite(), "{name}: {s:?}");

    m.publish(
        &format!("/{name}/motor1/target"),
        val("{type: 0, value: 0.4}"),
    )
    .await
    .unwrap();
    eventually(
        &format!("{name}: motor1 duty 0.4"),
        Duration::from_millis(50),
        || async {
            let d = node.with(|f| f.axis(1).unwrap().duty);
            ((d - 0.4).abs() < 1e-6).then_some(())
        },
    )
    .await;

    let kp = format!("{name}.motor0.velocity.kp");
    m.param_set(&kp, Value::Float(0.25)).await.unwrap();
    assert_eq!(m.param_get(&kp).await.unwrap(), Value::Float(0.25));
    assert!(
        m.param_set(&kp, Value::Float(200.0)).await.is_err(),
        "{name}: out of range refused by the node"
    );

    let r = m
        .call(&format!("/{name}/motor0/clear_fault"), val("{}"))
        .await
        .unwrap_or_else(|e| panic!("{name}: clear_fault: {e}"));
    assert_eq!(field(&r, "success"), &Value::Bool(true));
}

#[tokio::test(start_paused = true)]
async fn fd_firmwares_on_an_fd_and_a_classic_downlink() {
    fastrand::seed(0x0fca_0011);
    let up = SimBus::new(Default::default());
    let a = SimBus::new(Default::default());
    let b = SimBus::new(Default::default());
    let obs_up = Observer::spawn(up.endpoint(Mtu::Fd));
    let obs_a = Observer::spawn(a.endpoint(Mtu::Fd));
    // An FD-capable listener on B: it would see any FD frame bus B could carry.
    let obs_b = Observer::spawn(b.endpoint(Mtu::Fd));
    let bridge: Bridge<2> = Bridge::start(
        up.endpoint(Mtu::Fd),
        vec![a.endpoint(Mtu::Fd), b.endpoint(Mtu::Classic)],
        BridgeOptions::default(),
    )
    .unwrap();
    // Both boards have CAN FD controllers and announce FD + BRS. Bus B is Classical CAN
    // because the router's port on it is.
    let md1 = run_node_shared(a.endpoint(Mtu::Fd), motor_driver(ON_FD, 2, true));
    let md2 = run_node_shared(b.endpoint(Mtu::Fd), motor_driver(ON_CLASSIC, 2, true));
    let m = Master::start(up.endpoint(Mtu::Fd), MasterOptions::default())
        .await
        .expect("master starts");

    wait_running(&m, &[ON_FD, ON_CLASSIC], Duration::from_secs(10)).await;
    for (id, n) in [(ON_FD, &md1), (ON_CLASSIC, &md2)] {
        assert_eq!(n.with(|f| f.node.state()), NodeState::Running, "node {id}");
    }
    let info = |id: u8| {
        let m = m.clone();
        async move { node_info(&m, id).await.unwrap() }
    };
    assert_eq!(info(ON_FD).await.mode, BusMode::FdBrs, "FD path: FD frames");
    assert_eq!(
        info(ON_CLASSIC).await.mode,
        BusMode::Classic,
        "classic downlink: the master plans Classical CAN frames"
    );

    exercise(&m, &md1, ON_FD).await;
    exercise(&m, &md2, ON_CLASSIC).await;
    // Let periodic traffic flow a while.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // No FD frame ever concerned motor_driver2: not on the uplink (the master planned
    // and sent only Classical frames for it), not on bus B.
    let now = bridge.now_us();
    let plan = |id: u8| -> Vec<u16> {
        bridge.with_router(|r| {
            r.std_ids()
                .filter(|e| e.node.get() == id)
                .map(|e| e.std_id)
                .collect()
        })
    };
    let (plan1, plan2) = (plan(ON_FD), plan(ON_CLASSIC));
    assert!(!plan2.is_empty(), "motor_driver2 has a plan");
    let up_frames = obs_up.frames();
    let for2 = frames_of(&up_frames, ON_CLASSIC, &plan2);
    assert!(for2.len() > 100, "traffic of motor_driver2 flowed");
    let fd_for2: Vec<_> = for2.iter().filter(|f| f.is_fd()).collect();
    assert!(
        fd_for2.is_empty(),
        "FD frames for motor_driver2: {fd_for2:?}"
    );
    let b_frames = obs_b.frames();
    assert!(frames_of(&b_frames, ON_CLASSIC, &plan2).len() > 100);
    assert!(b_frames.iter().all(|f| !f.is_fd()));
    assert_eq!(b.totals().errors, 0, "no FD frame was destroyed on bus B");
    // The FD downlink really runs FD: motor_driver1's data goes in FD frames.
    let a_frames = obs_a.frames();
    assert!(frames_of(&a_frames, ON_FD, &plan1)
        .iter()
        .any(|f| f.is_fd()));

    let c = bridge.counters();
    println!(
        "{}",
        fcan_router::bridge::format_counters(&c, bridge.names())
    );
    assert_eq!(c.down[1].mtu_dropped, 0, "no FD frame was ever meant for B");
    assert_eq!(c.dropped.get(DropReason::Mtu), 0);
    assert!(
        c.down[1].fd_masked >= 1,
        "motor_driver2's ANNOUNCE was masked"
    );
    assert_eq!(c.down[0].fd_masked, 0, "an FD path is left as it is");
    assert_eq!(
        bridge.with_router(|r| r.node_link(NodeId::new(ON_CLASSIC).unwrap(), now)),
        Some(Link::Down(1))
    );
    bridge.stop().await;
}
