//! Master and node assemble every sequenced group the same way (issue 15, part 1): for
//! arbitrary topic sizes, arbitrary plans (a topic cut into pieces placed in any part,
//! in any order, at any frame offset) and arbitrary arrival orders (lost, repeated and
//! reordered parts, publications overtaking each other), on Classical CAN and CAN FD,
//! the node (`fcan-runtime-nostd`, fed the frames) and the master's decoder
//! (`fcan_master::observer::Observer`, fed the same frames) deliver the same values in
//! the same order. Both use `fcan_core::group`; before it the master appended parts in
//! arrival order and ignored the source offsets.

use std::sync::Arc;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_fake::{FakeSchema, VecStorage};
use fcan_master::cache::{BlobStore, MemoryStore};
use fcan_master::observer::{Observation, Observer};
use fcan_master::value::Value;
use fcan_runtime_nostd::codegen::{Dispatch, ServiceCall, ServiceOutcome};
use fcan_runtime_nostd::{Context, Controller, Event, Node, NodeConfig, Transmit, TxRefused};
use proptest::prelude::*;

const NODE: u8 = 3;
const BOOT_ID: u32 = 0x5EED_0003;
const SESSION: u32 = 0x0BAD_CAFE;

struct App;
impl Dispatch for App {
    fn service(&mut self, _: &mut Context<'_>, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome {
        ServiceOutcome::Failed
    }
    fn params_changed(&mut self, _: &mut Context<'_>, _: u8, _: u32) {}
    fn event(&mut self, _: Event) {}
}

#[derive(Default)]
struct Bus(Vec<Frame>);
impl Transmit for Bus {
    fn transmit(&mut self, f: &Frame) -> Result<(), TxRefused> {
        self.0.push(*f);
        Ok(())
    }
}

/// The blob of a node with one m2s topic of `size` bytes (`x: u8[size]`).
fn schema(size: usize) -> Arc<FakeSchema> {
    let dir = std::env::temp_dir().join(format!("fcan-group-{}-{size}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grp.yaml");
    std::fs::write(
        &file,
        format!(
            "node: grp{{i}}\nprotocol: 2\nlimits: {{ max_frames: 32, max_copy_entries: 128, \
             service_buffer: 0, service_reassembly: 1 }}\ntypes:\n  T:\n    topics:\n      \
             cmd:\n        dir: m2s\n        fields:\n          x: {{ type: u8, len: {size} }}\n\
             instances:\n  - {{ type: T, max_count: 1, ns: \"t{{i}}\" }}\n"
        ),
    )
    .unwrap();
    let out = fcan_codegen::compile_files(&[&file]).expect("the test schema compiles");
    FakeSchema::from_blob(&out.blob).expect("the test schema runs")
}

/// One part of the plan: its copy entries `(source offset, frame offset, length)`.
type Part = Vec<(u16, u8, u8)>;

/// Cuts `size` bytes into pieces and places them in parts of at most `room` payload bytes
/// (after the sequence byte), each piece at the next free frame offset of its part.
/// `cuts` and `order` come from the strategy: where the pieces end, and which part each
/// goes to.
fn plan(size: usize, room: usize, cuts: &[usize], order: &[usize]) -> Vec<Part> {
    let mut ends: Vec<usize> = cuts.iter().map(|c| 1 + c % size).collect();
    ends.push(size);
    ends.sort_unstable();
    ends.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for e in ends {
        // A piece never longer than a part holds.
        while e - start > room {
            pieces.push((start, room));
            start += room;
        }
        if e > start {
            pieces.push((start, e - start));
            start = e;
        }
    }
    // Shuffle the pieces by the strategy's order, then fill parts first-fit.
    let mut keyed: Vec<(usize, (usize, usize))> = pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| (order.get(i).copied().unwrap_or(i), p))
        .collect();
    keyed.sort_by_key(|(k, _)| *k);
    let mut parts: Vec<(usize, Part)> = Vec::new();
    for (_, (src, len)) in keyed {
        let slot = parts.iter_mut().find(|(used, _)| used + len <= room);
        let (used, part) = match slot {
            Some(s) => s,
            None => {
                parts.push((0, Vec::new()));
                parts.last_mut().unwrap()
            }
        };
        part.push((src as u16, (1 + *used) as u8, len as u8));
        *used += len;
    }
    parts.into_iter().map(|(_, p)| p).collect()
}

/// The node and the observer, fed the same frames.
struct Pair {
    node: Node<VecStorage>,
    observer: Observer,
    bus: Bus,
    now: u32,
    transfer: u8,
    replies: ReassemblyPool<4, 8192>,
    /// Values the observer delivered for the topic.
    observed: Vec<Vec<u8>>,
}

impl Pair {
    fn new(s: &Arc<FakeSchema>) -> Pair {
        let store = MemoryStore::new();
        store
            .store(fcan_core::hash::SchemaDigest::of(s.desc.blob), s.desc.blob)
            .unwrap();
        let node = Node::new(
            s.desc,
            VecStorage::new(s.desc, &s.arena),
            NodeConfig {
                node_id: NodeId::new(NODE).unwrap(),
                boot_id: BOOT_ID,
                counts: &[1],
                controller: Controller::Fd,
            },
        )
        .unwrap();
        Pair {
            node,
            observer: Observer::new(Some(Box::new(store))),
            bus: Bus::default(),
            now: 1_000,
            transfer: 0,
            replies: ReassemblyPool::new(),
            observed: Vec::new(),
        }
    }

