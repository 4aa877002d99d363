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
use fcan_master::engine::CallError;
use fcan_master::transport::sim::TxRecord;
use fcan_master::MasterEvent;
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
                MasterEvent::Announced { .. }
                    | MasterEvent::Rebooted { .. }
                    | MasterEvent::Offline { .. }
                    | MasterEvent::Failed { .. }
                    | MasterEvent::Online { .. }
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
    // The master sent its heartbeat on time (every 75 ms, give or take the timer
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
            sent <= Duration::from_micros(
                u64::from(fcan_core::timing::MASTER_HEARTBEAT_PERIOD_US) + 2_000
            ),
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

// ---------------------------------------------------------------------------------------
// Figures for docs/performance.md, "A flood of commands" (ignored: they measure, they
// assert nothing):
//
//     cargo test -p fcan-e2e --test flood flood_figures -- --ignored --nocapture
//
// `flood_figures`: the flood above at several offered rates, on the paused clock (model
// figures, exact for a seed). `flood_figures_zenoh`: the same flood through the remote
// API over Zenoh on loopback, on the real clock (one run on this machine).

/// What the bus's own record says of a window.
struct BusFigures {
    /// Bus load, every frame.
    load: f64,
    /// The master's data frames (the commands accepted; on CAN FD one may carry several):
    /// their share of the bus and how many a second.
    commands_share: f64,
    command_frames_per_s: f64,
    /// The mean bus time of one of them, and what the bus would carry of them a second
    /// if it carried nothing else.
    command_frame: Duration,
    /// Master heartbeats on the wire: the gaps between them (p50, p99, max), and the
    /// longest one waited for the bus.
    hb_gaps: [Duration; 3],
    hb_wait_max: Duration,
}

