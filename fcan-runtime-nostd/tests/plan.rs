//! FRAME_DEFINE (good and every NAK reason), START, and the data plane: m2s topics with
//! generation/age, whole-or-nothing groups, periodic and on-commit s2m frames, classic
//! and FD bus modes.

mod common;
use common::*;

use fcan_core::frame::{CanId, Mtu};
use fcan_core::msg::*;
use fcan_runtime_nostd::*;

const M2S: DataDirection = DataDirection::M2s;
const S2M: DataDirection = DataDirection::S2m;

fn provisioned() -> Rig {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig
}

fn nak(r: CommandResult) -> (ResultCode, u16) {
    assert_eq!(r.opcode, fcan_core::id::Opcode::FrameDefine);
    (r.code, r.detail)
}

#[test]
fn frame_define_before_ack_is_bad_state() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    let r = rig.define(header(0, 0x120, M2S, 5), &[entry(0, T_CMD, 0, 5, 0)]);
    assert_eq!(r.code, ResultCode::BadState);
}

/// One FRAME_DEFINE NAK reason: on a node whose plan holds frame 0 (0x120, block 0's
/// cmd), defining frame `h` with `entries` is refused with `want` (code, detail), one
/// NAK is counted, and nothing changed: the plan still has exactly frame 0, so START(1)
/// works and the frame still maps 0x120 to block 0's cmd.
fn refused_and_nothing_changed(h: FrameHeader, entries: &[CopyEntry], want: (ResultCode, u16)) {
    let mut rig = provisioned();
    assert!(rig
        .define(header(0, 0x120, M2S, 5), &[entry(0, T_CMD, 0, 5, 0)])
        .is_ack());
    let r = rig.define(h, entries);
    assert_eq!(nak(r), want, "{h:?} {entries:?}");
    assert_eq!(rig.node.counters().naks_sent, 1);
    assert!(rig.start(1, 0).is_ack());
    rig.inject(rig.data_frame(0x120, &[1, 2, 3, 4, 5]));
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().bytes, &[1, 2, 3, 4, 5]);
}

/// One test per NAK reason, so a failure names the reason (`frame_define_nak::…`).
macro_rules! frame_define_naks {
    ($($name:ident: $h:expr, $entries:expr => $want:expr;)+) => {
        mod frame_define_nak {
            use super::*;
            $(
                #[test]
                fn $name() {
                    refused_and_nothing_changed($h, &$entries, $want);
                }
            )+
        }
    };
}

/// `entry` under a short name, for the table.
fn e(block: u8, topic: u8, src_offset: u16, len: u8, dst_offset: u8) -> CopyEntry {
    entry(block, topic, src_offset, len, dst_offset)
}

