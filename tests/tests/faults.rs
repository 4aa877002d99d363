//! Faults: with 1 % of frames dropped at random (seeded) everywhere, the system still
//! converges and retries stay bounded (no retry storm); a schema blob that does not
//! match its announcement is rejected and read again, never trusted.

use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::hash::SchemaDigest;
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_e2e::*;
use fcan_master::transport::fault::{FaultConfig, FaultInjector};
use fcan_master::transport::{Received, Transport, TransportError};
use fcan_master::value::Value;
use fcan_master::MasterEvent;

/// Configuration frames on the bus from master start until all three nodes run, and the master's
/// retry count, for a world whose every endpoint drops `drop` of what it receives.
async fn provision(mtu: Mtu, drop: f64) -> (u64, u64, Duration, World, fcan_master::Master) {
    let mut w = World::new(mtu);
    let cfg = FaultConfig {
        drop,
        ..Default::default()
    };
    w.add_motor_on(FaultInjector::new(w.endpoint(), cfg, 11), MD1, 8);
    w.add_motor_on(FaultInjector::new(w.endpoint(), cfg, 12), MD2, 4);
    w.add_io_on(FaultInjector::new(w.endpoint(), cfg, 13), IO3);
    let t0 = w.bus.now();
    let m = w
        .start_master_on(FaultInjector::new(w.endpoint(), cfg, 14))
        .await;
    let took = wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(10)).await;
    // Configuration frames only: the data frames of nodes already running are not
    // provisioning traffic (and grow with the time the slowest node takes).
    let frames = w
        .bus
        .history()
        .iter()
        .filter(|r| r.start >= t0 && matches!(r.frame.id(), fcan_core::frame::CanId::Extended(_)))
        .count() as u64;
    let retries = m.status().await.unwrap().stats.retries;
    (frames, retries, took, w, m)
}

async fn one_percent_drop_converges_without_storm(mtu: Mtu) {
    let (clean_frames, clean_retries, clean_took, _w, _m) = provision(mtu, 0.0).await;
    assert_eq!(clean_retries, 0);
    let (frames, retries, took, w, m) = provision(mtu, 0.01).await;
    println!(
        "{mtu:?}: fault-free {clean_frames} frames in {clean_took:?}; 1 % drop {frames} frames, {retries} retries in {took:?}"
    );
    // Bounded: at most 3× the fault-free configuration traffic.
    assert!(
        frames <= 3 * clean_frames,
        "{frames} frames vs {clean_frames} fault-free: retry storm"
    );
    assert!(retries <= 20, "{retries} retries");
    // Everything works once converged, despite the losses.
    m.param_set("motor_driver1.motor0.velocity.kp", Value::Float(0.75))
        .await
        .unwrap();
    assert_eq!(
        m.param_get("motor_driver1.motor0.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.75)
    );
    let r = m
        .call("/io_board3/out0/set", val("{on: true}"))
        .await
        .unwrap();
    assert_eq!(r, val("{success: true, settle_ms: 20}"));
    // And it stays converged: 5 s of 1 % loss take no node offline (heartbeats 1 s, data
    // frames every 5 ms, offline after 3 s of silence).
    tokio::time::sleep(Duration::from_secs(5)).await;
    for id in [MD1, MD2, IO3] {
        assert_eq!(
            node_info(&m, id).await.unwrap().phase,
            fcan_master::Phase::Running
        );
        assert_eq!(w.node_state(id), fcan_core::msg::NodeState::Running);
    }
}

/// Flips one bit in the body of the first SCHEMA_DATA frame(s) it delivers.
struct Tamper<T> {
    inner: T,
    left: usize,
}

impl<T: Transport> Transport for Tamper<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }
    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.inner.send(frame).await
    }
    async fn recv(&mut self) -> Result<Received, TransportError> {
        let mut rx = self.inner.recv().await?;
        let is_schema = ConfigId::from_can_id(rx.frame.id()).is_ok_and(|id| {
            id.opcode == Opcode::Schema && id.dir == Direction::ToMaster && id.segment == 2
        });
        if is_schema && self.left > 0 {
            self.left -= 1;
            let mut data = rx.frame.data().to_vec();
            data[1] ^= 0x10;
            let f = if rx.frame.is_fd() {
                Frame::fd(rx.frame.id(), &data).unwrap()
            } else {
                Frame::classic(rx.frame.id(), &data).unwrap()
            };
            rx.frame = if rx.frame.is_fd() && !rx.frame.is_brs() {
                f.without_brs()
            } else {
                f
            };
        }
        Ok(rx)
    }
}

