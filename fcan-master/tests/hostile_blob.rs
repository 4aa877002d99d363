//! Hostile schema blobs against the engine, frame by frame, with real firmware on the
//! bus (issue 10, items 1 and 3).
//!
//! The engine's clock is charged with the real time the engine spends in each call: a
//! master that computes for seconds is a master that sends no heartbeat for seconds, and
//! the real motor firmware on the bus (300 ms master-lost watchdog) sees exactly that.

#[path = "../../fcan-core/tests/support/hostile.rs"]
mod hostile;
#[path = "support/mod.rs"]
mod support;

use std::time::Instant;

use fcan_core::blob::{self, MAX_BLOB_LEN};
use fcan_core::frame::{Frame, Mtu};
use fcan_core::hash::{HashPrefix, SchemaDigest};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{Announce, ConfigMessage, NodeState, SchemaData};
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_core::timing::{DEFAULT_MASTER_TIMEOUT_MS, MASTER_HEARTBEAT_PERIOD_US};
use fcan_master::engine::{NoSink, Phase};
use support::{Collect, EngineWorld};

/// A node that serves whatever blob it is given, answering DISCOVER and SCHEMA_READ.
struct FakeNode {
    id: NodeId,
    blob: Vec<u8>,
    /// The length it announces (the blob's, unless lying).
    announced_len: u32,
    /// Extra bytes appended to every chunk (more than asked for).
    oversize: usize,
    pool: Box<ReassemblyPool<8, 8192>>,
    out: Vec<Frame>,
    /// Times SCHEMA_READs were received.
    reads: Vec<u64>,
}

impl FakeNode {
    fn new(id: u8, blob: Vec<u8>) -> FakeNode {
        FakeNode {
            id: NodeId::new(id).unwrap(),
            announced_len: blob.len() as u32,
            blob,
            oversize: 0,
            pool: Box::new(ReassemblyPool::new()),
            out: Vec::new(),
            reads: Vec::new(),
        }
    }

    fn send(&mut self, msg: &ConfigMessage, transfer: u8) {
        let mut buf = vec![0u8; 9000];
        let len = msg.encode(&mut buf).unwrap();
        let id = ConfigId::single(msg.opcode(), Direction::ToMaster, self.id, transfer);
        self.out
            .extend(Segmenter::new(id, Mtu::Classic, &buf[..len], &[]).unwrap());
    }

    fn announce(&mut self) {
        let hash: HashPrefix = SchemaDigest::of(&self.blob).prefix();
        let msg = ConfigMessage::Announce(Announce {
            protocol: fcan_core::PROTOCOL_VERSION,
            state: NodeState::Unprovisioned,
            caps: 0,
            boot_id: 0xBAD0 + self.id.get() as u32,
            blob_len: self.announced_len,
            hash,
            counts: &[1],
        });
        self.send(&msg, 0);
    }

    fn receive(&mut self, f: &Frame, now: u64) {
        let Ok(id) = ConfigId::from_can_id(f.id()) else {
            return;
        };
        if id.dir != Direction::ToNode || (id.node != self.id && id.node != NodeId::BROADCAST) {
            return;
        }
        let Ok(Some(p)) = self.pool.push(id, f.data(), now as u32) else {
            return;
        };
        let p = p.to_vec();
        match ConfigMessage::decode(id.opcode, id.dir, &p) {
            Ok(ConfigMessage::Discover(_)) => self.announce(),
            Ok(ConfigMessage::SchemaRead(r)) => {
                self.reads.push(now);
                let start = (r.offset as usize).min(self.blob.len());
                let end = (start + r.len as usize + self.oversize).min(self.blob.len());
                let data = self.blob[start..end].to_vec();
                let msg = ConfigMessage::SchemaData(SchemaData {
                    offset: r.offset,
                    data: &data,
                });
                self.send(&msg, id.transfer);
            }
            _ => {}
        }
    }
}

/// The world, fake nodes beside it, and the master's heartbeats as the firmware got them.
struct Bench {
    w: EngineWorld,
    fakes: Vec<FakeNode>,
    heartbeats: Vec<u64>,
}

