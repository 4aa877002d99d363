//! A node reboots: the master notices the new boot id, re-provisions it and restores the
//! parameters it had set. The master restarts: the nodes fall back to announcing and a
//! new master brings them back to RUNNING with data flowing.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::msg::NodeState;
use fcan_e2e::*;
use fcan_master::value::Value;
use fcan_master::MasterEvent;

async fn node_reboot_restores_params(mtu: Mtu) {
    let (mut w, m) = World::standard(mtu).await;
    m.param_set("motor_driver1.motor0.velocity.kp", Value::Float(0.75))
        .await
        .unwrap();
    m.param_set("motor_driver1.motor7.command_timeout_ms", Value::UInt(0))
        .await
        .unwrap();
    let old = node_info(&m, MD1).await.unwrap().boot_id;
    let mut events = m.events();

    let new = w.reboot_motor(MD1);
    assert_ne!(old, new);
    // The fresh firmware starts from the schema defaults.
    assert_eq!(
        w.motor(MD1)
            .with(|f| f.node.motor(0).unwrap().params().unwrap().velocity_kp),
        0.5
    );
    // Listen window (≤ 400 ms), ANNOUNCE, re-provisioning.
    let (_, took) = eventually(
        "md1 running with its new boot",
        Duration::from_secs(1),
        || async {
            let n = node_info(&m, MD1).await?;
            (n.boot_id == new && n.phase == fcan_master::Phase::Running).then_some(())
        },
    )
    .await;
    assert!(took >= Duration::from_millis(300), "{took:?}");
    let mut rebooted = None;
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::Rebooted {
            node,
            old: o,
            new: n,
        } = e
        {
            if node.get() == MD1 {
                rebooted = Some((o, n));
            }
        }
    }
    assert_eq!(rebooted, Some((old, new)));
    assert_eq!(w.node_state(MD1), NodeState::Running);
    // The values the user set are back, on the node itself.
    assert_eq!(
        m.param_get("motor_driver1.motor0.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.75)
    );
    let (kp, timeout) = w.motor(MD1).with(|f| {
        let p = f.node.motor(0).unwrap().params().unwrap();
        let q = f.node.motor(7).unwrap().params().unwrap();
        (p.velocity_kp, q.command_timeout_ms)
    });
    assert_eq!((kp, timeout), (0.75, 0));
    // ... and data flows to the new firmware.
    m.publish(
        "/motor_driver1/motor1/target",
        val("{type: 0, value: -0.3}"),
    )
    .await
    .unwrap();
    eventually(
        "duty reaches the rebooted node",
        Duration::from_millis(5),
        || async {
            let d = w.motor(MD1).with(|f| f.axis(1).unwrap().duty);
            ((d + 0.3).abs() < 1e-6).then_some(())
        },
    )
    .await;
    // The other nodes never noticed.
    for id in [MD2, IO3] {
        assert_eq!(
            node_info(&m, id).await.unwrap().phase,
            fcan_master::Phase::Running
        );
    }
}

async fn master_restart_nodes_recover(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    m.param_set("motor_driver2.motor1.velocity.kp", Value::Float(0.75))
        .await
        .unwrap();
    drop(m);
    // Without a master the nodes' watchdogs fire (300 ms): SUSPENDED, announcing.
    eventually("nodes suspended", Duration::from_millis(400), || async {
        [MD1, MD2, IO3]
            .iter()
            .all(|id| w.node_state(*id) == NodeState::Suspended)
            .then_some(())
    })
    .await;
    assert_eq!(w.motor(MD1).with(|f| f.app.events.master_lost), 1);

    let m = w.start_master().await;
    wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(2)).await;
    for id in [MD1, MD2, IO3] {
        assert_eq!(w.node_state(id), NodeState::Running, "node {id}");
    }
    // Data flows both ways with the new master.
    let mut fb = m.subscribe("/motor_driver2/motor1/feedback").await.unwrap();
    tokio::time::timeout(Duration::from_millis(20), fb.recv())
        .await
        .expect("feedback flows")
        .unwrap();
    m.publish("/motor_driver2/motor1/target", val("{type: 0, value: 0.2}"))
        .await
        .unwrap();
    eventually(
        "duty with the new master",
        Duration::from_millis(5),
        || async {
            let d = w.motor(MD2).with(|f| f.axis(1).unwrap().duty);
            ((d - 0.2).abs() < 1e-6).then_some(())
        },
    )
    .await;
    // The node did not reboot, so its parameters are what the first master set.
    assert_eq!(
        m.param_get("motor_driver2.motor1.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.75)
    );
    assert_eq!(w.motor(MD1).with(|f| f.app.events.started), 2);
}

both_links!(node_reboot_restores_params, master_restart_nodes_recover);

/// A running node provisioned again on request (the ancestor's `ReprovisionNode`): the
/// node passes through provisioning without rebooting, comes back running with the
/// parameters set before, data flows again; a node that is not running is refused.
async fn reprovision_keeps_the_boot_and_the_params(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    m.param_set("motor_driver1.motor0.velocity.kp", Value::Float(0.25))
        .await
        .unwrap();
    let boot = node_info(&m, MD1).await.unwrap().boot_id;
    let mut events = m.events();
    let id = fcan_core::id::NodeId::new(MD1).unwrap();
    m.reprovision(id).await.unwrap();
    assert_eq!(
        node_info(&m, MD1).await.unwrap().phase,
        fcan_master::Phase::Provisioning
    );
    eventually("md1 running again", Duration::from_secs(1), || async {
        let n = node_info(&m, MD1).await?;
        (n.phase == fcan_master::Phase::Running).then_some(())
    })
    .await;
    let mut online = false;
    while let Ok(e) = events.try_recv() {
        online |= matches!(e, MasterEvent::Online { node } if node == id);
        assert!(!matches!(e, MasterEvent::Rebooted { .. }), "{e:?}");
    }
    assert!(online, "an Online event for the node");
    assert_eq!(node_info(&m, MD1).await.unwrap().boot_id, boot);
    assert_eq!(
        w.motor(MD1)
            .with(|f| f.node.motor(0).unwrap().params().unwrap().velocity_kp),
        0.25
    );
    let mut rx = m.subscribe("/motor_driver1/motor0/feedback").await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), rx.recv())
        .await
        .expect("feedback flows again")
        .expect("a sample");
    // Twice in a row: the second while the first is still provisioning is refused.
    m.reprovision(id).await.unwrap();
    let e = m.reprovision(id).await.unwrap_err();
    assert!(
        matches!(
            e,
            fcan_master::MasterError::Call(fcan_master::engine::CallError::WrongPhase(_))
        ),
        "a node in the wrong phase, not a bad target: {e:?}"
    );
    let e = e.to_string();
    assert!(e.contains("only a running or failed node"), "{e}");
    let none = fcan_core::id::NodeId::new(42).unwrap();
    assert!(m.reprovision(none).await.is_err());
}

both_links!(reprovision_keeps_the_boot_and_the_params);
