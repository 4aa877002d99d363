//! Presence masks (`docs/protocol.md` §4.2): a frame shared by several m2s or on-commit
//! topics delivers only the topics whose bit is set in its byte 0 — the node never takes
//! a value nobody published for a fresh command, and never sends a topic nobody
//! committed. FRAME_DEFINE checks the mask rules (§3.7).

mod common;
use common::*;

use fcan_core::msg::*;
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

const M2S: DataDirection = DataDirection::M2s;
const S2M: DataDirection = DataDirection::S2m;

fn masked(index: u8, std_id: u16, dir: DataDirection, len: u8) -> FrameHeader {
    FrameHeader {
        masked: true,
        ..header(index, std_id, dir, len)
    }
}

/// A node acknowledged in `mode` with every block wired (motors 0..3, aux 3..5).
fn all_wired(mode: BusMode) -> Rig {
    let node = Node::new(
        &DESC,
        Buffers::new(),
        NodeConfig {
            node_id: node_id(),
            boot_id: BOOT_ID,
            counts: &[3, 2],
            controller: if mode != BusMode::Classic {
                Controller::Fd
            } else {
                Controller::Classic
            },
        },
    )
    .unwrap();
    let mut rig = Rig::with_node(node);
    rig.boot_and_ack(mode);
    rig
}

fn gen(rig: &Rig, block: u8, topic: u8) -> u32 {
    rig.node.topic(block, topic).unwrap().generation
}

#[test]
fn frame_define_checks_the_mask_rules() {
    let mut rig = all_wired(BusMode::Classic);
    let e = entry;
    let periodic = |h: FrameHeader| FrameHeader {
        period_us: FEEDBACK_PERIOD,
        ..h
    };
    let sequenced = |h: FrameHeader| FrameHeader {
        sequenced: true,
        group_parts: 2,
        ..h
    };
    let naks: Vec<(FrameHeader, Vec<CopyEntry>, (ResultCode, u16))> = vec![
        // Two m2s topics without a mask: the node could not tell which one is fresh.
        (
            header(0, 0x120, M2S, 8),
            vec![e(0, T_CMD, 0, 4, 0), e(1, T_CMD, 0, 4, 4)],
            (ResultCode::BadPlan, 0),
        ),
        // Two on-commit s2m topics without a mask.
        (
            header(0, 0x120, S2M, 8),
            vec![e(0, T_EVENT, 0, 4, 0), e(1, T_EVENT, 0, 4, 4)],
            (ResultCode::BadPlan, 0),
        ),
        // A mask on a single-topic frame (even split over two entries).
        (
            masked(0, 0x120, M2S, 6),
            vec![e(0, T_CMD, 0, 2, 1), e(0, T_CMD, 2, 3, 3)],
            (ResultCode::BadPlan, 0),
        ),
        // A mask on a periodic frame: every period samples every topic.
        (
            periodic(masked(0, 0x120, S2M, 7)),
            vec![e(0, T_FEEDBACK, 0, 3, 1), e(1, T_FEEDBACK, 0, 3, 4)],
            (ResultCode::BadPlan, 0),
        ),
        // A mask on a sequenced group part (one topic, byte 0 is the sequence).
        (
            sequenced(masked(0, 0x120, M2S, 8)),
            vec![e(0, T_SETPOINT, 0, 7, 1)],
            (ResultCode::BadPlan, 0),
        ),
        // An entry on byte 0, which is the mask.
        (
            masked(0, 0x120, M2S, 8),
            vec![e(0, T_CMD, 0, 3, 1), e(1, T_CMD, 0, 4, 0)],
            (ResultCode::BadEntry, 1),
        ),
    ];
    for (i, (h, entries, want)) in naks.iter().enumerate() {
        let r = rig.define(*h, entries);
        assert_eq!((r.code, r.detail), *want, "case {i}: {h:?} {entries:?}");
    }
    // Allowed: a masked m2s or on-commit frame, an unmasked periodic shared frame.
    let oks: Vec<(FrameHeader, Vec<CopyEntry>)> = vec![
        (
            masked(0, 0x120, M2S, 8),
            vec![e(0, T_CMD, 0, 3, 1), e(1, T_CMD, 0, 4, 4)],
        ),
        (
            masked(1, 0x121, S2M, 8),
            vec![e(0, T_EVENT, 0, 4, 1), e(1, T_EVENT, 0, 3, 5)],
        ),
        (
            periodic(header(2, 0x122, S2M, 6)),
            vec![e(0, T_FEEDBACK, 0, 3, 0), e(1, T_FEEDBACK, 0, 3, 3)],
        ),
    ];
    for (h, entries) in &oks {
        assert!(rig.define(*h, entries).is_ack(), "{h:?} {entries:?}");
    }
    assert!(rig.start(3, 0).is_ack());
}