async fn bad_blob_is_reread_not_trusted(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_io(IO3);
    let blob = w.io(IO3).with(|f| f.node.raw().desc().blob);
    let m = w
        .start_master_on(Tamper {
            inner: w.endpoint(),
            left: 1,
        })
        .await;
    let mut events = m.events();
    wait_running(&m, &[IO3], Duration::from_secs(3)).await;
    let mut ready = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::SchemaReady {
            node,
            digest,
            cached,
        } = e
        {
            ready.push((node.get(), digest, cached));
        }
    }
    // One verified schema, the right one; the tampered read was discarded and redone.
    assert_eq!(ready, vec![(IO3, SchemaDigest::of(blob), false)]);
    let stats = m.status().await.unwrap().stats;
    assert_eq!(stats.schema_bytes_read, 2 * blob.len() as u64);
    assert_eq!(w.store.len(), 1);
    let node = node_info(&m, IO3).await.unwrap();
    assert_eq!(node.digest, Some(SchemaDigest::of(blob)));
}

/// Drops, at one node's endpoint, the master heartbeats numbered `drop` (counted from the
/// first this endpoint receives): a burst of losses placed exactly. The heartbeat after
/// the burst comes 2 ms late, as one that lost arbitration to data frames does (the
/// simulated bus has no such jitter on its own, and a gap of exactly the timeout does not
/// fire the watchdog, which needs *more* than the timeout).
struct LoseHeartbeats<T> {
    inner: T,
    seen: usize,
    drop: std::ops::Range<usize>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    late: Late,
}

/// A received frame held back until it is due. `recv` futures are cancelled (the node's
/// loop selects between receiving and its poll timer), so the frame waits here, not in
/// the future: a cancelled wait loses nothing.
#[derive(Default)]
struct Late(Option<(Received, tokio::time::Instant)>);

impl Late {
    /// Holds `rx` back by `by` (its timestamp moved with it).
    fn hold(&mut self, mut rx: Received, by: Duration) {
        rx.at += by;
        self.0 = Some((rx, tokio::time::Instant::now() + by));
    }

    /// The held frame once due; `None` if none is held.
    async fn due(&mut self) -> Option<Received> {
        let (_, when) = self.0.as_ref()?;
        tokio::time::sleep_until(*when).await;
        self.0.take().map(|(rx, _)| rx)
    }
}

impl<T: Transport> Transport for LoseHeartbeats<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }
    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.inner.send(frame).await
    }
    async fn recv(&mut self) -> Result<Received, TransportError> {
        if let Some(rx) = self.late.due().await {
            return Ok(rx);
        }
        loop {
            let rx = self.inner.recv().await?;
            let heartbeat = ConfigId::from_can_id(rx.frame.id())
                .is_ok_and(|id| id.opcode == Opcode::Heartbeat && id.dir == Direction::ToNode);
            if heartbeat {
                self.seen += 1;
                if self.drop.contains(&self.seen) {
                    self.dropped
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    continue;
                }
                if self.seen == self.drop.end {
                    self.late.hold(rx, Duration::from_millis(2));
                    return Ok(self.late.due().await.expect("held"));
                }
            }
            return Ok(rx);
        }
    }
}

/// Two master heartbeats lost in a row at a node do not suspend it: the master heartbeats
/// four times per master-lost timeout (75 ms against 300 ms), so two losses leave a
/// 225 ms gap. At 100 ms (three per timeout) two losses left a 300 ms gap and the node
/// suspended itself: 1 % loss did that about seven times an hour to two nodes
/// (docs/cli.md, "Bus specs"). Three in a row still suspend it: the timeout is what
/// stops a motor whose master is gone.
async fn two_heartbeats_lost_in_a_row_do_not_suspend_a_node(mtu: Mtu) {
    for (lost, suspended) in [(2usize, false), (3, true)] {
        let mut w = World::new(mtu);
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Well after START: the node is running and fed when the burst comes.
        let first = 20;
        w.add_motor_on(
            LoseHeartbeats {
                inner: w.endpoint(),
                seen: 0,
                drop: first..first + lost,
                dropped: dropped.clone(),
                late: Late::default(),
            },
            MD1,
            2,
        );
        let m = w.start_master().await;
        wait_running(&m, &[MD1], Duration::from_secs(3)).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(
            dropped.load(std::sync::atomic::Ordering::Relaxed),
            lost,
            "the burst happened"
        );
        let master_lost = w.motor(MD1).with(|f| f.node.counters().master_lost);
        assert_eq!(
            master_lost > 0,
            suspended,
            "{lost} heartbeats lost in a row: master_lost {master_lost}"
        );
        // Either way the node runs in the end (a suspended one is started again).
        wait_running(&m, &[MD1], Duration::from_secs(3)).await;
    }
}

