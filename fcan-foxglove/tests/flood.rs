//! A Foxglove client that outruns the bus (issue 33, docs/protocol.md §5.5): a real
//! WebSocket client advertises the twelve motor `target` channels of the example nodes
//! and publishes on them far faster than the face and the bus take them, for longer than
//! the nodes' 300 ms master-lost watchdog, while another program (here a task publishing
//! batches straight to the master) keeps the bus full of commands. The master admits
//! commands by bus time and refuses the rest `busy`; the client hears that in a few error
//! statuses (not one per message), the server counts it, the client stays connected, and
//! no node notices: each keeps running with its watchdog quiet, and the master sees no
//! node announce, reboot or go.
//!
//! Why the other program: a debug build of this server on two shared cores hands the
//! master a few thousand messages a second, fewer than a Classical bus carries (and on CAN
//! FD eight targets share a frame), so the client alone outruns the server, not the bus
//! (it is told "the server is busy": `a_client_that_outruns_the_server_is_told_busy`).
//! tests/tests/flood.rs floods the master itself on the paused clock.
//!
//! Real time (the WebSocket is real TCP, and the server needs a multi-threaded runtime):
//! the simulated bus and the firmwares run on the real clock, like `tests/tests/remote.rs`.
//! The client is paced (20 messages a millisecond, several times what the server
//! takes): flat out, it and the server would take the CPU from the simulated boards,
//! whose main loops are tasks of this process. The figures it prints are one run's
//! (docs/performance.md, "A flood of commands").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::NodeState;
use fcan_e2e::capture::Capture;
use fcan_e2e::val;
use fcan_e2e::{World, IO3, MD1, MD2};
use fcan_foxglove::{FoxgloveCounters, FoxgloveOptions, FoxgloveServer};
use fcan_master::engine::CallError;
use fcan_master::MasterError;
use fcan_master::MasterEvent;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tracing::Instrument;

/// What the client's reading half heard.
#[derive(Default)]
struct Heard {
    /// topic → channel id, as advertised.
    channels: Vec<(String, u64)>,
    /// Status messages: (level, text).
    statuses: Vec<(u64, String)>,
    /// Binary messages (samples of subscribed channels).
    messages: usize,
    /// The connection ended (a close, an error, the end of the stream).
    closed: Option<String>,
}

impl Heard {
    fn channel(&self, topic: &str) -> Option<u64> {
        self.channels
            .iter()
            .find(|(t, _)| t == topic)
            .map(|(_, id)| *id)
    }

    fn take(&mut self, m: Message) {
        match m {
            Message::Text(t) => {
                let j: Json = serde_json::from_str(&t).expect("server text is JSON");
                match j["op"].as_str() {
                    Some("advertise") => {
                        for c in j["channels"].as_array().unwrap() {
                            self.channels.push((
                                c["topic"].as_str().unwrap().to_string(),
                                c["id"].as_u64().unwrap(),
                            ));
                        }
                    }
                    Some("status") => self.statuses.push((
                        j["level"].as_u64().unwrap_or(99),
                        j["message"].as_str().unwrap_or("").to_string(),
                    )),
                    _ => {}
                }
            }
            Message::Binary(b) if b.first() == Some(&1) => self.messages += 1,
            Message::Close(c) => self.closed = Some(format!("closed by the server: {c:?}")),
            _ => {}
        }
    }
}

