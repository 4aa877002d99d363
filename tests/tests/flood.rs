//! No client can knock the bus over with commands (the engine's `admission.rs`,
//! docs/protocol.md §5.5): a client publishing many times faster than the bus carries
//! gets `Busy` for what does not fit, and every node on the bus keeps running — the
//! master sends its heartbeat on time, no watchdog fires, nothing is re-provisioned,
//! and what was accepted arrives, the last command of each motor last.
//!
//! The flood is what a face's intake does with a client's burst: one worker publishing
//! each message as soon as the previous one was taken, here 50 every millisecond
//! (several times what the bus carries), for two seconds of virtual time, well past the
//! nodes' 300 ms master-lost watchdog. On the Classical link the example boards alone
//! load the bus to about 63 %: the commands get what is left.

use std::collections::BTreeMap;
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::NodeState;
use fcan_e2e::*;
use fcan_master::engine::{CallError, Event};
use fcan_master::transport::sim::TxRecord;
use fcan_master::{Master, MasterError};
use tokio::time::Instant;

/// What the flood got.
#[derive(Debug, Default)]
struct Outcome {
    accepted: u64,
    busy: u64,
    /// Refusals other than `Busy` (there must be none).
    other: Vec<String>,
    /// The last value accepted for each (node, motor).
    last: BTreeMap<(u8, usize), f32>,
}

/// Publishes `burst` commands every millisecond for `span`, round-robin over the eight
/// motors of motor_driver1 and the four of motor_driver2, the values a ramp.
async fn flood(m: &Master, burst: usize, span: Duration) -> Outcome {
    let mut out = Outcome::default();
    let end = Instant::now() + span;
    let mut i = 0usize;
    while Instant::now() < end {
        for _ in 0..burst {
            let (node, motor) = if i % 12 < 8 {
                (MD1, i % 12)
            } else {
                (MD2, i % 12 - 8)
            };
            // Exact in f32 and in the text: k / 1024.
            let v = (i % 512) as f32 / 1024.0;
            let topic = format!("/motor_driver{node}/motor{motor}/target");
            match m
                .publish(&topic, val(&format!("{{type: 0, value: {v}}}")))
                .await
            {
                Ok(()) => {
                    out.accepted += 1;
                    out.last.insert((node, motor), v);
                }
                Err(MasterError::Call(CallError::Busy { .. })) => out.busy += 1,
                Err(e) => out.other.push(e.to_string()),
            }
            i += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    out
}

/// The master heartbeats the bus carried, in order.
fn heartbeats(w: &World) -> Vec<TxRecord> {
    w.bus
        .history()
        .into_iter()
        .filter(|r| {
            ConfigId::from_can_id(r.frame.id()).is_ok_and(|c| {
                c.opcode == Opcode::Heartbeat && c.dir == Direction::ToNode && c.node.is_broadcast()
            })
        })
        .collect()
}

async fn a_command_flood_keeps_every_node_running(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let mut events = m.events();
    let before = m.status().await.unwrap().stats;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = w.bus.now();

    let out = flood(&m, 50, Duration::from_secs(2)).await;
    let end = w.bus.now();
    // What was accepted is sent: the backlog limit (20 ms of bus time) at what the
    // boards leave of the bus. Each motor then runs the last command accepted for it,
    // none lost or overtaken by an earlier one.
    eventually(
        "the commands accepted sent",
        Duration::from_millis(100),
        || async { (m.status().await.unwrap().stats.data_waiting_us == 0).then_some(()) },
    )
    .await;
    // Handed to the link is not yet on the wire: the link holds up to the lead (5 ms).
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(out.last.len(), 12, "every motor got commands: {out:?}");
    for (&(node, motor), &v) in &out.last {
        let duty = w.motor(node).with(|f| f.axis(motor).unwrap().duty);
        assert_eq!(duty, v, "motor {motor} of node {node}");
    }

    assert!(
        out.other.is_empty(),
        "only Busy refusals: {:?}",
        &out.other[..out.other.len().min(3)]
    );
    assert!(out.busy > 0, "the client outran the bus and was told so");
    assert!(out.accepted > 0, "commands still got through");
    let after = m.status().await.unwrap().stats;
    assert_eq!(after.publish_busy - before.publish_busy, out.busy);
    assert_eq!(after.tx_withdrawn, before.tx_withdrawn);
    // The commands took the bus up to the load limit (90 %), not past it.
    let load = w.bus.load(start..end);
    assert!(
        (0.8..=0.92).contains(&load),
        "bus load {load} during the flood"
    );

    // No node noticed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(e) = events.try_recv() {
        assert!(
            !matches!(
                e,
                Event::Announced { .. }
                    | Event::Rebooted { .. }
                    | Event::Offline { .. }
                    | Event::Failed { .. }
                    | Event::Online { .. }
            ),
            "a node noticed the flood: {e:?}"
        );
    }
    for id in [MD1, MD2] {
        w.motor(id).with(|f| {
            assert_eq!(f.node.state(), NodeState::Running, "node {id}");
            assert_eq!(f.node.counters().master_lost, 0, "node {id}");
        });
    }
    w.io(IO3).with(|f| {
        assert_eq!(f.node.state(), NodeState::Running);
        assert_eq!(f.node.counters().master_lost, 0);
    });
    // The master sent its heartbeat on time (every 100 ms, give or take the timer
    // tick), whatever was queued; on the wire it loses arbitration to every data frame
    // (extended identifiers), yet arrives well within the nodes' 300 ms watchdog.
    let hb: Vec<TxRecord> = heartbeats(&w)
        .into_iter()
        .filter(|r| r.queued >= start && r.queued <= end)
        .collect();
    assert!(hb.len() >= 19, "{} heartbeats", hb.len());
    for p in hb.windows(2) {
        let sent = p[1].queued - p[0].queued;
        assert!(
            sent <= Duration::from_millis(102),
            "heartbeat sent {sent:?} after the last"
        );
        let seen = p[1].end - p[0].end;
        assert!(
            seen < Duration::from_millis(200),
            "heartbeat on the wire {seen:?} after the last"
        );
    }
}

both_links!(a_command_flood_keeps_every_node_running);
