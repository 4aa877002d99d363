//! Unit tests of the reassembly pool's failure cases (`fcan_core::segment`).

use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode, MAX_SEGMENTS};
use fcan_core::segment::*;

fn id(transfer: u8) -> ConfigId {
    ConfigId::single(
        Opcode::Service,
        Direction::ToNode,
        NodeId::new(5).unwrap(),
        transfer,
    )
}

fn seg(transfer: u8, segment: u8, eot: bool) -> ConfigId {
    id(transfer).with_segment(segment, eot)
}

/// Eight bytes tagged with the segment index, so a misplaced segment shows.
fn data(segment: u8) -> [u8; 8] {
    [segment; 8]
}

#[test]
fn classic_three_segment_transfer_completes() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    assert_eq!(pool.push(seg(1, 0, false), &data(0), 0), Ok(None));
    assert_eq!(pool.in_progress(), 1);
    assert_eq!(pool.push(seg(1, 1, false), &data(1), 10), Ok(None));
    let done = pool.push(seg(1, 2, true), &[2, 2, 2], 20).unwrap().unwrap();
    assert_eq!(
        done,
        &[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    );
    assert_eq!(pool.in_progress(), 0);
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn out_of_order_segment_is_a_gap_and_drops_the_transfer() {
    let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    assert_eq!(
        pool.push(seg(1, 2, false), &data(2), 1),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
    // The rest of the broken transfer finds nothing to join and is not counted again.
    assert_eq!(
        pool.push(seg(1, 1, false), &data(1), 2),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(
        pool.push(seg(1, 3, true), &[3], 3),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
}

#[test]
fn segment_without_a_start_is_a_gap_and_no_drop() {
    let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
    assert_eq!(
        pool.push(seg(1, 1, true), &[1], 0),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn non_final_segment_of_another_length_is_a_gap() {
    // The first segment sets the step; a later full-looking segment of the other frame
    // size means frames of two transfers got mixed.
    let mut pool: ReassemblyPool<1, 256> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    assert_eq!(
        pool.push(seg(1, 1, false), &[1; 64], 1),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
}

#[test]
fn duplicate_is_ignored_and_the_transfer_completes() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.push(seg(1, 1, false), &data(1), 1).unwrap();
    // A retransmitted segment 1, even with other bytes, changes nothing.
    assert_eq!(
        pool.push(seg(1, 1, false), &[9; 8], 2),
        Err(ReassemblyError::Duplicate)
    );
    assert_eq!(pool.in_progress(), 1);
    pool.push(seg(1, 2, false), &data(2), 3).unwrap();
    assert_eq!(
        pool.push(seg(1, 1, false), &data(1), 4),
        Err(ReassemblyError::Duplicate)
    );
    let done = pool.push(seg(1, 3, true), &[3; 2], 5).unwrap().unwrap();
    let mut want = Vec::new();
    for s in 0..3 {
        want.extend_from_slice(&data(s));
    }
    want.extend_from_slice(&[3; 2]);
    assert_eq!(done, &want[..]);
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn duplicate_final_segment_after_completion_is_a_gap() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    assert!(pool.push(seg(1, 1, true), &[1], 1).unwrap().is_some());
    assert_eq!(
        pool.push(seg(1, 1, true), &[1], 2),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn silent_transfer_expires_after_the_timeout() {
    let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
    let t = 1_000_000;
    pool.push(seg(1, 0, false), &data(0), t).unwrap();
    assert_eq!(pool.expire(t), 0);
    assert_eq!(pool.expire(t + TRANSFER_TIMEOUT_US), 0);
    assert_eq!(pool.in_progress(), 1);
    assert_eq!(pool.expire(t + TRANSFER_TIMEOUT_US + 1), 1);
    assert_eq!(pool.in_progress(), 0);
    assert_eq!(pool.dropped(), 1);
    assert_eq!(
        pool.push(seg(1, 1, true), &[1], t + 200_000),
        Err(ReassemblyError::Gap)
    );
    assert_eq!(pool.dropped(), 1);
}

#[test]
fn expiry_works_across_the_clock_wrapping() {
    let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
    let t = u32::MAX - 10;
    pool.push(seg(1, 0, false), &data(0), t).unwrap();
    assert_eq!(pool.expire(t.wrapping_add(20)), 0);
    assert_eq!(pool.expire(t.wrapping_add(TRANSFER_TIMEOUT_US)), 0);
    assert_eq!(pool.expire(t.wrapping_add(TRANSFER_TIMEOUT_US + 1)), 1);
    assert_eq!(pool.dropped(), 1);
}

#[test]
fn a_transfer_that_keeps_talking_across_the_wrap_does_not_expire() {
    let mut pool: ReassemblyPool<1, 1024> = ReassemblyPool::new();
    let step = TRANSFER_TIMEOUT_US * 3 / 5;
    let mut now = u32::MAX - 2 * step;
    pool.push(seg(1, 0, false), &data(0), now).unwrap();
    for s in 1..6u8 {
        now = now.wrapping_add(step);
        assert_eq!(pool.expire(now), 0, "segment {s}");
        pool.push(seg(1, s, false), &data(s), now).unwrap();
    }
    now = now.wrapping_add(step);
    assert_eq!(pool.expire(now), 0);
    let done = pool.push(seg(1, 6, true), &[6], now).unwrap().unwrap();
    assert_eq!(done.len(), 6 * 8 + 1);
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn expire_frees_only_the_silent_transfers() {
    let mut pool: ReassemblyPool<3, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.push(seg(2, 0, false), &data(0), 50_000).unwrap();
    pool.push(seg(3, 0, false), &data(0), 90_000).unwrap();
    assert_eq!(pool.expire(160_000), 2);
    assert_eq!(pool.in_progress(), 1);
    assert!(pool.push(seg(3, 1, true), &[1], 160_000).unwrap().is_some());
}

#[test]
fn short_non_final_segment_is_refused() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    // As a first segment: refused; nothing was in progress, so nothing is dropped.
    assert_eq!(
        pool.push(seg(1, 0, false), &[0; 7], 0),
        Err(ReassemblyError::ShortSegment)
    );
    assert_eq!(pool.dropped(), 0);
    assert_eq!(pool.in_progress(), 0);
    // In the middle of a transfer: refused, and the transfer is dropped.
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    assert_eq!(
        pool.push(seg(1, 1, false), &[1; 3], 1),
        Err(ReassemblyError::ShortSegment)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
    // Every length but the two frame sizes is short.
    for len in 0..=64usize {
        let mut p: ReassemblyPool<1, 64> = ReassemblyPool::new();
        let payload = vec![0; len];
        let got = p.push(seg(1, 0, false), &payload, 0);
        if len == 8 || len == 64 {
            assert_eq!(got, Ok(None), "len {len}");
        } else {
            assert_eq!(got, Err(ReassemblyError::ShortSegment), "len {len}");
        }
    }
}

#[test]
fn overflow_of_the_buffer_drops_the_transfer() {
    let mut pool: ReassemblyPool<1, 16> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.push(seg(1, 1, false), &data(1), 1).unwrap();
    assert_eq!(
        pool.push(seg(1, 2, true), &[2], 2),
        Err(ReassemblyError::Overflow)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
    // Exactly N bytes fit.
    pool.push(seg(2, 0, false), &data(0), 3).unwrap();
    let d1 = data(1);
    let done = pool.push(seg(2, 1, true), &d1, 4).unwrap().unwrap();
    assert_eq!(done.len(), 16);
}

#[test]
fn first_segment_larger_than_the_buffer_overflows() {
    let mut pool: ReassemblyPool<1, 32> = ReassemblyPool::new();
    assert_eq!(
        pool.push(seg(1, 0, false), &[0; 64], 0),
        Err(ReassemblyError::Overflow)
    );
    assert_eq!(pool.in_progress(), 0);
    // The slot is still usable.
    pool.push(seg(1, 0, false), &data(0), 1).unwrap();
    assert!(pool.push(seg(1, 1, true), &[1], 2).unwrap().is_some());
}

#[test]
fn more_than_max_segments_overflows() {
    let mut pool: ReassemblyPool<1, 2048> = ReassemblyPool::new();
    for s in 0..MAX_SEGMENTS as u8 - 1 {
        assert_eq!(
            pool.push(seg(1, s, false), &data(s), 0),
            Ok(None),
            "segment {s}"
        );
    }
    // Segment 127 is the last index the identifier can carry; without EOT the transfer
    // cannot end.
    assert_eq!(
        pool.push(seg(1, MAX_SEGMENTS as u8 - 1, false), &data(127), 0),
        Err(ReassemblyError::Overflow)
    );
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
}

#[test]
fn largest_transfer_completes() {
    // 128 classic segments: the largest transfer there is.
    let mut pool: ReassemblyPool<1, 1024> = ReassemblyPool::new();
    let last = MAX_SEGMENTS as u8 - 1;
    for s in 0..last {
        pool.push(seg(1, s, false), &data(s), 0).unwrap();
    }
    let d = data(last);
    let done = pool.push(seg(1, last, true), &d, 0).unwrap().unwrap();
    assert_eq!(done.len(), max_transfer_len(Mtu::Classic));
    assert!(done.chunks(8).enumerate().all(|(i, c)| c == data(i as u8)));
}

#[test]
fn more_transfers_than_slots_is_no_slot() {
    let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.push(seg(2, 0, false), &data(0), 10).unwrap();
    assert_eq!(
        pool.push(seg(3, 0, false), &data(0), 20),
        Err(ReassemblyError::NoSlot)
    );
    assert_eq!(pool.in_progress(), 2);
    assert_eq!(pool.dropped(), 0);
    // Single-frame transfers need no slot.
    assert_eq!(pool.push(seg(3, 0, true), &[7], 30), Ok(Some(&[7][..])));
    // Once a busy slot has been silent past the timeout, a new transfer takes it over
    // and the silent one is counted as dropped.
    let later = 10 + TRANSFER_TIMEOUT_US + 1;
    assert_eq!(pool.push(seg(3, 0, false), &data(0), later), Ok(None));
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 2);
    assert_eq!(
        pool.push(seg(1, 1, true), &[1], later),
        Err(ReassemblyError::Gap)
    );
    assert!(pool.push(seg(2, 1, true), &[1], later).unwrap().is_some());
    assert!(pool.push(seg(3, 1, true), &[1], later).unwrap().is_some());
}

#[test]
fn pool_without_slots_passes_single_frames_only() {
    let mut pool: ReassemblyPool<0, 64> = ReassemblyPool::new();
    assert_eq!(
        pool.push(seg(1, 0, true), &[1, 2], 0),
        Ok(Some(&[1, 2][..]))
    );
    assert_eq!(
        pool.push(seg(1, 0, false), &data(0), 0),
        Err(ReassemblyError::NoSlot)
    );
    assert_eq!(pool.in_progress(), 0);
    assert_eq!(pool.expire(u32::MAX), 0);
}

#[test]
fn single_frame_is_returned_as_it_came_even_past_the_buffer() {
    // A single-frame transfer never touches a slot, so N does not bound it.
    let mut pool: ReassemblyPool<1, 4> = ReassemblyPool::new();
    let payload = [0x5A; 64];
    assert_eq!(
        pool.push(seg(1, 0, true), &payload, 0),
        Ok(Some(&payload[..]))
    );
}

#[test]
fn new_segment_zero_restarts_the_transfer() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.push(seg(1, 1, false), &data(1), 1).unwrap();
    // The sender starts over with other content: the partial transfer is dropped.
    pool.push(seg(1, 0, false), &[0xAA; 8], 2).unwrap();
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 1);
    let done = pool.push(seg(1, 1, true), &[0xBB], 3).unwrap().unwrap();
    assert_eq!(
        done,
        &[0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xBB]
    );
    assert_eq!(pool.in_progress(), 0);
}

#[test]
fn single_frame_with_the_same_key_replaces_a_partial_transfer() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    assert_eq!(pool.push(seg(1, 0, true), &[4], 1), Ok(Some(&[4][..])));
    assert_eq!(pool.dropped(), 1);
    assert_eq!(pool.in_progress(), 0);
}

#[test]
fn transfers_are_told_apart_by_their_whole_key() {
    let mut pool: ReassemblyPool<4, 64> = ReassemblyPool::new();
    let node = NodeId::new(5).unwrap();
    let keys = [
        ConfigId::single(Opcode::Service, Direction::ToNode, node, 1),
        ConfigId::single(Opcode::Service, Direction::ToMaster, node, 1),
        ConfigId::single(Opcode::Schema, Direction::ToNode, node, 1),
        ConfigId::single(
            Opcode::Service,
            Direction::ToNode,
            NodeId::new(6).unwrap(),
            1,
        ),
    ];
    for (i, k) in keys.iter().enumerate() {
        pool.push(k.with_segment(0, false), &[i as u8; 8], 0)
            .unwrap();
    }
    assert_eq!(pool.in_progress(), 4);
    for (i, k) in keys.iter().enumerate().rev() {
        let tail = [i as u8];
        let done = pool
            .push(k.with_segment(1, true), &tail, 0)
            .unwrap()
            .unwrap();
        assert_eq!(done, &[i as u8; 9][..]);
    }
    assert_eq!(pool.dropped(), 0);
}

#[test]
fn cancel_frees_the_slot_without_counting_a_drop() {
    let mut pool: ReassemblyPool<1, 64> = ReassemblyPool::new();
    pool.push(seg(1, 0, false), &data(0), 0).unwrap();
    pool.cancel(TransferKey::from(seg(2, 0, false)));
    assert_eq!(pool.in_progress(), 1);
    pool.cancel(TransferKey::from(seg(1, 5, true)));
    assert_eq!(pool.in_progress(), 0);
    assert_eq!(pool.dropped(), 0);
    assert_eq!(
        pool.push(seg(1, 1, true), &[1], 1),
        Err(ReassemblyError::Gap)
    );
}

#[test]
fn fd_transfer_of_64_byte_segments() {
    let id = id(3);
    let msg: Vec<u8> = (0..150u32).map(|i| (i * 7) as u8).collect();
    let mut pool: ReassemblyPool<1, 256> = ReassemblyPool::new();
    let mut done = None;
    for f in Segmenter::new(id, Mtu::Fd, &msg[..10], &msg[10..]).unwrap() {
        let cid = ConfigId::from_can_id(f.id()).unwrap();
        if let Some(m) = pool.push(cid, f.data(), 0).unwrap() {
            done = Some(m.to_vec());
        }
    }
    let done = done.unwrap();
    // 64 + 64 + 22 bytes; the last frame goes out as 24.
    assert_eq!(done.len(), 64 + 64 + 24);
    assert_eq!(&done[..150], &msg[..]);
    assert_eq!(&done[150..], &[0, 0]);
}

#[test]
fn errors_display() {
    for e in [
        ReassemblyError::Gap,
        ReassemblyError::Duplicate,
        ReassemblyError::ShortSegment,
        ReassemblyError::Overflow,
        ReassemblyError::NoSlot,
    ] {
        assert!(!e.to_string().is_empty());
    }
}
