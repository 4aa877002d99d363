//! Safety and ownership: master lost and stale commands stop the motor (seen in the
//! firmware), node-id collisions, one master per bus, a silent node goes offline and
//! comes back on its own.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::msg::{FaultCode, NodeState};
use fcan_e2e::*;
use fcan_master::transport::fault::{FaultConfig, FaultInjector};
use fcan_master::value::Value;
use fcan_master::MasterEvent;
use fcan_master::{Master, MasterError, MasterOptions};
use tokio::time::Instant;

fn duty(w: &World, node: u8, motor: usize) -> f32 {
    w.motor(node).with(|f| f.axis(motor).unwrap().duty)
}

async fn master_lost_stops_the_motor(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    // Stale-command stop off: only the master-lost watchdog may stop this motor.
    m.param_set("motor_driver1.motor0.command_timeout_ms", Value::UInt(0))
        .await
        .unwrap();
    m.publish("/motor_driver1/motor0/target", val("{type: 0, value: 0.5}"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        duty(&w, MD1, 0),
        0.5,
        "still driven while the master is there"
    );

    let t0 = Instant::now();
    drop(m);
    let (_, took) = eventually(
        "duty 0 after master loss",
        Duration::from_millis(400),
        || async { (duty(&w, MD1, 0) == 0.0).then_some(()) },
    )
    .await;
    // The last master heartbeat came ≤ 100 ms before t0; the watchdog is 300 ms.
    assert!(
        took >= Duration::from_millis(199) && took <= Duration::from_millis(302),
        "{took:?}"
    );
    assert!(t0.elapsed() <= Duration::from_millis(303));
    w.motor(MD1).with(|f| {
        assert_eq!(f.node.state(), NodeState::Suspended);
        assert_eq!(f.app.events.master_lost, 1);
        assert_eq!(f.node.counters().master_lost, 1);
    });
    // It stays stopped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(duty(&w, MD1, 0), 0.0);
}

async fn stale_command_stops_the_motor(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    // command_timeout_ms defaults to 100.
    m.publish(
        "/motor_driver2/motor2/target",
        val("{type: 0, value: -0.7}"),
    )
    .await
    .unwrap();
    let (_, on) = eventually("driven", Duration::from_millis(5), || async {
        (duty(&w, MD2, 2) == -0.7).then_some(())
    })
    .await;
    let (_, off) = eventually("stopped when stale", Duration::from_millis(150), || async {
        (duty(&w, MD2, 2) == 0.0).then_some(())
    })
    .await;
    let total = on + off;
    assert!(
        total >= Duration::from_millis(99) && total <= Duration::from_millis(103),
        "{total:?}"
    );
    // Not a master problem: the node is still running.
    assert_eq!(w.node_state(MD2), NodeState::Running);
    // A fresh command drives it again.
    m.publish("/motor_driver2/motor2/target", val("{type: 0, value: 0.1}"))
        .await
        .unwrap();
    eventually("driven again", Duration::from_millis(5), || async {
        (duty(&w, MD2, 2) == 0.1).then_some(())
    })
    .await;
}

/// docs/protocol.md §5.3: the node that holds the id keeps it; the newcomer, hearing it,
/// goes to FAULT (code 1) and stays silent; the master reports the collision and keeps
/// running the first node.
async fn node_id_collision(mtu: Mtu) {
    let (mut w, m) = World::standard(mtu).await;
    let first = w.motor(MD2).with(|f| f.node.boot_id());
    let mut events = m.events();
    // A second board with id 2 powers up.
    let second =
        fcan_examples::run_node_shared(w.endpoint(), fcan_examples::motor_driver(MD2, 3, w.fd()));
    let second_boot = second.with(|f| f.node.boot_id());
    eventually("newcomer in FAULT", Duration::from_secs(2), || async {
        (second.with(|f| f.node.state()) == NodeState::Fault).then_some(())
    })
    .await;
    second.with(|f| {
        assert_eq!(f.node.fault(), FaultCode::IdCollision);
        assert_eq!(f.app.events.collisions, 1);
    });
    let (boot_ids, _) = eventually(
        "master reports the collision",
        Duration::from_secs(2),
        || {
            let mut found = None;
            while let Ok(e) = events.try_recv() {
                if let MasterEvent::Collision { node, boot_ids } = e {
                    if node.get() != MD2 {
                        continue;
                    }
                    found = Some(boot_ids);
                }
            }
            async move { found }
        },
    )
    .await;
    let mut seen = [boot_ids.0, boot_ids.1];
    seen.sort();
    let mut want = [first, second_boot];
    want.sort();
    assert_eq!(seen, want);
    // The first board keeps its id and its job.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(w.node_state(MD2), NodeState::Running);
    assert_eq!(second.with(|f| f.node.state()), NodeState::Fault);
    let n = node_info(&m, MD2).await.unwrap();
    assert_eq!((n.boot_id, n.phase), (first, fcan_master::Phase::Running));
    m.publish("/motor_driver2/motor0/target", val("{type: 0, value: 0.3}"))
        .await
        .unwrap();
    eventually(
        "first board still driven",
        Duration::from_millis(5),
        || async { (duty(&w, MD2, 0) == 0.3).then_some(()) },
    )
    .await;
    // The newcomer is silent: it sent nothing after its fault.
    let tx = second.with(|f| f.node.counters().tx_frames);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(second.with(|f| f.node.counters().tx_frames), tx);
    let _ = &mut w;
}

async fn one_master_per_bus(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let e = match Master::start(w.endpoint(), MasterOptions::default()).await {
        Err(e) => e,
        Ok(_) => panic!("a second master started"),
    };
    assert!(matches!(e, MasterError::OtherMaster { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("another fcan master"), "{text}");
    assert!(text.contains("stop the other one"), "{text}");
    // The refused master sent nothing the nodes would follow: all still running.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in [MD1, MD2, IO3] {
        assert_eq!(w.node_state(id), NodeState::Running);
        assert_eq!(
            node_info(&m, id).await.unwrap().phase,
            fcan_master::Phase::Running
        );
    }
}

/// A node that goes silent (its controller bus-off) is marked offline after 3 s, and
/// comes back on its own once it can talk again.
async fn silent_node_offline_and_back(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 2);
    let io = FaultInjector::new(w.endpoint(), FaultConfig::default(), 7);
    let switch = io.bus_off_switch();
    w.add_io_on(io, IO3);
    let m = w.start_master().await;
    wait_running(&m, &[MD1, IO3], Duration::from_secs(2)).await;
    let mut events = m.events();

    switch.trip();
    let (_, took) = eventually("io offline", Duration::from_millis(3200), || async {
        (node_info(&m, IO3).await?.phase == fcan_master::Phase::Offline).then_some(())
    })
    .await;
    assert!(took >= Duration::from_millis(2000), "{took:?}");
    assert_eq!(
        node_info(&m, MD1).await.unwrap().phase,
        fcan_master::Phase::Running
    );
    assert_eq!(w.node_state(IO3), NodeState::Suspended);

    switch.recover();
    wait_running(&m, &[IO3], Duration::from_secs(3)).await;
    assert_eq!(w.node_state(IO3), NodeState::Running);
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        match e {
            MasterEvent::Offline { node } => seen.push(("offline", node.get())),
            MasterEvent::Online { node } => seen.push(("online", node.get())),
            MasterEvent::Rebooted { node, .. } => seen.push(("rebooted", node.get())),
            _ => {}
        }
    }
    assert_eq!(seen, vec![("offline", IO3), ("online", IO3)]);
    // Service works again.
    let r = m
        .call("/io_board3/out3/set", val("{on: true}"))
        .await
        .unwrap();
    assert_eq!(r, val("{success: true, settle_ms: 20}"));
}

both_links!(
    master_lost_stops_the_motor,
    stale_command_stops_the_motor,
    node_id_collision,
    one_master_per_bus,
    silent_node_offline_and_back
);