#[test]
fn a_masked_frame_carries_at_most_eight_topics() {
    let mut rig = all_wired(BusMode::FdBrs);
    // Ten m2s topics are wired (cmd and setpoint of five blocks); one byte of each.
    let topics: Vec<(u8, u8)> = (0..5u8)
        .flat_map(|b| [(b, T_CMD), (b, T_SETPOINT)])
        .collect();
    let entries = |n: usize| -> Vec<CopyEntry> {
        topics[..n]
            .iter()
            .enumerate()
            .map(|(i, &(b, t))| entry(b, t, 0, 1, 1 + i as u8))
            .collect()
    };
    let r = rig.define(masked(0, 0x120, M2S, 10), &entries(9));
    assert_eq!((r.code, r.detail), (ResultCode::BadEntry, 8));
    assert!(rig.define(masked(0, 0x120, M2S, 9), &entries(8)).is_ack());
    assert!(rig.start(1, 0).is_ack());
    // The eighth topic's bit is bit 7.
    let mut data = [0u8; 9];
    data[0] = 0x80;
    data[8] = 0xAB;
    rig.inject(rig.data_frame(0x120, &data));
    let (b, t) = topics[7];
    assert_eq!(gen(&rig, b, t), 1);
    assert_eq!(rig.node.topic(b, t).unwrap().bytes[0], 0xAB);
    for &(b, t) in &topics[..7] {
        assert_eq!(gen(&rig, b, t), 0, "block {b} topic {t}");
    }
}

/// Frame 0x120: cmd of block 0 and of block 1 (and on FD the setpoint of block 0) behind
/// a mask, the only frame of the plan. Returns the topics in bit order.
fn shared_m2s_plan(rig: &mut Rig, fd: bool) -> Vec<(u8, u8, usize, usize)> {
    // (block, topic, dst, len)
    let topics: Vec<(u8, u8, usize, usize)> = if fd {
        vec![(0, T_CMD, 1, 5), (1, T_CMD, 6, 5), (0, T_SETPOINT, 11, 12)]
    } else {
        // 7 bytes behind the mask: parts of the two commands.
        vec![(0, T_CMD, 1, 3), (1, T_CMD, 4, 4)]
    };
    let len = topics.iter().map(|t| t.2 + t.3).max().unwrap() as u8;
    let entries: Vec<CopyEntry> = topics
        .iter()
        .map(|&(b, t, d, l)| entry(b, t, 0, l as u8, d as u8))
        .collect();
    assert!(rig.define(masked(0, 0x120, M2S, len), &entries).is_ack());
    assert!(rig.start(1, 0).is_ack());
    topics
}

fn m2s_frame_delivers_only_present_topics(mode: BusMode) {
    let fd = mode != BusMode::Classic;
    let mut rig = all_wired(mode);
    let topics = shared_m2s_plan(&mut rig, fd);
    let len = topics.iter().map(|t| t.2 + t.3).max().unwrap();
    // A frame with every topic's bytes non-zero, and the given mask.
    let frame = |mask: u8, fill: u8| {
        let mut d = vec![fill; len];
        d[0] = mask;
        d
    };
    // Twenty publications of the first topic only.
    for k in 1..=20u8 {
        rig.inject(rig.data_frame(0x120, &frame(0b1, k)));
        let (b, t, _, l) = topics[0];
        assert_eq!(gen(&rig, b, t), k as u32);
        assert_eq!(&rig.node.topic(b, t).unwrap().bytes[..l], &vec![k; l][..]);
    }
    for &(b, t, _, _) in &topics[1..] {
        let r = rig.node.topic(b, t).unwrap();
        assert_eq!(r.generation, 0, "block {b} topic {t} was never published");
        assert!(r.bytes.iter().all(|&x| x == 0), "no value delivered");
    }
    // The second topic alone: the first keeps its generation and value.
    rig.inject(rig.data_frame(0x120, &frame(0b10, 99)));
    assert_eq!(gen(&rig, topics[0].0, topics[0].1), 20);
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().bytes[0], 20);
    assert_eq!(gen(&rig, topics[1].0, topics[1].1), 1);
    // All bits: every topic once.
    let all = ((1u16 << topics.len()) - 1) as u8;
    rig.inject(rig.data_frame(0x120, &frame(all, 7)));
    let gens: Vec<u32> = topics.iter().map(|&(b, t, _, _)| gen(&rig, b, t)).collect();
    let mut want = vec![21, 2];
    want.extend(std::iter::repeat_n(1, topics.len() - 2));
    assert_eq!(gens, want);
    // A bit for a topic the frame does not carry: malformed, nothing applied.
    let bad = rig.node.counters().rx_malformed;
    rig.inject(rig.data_frame(0x120, &frame(all | 1 << topics.len(), 55)));
    assert_eq!(rig.node.counters().rx_malformed, bad + 1);
    let after: Vec<u32> = topics.iter().map(|&(b, t, _, _)| gen(&rig, b, t)).collect();
    assert_eq!(after, want);
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().bytes[0], 7);
    // An empty mask delivers nothing.
    rig.inject(rig.data_frame(0x120, &frame(0, 66)));
    let after: Vec<u32> = topics.iter().map(|&(b, t, _, _)| gen(&rig, b, t)).collect();
    assert_eq!(after, want);
}