frame_define_naks! {
    // The index must append to the plan.
    index_not_appended: header(2, 0x121, M2S, 5), [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadPlan, 0);
    // The std id must lie in the data range (below it, above it) and be free.
    std_id_below_the_data_range: header(1, 0x0FF, M2S, 5), [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadStdId, 0);
    std_id_above_the_data_range: header(1, 0x400, M2S, 5), [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadStdId, 0);
    std_id_taken: header(1, 0x120, M2S, 5), [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadStdId, 0);
    // Length: 0 or above the classic MTU.
    length_zero: header(1, 0x121, M2S, 0), [] => (ResultCode::BadLength, 0);
    length_above_the_classic_mtu: header(1, 0x121, M2S, 9), [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadLength, 0);
    // Too many entries (16 allowed, 1 used).
    too_many_entries: header(1, 0x121, M2S, 8), [e(1, T_CMD, 0, 1, 0); 16]
        => (ResultCode::LimitEntries, 16);
    // Unknown block, unwired block (first or later entry), unknown topic.
    unknown_block: header(1, 0x121, M2S, 5), [e(9, T_CMD, 0, 5, 0)]
        => (ResultCode::BadEntry, 0);
    unwired_block: header(1, 0x121, M2S, 5), [e(2, T_CMD, 0, 5, 0)]
        => (ResultCode::NotWired, 0);
    unwired_block_in_the_second_entry:
        header(1, 0x121, M2S, 8), [e(1, T_CMD, 0, 2, 0), e(4, T_CMD, 0, 2, 2)]
        => (ResultCode::NotWired, 1);
    unknown_topic: header(1, 0x121, M2S, 5), [e(1, 7, 0, 5, 0)]
        => (ResultCode::BadEntry, 0);
    // An s2m topic in an m2s frame.
    direction_mismatch: header(1, 0x121, M2S, 6), [e(1, T_FEEDBACK, 0, 6, 0)]
        => (ResultCode::BadEntry, 0);
    // An entry past the end of the topic, past the end of the frame.
    entry_past_the_end_of_the_topic: header(1, 0x121, M2S, 8), [e(1, T_CMD, 1, 5, 0)]
        => (ResultCode::BadEntry, 0);
    entry_past_the_end_of_the_frame: header(1, 0x121, M2S, 5), [e(1, T_CMD, 0, 5, 1)]
        => (ResultCode::BadEntry, 0);
    zero_length_entry: header(1, 0x121, M2S, 5), [e(1, T_CMD, 0, 0, 0)]
        => (ResultCode::BadEntry, 0);
    overlapping_entries:
        header(1, 0x121, M2S, 8), [e(1, T_CMD, 0, 3, 0), e(1, T_CMD, 3, 2, 2)]
        => (ResultCode::BadEntry, 1);
    m2s_with_a_period:
        FrameHeader { period_us: 5, ..header(1, 0x121, M2S, 5) }, [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadPlan, 0);
    // Groups: parts 0, index ≥ parts, multi-part unsequenced.
    group_of_zero_parts:
        FrameHeader { group_parts: 0, ..header(1, 0x121, M2S, 5) }, [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadPlan, 0);
    group_index_not_below_parts:
        FrameHeader { group_index: 1, ..header(1, 0x121, M2S, 5) }, [e(1, T_CMD, 0, 5, 0)]
        => (ResultCode::BadPlan, 0);
    multi_part_group_unsequenced:
        FrameHeader { group_parts: 2, ..header(1, 0x121, M2S, 8) }, [e(1, T_SETPOINT, 0, 7, 1)]
        => (ResultCode::BadPlan, 0);
    // Sequenced: byte 0 is the sequence number.
    sequenced_entry_over_the_sequence_byte:
        sequenced_group(), [e(1, T_SETPOINT, 0, 7, 0)]
        => (ResultCode::BadEntry, 0);
    // A group carries one topic.
    group_of_two_topics:
        sequenced_group(), [e(1, T_SETPOINT, 0, 4, 1), e(1, T_CMD, 0, 3, 5)]
        => (ResultCode::BadEntry, 1);
    // An m2s group needs a topic with staging.
    m2s_group_of_an_unstaged_topic: sequenced_group(), [e(1, T_CMD, 0, 5, 1)]
        => (ResultCode::BadEntry, 0);
}

/// Frame 1 as the first part of a sequenced two-part m2s group, 8 bytes.
fn sequenced_group() -> FrameHeader {
    FrameHeader {
        sequenced: true,
        masked: false,
        group_parts: 2,
        ..header(1, 0x121, M2S, 8)
    }
}

#[test]
fn frame_limit_nak() {
    let mut rig = provisioned();
    for i in 0..8u8 {
        let r = rig.define(header(i, 0x200 + i as u16, S2M, 1), &[]);
        assert!(r.is_ack(), "{i}: {r:?}");
    }
    let r = rig.define(header(8, 0x300, S2M, 1), &[]);
    assert_eq!(nak(r), (ResultCode::LimitFrames, 8));
    assert!(rig.start(8, 0).is_ack());
}

