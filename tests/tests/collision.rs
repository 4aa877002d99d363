//! Two boards with one node id (docs/protocol.md §5.3), as a third-party node may
//! behave: the master holds a newcomer's ANNOUNCE until the board holding the id had its
//! chance to answer, reports the collision (event, node info), never serves two boards
//! at once, and the rule-2 answer is bounded.

use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{ConfigMessage, FaultCode, NodeHeartbeat, NodeState};
use fcan_e2e::*;
use fcan_master::transport::fault::{FaultConfig, FaultInjector};
use fcan_master::transport::Transport;
use fcan_master::MasterEvent;
use fcan_master::Phase;

fn duty(w: &World, node: u8, motor: usize) -> f32 {
    w.motor(node).with(|f| f.axis(motor).unwrap().duty)
}

/// The collisions reported so far for `node`, as (known, other) boot ids.
fn collisions(
    events: &mut tokio::sync::broadcast::Receiver<MasterEvent>,
    node: u8,
) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::Collision { node: n, boot_ids } = e {
            if n.get() == node {
                out.push(boot_ids);
            }
        }
    }
    out
}

/// A board holding id 2 that hears the bus 20 ms late (a slow main loop, a loaded
/// gateway) answers a newcomer's ANNOUNCE 20 ms late. The master used to acknowledge the
/// newcomer within milliseconds, so both ran on the same data identifiers; now it waits
/// for the holder's answer: the newcomer, never acknowledged, hears it and faults.
async fn a_slow_holder_keeps_its_id(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 8);
    let late = FaultConfig {
        delay: 1.0,
        delay_by: Duration::from_millis(20),
        ..Default::default()
    };
    w.add_motor_on(FaultInjector::new(w.endpoint(), late, 5), MD2, 4);
    let m = w.start_master().await;
    wait_running(&m, &[MD1, MD2], Duration::from_secs(3)).await;
    let first = w.motor(MD2).with(|f| f.node.boot_id());
    let mut events = m.events();
    // The newcomer boots just after one of the holder's heartbeats (1 s apart), so it
    // hears none in its listen window (300–400 ms) and announces: the race at issue.
    let heartbeats = |w: &World| {
        w.bus
            .history()
            .iter()
            .filter(|r| {
                ConfigId::from_can_id(r.frame.id()).is_ok_and(|c| {
                    c.opcode == Opcode::Heartbeat
                        && c.dir == Direction::ToMaster
                        && c.node.get() == MD2
                })
            })
            .count()
    };
    let seen = heartbeats(&w);
    eventually(
        "a heartbeat of the holder",
        Duration::from_millis(1100),
        || async { (heartbeats(&w) > seen).then_some(()) },
    )
    .await;

    let second =
        fcan_examples::run_node_shared(w.endpoint(), fcan_examples::motor_driver(MD2, 3, w.fd()));
    let second_boot = second.with(|f| f.node.boot_id());
    eventually("newcomer in FAULT", Duration::from_secs(3), || async {
        (second.with(|f| f.node.state()) == NodeState::Fault).then_some(())
    })
    .await;
    assert_eq!(second.with(|f| f.node.fault()), FaultCode::IdCollision);
    let mut announced = false;
    let mut reported = Vec::new();
    while let Ok(e) = events.try_recv() {
        match e {
            MasterEvent::Announced { node, boot_id } if node.get() == MD2 => {
                announced |= boot_id == second_boot;
            }
            MasterEvent::Collision { node, boot_ids } if node.get() == MD2 => {
                reported.push(boot_ids)
            }
            _ => {}
        }
    }
    // The race this is about: the newcomer got as far as announcing (it did not hear the
    // holder in its listen window).
    assert!(announced, "the newcomer announced");
    assert_eq!(reported, vec![(first, second_boot)]);

    // The holder keeps its id and its job; node info names the other board.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.node_state(MD2), NodeState::Running);
    let n = node_info(&m, MD2).await.unwrap();
    assert_eq!((n.boot_id, n.phase.clone()), (first, Phase::Running));
    assert_eq!(n.collision, Some(second_boot));
    m.publish("/motor_driver2/motor0/target", val("{type: 0, value: 0.3}"))
        .await
        .unwrap();
    eventually("holder driven", Duration::from_millis(30), || async {
        (duty(&w, MD2, 0) == 0.3).then_some(())
    })
    .await;
    // The newcomer never ran and is silent.
    assert!(
        second.with(|f| f.node.counters().tx_frames) > 0,
        "it announced"
    );
    let tx = second.with(|f| f.node.counters().tx_frames);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(second.with(|f| f.node.counters().tx_frames), tx);
    // Once the other board has been silent for the offline timeout, the report clears.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(node_info(&m, MD2).await.unwrap().collision, None);
}

