//! Frames shared by topics sent per publication (`docs/protocol.md` §4.2), the engine
//! against the real example firmwares on both links: a publication of one topic never
//! makes its frame mates fresh on the node, a batch still shares one frame, and an
//! on-commit frame delivers one sample per commit of exactly the committed topic.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_master::engine::{NoSink, SampleSink};
use fcan_master::planner::Plan;
use support::{EngineWorld, Fw};

const MD: NodeId = node_id(1);
const fn node_id(raw: u8) -> NodeId {
    match NodeId::new(raw) {
        Some(id) => id,
        None => panic!("not a node id"),
    }
}

/// Motor topics: 0 target, 1 trajectory (both m2s).
const M2S_TOPICS: [u8; 2] = [0, 1];

fn plan(w: &EngineWorld, node: NodeId) -> Plan {
    w.engine.node(node).unwrap().plan.clone().unwrap()
}

/// The generation of every m2s topic of the motor driver, by (block, topic).
fn generations(w: &EngineWorld) -> BTreeMap<(u8, u8), u32> {
    let Fw::Motor(m) = &w.nodes[0] else {
        panic!("node 0 is the motor driver")
    };
    let mut out = BTreeMap::new();
    for block in 0..8u8 {
        for t in M2S_TOPICS {
            let r = m.node.raw().topic(block, t).unwrap();
            out.insert((block, t), r.generation);
        }
    }
    out
}

/// Data frames the master sent since `from` (an index into `master_sent`).
fn data_sent(w: &EngineWorld, from: usize) -> Vec<Frame> {
    w.master_sent[from..]
        .iter()
        .filter(|f| matches!(f.id(), CanId::Standard(_)))
        .copied()
        .collect()
}

fn one_publication_leaves_frame_mates_alone(mtu: Mtu) {
    let mut w = EngineWorld::new(mtu, 1, 0);
    w.provision();
    let before = generations(&w);
    let from = w.master_sent.len();
    for k in 0..20u8 {
        let target = [0, k, 0, 0, 0]; // type 0 (duty), value: a tiny float
        w.engine
            .stage_publish(MD, 0, 0, &target, w.now_us, &mut NoSink)
            .unwrap();
        w.step(1_000, &mut NoSink);
    }
    let after = generations(&w);
    for (key, g) in &after {
        let want = before[key] + if *key == (0, 0) { 20 } else { 0 };
        assert_eq!(*g, want, "{mtu:?}: generation of (block, topic) {key:?}");
    }
    // Every frame carries motor 0's target and, if shared, says so alone.
    let p = plan(&w, MD);
    let (f, _) = p.frames_of(0, 0).next().unwrap();
    let sent = data_sent(&w, from);
    assert_eq!(sent.len(), 20, "{mtu:?}");
    let mine = f
        .entries
        .iter()
        .find(|e| (e.block, e.topic) == (0, 0))
        .unwrap();
    for (k, s) in sent.iter().enumerate() {
        assert_eq!(s.id(), CanId::Standard(f.header.std_id));
        assert_eq!(s.data()[mine.dst_offset as usize + 1], k as u8);
        if f.header.masked {
            let bit =
                fcan_core::presence::bit_of(f.entries.iter().map(|e| (e.block, e.topic)), (0, 0));
            assert_eq!(
                s.data()[0],
                1 << bit.unwrap(),
                "{mtu:?}: motor 0's target alone"
            );
            // The other topics' bytes are zero: nothing stale is re-sent.
            for e in f.entries.iter().filter(|e| (e.block, e.topic) != (0, 0)) {
                let d = e.dst_offset as usize;
                assert!(s.data()[d..d + e.len as usize].iter().all(|&b| b == 0));
            }
        }
    }
    if mtu == Mtu::Fd {
        assert!(
            f.header.masked,
            "on CAN FD motor 0's target shares its frame"
        );
    }
}

#[test]
fn one_publication_leaves_frame_mates_alone_fd() {
    one_publication_leaves_frame_mates_alone(Mtu::Fd);
}

#[test]
fn one_publication_leaves_frame_mates_alone_classic() {
    one_publication_leaves_frame_mates_alone(Mtu::Classic);
}

#[test]
fn a_batch_still_shares_one_frame() {
    let mut w = EngineWorld::new(Mtu::Fd, 1, 0);
    w.provision();
    let p = plan(&w, MD);
    let (f, _) = p.frames_of(0, 0).next().unwrap();
    assert!(f.header.masked && f.entries.len() > 1);
    let before = generations(&w);
    let from = w.master_sent.len();
    // Publish every topic of that frame in one batch.
    for e in &f.entries {
        let size = if e.topic == 0 { 5 } else { 12 };
        w.engine
            .stage_publish(MD, e.block, e.topic, &vec![0; size], w.now_us, &mut NoSink)
            .unwrap();
    }
    w.step(100, &mut NoSink);
    let sent = data_sent(&w, from);
    assert_eq!(sent.len(), 1, "one frame for the batch");
    assert_eq!(sent[0].data()[0] as u32, (1u32 << f.entries.len()) - 1);
    let after = generations(&w);
    for (key, g) in &after {
        let in_frame = f.entries.iter().any(|e| (e.block, e.topic) == *key);
        assert_eq!(*g, before[key] + in_frame as u32, "{key:?}");
    }
}