#[test]
fn start_checks_the_plan() {
    let mut rig = provisioned();
    let g = |index, id, gi| FrameHeader {
        index,
        std_id: id,
        dir: M2S,
        sequenced: true,
        masked: false,
        len: 8,
        group_parts: 2,
        group_index: gi,
        period_us: 0,
    };
    // Wrong count.
    assert!(rig
        .define(header(0, 0x120, M2S, 5), &[entry(0, T_CMD, 0, 5, 0)])
        .is_ack());
    assert_eq!(rig.start(2, 0).code, ResultCode::BadPlan);
    // Incomplete group.
    assert!(rig
        .define(g(1, 0x130, 0), &[entry(0, T_SETPOINT, 0, 7, 1)])
        .is_ack());
    assert_eq!(rig.start(2, 0).code, ResultCode::BadPlan);
    // Group parts out of order.
    assert!(rig
        .define(g(2, 0x131, 0), &[entry(0, T_SETPOINT, 7, 5, 1)])
        .is_ack());
    assert_eq!(rig.start(3, 0).code, ResultCode::BadPlan);
    // Restart the plan (index 0 clears it) and do it right.
    assert!(rig
        .define(header(0, 0x120, M2S, 5), &[entry(0, T_CMD, 0, 5, 0)])
        .is_ack());
    assert!(rig
        .define(g(1, 0x130, 0), &[entry(0, T_SETPOINT, 0, 7, 1)])
        .is_ack());
    assert!(rig
        .define(g(2, 0x131, 1), &[entry(0, T_SETPOINT, 7, 5, 1)])
        .is_ack());
    assert_eq!(rig.node.state(), NodeState::Provisioned);
    assert!(rig.start(3, 0).is_ack());
    assert_eq!(rig.node.state(), NodeState::Running);
    // A retried START while running is answered the same way.
    assert!(rig.start(3, 0).is_ack());
    assert_eq!(
        rig.app
            .events
            .iter()
            .filter(|e| **e == Event::Started)
            .count(),
        1
    );
    // Appending while running is refused; index 0 resets the plan.
    assert_eq!(
        rig.define(header(3, 0x140, M2S, 5), &[]).code,
        ResultCode::BadState
    );
    assert!(rig
        .define(header(0, 0x140, M2S, 5), &[entry(1, T_CMD, 0, 5, 0)])
        .is_ack());
    assert_eq!(rig.node.state(), NodeState::Provisioned);
    assert_eq!(rig.app.events.last(), Some(&Event::PlanReset));
}

#[test]
fn start_before_ack_is_bad_state() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    assert_eq!(rig.start(0, 0).code, ResultCode::BadState);
}

#[test]
fn m2s_frames_update_topics_with_generation_and_age() {
    let mut rig = running_rig();
    let r0 = rig.node.topic(0, T_CMD).unwrap();
    assert_eq!(r0.generation, 0);
    assert_eq!(r0.bytes, &[0; 5]);
    let t = rig.now;
    rig.inject(rig.data_frame(0x120, &[1, 2, 3, 4, 5]));
    let r = rig.node.topic(0, T_CMD).unwrap();
    assert_eq!(r.bytes, &[1, 2, 3, 4, 5]);
    assert_eq!(r.generation, 1);
    assert_eq!(r.received_at_us, t);
    assert_eq!(r.age_us(t + 2_500), 2_500);
    rig.inject(rig.data_frame(0x120, &[9, 9, 9, 9, 9, 7, 7, 7]));
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, 2);
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().bytes, &[9; 5]);
    // Short frame: malformed, no update.
    let c = rig.node.counters().rx_malformed;
    rig.inject(rig.data_frame(0x120, &[1, 2]));
    assert_eq!(rig.node.counters().rx_malformed, c + 1);
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, 2);
    // Unknown data id: ignored.
    let c = rig.node.counters().rx_ignored;
    rig.inject(rig.data_frame(0x1FF, &[1]));
    assert_eq!(rig.node.counters().rx_ignored, c + 1);
    // Unwired or unknown blocks have no topic.
    assert!(rig.node.topic(2, T_CMD).is_none());
    assert!(rig.node.topic(0, 9).is_none());
    assert!(rig.node.topic(77, 0).is_none());
}