    fn observe(&mut self, f: &Frame) {
        let observed = &mut self.observed;
        self.observer.push(f, self.now as u64, &mut |o| {
            if let Observation::Sample(s) = o {
                observed.push(bytes_of(&s.value));
            }
        });
    }

    /// A frame from the master: to the node and to the observer.
    fn deliver(&mut self, f: &Frame) {
        self.node.receive(f, self.now);
        self.observe(f);
    }

    /// Polls the node, shows what it sent to the observer, returns its complete replies.
    fn poll(&mut self) -> Vec<(ConfigId, Vec<u8>)> {
        self.node.poll(self.now, &mut self.bus, &mut App);
        let sent: Vec<Frame> = self.bus.0.drain(..).collect();
        let mut out = Vec::new();
        for f in &sent {
            self.observe(f);
            if let Ok(id) = ConfigId::from_can_id(f.id()) {
                if let Ok(Some(p)) = self.replies.push(id, f.data(), self.now) {
                    out.push((id, p.to_vec()));
                }
            }
        }
        out
    }

    /// Sends a master message and returns the node's answer: the complete messages it
    /// sent within 10 ms.
    fn exchange(&mut self, msg: ConfigMessage<'_>) -> Vec<(ConfigId, Vec<u8>)> {
        self.transfer = self.transfer.wrapping_add(1);
        let mut buf = vec![0u8; 1024];
        let n = msg.encode(&mut buf).unwrap();
        let id = ConfigId::single(
            msg.opcode(),
            Direction::ToNode,
            NodeId::new(NODE).unwrap(),
            self.transfer,
        );
        for f in Segmenter::new(id, Mtu::Classic, &buf[..n], &[]).unwrap() {
            self.deliver(&f);
        }
        let mut out = Vec::new();
        for _ in 0..10 {
            out.extend(self.poll());
            self.now += 1_000;
        }
        out
    }

    /// Sends a command and returns the node's RESULT to it.
    fn command(&mut self, msg: ConfigMessage<'_>) -> CommandResult {
        let replies = self.exchange(msg);
        for (id, p) in replies {
            if id.opcode == Opcode::Result && id.transfer == self.transfer {
                if let Ok(ConfigMessage::Result(r)) =
                    ConfigMessage::decode(Opcode::Result, Direction::ToMaster, &p)
                {
                    return r;
                }
            }
        }
        panic!("no RESULT to {msg:?}");
    }

    /// Boot, ANNOUNCE, ANNOUNCE_ACK, the plan, START.
    fn provision(&mut self, mode: BusMode, parts: &[Part], mtu: usize) {
        let mut announced = false;
        for _ in 0..100 {
            self.now += 10_000;
            announced |= self
                .poll()
                .iter()
                .any(|(id, _)| id.opcode == Opcode::Discover);
            if announced {
                break;
            }
        }
        assert!(announced, "the node never announced");
        // A heartbeat confirms the acknowledgement.
        let replies = self.exchange(ConfigMessage::AnnounceAck(AnnounceAck {
            boot_id: BOOT_ID,
            session: SESSION,
            mode,
        }));
        assert!(
            replies.iter().any(|(id, _)| id.opcode == Opcode::Heartbeat),
            "{replies:?}"
        );
        for (k, part) in parts.iter().enumerate() {
            let entries: Vec<CopyEntry> = part
                .iter()
                .map(|&(src, dst, len)| CopyEntry {
                    block: 0,
                    topic: 0,
                    src_offset: src,
                    len,
                    dst_offset: dst,
                })
                .collect();
            let len = part.iter().map(|&(_, d, l)| d + l).max().unwrap();
            assert!(len as usize <= mtu);
            let r = self.command(ConfigMessage::FrameDefine(FrameDefine {
                header: FrameHeader {
                    index: k as u8,
                    std_id: 0x100 + k as u16,
                    dir: DataDirection::M2s,
                    sequenced: true,
                    masked: false,
                    len,
                    group_parts: parts.len() as u8,
                    group_index: k as u8,
                    period_us: 0,
                },
                entries: Entries::List(&entries),
            }));
            assert!(r.is_ack(), "part {k}: {r:?} for {part:?}");
        }
        let r = self.command(ConfigMessage::Start(Start {
            frame_count: parts.len() as u8,
            master_timeout_ms: 0,
        }));
        assert!(r.is_ack(), "{r:?}");
    }
}

fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::Struct(fields) => bytes_of(&fields[0].1),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::UInt(u) => *u as u8,
                other => panic!("not a byte: {other:?}"),
            })
            .collect(),
        other => panic!("not the test topic: {other:?}"),
    }
}