/// Waits until `done` holds of what was heard (panics after 30 s).
async fn until(heard: &Mutex<Heard>, what: &str, done: impl Fn(&Heard) -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        {
            let h = heard.lock().unwrap();
            if done(&h) {
                return;
            }
            assert!(h.closed.is_none(), "{what}: {:?}", h.closed);
        }
        assert!(Instant::now() < end, "{what}: not within 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The twelve motor targets of the example nodes, and 512 messages for them (a duty
/// ramp), written out before the flood so the client spends its time sending.
fn targets() -> (Vec<String>, Vec<Vec<u8>>) {
    let mut v = Vec::new();
    for (node, motors) in [(MD1, 8), (MD2, 4)] {
        for motor in 0..motors {
            v.push(format!("/motor_driver{node}/motor{motor}/target"));
        }
    }
    let msgs = (0..512)
        .map(|k| {
            json!({"type": 0, "value": k as f64 / 1024.0})
                .to_string()
                .into_bytes()
        })
        .collect();
    (v, msgs)
}

/// Percentiles of gaps, for the figures.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A program that keeps the bus full of commands: the twelve targets in one batch, again
/// and again (twelve frames on Classical CAN), until `stop`. Returns (accepted, busy).
fn hog(m: fcan_master::Master, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(u64, u64)> {
    tokio::spawn(async move {
        let (topics, _) = targets();
        let (mut ok, mut busy) = (0, 0);
        let mut k = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let v = (k % 512) as f32 / 1024.0;
            let items = topics
                .iter()
                .map(|t| (t.clone(), val(&format!("{{type: 0, value: {v}}}"))))
                .collect();
            match m.publish_many(items).await {
                Ok(()) => ok += 1,
                Err(MasterError::Call(CallError::Busy { .. })) => busy += 1,
                Err(e) => panic!("the other program's batch: {e}"),
            }
            k += 1;
            // Room for the rest of the process between two batches.
            tokio::task::yield_now().await;
        }
        (ok, busy)
    })
}

/// Floods the twelve targets through the server for 1.5 s, with or without the other
/// program, checks what every flood must keep (only busy refusals, few statuses, a quiet
/// log, no node noticing, the client still served) and prints the figures.
async fn flood(
    mtu: Mtu,
    opts: FoxgloveOptions,
    with_hog: bool,
) -> (
    World,
    FoxgloveServer,
    FoxgloveCounters,
    Vec<(u64, String)>,
    Capture,
) {
    /// Messages a millisecond, and for how long.
    const BURST: usize = 20;
    const FLOOD: Duration = Duration::from_millis(1500);
    let (w, m) = World::standard(mtu).await;
    let mut events = m.events();
    let log = Capture::new();
    let server = FoxgloveServer::start(m.clone(), "127.0.0.1:0".parse().unwrap(), opts)
        .instrument(log.span().clone())
        .await
        .expect("server starts");

    let mut req = server.url().into_client_request().unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "foxglove.sdk.v1".parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("connects");
    let (mut tx, mut rx) = ws.split();
    let heard = Arc::new(Mutex::new(Heard::default()));
    let reader = {
        let heard = heard.clone();
        tokio::spawn(async move {
            while let Some(m) = rx.next().await {
                match m {
                    Ok(m) => heard.lock().unwrap().take(m),
                    Err(e) => {
                        heard.lock().unwrap().closed = Some(format!("error: {e}"));
                        return;
                    }
                }
            }
            let mut h = heard.lock().unwrap();
            h.closed.get_or_insert_with(|| "the stream ended".into());
        })
    };
    let (topics, msgs) = targets();
    until(&heard, "the targets advertised", |h| {
        topics.iter().all(|t| h.channel(t).is_some())
    })
    .await;
    let channels: Vec<Json> = topics
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": i + 1, "topic": t, "encoding": "json", "schemaName": "x"}))
        .collect();
    tx.send(Message::Text(
        json!({"op": "advertise", "channels": channels})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // What the bus carried before, to tell the flood's frames.
    let stats_before = m.status().await.unwrap().stats;
    let bus_start = w.bus.now();

    // The flood: each message the next of the ramp on the next channel, BURST a
    // millisecond.
    let stop = Arc::new(AtomicBool::new(false));
    let hogging = with_hog.then(|| hog(m.clone(), stop.clone()));
    let start = Instant::now();
    let mut sent = 0usize;
    while start.elapsed() < FLOOD {
        for _ in 0..BURST {
            let chan = (sent % topics.len()) as u32 + 1;
            let mut b = vec![1];
            b.extend_from_slice(&chan.to_le_bytes());
            b.extend_from_slice(&msgs[sent % msgs.len()]);
            tx.feed(Message::Binary(b.into())).await.unwrap();
            sent += 1;
        }
        tx.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let flood = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (hog_ok, hog_busy) = match hogging {
        Some(h) => h.await.unwrap(),
        None => (0, 0),
    };
    let bus_end = w.bus.now();

    // Every message handled: accepted or refused.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let c = server.counters();
        if c.published + c.refused >= sent as u64 {
            break;
        }
        assert!(Instant::now() < end, "not every message handled: {c:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let handled = start.elapsed();
    // Past the nodes' watchdog once more, the flood over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = server.counters();
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
        .filter(|r| {
            Some(r.sender) == master && matches!(r.frame.id(), fcan_core::frame::CanId::Standard(_))
        })
        .filter(|r| r.start >= bus_start && r.end <= bus_end)
        .map(|r| r.end - r.start)
        .sum();
    eprintln!(
        "foxglove flood ({mtu:?}, other program: {with_hog}, its batches {hog_ok} accepted, {hog_busy} busy): \
         {sent} messages in {flood:.2?} ({:.0}/s offered), all handled after {handled:.2?}; \
         published {} ({:.0}/s), busy {}, queue full {}, stale {}, other refusals {}; \
         commands' bus time {:.1} % of the bus, bus load {:.1} %; \
         heartbeat gaps on the wire p50 {:?} p99 {:?} max {:?} ({} heartbeats)",
        sent as f64 / flood.as_secs_f64(),
        c.published,
        c.published as f64 / flood.as_secs_f64(),
        c.busy,
        c.queue_full,
        c.stale,
        c.refused - c.busy - c.queue_full - c.stale,
        commands.as_secs_f64() / span * 100.0,
        w.bus.load(bus_start..bus_end) * 100.0,
        pct(&gaps, 0.5),
        pct(&gaps, 0.99),
        gaps.last().copied().unwrap_or_default(),
        hb.len(),
    );

    let statuses = heard.lock().unwrap().statuses.clone();
    assert_eq!(
        c.refused,
        c.busy + c.queue_full + c.stale,
        "only busy refusals: {c:?}"
    );
    assert!(
        stats.publish_busy - stats_before.publish_busy >= c.busy + hog_busy,
        "the master counted its refusals: {stats:?}"
    );
    // At most one a second per topic and kind: a few dozen, not thousands.
    let secs = handled.as_secs() as usize + 2;
    assert!(
        statuses.len() <= 3 * topics.len() * secs,
        "{} statuses for {} refusals",
        statuses.len(),
        c.refused
    );
    // The server's log is throttled too: the first 20, then one in 1000.
    let warnings = log.text().matches("refused publish #").count() as u64;
    assert!(
        warnings <= 20 + c.refused / 1000,
        "{warnings} warnings logged"
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
    let nodes = m.nodes().await.unwrap();
    assert!(
        nodes.iter().all(|n| n.phase == fcan_master::Phase::Running),
        "{nodes:?}"
    );

    // The client is still connected and served: a subscription streams.
    let fb = heard
        .lock()
        .unwrap()
        .channel("/motor_driver2/motor0/feedback")
        .unwrap();
    tx.send(Message::Text(
        json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": fb}]})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    until(&heard, "feedback after the flood", |h| h.messages >= 3).await;
    reader.abort();
    (w, server, c, statuses, log)
}

/// The error statuses that say `what`.
fn said(statuses: &[(u64, String)], what: &str) -> Vec<String> {
    statuses
        .iter()
        .filter(|(level, s)| *level == 2 && s.contains(what))
        .map(|(_, s)| s.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_outruns_the_bus_is_told_busy_and_no_node_notices() {
    let (_w, _server, c, statuses, _log) =
        flood(Mtu::Classic, FoxgloveOptions::default(), true).await;
    // The master refused some of the client's messages busy, and the client heard it
    // (once a second per topic: the count of the others is in the next report, as
    // server.rs's `garbage_from_a_client_is_refused_and_the_server_goes_on` checks).
    assert!(c.busy > 0, "the master refused nothing busy: {c:?}");
    let busy = said(&statuses, "refused: the bus is busy");
    assert!(!busy.is_empty(), "no busy status: {statuses:?}");
    assert!(
        c.published > 0,
        "none of the client's commands went through: {c:?}"
    );
}

/// A message that waited longer than `publish_wait` for the master is refused busy: what
/// the server holds is bounded in time, whatever the queue's length. (A wait of zero
/// refuses every message: none is taken the instant it arrives.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_outruns_the_server_is_told_busy() {
    let mut opts = FoxgloveOptions::default();
    opts.publish_wait = Duration::ZERO;
    let (_w, _server, c, statuses, _log) = flood(Mtu::Classic, opts, false).await;
    assert!(c.stale > 0, "{c:?}");
    assert_eq!(c.published, 0, "{c:?}");
    assert_eq!(c.busy, 0, "the master saw nothing: {c:?}");
    let stale = said(&statuses, "refused: the server is busy: the message waited");
    assert!(!stale.is_empty(), "no status: {statuses:?}");
}

/// The figures of the client alone (no other program) on both links, for
/// docs/performance.md: what a debug build of the server hands the master, and what the
/// bus takes of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn flood_figures() {
    for mtu in [Mtu::Fd, Mtu::Classic] {
        flood(mtu, FoxgloveOptions::default(), false).await;
    }
}
