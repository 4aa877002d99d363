//! Property tests of segmentation and reassembly (`fcan_core::segment`).

use std::collections::HashMap;

use fcan_core::frame::{fd_padded_len, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode, MAX_SEGMENTS};
use fcan_core::segment::*;
use proptest::prelude::*;
use proptest::sample::select;

fn mtu() -> impl Strategy<Value = Mtu> {
    prop_oneof![Just(Mtu::Classic), Just(Mtu::Fd)]
}

fn base_id() -> impl Strategy<Value = ConfigId> {
    (
        select(Opcode::ALL.to_vec()),
        prop_oneof![Just(Direction::ToNode), Just(Direction::ToMaster)],
        0..=NodeId::MAX,
        any::<u8>(),
    )
        .prop_map(|(op, dir, node, transfer)| {
            ConfigId::single(op, dir, NodeId::new(node).unwrap(), transfer)
        })
}

/// A message of any length a transfer can carry on `mtu`, with a split point into head
/// and body.
fn message(mtu: Mtu) -> impl Strategy<Value = (Vec<u8>, usize)> {
    let max = max_transfer_len(mtu);
    prop_oneof![
        // Lengths around frame boundaries are where the bugs hide.
        (0usize..=3, 0usize..=max / mtu.payload())
            .prop_map(move |(d, k)| { (k * mtu.payload()).saturating_sub(d).min(max) }),
        0usize..=max,
    ]
    .prop_flat_map(|len| (prop::collection::vec(any::<u8>(), len..=len), 0usize..=len))
}

/// What the reassembled message is: the original, then the zero padding of the last
/// frame (FD only: every non-final segment is a full 64-byte frame, the last is padded
/// up to a legal FD length).
fn expected_reassembly(mtu: Mtu, msg: &[u8]) -> Vec<u8> {
    let count = segment_count(mtu, msg.len());
    let before_last = (count - 1) * mtu.payload();
    let last = msg.len() - before_last;
    let last_wire = mtu.wire_len(last).unwrap();
    let mut out = msg.to_vec();
    out.resize(before_last + last_wire, 0);
    out
}