/// Sends a HEARTBEAT as node `node` with boot `boot` (what a second, acknowledged board
/// with that id sends).
async fn heartbeat_as(ep: &mut impl Transport, node: u8, boot: u32) {
    let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: boot,
        errors: 0,
    });
    let mut buf = [0u8; 16];
    let n = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(
        Opcode::Heartbeat,
        Direction::ToMaster,
        NodeId::new(node).unwrap(),
        0,
    );
    let f = Frame::classic(id.can_id(), &buf[..n]).unwrap();
    ep.send(&f).await.unwrap();
}

/// Two acknowledged boards answering to one id (a master that started after both, a
/// node that ignores rule 1): the master serves neither — the node fails with a reason
/// naming both boot ids, commands are refused, the collision is reported once — and
/// serves the one left once the other has been silent for the offline timeout. The
/// running board does not answer the other's heartbeats (rule 2 bounded: two
/// acknowledged boards never answer each other).
async fn two_acknowledged_boards_are_served_neither(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let known = w.motor(MD2).with(|f| f.node.boot_id());
    let mut events = m.events();
    let mut other = w.endpoint();
    let foreign = known ^ 0x5a5a_0001;
    let from = w.bus.now();
    for _ in 0..10 {
        heartbeat_as(&mut other, MD2, foreign).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let n = node_info(&m, MD2).await.unwrap();
    let Phase::Failed(reason) = &n.phase else {
        panic!("served while two boards answer: {:?}", n.phase)
    };
    assert!(
        reason.contains(&format!("{known:#010x}")) && reason.contains(&format!("{foreign:#010x}")),
        "{reason}"
    );
    assert_eq!(n.collision, Some(foreign));
    assert_eq!(
        collisions(&mut events, MD2),
        vec![(known, foreign)],
        "reported once"
    );
    let e = m
        .publish("/motor_driver2/motor0/target", val("{type: 0, value: 0.3}"))
        .await
        .unwrap_err();
    // Not running (its phase named), as the remote API says it, not an unknown name.
    assert_eq!(e.kind(), fcan_master::ErrorKind::NotRunning, "{e:?}");
    assert!(
        e.to_string().contains("motor_driver2 is not running"),
        "{e}"
    );
    // The board answered none of the ten foreign heartbeats: over that second it sent
    // its own periodic one, not one per foreign heartbeat.
    let own = w
        .bus
        .history()
        .iter()
        .filter(|r| r.start >= from)
        .filter(|r| {
            let Ok(c) = ConfigId::from_can_id(r.frame.id()) else {
                return false;
            };
            let ours = matches!(
                ConfigMessage::decode(Opcode::Heartbeat, Direction::ToMaster, r.frame.data()),
                Ok(ConfigMessage::NodeHeartbeat(hb)) if hb.boot_id == known
            );
            c.opcode == Opcode::Heartbeat && c.node.get() == MD2 && ours
        })
        .count();
    assert!(own <= 2, "{own} heartbeats of its own in a second");
    // The other board goes quiet: after the offline timeout the one left is served again.
    wait_running(&m, &[MD2], Duration::from_secs(6)).await;
    let n = node_info(&m, MD2).await.unwrap();
    assert_eq!((n.boot_id, n.collision), (known, None));
    assert_eq!(w.node_state(MD2), NodeState::Running);
}

both_links!(
    a_slow_holder_keeps_its_id,
    two_acknowledged_boards_are_served_neither
);