#[test]
fn data_before_running_is_ignored_not_an_error() {
    // Items 12/18 of issue 10: before START a node cannot tell its m2s frames from
    // the other nodes' data on a shared bus, so neither counts as trouble.
    let mut rig = Rig::new(false);
    rig.poll();
    // In the listen window, unacknowledged, provisioned: other nodes' data (s2m ids of
    // the standard plan's range and others) and the master's broadcasts.
    let foreign = |rig: &mut Rig| {
        for id in [0x100u16, 0x120, 0x131, 0x200, 0x3FF] {
            rig.inject(rig.data_frame(id, &[9; 8]));
        }
        rig.master_heartbeat();
    };
    foreign(&mut rig);
    rig.advance(listen_end() + 1_000);
    foreign(&mut rig);
    rig.ack(BusMode::Classic);
    standard_plan(&mut rig);
    foreign(&mut rig);
    rig.inject(rig.data_frame(0x120, &[1, 2, 3, 4, 5]));
    let c = rig.node.counters();
    assert_eq!(c.error_summary(), 0, "{c:?}");
    assert_eq!(c.rx_bad_state, 0, "{c:?}");
    assert!(c.rx_ignored >= 16, "{c:?}");
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, 0);
    // Running: other nodes' data is still ignored, ours applied, nothing is an error.
    assert!(rig.start(5, 0).is_ack());
    let ignored = rig.node.counters().rx_ignored;
    for id in [0x100u16, 0x200, 0x3FF] {
        rig.inject(rig.data_frame(id, &[9; 8]));
    }
    rig.inject(rig.data_frame(0x120, &[1, 2, 3, 4, 5]));
    rig.master_heartbeat();
    let c = rig.node.counters();
    assert_eq!(c.rx_ignored, ignored + 3, "{c:?}");
    assert_eq!(c.error_summary(), 0, "{c:?}");
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, 1);
}

#[test]
fn unicast_while_listening_is_bad_state() {
    // A master still talking to the node's previous boot: lost, and counted.
    let mut rig = Rig::new(false);
    rig.poll();
    rig.send(ConfigMessage::StatsRead);
    assert!(rig.take().is_empty());
    assert_eq!(rig.node.counters().rx_bad_state, 1);
}

#[test]
fn period_up_to_2_pow_31_minus_1_is_accepted_and_scheduled() {
    use fcan_core::timing::MAX_PERIOD_US;
    assert_eq!(MAX_PERIOD_US, (1u32 << 31) - 1);
    let mut fb = header(0, 0x200, S2M, 6);
    let entries = [entry(0, T_FEEDBACK, 0, 6, 0)];
    // 2^31 and anything longer: NAK BAD_PLAN, nothing defined.
    for period in [1u32 << 31, (1 << 31) + 1, u32::MAX] {
        let mut rig = provisioned();
        fb.period_us = period;
        assert_eq!(nak(rig.define(fb, &entries)), (ResultCode::BadPlan, 0));
        assert_eq!(
            rig.start(1, 0).code,
            ResultCode::BadPlan,
            "nothing was defined"
        );
    }
    // 2^31 - 1: accepted, sent at START and not again for 2^31 - 1 µs.
    let mut rig = provisioned();
    fb.period_us = MAX_PERIOD_US;
    assert!(rig.define(fb, &entries).is_ack());
    assert!(rig.start(1, 0).is_ack());
    rig.advance(20_000);
    assert_eq!(rig.data_with_id(0x200).len(), 1);
    // Far along the clock (polled every 10 s, wrapping included), still one frame...
    for _ in 0..214 {
        rig.now = rig.now.wrapping_add(10_000_000);
        rig.poll();
    }
    assert_eq!(rig.data_with_id(0x200).len(), 1);
    // ... until the period has passed.
    rig.now = rig.now.wrapping_add(10_000_000);
    rig.poll();
    assert_eq!(rig.data_with_id(0x200).len(), 2);
}

fn setpoint_parts(seq: u8, value: &[u8; 12]) -> ([u8; 8], [u8; 6]) {
    let mut a = [0u8; 8];
    a[0] = seq;
    a[1..].copy_from_slice(&value[..7]);
    let mut b = [0u8; 6];
    b[0] = seq;
    b[1..].copy_from_slice(&value[7..]);
    (a, b)
}

