//! ROS 2 writers that outrun the bus (issue 33, docs/protocol.md §5.5): twelve DDS
//! writers, one per motor `target` of the example nodes, write commands far faster than
//! the bus carries, for longer than the nodes' 300 ms master-lost watchdog. The master
//! admits commands by bus time and refuses the rest `busy`; the bridge counts those
//! drops per writer (its GUID, as DDS names it in the sample) and logs them per writer
//! at most once a second, naming the writer and the reason; and no node notices: each
//! keeps running with its watchdog quiet, and the master sees no node announce, reboot
//! or go. One writer also skips sequence numbers, as a DDS reader's history overwritten
//! while the bridge was behind would show: those samples are counted as missed.
//!
//! The in-memory DDS of `common` stands in for RustDDS (which hands the bridge the same
//! writer GUID and sequence number, `rustdds_backend`). Nothing here does real I/O, so
//! it runs on tokio's paused clock like tests/tests/flood.rs: the writers write exactly
//! their rate in virtual time, however slow the machine, and the figures it prints are
//! model figures (docs/performance.md, "A flood of commands").

use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::NodeState;
use fcan_e2e::capture::Capture;
use fcan_e2e::{both_links, World, IO3, MD1, MD2};
use fcan_master::MasterEvent;
use fcan_ros2_bridge::dds::{Gid, Received};
use fcan_ros2_bridge::drops::gid_text;
use fcan_ros2_bridge::rpc::{Framing, SampleId};
use fcan_ros2_bridge::{Ros2Bridge, Ros2Options};
use tokio::time::Instant;
use tracing::Instrument;

mod common;
use common::MemDds;

/// example_msgs/msg/Target in CDR: duty `setpoint` (type 0).
fn target_cdr(setpoint: f32) -> Vec<u8> {
    let mut b = vec![0, 1, 0, 0];
    b.extend(setpoint.to_le_bytes());
    b.push(0);
    b
}