fn frames_of(id: ConfigId, mtu: Mtu, msg: &[u8], split: usize) -> Vec<Frame> {
    Segmenter::new(id, mtu, &msg[..split], &msg[split..])
        .unwrap()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Segmenter → ReassemblyPool gives back the message (plus the last FD frame's zero
    /// padding), whatever the length and the head/body split.
    #[test]
    fn segment_reassemble_roundtrip(
        (mtu, (msg, split)) in mtu().prop_flat_map(|m| (Just(m), message(m))),
        id in base_id(),
        t0 in any::<u32>(),
    ) {
        let frames = frames_of(id, mtu, &msg, split);
        let count = segment_count(mtu, msg.len());
        prop_assert_eq!(frames.len(), count);
        prop_assert!(count <= MAX_SEGMENTS);

        let mut pool: ReassemblyPool<1, 8192> = ReassemblyPool::new();
        let mut done = None;
        for (k, f) in frames.iter().enumerate() {
            let cid = ConfigId::from_can_id(f.id()).unwrap();
            prop_assert_eq!(cid, id.with_segment(k as u8, k + 1 == count));
            prop_assert_eq!(f.mtu(), mtu);
            if k + 1 < count {
                prop_assert_eq!(f.len(), mtu.payload());
            } else {
                prop_assert!(f.len() <= mtu.payload());
            }
            let now = t0.wrapping_add(k as u32 * 1000);
            match pool.push(cid, f.data(), now) {
                Ok(None) => prop_assert!(k + 1 < count),
                Ok(Some(m)) => {
                    prop_assert_eq!(k + 1, count);
                    done = Some(m.to_vec());
                }
                Err(e) => prop_assert!(false, "segment {} refused: {:?}", k, e),
            }
        }
        let done = done.unwrap();
        let expected = expected_reassembly(mtu, &msg);
        prop_assert_eq!(&done, &expected);
        // Said differently: the original, then only zeros, fewer than one FD step.
        prop_assert_eq!(&done[..msg.len()], &msg[..]);
        prop_assert!(done[msg.len()..].iter().all(|&b| b == 0));
        if mtu == Mtu::Classic {
            prop_assert_eq!(done.len(), msg.len());
        } else {
            let last = msg.len() - (count - 1) * mtu.payload();
            prop_assert_eq!(done.len() - msg.len(), fd_padded_len(last).unwrap() - last);
        }
        prop_assert_eq!(pool.in_progress(), 0);
        prop_assert_eq!(pool.dropped(), 0);
    }

    /// `peek`/`advance`/`frame(k)` and the iterator agree, and the split between head
    /// and body does not change the frames.
    #[test]
    fn segmenter_access_paths_agree(
        (mtu, (msg, split)) in mtu().prop_flat_map(|m| (Just(m), message(m))),
        id in base_id(),
    ) {
        let whole = frames_of(id, mtu, &msg, msg.len());
        let split_frames = frames_of(id, mtu, &msg, split);
        prop_assert_eq!(&whole, &split_frames);
        let mut s = Segmenter::new(id, mtu, &msg[..split], &msg[split..]).unwrap();
        prop_assert_eq!(s.segment_count(), whole.len());
        for (k, f) in whole.iter().enumerate() {
            prop_assert!(!s.is_done());
            prop_assert_eq!(s.frame(k), Some(*f));
            prop_assert_eq!(s.peek(), Some(*f));
            prop_assert_eq!(s.peek(), Some(*f)); // peek does not consume
            s.advance();
        }
        prop_assert!(s.is_done());
        prop_assert_eq!(s.peek(), None);
        prop_assert_eq!(s.frame(whole.len()), None);
        s.advance();
        prop_assert!(s.is_done());
    }

    /// A message longer than one transfer is refused.
    #[test]
    fn too_long_is_refused(mtu in mtu(), extra in 1usize..100, split in any::<prop::sample::Index>()) {
        let msg = vec![0xA5u8; max_transfer_len(mtu) + extra];
        let split = split.index(msg.len() + 1);
        prop_assert!(Segmenter::new(base_id_fixed(), mtu, &msg[..split], &msg[split..]).is_err());
    }

    /// Several transfers with distinct keys, their frames interleaved in any order that
    /// keeps each transfer's own order, all reassemble when the pool has a slot each.
    #[test]
    fn interleaved_transfers(
        mtu in mtu(),
        msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..=4),
        schedule in prop::collection::vec(any::<prop::sample::Index>(), 0..800),
    ) {
        let node = NodeId::new(9).unwrap();
        let streams: Vec<Vec<Frame>> = msgs
            .iter()
            .enumerate()
            .map(|(t, m)| {
                let id = ConfigId::single(Opcode::Service, Direction::ToNode, node, t as u8);
                frames_of(id, mtu, m, 0)
            })
            .collect();
        let mut next = vec![0usize; streams.len()];
        let mut order = Vec::new();
        let mut sched = schedule.into_iter();
        while next.iter().zip(&streams).any(|(n, s)| *n < s.len()) {
            let open: Vec<usize> = (0..streams.len()).filter(|&t| next[t] < streams[t].len()).collect();
            let pick = match sched.next() {
                Some(ix) => open[ix.index(open.len())],
                None => open[0],
            };
            order.push((pick, next[pick]));
            next[pick] += 1;
        }
        let mut pool: ReassemblyPool<4, 1024> = ReassemblyPool::new();
        let mut got: Vec<Option<Vec<u8>>> = vec![None; msgs.len()];
        for (t, k) in order {
            let f = &streams[t][k];
            let cid = ConfigId::from_can_id(f.id()).unwrap();
            prop_assert!(pool.in_progress() <= 4);
            if let Some(m) = pool.push(cid, f.data(), 0).unwrap() {
                prop_assert!(got[t].is_none());
                got[t] = Some(m.to_vec());
            }
        }
        for (t, m) in msgs.iter().enumerate() {
            prop_assert_eq!(got[t].as_ref(), Some(&expected_reassembly(mtu, m)));
        }
        prop_assert_eq!(pool.dropped(), 0);
        prop_assert_eq!(pool.in_progress(), 0);
    }
}

fn base_id_fixed() -> ConfigId {
    ConfigId::single(
        Opcode::Schema,
        Direction::ToMaster,
        NodeId::new(1).unwrap(),
        0,
    )
}