fn bus_figures(w: &World, window: std::ops::Range<Duration>) -> BusFigures {
    let history = w.bus.history();
    let hb: Vec<&TxRecord> = history
        .iter()
        .filter(|r| {
            ConfigId::from_can_id(r.frame.id()).is_ok_and(|c| {
                c.opcode == Opcode::Heartbeat && c.dir == Direction::ToNode && c.node.is_broadcast()
            })
        })
        .filter(|r| window.contains(&r.end))
        .collect();
    let master = hb.first().map(|r| r.sender);
    let mut gaps: Vec<Duration> = hb.windows(2).map(|p| p[1].end - p[0].end).collect();
    gaps.sort();
    let pct = |p: f64| {
        gaps.get(((gaps.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    let commands: Vec<Duration> = history
        .iter()
        .filter(|r| {
            Some(r.sender) == master && matches!(r.frame.id(), fcan_core::frame::CanId::Standard(_))
        })
        .filter(|r| window.contains(&r.start))
        .map(|r| r.end - r.start)
        .collect();
    let span = (window.end - window.start).as_secs_f64();
    let busy: Duration = commands.iter().sum();
    BusFigures {
        load: w.bus.load(window.clone()),
        commands_share: busy.as_secs_f64() / span,
        command_frames_per_s: commands.len() as f64 / span,
        command_frame: busy.checked_div(commands.len() as u32).unwrap_or_default(),
        hb_gaps: [pct(0.5), pct(0.99), pct(1.0)],
        hb_wait_max: hb
            .iter()
            .map(|r| r.start - r.queued)
            .max()
            .unwrap_or_default(),
    }
}

/// How many of the boards' watchdogs fired, and how many node events the master saw
/// (announced, rebooted, offline, failed, online).
fn noticed(w: &World, events: &mut tokio::sync::broadcast::Receiver<MasterEvent>) -> (u32, usize) {
    let mut lost = 0;
    for id in [MD1, MD2] {
        lost += w.motor(id).with(|f| f.node.counters().master_lost);
    }
    lost += w.io(IO3).with(|f| f.node.counters().master_lost);
    let mut n = 0;
    while let Ok(e) = events.try_recv() {
        if matches!(
            e,
            MasterEvent::Announced { .. }
                | MasterEvent::Rebooted { .. }
                | MasterEvent::Offline { .. }
                | MasterEvent::Failed { .. }
                | MasterEvent::Online { .. }
        ) {
            n += 1;
        }
    }
    (lost, n)
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

const FIGURES_HEADER: &str = "| link | face | offered/s | accepted/s | busy/s | other refusals/s | command frames/s (capacity) | commands' bus share | bus load | heartbeat gap p50 / p99 / max (ms) | heartbeat wait max (ms) | watchdogs, events |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|";

#[allow(clippy::too_many_arguments)]
fn figures_row(
    mtu: Mtu,
    face: &str,
    offered: f64,
    accepted: f64,
    busy: f64,
    other: f64,
    b: &BusFigures,
    noticed: (u32, usize),
) -> String {
    let capacity = if b.command_frame.is_zero() {
        "—".to_string()
    } else {
        format!("{:.0}", 1.0 / b.command_frame.as_secs_f64())
    };
    format!(
        "| {} | {face} | {offered:.0} | {accepted:.0} | {busy:.0} | {other:.0} | {:.0} ({capacity}) | {:.1} % | {:.1} % | {} / {} / {} | {} | {}, {} |",
        if mtu == Mtu::Fd { "CAN FD" } else { "Classical" },
        b.command_frames_per_s,
        b.commands_share * 100.0,
        b.load * 100.0,
        us(b.hb_gaps[0]),
        us(b.hb_gaps[1]),
        us(b.hb_gaps[2]),
        us(b.hb_wait_max),
        noticed.0,
        noticed.1,
    )
}

/// The flood of `a_command_flood_keeps_every_node_running` at 0 (the boards alone), 2, 5,
/// 10, 20 and 50 commands a millisecond, two seconds each, on both links.
#[tokio::test(start_paused = true)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn flood_figures() {
    const SPAN: Duration = Duration::from_secs(2);
    println!("{FIGURES_HEADER}");
    for mtu in [Mtu::Fd, Mtu::Classic] {
        for burst in [0usize, 2, 5, 10, 20, 50] {
            let (w, m) = World::standard(mtu).await;
            let mut events = m.events();
            tokio::time::sleep(Duration::from_millis(500)).await;
            let start = w.bus.now();
            let out = if burst == 0 {
                tokio::time::sleep(SPAN).await;
                Outcome::default()
            } else {
                flood(&m, burst, SPAN).await
            };
            let end = w.bus.now();
            assert!(out.other.is_empty(), "{:?}", out.other);
            let secs = (end - start).as_secs_f64();
            let b = bus_figures(&w, start..end);
            tokio::time::sleep(Duration::from_millis(500)).await;
            println!(
                "{}",
                figures_row(
                    mtu,
                    "in process",
                    (out.accepted + out.busy) as f64 / secs,
                    out.accepted as f64 / secs,
                    out.busy as f64 / secs,
                    0.0,
                    &b,
                    noticed(&w, &mut events),
                )
            );
        }
    }
}

/// Zenoh: a client session puts one command per put on the targets' topic keys in turn
/// (`burst` a millisecond), or one batch of the twelve targets per put on the `publish`
/// key; the daemon publishes each through the master. Real clock, loopback TCP.
async fn zenoh_flood(mtu: Mtu, burst: usize, batch: bool) -> String {
    use fcan_remote::server::{Server, ServerOptions};
    use fcan_remote::session::SessionConfig;
    const SPAN: Duration = Duration::from_secs(2);
    let (w, m) = World::standard(mtu).await;
    let mut events = m.events();
    let port = free_port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let dz = SessionConfig::daemon()
        .listen([ep.clone()])
        .open()
        .await
        .expect("daemon session")
        .session;
    let server = Server::start(m.clone(), &dz, "sim", ServerOptions::default())
        .await
        .unwrap();
    let cz = SessionConfig::client()
        .connect([ep])
        .open()
        .await
        .expect("client session")
        .session;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut topics = Vec::new();
    for (node, motors) in [(MD1, 8), (MD2, 4)] {
        for motor in 0..motors {
            topics.push(format!("motor_driver{node}/motor{motor}/target"));
        }
    }
    let before = server.counters();
    let start = w.bus.now();
    let t0 = std::time::Instant::now();
    let mut sent = 0u64;
    let mut k = 0usize;
    while t0.elapsed() < SPAN {
        for _ in 0..burst {
            let v = (k % 512) as f64 / 1024.0;
            let one = serde_json::json!({"type": 0, "value": v});
            if batch {
                let items: serde_json::Map<String, serde_json::Value> = topics
                    .iter()
                    .map(|t| (format!("/{t}"), one.clone()))
                    .collect();
                cz.put(
                    "fcan/sim/publish",
                    serde_json::Value::Object(items).to_string(),
                )
                .await
                .unwrap();
            } else {
                let key = format!("fcan/sim/topic/{}", topics[k % topics.len()]);
                cz.put(&key, one.to_string()).await.unwrap();
            }
            sent += 1;
            k += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let flood = t0.elapsed().as_secs_f64();
    let end = w.bus.now();
    // Every put the daemon received handled (puts it never received are Zenoh's drops).
    let mut last = server.counters();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let c = server.counters();
        if c == last {
            break;
        }
        last = c;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = server.counters();
    let puts = c.puts - before.puts;
    let rejected = c.rejected_puts - before.rejected_puts;
    let busy = c.busy_puts - before.busy_puts;
    let per = if batch { topics.len() as f64 } else { 1.0 };
    let b = bus_figures(&w, start..end);
    let face = if batch {
        format!("Zenoh, batches of 12 ({puts} of {sent} puts received)")
    } else {
        format!("Zenoh, one per put ({puts} of {sent} puts received)")
    };
    figures_row(
        mtu,
        &face,
        sent as f64 * per / flood,
        (puts - rejected) as f64 * per / flood,
        busy as f64 * per / flood,
        (rejected - busy) as f64 * per / flood,
        &b,
        noticed(&w, &mut events),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn flood_figures_zenoh() {
    println!("{FIGURES_HEADER}");
    for mtu in [Mtu::Fd, Mtu::Classic] {
        println!("{}", zenoh_flood(mtu, 20, false).await);
        println!("{}", zenoh_flood(mtu, 2, true).await);
    }
}