#[test]
fn m2s_frame_delivers_only_present_topics_classic() {
    m2s_frame_delivers_only_present_topics(BusMode::Classic);
}

#[test]
fn m2s_frame_delivers_only_present_topics_fd() {
    m2s_frame_delivers_only_present_topics(BusMode::FdBrs);
}

#[test]
fn shared_on_commit_frame_carries_only_committed_topics() {
    let mut rig = all_wired(BusMode::Classic);
    let h = masked(0, 0x210, S2M, 8);
    let es = [entry(0, T_EVENT, 0, 4, 1), entry(1, T_EVENT, 0, 3, 5)];
    assert!(rig.define(h, &es).is_ack());
    // Block 1 commits before START: its bit alone goes out at START.
    rig.node.publish(1, T_EVENT, &[5, 6, 7, 8]).unwrap();
    assert!(rig.start(1, 0).is_ack());
    let sent = |rig: &Rig| -> Vec<Vec<u8>> {
        rig.data_with_id(0x210)
            .iter()
            .map(|(_, f)| f.data().to_vec())
            .collect()
    };
    assert_eq!(sent(&rig), vec![vec![0b10, 0, 0, 0, 0, 5, 6, 7]]);
    // Block 0 commits: only its bit and bytes, block 1's stay zero.
    rig.node.publish(0, T_EVENT, &[1, 2, 3, 4]).unwrap();
    rig.poll();
    assert_eq!(sent(&rig)[1], vec![0b01, 1, 2, 3, 4, 0, 0, 0]);
    // Nothing committed: nothing sent.
    rig.advance(50_000);
    assert_eq!(sent(&rig).len(), 2);
    // Both commit between two polls: one frame, both bits.
    rig.node.publish(1, T_EVENT, &[9, 9, 9, 9]).unwrap();
    rig.node.publish(0, T_EVENT, &[4, 3, 2, 1]).unwrap();
    rig.poll();
    assert_eq!(sent(&rig)[2], vec![0b11, 4, 3, 2, 1, 9, 9, 9]);
    assert_eq!(sent(&rig).len(), 3);
}

#[test]
fn a_refused_masked_frame_keeps_its_pending_topics() {
    let mut rig = all_wired(BusMode::Classic);
    let h = masked(0, 0x210, S2M, 8);
    let es = [entry(0, T_EVENT, 0, 4, 1), entry(1, T_EVENT, 0, 3, 5)];
    assert!(rig.define(h, &es).is_ack());
    assert!(rig.start(1, 0).is_ack());
    rig.take();
    rig.bus.refuse_all = true;
    rig.node.publish(0, T_EVENT, &[1, 1, 1, 1]).unwrap();
    rig.poll();
    rig.node.publish(1, T_EVENT, &[2, 2, 2, 2]).unwrap();
    rig.poll();
    assert!(rig.data_with_id(0x210).is_empty());
    rig.bus.refuse_all = false;
    rig.poll();
    let sent = rig.data_with_id(0x210);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1.data(), &[0b11, 1, 1, 1, 1, 2, 2, 2]);
}

#[test]
fn the_mask_costs_no_plan_ram() {
    // The masked flag and the pending bits fit where the frame had padding and a `dirty`
    // flag: 20 bytes a frame, as before (docs/performance.md). A copy entry is kept in its
    // 6-byte wire form.
    assert_eq!(core::mem::size_of::<PlanFrame>(), 20);
    assert_eq!(core::mem::size_of::<PlanEntry>(), 6);
    // The staging progress of a topic is three bytes beside the flag: 12 bytes a topic.
    assert_eq!(core::mem::size_of::<TopicState>(), 12);
}