impl Bench {
    fn new(fakes: Vec<FakeNode>) -> Bench {
        let mut w = EngineWorld::new(Mtu::Classic, 1, 0);
        w.provision();
        let mut b = Bench {
            w,
            fakes,
            heartbeats: Vec::new(),
        };
        // 300 ms of normal running first, so the heartbeats have a rhythm to keep.
        for _ in 0..3000 {
            b.step();
        }
        b
    }

    /// Runs `f` on the engine and charges the real time it took to the world's clock.
    fn charged(&mut self, f: impl FnOnce(&mut EngineWorld)) {
        let t = Instant::now();
        f(&mut self.w);
        self.w.now_us += t.elapsed().as_micros() as u64;
    }

    /// One 100 µs step: the master's frames to everyone, everyone's frames to the master.
    fn step(&mut self) {
        self.w.now_us += 100;
        self.charged(|w| w.engine.poll(w.now_us));
        let now = self.w.now_us;
        let mut from_master = Vec::new();
        while let Some(f) = self.w.engine.pop_frame() {
            from_master.push(f);
        }
        for f in &from_master {
            let id = ConfigId::from_can_id(f.id());
            if id.is_ok_and(|id| id.opcode == Opcode::Heartbeat && id.dir == Direction::ToNode) {
                self.heartbeats.push(now);
            }
            for n in &mut self.w.nodes {
                n.receive(f, now as u32);
            }
            for fake in &mut self.fakes {
                fake.receive(f, now);
            }
        }
        let mut to_master = Vec::new();
        for n in &mut self.w.nodes {
            let mut tx = Collect::default();
            n.poll(now as u32, &mut tx);
            to_master.extend(tx.0);
        }
        for fake in &mut self.fakes {
            to_master.append(&mut fake.out);
        }
        for f in to_master {
            self.charged(|w| w.engine.handle_frame(&f, now, &mut NoSink));
        }
        while self.w.engine.pop_event().is_some() {}
    }

    fn phase(&self, node: u8) -> Option<Phase> {
        self.w
            .engine
            .node(NodeId::new(node)?)
            .map(|n| n.phase.clone())
    }

    fn run_until(&mut self, what: &str, limit_us: u64, done: impl Fn(&Bench) -> bool) {
        let end = self.w.now_us + limit_us;
        while !done(self) {
            self.step();
            assert!(self.w.now_us < end, "{what} did not happen");
        }
    }

    /// The motor firmware (node 1) still runs and never lost its master, and it got every
    /// heartbeat in time.
    fn assert_motor_kept_its_master(&self) {
        let fw = match &self.w.nodes[0] {
            support::Fw::Motor(m) => m,
            _ => unreachable!(),
        };
        assert!(self.heartbeats.len() > 2);
        // Between heartbeats, and since the last one.
        let last = self.heartbeats.last().map(|t| self.w.now_us - t);
        let gaps = self.heartbeats.windows(2).map(|w| w[1] - w[0]);
        let gap = gaps.chain(last).max().unwrap();
        assert!(
            gap < DEFAULT_MASTER_TIMEOUT_MS as u64 * 1000,
            "the master sent no heartbeat for {gap} µs"
        );
        assert!(gap >= MASTER_HEARTBEAT_PERIOD_US as u64);
        assert_eq!(fw.node.state(), NodeState::Running);
        assert_eq!(fw.node.counters().master_lost, 0);
        assert_eq!(self.phase(1), Some(Phase::Running));
    }
}

fn failed_reason(b: &Bench, node: u8) -> Option<String> {
    match b.phase(node) {
        Some(Phase::Failed(r)) => Some(r),
        _ => None,
    }
}