/// The data frame of part `k` of publication `value` with sequence byte `seq`.
fn part_frame(mtu: Mtu, parts: &[Part], k: usize, seq: u8, value: &[u8]) -> Frame {
    let len = parts[k].iter().map(|&(_, d, l)| d + l).max().unwrap() as usize;
    let mut data = vec![0u8; len];
    data[0] = seq;
    for &(src, dst, l) in &parts[k] {
        let (s, d, l) = (src as usize, dst as usize, l as usize);
        data[d..d + l].copy_from_slice(&value[s..s + l]);
    }
    Frame::padded(mtu, CanId::Standard(0x100 + k as u16), &data).unwrap()
}

/// What arrives: publication `pubs[i]` part `k`, in the strategy's order.
fn run_case(fd: bool, size: usize, cuts: Vec<usize>, order: Vec<usize>, arrivals: Vec<(u8, u8)>) {
    let (mtu, room, mode) = if fd {
        (Mtu::Fd, 63, BusMode::Fd)
    } else {
        (Mtu::Classic, 7, BusMode::Classic)
    };
    let s = schema(size);
    let parts = plan(size, room, &cuts, &order);
    if parts.len() < 2 || parts.len() > 32 {
        // One part is not a group; more than the schema's frames cannot be planned.
        return;
    }
    let mut pair = Pair::new(&s);
    pair.provision(mode, &parts, mtu.payload());
    pair.observed.clear();

    let mut delivered_by_node = Vec::new();
    let mut generation = pair.node.topic(0, 0).unwrap().generation;
    for (publication, part) in arrivals {
        let k = part as usize % parts.len();
        // Publication p's value: every byte p + its index, so values differ per byte.
        let value: Vec<u8> = (0..size)
            .map(|i| publication.wrapping_mul(31).wrapping_add(i as u8))
            .collect();
        let f = part_frame(mtu, &parts, k, publication, &value);
        pair.now += 100;
        pair.deliver(&f);
        let t = pair.node.topic(0, 0).unwrap();
        if t.generation != generation {
            generation = t.generation;
            delivered_by_node.push(t.bytes.to_vec());
        }
    }
    assert_eq!(
        delivered_by_node, pair.observed,
        "plan {parts:?}: the node and the master delivered different values"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn master_and_node_assemble_groups_alike_classic(
        size in 9usize..40,
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        order in proptest::collection::vec(0usize..16, 0..16),
        arrivals in proptest::collection::vec((0u8..4, 0u8..8), 1..60),
    ) {
        run_case(false, size, cuts, order, arrivals);
    }

    #[test]
    fn master_and_node_assemble_groups_alike_fd(
        size in 64usize..200,
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        order in proptest::collection::vec(0usize..16, 0..16),
        arrivals in proptest::collection::vec((0u8..4, 0u8..8), 1..60),
    ) {
        run_case(true, size, cuts, order, arrivals);
    }
}

/// The arrivals above rarely happen to be a whole publication in order; make sure the
/// comparison is not vacuous: in-order publications are delivered by both.
#[test]
fn in_order_publications_are_delivered_by_both() {
    let arrivals: Vec<(u8, u8)> = (0..3u8)
        .flat_map(|p| (0..8u8).map(move |k| (p, k)))
        .collect();
    let size = 20;
    let s = schema(size);
    let parts = plan(size, 7, &[5, 12], &[2, 0, 1]);
    assert!(parts.len() >= 3);
    let mut pair = Pair::new(&s);
    pair.provision(BusMode::Classic, &parts, 8);
    pair.observed.clear();
    let mut by_node = 0;
    let mut generation = pair.node.topic(0, 0).unwrap().generation;
    for (p, k) in arrivals {
        if k as usize >= parts.len() {
            continue;
        }
        let value: Vec<u8> = (0..size).map(|i| p * 40 + i as u8).collect();
        pair.now += 100;
        pair.deliver(&part_frame(Mtu::Classic, &parts, k as usize, p, &value));
        let t = pair.node.topic(0, 0).unwrap();
        if t.generation != generation {
            generation = t.generation;
            by_node += 1;
            assert_eq!(t.bytes, &value[..]);
        }
    }
    assert_eq!(by_node, 3);
    assert_eq!(pair.observed.len(), 3);
}