// ---------------------------------------------------------------------------------------
// The pool under arbitrary input.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Push {
        id: ConfigId,
        len: usize,
        fill: u8,
        dt: u32,
    },
    Expire {
        dt: u32,
    },
    Cancel {
        id: ConfigId,
    },
}

/// Identifiers drawn from a small key space so that transfers collide, with mostly
/// small segment numbers so that some transfers progress.
fn small_id() -> impl Strategy<Value = ConfigId> {
    (
        select(vec![Opcode::Service, Opcode::Schema]),
        prop_oneof![Just(Direction::ToNode), Just(Direction::ToMaster)],
        0u8..2,
        0u8..2,
        prop_oneof![4 => 0u8..4, 1 => 0u8..MAX_SEGMENTS as u8, 1 => any::<u8>()],
        any::<bool>(),
    )
        .prop_map(|(opcode, dir, node, transfer, segment, eot)| ConfigId {
            opcode,
            dir,
            node: NodeId::new(node).unwrap(),
            transfer,
            segment,
            eot,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            small_id(),
            prop_oneof![3 => Just(8usize), 2 => Just(64usize), 2 => 0usize..=64],
            any::<u8>(),
            prop_oneof![4 => 0u32..50_000, 1 => any::<u32>()],
        )
            .prop_map(|(id, len, fill, dt)| Op::Push { id, len, fill, dt }),
        1 => prop_oneof![0u32..200_000, any::<u32>()].prop_map(|dt| Op::Expire { dt }),
        1 => small_id().prop_map(|id| Op::Cancel { id }),
    ]
}

/// One transfer sent in order (segments `0..count`, EOT on the last), then damaged a
/// little: a segment skipped, repeated, shortened, swapped with the next, or delayed
/// past the timeout.
fn script() -> impl Strategy<Value = Vec<Op>> {
    (
        small_id(),
        1usize..=7,
        prop_oneof![5 => Just(8usize), 1 => Just(64usize)],
        0usize..=8,
        any::<u8>(),
        prop::collection::vec((0u8..8, any::<prop::sample::Index>()), 0..=2),
        prop::collection::vec(0u32..20_000, 7),
    )
        .prop_map(|(key, count, seg_len, last_len, fill, damage, dts)| {
            let mut pushes: Vec<Op> = (0..count)
                .map(|k| {
                    let eot = k + 1 == count;
                    Op::Push {
                        id: key.with_segment(k as u8, eot),
                        len: if eot { last_len } else { seg_len },
                        fill: fill.wrapping_add(k as u8 * 16),
                        dt: dts[k],
                    }
                })
                .collect();
            for (kind, at) in damage {
                let i = at.index(pushes.len());
                match kind {
                    0 => {
                        pushes.remove(i);
                    }
                    1 => {
                        let again = pushes[i].clone();
                        pushes.insert(i + 1, again);
                    }
                    2 => {
                        if let Op::Push { len, .. } = &mut pushes[i] {
                            *len = 5;
                        }
                    }
                    3 if i + 1 < pushes.len() => pushes.swap(i, i + 1),
                    4 => {
                        if let Op::Push { dt, .. } = &mut pushes[i] {
                            *dt += TRANSFER_TIMEOUT_US + 1;
                        }
                    }
                    _ => {}
                }
                if pushes.is_empty() {
                    break;
                }
            }
            pushes
        })
}

/// Several damaged transfers and some noise, interleaved in an arbitrary order that
/// keeps each transfer's own order.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    (
        prop::collection::vec(script(), 0..8),
        prop::collection::vec(op(), 0..40),
        prop::collection::vec(any::<prop::sample::Index>(), 0..400),
    )
        .prop_map(|(scripts, noise, schedule)| {
            let mut streams: Vec<std::collections::VecDeque<Op>> =
                scripts.into_iter().map(Into::into).collect();
            streams.extend(
                noise
                    .into_iter()
                    .map(|o| std::collections::VecDeque::from([o])),
            );
            let mut out = Vec::new();
            let mut sched = schedule.into_iter();
            loop {
                let open: Vec<usize> = (0..streams.len())
                    .filter(|&i| !streams[i].is_empty())
                    .collect();
                if open.is_empty() {
                    break out;
                }
                let pick = match sched.next() {
                    Some(ix) => open[ix.index(open.len())],
                    None => open[0],
                };
                out.push(streams[pick].pop_front().unwrap());
            }
        })
}