/// Item 1: a blob of near-identical names (16 KB: a type named with 8,000 letters and an
/// instance naming a type one letter away, which the old checks compared letter by
/// letter for a "did you mean") is downloaded and refused while the motor node keeps
/// its heartbeats; announced again, it is refused at once, by digest, with no download.
#[test]
fn a_hostile_blob_is_refused_without_stalling_the_master() {
    let bytes = blob::encode(&hostile::long_names(16 * 1024));
    let len = bytes.len() as u64;
    let mut b = Bench::new(vec![FakeNode::new(5, bytes)]);
    let read_before = b.w.engine.stats().schema_bytes_read;
    b.fakes[0].announce();
    b.run_until("refusing the hostile blob", 20_000_000, |b| {
        failed_reason(b, 5).is_some()
    });
    // The checks ran in the engine, between two frames: the motor firmware noticed
    // nothing.
    for _ in 0..10 {
        b.step();
    }
    b.assert_motor_kept_its_master();
    let reason = failed_reason(&b, 5).unwrap();
    assert!(reason.contains("schema is invalid"), "{reason}");
    assert!(reason.len() < 400, "{reason}");
    let read = b.w.engine.stats().schema_bytes_read - read_before;
    assert_eq!(read, len, "the whole blob was read once");
    // Some more time, with heartbeats, then the same boot announces again.
    for _ in 0..5000 {
        b.step();
    }
    let reads = b.fakes[0].reads.len();
    b.fakes[0].announce();
    for _ in 0..5000 {
        b.step();
    }
    assert_eq!(failed_reason(&b, 5), Some(reason));
    assert_eq!(b.fakes[0].reads.len(), reads, "no SCHEMA_READ again");
    assert_eq!(b.w.engine.stats().schema_bytes_read - read_before, read);
    b.assert_motor_kept_its_master();
}

/// Item 3: a blob length over the protocol limit is refused before anything is read.
#[test]
fn an_oversized_announcement_is_refused_before_reading() {
    let mut fake = FakeNode::new(6, vec![1, 2, 3]);
    fake.announced_len = MAX_BLOB_LEN + 1;
    let mut b = Bench::new(vec![fake]);
    b.fakes[0].announce();
    b.run_until("refusing the announcement", 1_000_000, |b| {
        failed_reason(b, 6).is_some()
    });
    let reason = failed_reason(&b, 6).unwrap();
    assert!(reason.contains("protocol limit"), "{reason}");
    for _ in 0..5000 {
        b.step();
    }
    assert!(b.fakes[0].reads.is_empty());
    b.assert_motor_kept_its_master();
}

/// Item 3: chunks larger than asked for are dropped, never appended: the download fails
/// having kept nothing.
#[test]
fn chunks_larger_than_requested_are_not_appended() {
    let bytes = blob::encode(&hostile::wide_valid(3000));
    assert!(bytes.len() > 1000);
    let mut fake = FakeNode::new(7, bytes);
    fake.oversize = 5;
    let mut b = Bench::new(vec![fake]);
    let read_before = b.w.engine.stats().schema_bytes_read;
    let malformed_before = b.w.engine.stats().rx_malformed;
    b.fakes[0].announce();
    b.run_until("the download to fail", 20_000_000, |b| {
        failed_reason(b, 7).is_some()
    });
    assert_eq!(b.w.engine.stats().schema_bytes_read, read_before);
    assert!(b.w.engine.stats().rx_malformed > malformed_before);
    assert!(b.fakes[0].reads.len() > 1, "asked again");
    b.assert_motor_kept_its_master();
}

/// Item 3: at most four downloads run at once; the others wait their turn and all finish.
#[test]
fn downloads_at_once_are_bounded() {
    let fakes = (0..6)
        .map(|i| {
            let mut s = hostile::wide_valid(3000);
            s.node = format!("h{i}");
            FakeNode::new(10 + i, blob::encode(&s))
        })
        .collect();
    let mut b = Bench::new(fakes);
    for f in &mut b.fakes {
        f.announce();
    }
    let mut most = 0;
    let end = b.w.now_us + 20_000_000;
    loop {
        b.step();
        let have = |b: &Bench, id: NodeId| b.w.engine.node(id).is_some_and(|n| n.schema.is_some());
        let downloading = b
            .fakes
            .iter()
            .filter(|f| !f.reads.is_empty() && !have(&b, f.id))
            .count();
        most = most.max(downloading);
        if b.fakes.iter().all(|f| have(&b, f.id)) {
            break;
        }
        assert!(b.w.now_us < end, "not every schema was downloaded");
    }
    assert_eq!(most, 4);
}