/// Records every sample the engine delivers.
#[derive(Default)]
struct Record(Vec<(u8, u8, Vec<u8>)>);

impl SampleSink for Record {
    fn sample(&mut self, _node: NodeId, block: u8, topic: u8, bytes: &[u8], _at: u64) {
        self.0.push((block, topic, bytes.to_vec()));
    }
}

/// I/O board blocks: outputs 0..8 (topic 0 `state`), inputs 8..16 (topic 0 `edge`).
const IO: NodeId = node_id(1);
const IN0: u8 = 8;

fn on_commit_frames_deliver_each_commit_once(mtu: Mtu) {
    let mut w = EngineWorld::new(mtu, 0, 1);
    w.provision();
    let p = plan(&w, IO);
    let shared = p
        .frames
        .iter()
        .any(|f| f.header.dir == DataDirection::S2m && f.header.masked);
    if mtu == Mtu::Classic {
        assert!(
            shared,
            "on Classical CAN the I/O board's on-commit topics share"
        );
    }
    // 2.1 s: input k toggles every (k + 1) × 250 ms; no output changes.
    let mut rec = Record::default();
    let start = w.now_us;
    let end = w.now_us + 2_100_000;
    while w.now_us < end {
        w.step(100, &mut rec);
    }
    let states: Vec<_> = rec.0.iter().filter(|s| s.0 < IN0).collect();
    assert!(states.is_empty(), "{mtu:?}: no output changed: {states:?}");
    for k in 0..8u8 {
        let counts: Vec<u32> = rec
            .0
            .iter()
            .filter(|s| s.0 == IN0 + k && s.1 == 0)
            .map(|s| u32::from_le_bytes(s.2[1..5].try_into().unwrap()))
            .collect();
        // One sample per edge, each edge once: the count goes up by one every time.
        let period = 250_000 * (k as u64 + 1);
        let edges = end / period - start / period;
        assert_eq!(counts.len() as u64, edges, "{mtu:?} in{k}");
        assert!(
            counts.windows(2).all(|c| c[1] == c[0] + 1),
            "{mtu:?} in{k}: {counts:?}"
        );
    }
    // Switching output 0 on commits its state once: exactly one sample, of it alone.
    let mut rec = Record::default();
    w.engine.call_service(IO, 0, 0, &[1], w.now_us).unwrap();
    let end = w.now_us + 100_000;
    while w.now_us < end {
        w.step(100, &mut rec);
    }
    let states: Vec<_> = rec.0.iter().filter(|s| s.0 < IN0).collect();
    assert_eq!(states, vec![&(0, 0, vec![1, 0])], "{mtu:?}");
}

#[test]
fn a_mask_naming_a_topic_the_frame_lacks_is_malformed() {
    let mut w = EngineWorld::new(Mtu::Classic, 0, 1);
    w.provision();
    let p = plan(&w, IO);
    let f = p
        .frames
        .iter()
        .find(|f| f.header.dir == DataDirection::S2m && f.header.masked)
        .expect("a shared on-commit frame on Classical CAN");
    let topics = f.entries.len();
    let mut rec = Record::default();
    let send = |w: &mut EngineWorld, rec: &mut Record, mask: u8| {
        let mut data = vec![0u8; f.header.len as usize];
        data[0] = mask;
        let frame = Frame::padded(Mtu::Classic, CanId::Standard(f.header.std_id), &data).unwrap();
        w.engine.handle_frame(&frame, w.now_us, rec);
    };
    let bad = w.engine.stats().rx_malformed;
    send(&mut w, &mut rec, 1 << topics);
    assert_eq!(w.engine.stats().rx_malformed, bad + 1);
    assert!(rec.0.is_empty(), "nothing delivered from a malformed frame");
    // The last topic alone: one sample, of it.
    send(&mut w, &mut rec, 1 << (topics - 1));
    let last = f.entries.last().unwrap();
    assert_eq!(rec.0.len(), 1);
    assert_eq!((rec.0[0].0, rec.0[0].1), (last.block, last.topic));
    assert_eq!(w.engine.stats().rx_malformed, bad + 1);
}

#[test]
fn on_commit_frames_deliver_each_commit_once_classic() {
    on_commit_frames_deliver_each_commit_once(Mtu::Classic);
}

#[test]
fn on_commit_frames_deliver_each_commit_once_fd() {
    on_commit_frames_deliver_each_commit_once(Mtu::Fd);
}