#[test]
fn multi_frame_group_whole_or_nothing() {
    let mut rig = running_rig();
    let v1: [u8; 12] = core::array::from_fn(|i| i as u8 + 1);
    let (a, b) = setpoint_parts(7, &v1);
    // Part 0 alone: nothing visible.
    rig.inject(rig.data_frame(0x130, &a));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 0);
    rig.inject(rig.data_frame(0x131, &b));
    let r = rig.node.topic(0, T_SETPOINT).unwrap();
    assert_eq!(r.bytes, &v1);
    assert_eq!(r.generation, 1);

    // Lose the middle (here: the second of two) part, then a new group starts: no update
    // from the lost one, the new one lands whole.
    let v2 = [0xAA; 12];
    let (a2, _b2) = setpoint_parts(8, &v2);
    rig.inject(rig.data_frame(0x130, &a2));
    let v3 = [0xBB; 12];
    let (a3, b3) = setpoint_parts(9, &v3);
    rig.inject(rig.data_frame(0x130, &a3));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().bytes, &v1);
    rig.inject(rig.data_frame(0x131, &b3));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().bytes, &v3);
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 2);

    // Torn mix: part 0 of one publication, part 1 of another (different seq): dropped.
    let drops = rig.node.counters().reassembly_dropped;
    let (a4, _) = setpoint_parts(10, &[0x44; 12]);
    let (_, b5) = setpoint_parts(11, &[0x55; 12]);
    rig.inject(rig.data_frame(0x130, &a4));
    rig.inject(rig.data_frame(0x131, &b5));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().bytes, &v3);
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 2);
    assert!(rig.node.counters().reassembly_dropped > drops);

    // Last part without a first: dropped.
    let (_, b6) = setpoint_parts(12, &[0x66; 12]);
    rig.inject(rig.data_frame(0x131, &b6));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 2);

    // Duplicate last part after completion: no second update.
    let v7 = [0x77; 12];
    let (a7, b7) = setpoint_parts(13, &v7);
    rig.inject(rig.data_frame(0x130, &a7));
    rig.inject(rig.data_frame(0x131, &b7));
    rig.inject(rig.data_frame(0x131, &b7));
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().bytes, &v7);
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 3);
}

#[test]
fn periodic_s2m_at_the_right_times() {
    let mut rig = running_rig();
    let t0 = rig.now;
    rig.node
        .publish(0, T_FEEDBACK, &[1, 2, 3, 4, 5, 6])
        .unwrap();
    rig.advance(55_000);
    let fb = rig.data_with_id(0x200);
    let times: Vec<u32> = fb.iter().map(|(t, _)| t - t0).collect();
    // Due at START (which happened at t0), then every 10 ms.
    assert_eq!(times, vec![0, 10_000, 20_000, 30_000, 40_000, 50_000]);
    assert_eq!(fb.last().unwrap().1.data(), &[1, 2, 3, 4, 5, 6]);
    assert!(fb.iter().all(|(_, f)| !f.is_fd()));
}

#[test]
fn periodic_s2m_first_frame_at_start() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    let t0 = rig.now;
    assert!(rig.start(5, 0).is_ack());
    rig.advance(35_000);
    let times: Vec<u32> = rig
        .data_with_id(0x200)
        .iter()
        .map(|(t, _)| t - t0)
        .collect();
    assert_eq!(times, vec![0, 10_000, 20_000, 30_000]);
}

#[test]
fn on_commit_s2m_after_publish_and_held_before_running() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    // Published before START: held...
    rig.node.publish(0, T_EVENT, &[1, 2, 3, 4]).unwrap();
    rig.advance(5_000);
    assert!(rig.data_with_id(0x210).is_empty());
    // ... and sent at the first chance.
    assert!(rig.start(5, 0).is_ack());
    let ev = rig.data_with_id(0x210);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].1.data(), &[1, 2, 3, 4]);
    // Nothing more until the next publish.
    rig.advance(50_000);
    assert_eq!(rig.data_with_id(0x210).len(), 1);
    rig.node.publish(0, T_EVENT, &[5, 6, 7, 8]).unwrap();
    rig.poll();
    let ev = rig.data_with_id(0x210);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[1].1.data(), &[5, 6, 7, 8]);
    // Two publishes between polls: one frame with the latest value.
    rig.node.publish(0, T_EVENT, &[1; 4]).unwrap();
    rig.node.publish(0, T_EVENT, &[2; 4]).unwrap();
    rig.poll();
    let ev = rig.data_with_id(0x210);
    assert_eq!(ev.len(), 3);
    assert_eq!(ev[2].1.data(), &[2; 4]);
}