const SLOTS: usize = 3;
const N: usize = 100;

/// The bytes a slot should hold for one key: everything accepted since its segment 0.
struct Shadow {
    next: u8,
    bytes: Vec<u8>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any sequence of pushes, expiries and cancels: no panic, never more transfers in
    /// flight than slots, never a multi-frame message longer than the buffer, a
    /// single-frame transfer is its frame's payload, accepted segments are consecutive,
    /// a completed transfer is exactly what was accepted for its key, and the drop
    /// counter never goes down.
    #[test]
    fn pool_under_arbitrary_input(ops in ops(), t0 in any::<u32>()) {
        let mut pool: ReassemblyPool<SLOTS, N> = ReassemblyPool::new();
        let mut now = t0;
        let mut shadow: HashMap<TransferKey, Shadow> = HashMap::new();
        let mut dropped = 0;
        for op in ops {
            match op {
                Op::Push { id, len, fill, dt } => {
                    now = now.wrapping_add(dt);
                    let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                    let key = TransferKey::from(id);
                    match pool.push(id, &data, now) {
                        Ok(Some(m)) => {
                            if id.segment == 0 {
                                prop_assert!(id.eot);
                                prop_assert_eq!(m, &data[..]);
                            } else {
                                prop_assert!(id.eot);
                                prop_assert!(m.len() <= N);
                                let s = shadow.remove(&key).expect("a transfer was in progress");
                                prop_assert_eq!(id.segment, s.next);
                                let mut want = s.bytes;
                                want.extend_from_slice(&data);
                                prop_assert_eq!(m, &want[..]);
                            }
                            shadow.remove(&key);
                        }
                        Ok(None) => {
                            prop_assert!(!id.eot);
                            prop_assert!(data.len() == 8 || data.len() == 64);
                            if id.segment == 0 {
                                shadow.insert(key, Shadow { next: 1, bytes: data.clone() });
                            } else {
                                let s = shadow.get_mut(&key).expect("a transfer was in progress");
                                prop_assert_eq!(id.segment, s.next);
                                s.next += 1;
                                s.bytes.extend_from_slice(&data);
                            }
                            prop_assert!(shadow[&key].bytes.len() <= N);
                        }
                        Err(ReassemblyError::Duplicate) => {
                            let s = shadow.get(&key).expect("a transfer was in progress");
                            prop_assert!(id.segment > 0 && id.segment < s.next);
                        }
                        Err(ReassemblyError::ShortSegment) => {
                            prop_assert!(!id.eot && data.len() != 8 && data.len() != 64);
                            shadow.remove(&key);
                        }
                        Err(ReassemblyError::NoSlot) => {
                            prop_assert_eq!(id.segment, 0);
                            prop_assert_eq!(pool.in_progress(), SLOTS);
                            shadow.remove(&key);
                        }
                        Err(ReassemblyError::Gap | ReassemblyError::Overflow) => {
                            shadow.remove(&key);
                        }
                    }
                }
                Op::Expire { dt } => {
                    now = now.wrapping_add(dt);
                    let before = pool.in_progress();
                    let n = pool.expire(now);
                    prop_assert_eq!(pool.in_progress(), before - n);
                    prop_assert_eq!(pool.dropped(), dropped + n as u32);
                    // Expiring again at the same instant finds nothing more.
                    prop_assert_eq!(pool.expire(now), 0);
                }
                Op::Cancel { id } => {
                    let before = pool.in_progress();
                    let d = pool.dropped();
                    pool.cancel(TransferKey::from(id));
                    prop_assert!(pool.in_progress() + 1 >= before);
                    prop_assert_eq!(pool.dropped(), d, "cancel is not a drop");
                    shadow.remove(&TransferKey::from(id));
                }
            }
            prop_assert!(pool.in_progress() <= SLOTS);
            prop_assert!(pool.dropped() >= dropped);
            dropped = pool.dropped();
        }
    }
}