/// The GUID of the test's writer `i`.
fn writer(i: usize) -> Gid {
    let mut g = [0x51; 16];
    g[12..].copy_from_slice(&(i as u32 + 0x100).to_be_bytes());
    g
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn writers_that_outrun_the_bus_are_counted_per_writer_and_no_node_notices(mtu: Mtu) {
    /// Samples per writer per millisecond (48 a millisecond in all, several times what
    /// the bus carries), and for how long: well past the nodes' 300 ms watchdog.
    const BURST: usize = 4;
    const FLOOD: Duration = Duration::from_millis(1500);
    /// The writer that skips a sequence number every this many.
    const SKIPPER: usize = 3;
    const SKIP_EVERY: i64 = 10;

    let (w, m) = World::standard(mtu).await;
    let mut events = m.events();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = Capture::new();
    let dds = MemDds::default();
    let mut opts = Ros2Options::default();
    opts.framing = Framing::Cyclone;
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), opts)
        .instrument(log.span().clone())
        .await;
    let mut topics = Vec::new();
    for (node, motors) in [(MD1, 8), (MD2, 4)] {
        for motor in 0..motors {
            topics.push(format!("/motor_driver{node}/motor{motor}/target"));
        }
    }
    let feeds: Vec<_> = topics
        .iter()
        .map(|t| dds.feeds.lock().unwrap()[&format!("rt{t}")].clone())
        .collect();
    let stats_before = m.status().await.unwrap().stats;
    let bus_start = w.bus.now();

    // The flood: every writer BURST samples a millisecond, a duty ramp.
    let start = Instant::now();
    let mut seq = vec![0i64; feeds.len()];
    let mut skipped = 0u64;
    let mut sent = 0u64;
    let mut k = 0usize;
    while start.elapsed() < FLOOD {
        for _ in 0..BURST {
            for (i, feed) in feeds.iter().enumerate() {
                seq[i] += 1;
                if i == SKIPPER && seq[i] % SKIP_EVERY == 0 {
                    // Written by the writer, never seen by the bridge (which learns of it
                    // from the writer's next sample).
                    skipped += 1;
                    continue;
                }
                let id = SampleId {
                    writer_guid: writer(i),
                    seq: seq[i],
                };
                let v = (k % 512) as f32 / 1024.0;
                feed.send(Received {
                    cdr: target_cdr(v),
                    id: Some(id),
                    source_time: None,
                })
                .unwrap();
                sent += 1;
                k += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let flood = start.elapsed();
    if seq[SKIPPER] % SKIP_EVERY == 0 {
        // The last one skipped: no later sample tells the bridge.
        skipped -= 1;
    }
    let bus_end = w.bus.now();
    // Every sample handled: sent on the bus or refused.
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let s = bridge.stats();
        if s.forwarded + s.refused >= sent {
            break;
        }
        assert!(Instant::now() < end, "not every sample handled: {s:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let handled = start.elapsed();
    // Past the nodes' watchdog once more, the flood over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = bridge.stats();
    let stats = m.status().await.unwrap().stats;

    // The figures (docs/performance.md).
    let history = w.bus.history();
    let hb: Vec<_> = history
        .iter()
        .filter(|r| {
            ConfigId::from_can_id(r.frame.id()).is_ok_and(|c| {
                c.opcode == Opcode::Heartbeat && c.dir == Direction::ToNode && c.node.is_broadcast()
            })
        })
        .filter(|r| r.end >= bus_start && r.end <= bus_end)
        .collect();
    let master = hb.first().map(|r| r.sender);
    let mut gaps: Vec<Duration> = hb.windows(2).map(|p| p[1].end - p[0].end).collect();
    gaps.sort();
    let span = (bus_end - bus_start).as_secs_f64();
    let commands: Duration = history
        .iter()
        .filter(|r| Some(r.sender) == master && matches!(r.frame.id(), CanId::Standard(_)))
        .filter(|r| r.start >= bus_start && r.end <= bus_end)
        .map(|r| r.end - r.start)
        .sum();
    eprintln!(
        "dds flood ({mtu:?}): {sent} samples in {flood:.2?} ({:.0}/s offered), all handled after {handled:.2?}; \
         forwarded {} ({:.0}/s), busy {}, other refusals {}, missed {}; \
         commands' bus time {:.1} % of the bus, bus load {:.1} %; \
         heartbeat gaps on the wire p50 {:?} p99 {:?} max {:?} ({} heartbeats)",
        sent as f64 / flood.as_secs_f64(),
        s.forwarded,
        s.forwarded as f64 / handled.as_secs_f64(),
        s.busy,
        s.refused - s.busy,
        s.missed,
        commands.as_secs_f64() / span * 100.0,
        w.bus.load(bus_start..bus_end) * 100.0,
        pct(&gaps, 0.5),
        pct(&gaps, 0.99),
        gaps.last().copied().unwrap_or_default(),
        hb.len(),
    );

    // The writers outran the bus, commands still went through, and only busy refusals.
    assert!(s.busy > 0, "the master refused nothing busy: {s:?}");
    assert!(s.forwarded > 0, "nothing was forwarded: {s:?}");
    assert_eq!(s.refused, s.busy, "only busy refusals: {s:?}");
    assert_eq!(s.missed, skipped, "{s:?}");
    assert!(
        stats.publish_busy - stats_before.publish_busy >= s.busy,
        "the master counted its refusals: {stats:?}"
    );
    // Counted per writer: each drop under the GUID that wrote it, on its topic.
    let drops = bridge.drops();
    assert_eq!(
        drops.iter().map(|d| d.busy).sum::<u64>(),
        s.busy,
        "{drops:?}"
    );
    assert_eq!(drops.iter().map(|d| d.refused).sum::<u64>(), 0, "{drops:?}");
    for d in &drops {
        let i = (0..topics.len())
            .find(|&i| Some(writer(i)) == d.writer)
            .unwrap_or_else(|| panic!("a writer the test did not make: {d:?}"));
        assert_eq!(d.topic, topics[i]);
        if d.busy > 0 {
            assert!(d.last_reason.contains("the bus is busy"), "{d:?}");
        }
        let missed = if i == SKIPPER { skipped } else { 0 };
        assert_eq!(d.missed, missed, "{d:?}");
    }
    assert!(drops.iter().any(|d| d.busy > 0));
    // Logged per writer, naming it and the reason: the first at once, then at most one
    // a second with the count since, not one per sample.
    let text = log.text();
    let busy_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("refused: the bus is busy"))
        .collect();
    assert!(!busy_lines.is_empty(), "no busy line logged:\n{text}");
    // One writer's reports: its first drop, then one a second at most (the flood lasts
    // 1.5 s of the bridge's clock): its busy drops are counted, not each logged.
    let secs = handled.as_secs() as usize + 1;
    assert!(
        busy_lines.len() <= topics.len() * secs,
        "{} busy lines for {} refusals:\n{text}",
        busy_lines.len(),
        s.busy
    );
    for d in &drops {
        let who = gid_text(d.writer);
        assert!(
            text.lines()
                .any(|l| l.starts_with("WARN") && l.contains(&d.topic) && l.contains(&who)),
            "no line names writer {who} on {}:\n{text}",
            d.topic
        );
    }
    assert!(
        text.contains("more refused since the last report"),
        "the reports count what they do not say:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "sample(s) of writer {} never reached the bridge",
            gid_text(Some(writer(SKIPPER)))
        )),
        "{text}"
    );

    // No node noticed.
    for id in [MD1, MD2] {
        w.motor(id).with(|f| {
            assert_eq!(f.node.state(), NodeState::Running, "node {id}");
            assert_eq!(f.node.counters().master_lost, 0, "node {id}");
        });
    }
    w.io(IO3).with(|f| {
        assert_eq!(f.node.state(), NodeState::Running, "node {IO3}");
        assert_eq!(f.node.counters().master_lost, 0, "node {IO3}");
    });
    loop {
        match events.try_recv() {
            Ok(e) => assert!(
                !matches!(
                    e,
                    MasterEvent::Announced { .. }
                        | MasterEvent::Rebooted { .. }
                        | MasterEvent::Offline { .. }
                        | MasterEvent::Failed { .. }
                        | MasterEvent::Online { .. }
                ),
                "a node noticed the flood: {e:?}"
            ),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
            Err(e) => panic!("the master's events: {e}"),
        }
    }
    assert_eq!(
        bridge.routes().len(),
        m.registry().await.unwrap().topics.len()
    );
}

both_links!(writers_that_outrun_the_bus_are_counted_per_writer_and_no_node_notices);