#[test]
fn publish_errors() {
    let mut rig = running_rig();
    assert_eq!(
        rig.node.publish(0, T_CMD, &[0; 5]),
        Err(PublishError::WrongDirection)
    );
    assert_eq!(
        rig.node.publish(0, T_EVENT, &[0; 5]),
        Err(PublishError::BadLength)
    );
    assert_eq!(
        rig.node.publish(2, T_EVENT, &[0; 4]),
        Err(PublishError::NotWired)
    );
    assert_eq!(
        rig.node.publish(9, T_EVENT, &[0; 4]),
        Err(PublishError::BadIndex)
    );
    assert_eq!(rig.node.publish(0, 9, &[0; 4]), Err(PublishError::BadIndex));
    rig.node.publish(0, T_EVENT, &[3; 4]).unwrap();
    let r = rig.node.topic(0, T_EVENT).unwrap();
    assert_eq!(r.bytes, &[3; 4]);
    assert_eq!(r.generation, 1);
}

/// An s2m topic larger than a classic frame goes out as a sequenced group.
#[test]
fn s2m_group_goes_out_whole_with_one_sequence() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    // Setpoint is m2s; use two feedback+event... build a group from block 0's feedback
    // (6 bytes) split 3+3 over two sequenced frames.
    let g = |index, id, gi| FrameHeader {
        index,
        std_id: id,
        dir: S2M,
        sequenced: true,
        masked: false,
        len: 4,
        group_parts: 2,
        group_index: gi,
        period_us: 0,
    };
    assert!(rig
        .define(g(0, 0x220, 0), &[entry(0, T_FEEDBACK, 0, 3, 1)])
        .is_ack());
    assert!(rig
        .define(g(1, 0x221, 1), &[entry(0, T_FEEDBACK, 3, 3, 1)])
        .is_ack());
    assert!(rig.start(2, 0).is_ack());
    rig.node
        .publish(0, T_FEEDBACK, &[1, 2, 3, 4, 5, 6])
        .unwrap();
    rig.poll();
    rig.node
        .publish(0, T_FEEDBACK, &[7, 8, 9, 10, 11, 12])
        .unwrap();
    rig.poll();
    let frames: Vec<_> = rig.data.iter().map(|(_, f)| *f).collect();
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[0].id(), CanId::Standard(0x220));
    assert_eq!(frames[1].id(), CanId::Standard(0x221));
    assert_eq!(frames[0].data()[0], frames[1].data()[0]);
    assert_ne!(frames[0].data()[0], frames[2].data()[0]);
    assert_eq!(&frames[0].data()[1..], &[1, 2, 3]);
    assert_eq!(&frames[1].data()[1..], &[4, 5, 6]);
    assert_eq!(&frames[3].data()[1..], &[10, 11, 12]);
}