/// Delays half the master heartbeats a node receives (drawn at random) by 2 ms, as
/// losing arbitration to data frames does on a real bus. Only heartbeats: delaying other
/// frames would reorder the segments of a transfer, which CAN never does.
struct HeartbeatJitter<T> {
    inner: T,
    rng: u64,
    late: Late,
}

impl<T> HeartbeatJitter<T> {
    fn new(inner: T, seed: u64) -> Self {
        HeartbeatJitter {
            inner,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            late: Late::default(),
        }
    }
}

impl<T: Transport> Transport for HeartbeatJitter<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }
    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.inner.send(frame).await
    }
    async fn recv(&mut self) -> Result<Received, TransportError> {
        if let Some(rx) = self.late.due().await {
            return Ok(rx);
        }
        let rx = self.inner.recv().await?;
        let heartbeat = ConfigId::from_can_id(rx.frame.id())
            .is_ok_and(|id| id.opcode == Opcode::Heartbeat && id.dir == Direction::ToNode);
        // xorshift64: a coin per heartbeat.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        if heartbeat && self.rng & 1 == 1 {
            self.late.hold(rx, Duration::from_millis(2));
            return Ok(self.late.due().await.expect("held"));
        }
        Ok(rx)
    }
}

/// Suspensions over half an hour of seeded random loss at every endpoint, for heartbeat
/// periods of 100 ms and 75 ms against the 300 ms master-lost timeout (the figures of
/// docs/performance.md "Heartbeats under loss"). Every other master heartbeat (drawn at
/// random) reaches a node 2 ms late ([`HeartbeatJitter`]): the simulated bus has no
/// arbitration jitter of its own, and a gap of exactly the timeout does not fire a
/// watchdog. Virtual time (a paused clock): about ten minutes of
/// a debug build.
///
/// ```sh
/// cargo test -p fcan-e2e --test faults -- --ignored heartbeat_loss_figures --nocapture
/// ```
#[tokio::test(start_paused = true)]
#[ignore = "figures: run by hand (docs/performance.md)"]
async fn heartbeat_loss_figures() {
    const MINUTES: u64 = 30;
    println!(
        "| loss at every endpoint | heartbeat period | suspensions of 2 nodes in {MINUTES} min | per node-hour |"
    );
    println!("|---:|---:|---:|---:|");
    for loss in [0.02, 0.05] {
        for period_ms in [100u64, 75] {
            let mut w = World::new(Mtu::Fd);
            let cfg = FaultConfig {
                drop: loss,
                ..Default::default()
            };
            for (id, seed) in [(MD1, 21), (MD2, 22)] {
                let lossy = FaultInjector::new(w.endpoint(), cfg, seed);
                w.add_motor_on(HeartbeatJitter::new(lossy, seed), id, 1);
            }
            let m = fcan_master::Master::start(
                FaultInjector::new(w.endpoint(), cfg, 23),
                fcan_master::MasterOptions {
                    store: Box::new(w.store.clone()),
                    tune: Some(Box::new(move |c| c.heartbeat_period_us = period_ms * 1000)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            wait_running(&m, &[MD1, MD2], Duration::from_secs(10)).await;
            tokio::time::sleep(Duration::from_secs(MINUTES * 60)).await;
            let lost: u64 = [MD1, MD2]
                .iter()
                .map(|&id| u64::from(w.motor(id).with(|f| f.node.counters().master_lost)))
                .sum();
            println!(
                "| {:.0} % | {period_ms} ms | {lost} | {:.1} |",
                loss * 100.0,
                lost as f64 * 60.0 / (2.0 * MINUTES as f64)
            );
            drop(m);
        }
    }
}

both_links!(
    one_percent_drop_converges_without_storm,
    bad_blob_is_reread_not_trusted,
    two_heartbeats_lost_in_a_row_do_not_suspend_a_node
);