#[test]
fn fd_bus_mode_uses_fd_frames_and_64_byte_plans() {
    let mut rig = Rig::new(true);
    rig.boot_and_ack(BusMode::FdBrs);
    assert_eq!(rig.node.bus_mode(), BusMode::FdBrs);
    // One 20-byte FD frame carries cmd (5) + setpoint (12) of block 0 behind a presence
    // mask: no group needed.
    let h = FrameHeader {
        masked: true,
        ..header(0, 0x120, M2S, 18)
    };
    assert!(rig
        .define(
            h,
            &[entry(0, T_CMD, 0, 5, 1), entry(0, T_SETPOINT, 0, 12, 6)]
        )
        .is_ack());
    let mut fb = header(1, 0x200, S2M, 10);
    fb.period_us = FEEDBACK_PERIOD;
    assert!(rig
        .define(
            fb,
            &[entry(0, T_FEEDBACK, 0, 6, 0), entry(3, T_EVENT, 0, 4, 6)]
        )
        .is_ack());
    // Too long even for FD.
    assert_eq!(
        rig.define(header(2, 0x300, M2S, 65), &[]).code,
        ResultCode::BadLength
    );
    let t = rig.send(fcan_core::msg::ConfigMessage::Start(Start {
        frame_count: 2,
        master_timeout_ms: 0,
    }));
    let res: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.transfer == t)
        .collect();
    assert!(res[0].fd, "config replies use FD after an FD ack");
    assert!(res[0].result().is_ack());
    let mut payload = [0u8; 18];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = i as u8 + 100;
    }
    payload[0] = 0b11; // both topics present
    let f = fcan_core::frame::Frame::padded(Mtu::Fd, CanId::Standard(0x120), &payload).unwrap();
    assert_eq!(f.len(), 20);
    rig.inject(f);
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().bytes, &payload[1..6]);
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().bytes, &payload[6..]);
    // Both topics bumped once by the one frame.
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, 1);
    assert_eq!(rig.node.topic(0, T_SETPOINT).unwrap().generation, 1);
    rig.node.publish(0, T_FEEDBACK, &[1; 6]).unwrap();
    rig.node.publish(3, T_EVENT, &[2; 4]).unwrap();
    rig.advance(10_000);
    let fb = rig.data_with_id(0x200);
    let f = fb.last().unwrap().1;
    assert!(f.is_fd() && f.is_brs());
    assert_eq!(f.len(), 12); // 10 padded to an FD length
    assert_eq!(&f.data()[..10], &[1, 1, 1, 1, 1, 1, 2, 2, 2, 2]);
}

#[test]
fn fd_without_brs_mode() {
    let mut rig = Rig::new(true);
    rig.boot_and_ack(BusMode::Fd);
    rig.send(ConfigMessage::StatsRead);
    let m = rig.one();
    assert!(m.fd);
    let mut fb = header(0, 0x200, S2M, 6);
    fb.period_us = FEEDBACK_PERIOD;
    assert!(rig.define(fb, &[entry(0, T_FEEDBACK, 0, 6, 0)]).is_ack());
    assert!(rig.start(1, 0).is_ack());
    rig.advance(1_000);
    let f = rig.data_with_id(0x200)[0].1;
    assert!(f.is_fd() && !f.is_brs());
}

/// The node reassembles one configuration transfer at a time (protocol §10.8): a second
/// transfer that starts in the middle of the first is dropped and counted, the first
/// completes, and the second goes through when sent again. A broadcast transfer never
/// takes the buffer.
#[test]
fn one_configuration_transfer_at_a_time() {
    let mut rig = provisioned();
    let entries = [entry(0, T_CMD, 0, 5, 0)];
    let define = |index: u8, id: u16| FrameDefine {
        header: header(index, id, M2S, 5),
        entries: Entries::List(&entries),
    };
    // FRAME_DEFINE is 12 + 6 bytes: 3 segments on Classical CAN.
    let first = rig.frames_for(node_id(), &ConfigMessage::FrameDefine(define(0, 0x120)), 1);
    let second = rig.frames_for(node_id(), &ConfigMessage::FrameDefine(define(0, 0x121)), 2);
    assert!(first.len() > 1 && second.len() > 1);
    let dropped = rig.node.counters().reassembly_dropped;

    // A broadcast start first: ignored, holds nothing.
    let bcast = rig.frames_for(
        fcan_core::id::NodeId::BROADCAST,
        &ConfigMessage::FrameDefine(define(0, 0x122)),
        3,
    );
    let ignored = rig.node.counters().rx_ignored;
    rig.inject(bcast[0]);
    assert!(rig.node.counters().rx_ignored > ignored);

    rig.inject(first[0]);
    for f in &second {
        rig.inject(*f);
    }
    for f in &first[1..] {
        rig.inject(*f);
    }
    let replies = rig.take();
    assert_eq!(replies.len(), 1, "{replies:#?}");
    let r = replies[0].result();
    assert!(r.is_ack());
    assert_eq!(replies[0].id.transfer, 1);
    assert!(rig.node.counters().reassembly_dropped > dropped);

    // Sent again on its own, the second transfer is taken (index 0 again starts a fresh
    // plan of one frame).
    for f in &second {
        rig.inject(*f);
    }
    let m = rig.one();
    assert_eq!(m.id.transfer, 2);
    assert!(m.result().is_ack());
}
