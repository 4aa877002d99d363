//! The frame planner: turns one node's schema and wired instance counts into the data
//! frames the master defines with FRAME_DEFINE (`docs/protocol.md` §4.1).
//!
//! Rules:
//! - a topic that fits one frame is never split; a larger one gets a sequenced group of
//!   `numbering::topic_frames` frames;
//! - topics of one direction and one period share frames (first-fit decreasing), so a
//!   motor's 1 kHz feedback and its 100 ms diagnostics never ride together;
//! - a shared frame of topics sent per publication (m2s, on-commit s2m) is masked: byte 0
//!   says which topics it delivers, so at most 8 topics and MTU − 1 bytes share it;
//! - when the node's `max_frames` would be exceeded, s2m classes are merged into the
//!   fastest period among them (more bandwidth, fewer frames) until the plan fits;
//! - identifiers come from a bus-wide [`IdAllocator`] whose bands give faster frames lower
//!   identifiers, so they win arbitration.

use std::collections::BTreeMap;

use fcan_core::frame::Mtu;
use fcan_core::id::DATA_ID_RANGE;
use fcan_core::ir::Schema;
use fcan_core::msg::{CopyEntry, DataDirection, FrameHeader};
use fcan_core::numbering::{topic_frames, Numbering};
use fcan_core::presence::{needs_mask, MASK_LEN, MAX_MASKED_TOPICS};

/// One frame of a plan, ready for FRAME_DEFINE.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlannedFrame {
    /// The header (index and std_id filled in).
    pub header: FrameHeader,
    /// Copy entries.
    pub entries: Vec<CopyEntry>,
}

/// A node's whole plan.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// Frames in plan order (index = position).
    pub frames: Vec<PlannedFrame>,
}

impl Plan {
    /// Copy entries over all frames of the plan.
    pub fn copy_entry_count(&self) -> usize {
        self.frames.iter().map(|f| f.entries.len()).sum()
    }

    /// The frames that carry topic `topic` of block `block`, with the entries for it.
    pub fn frames_of(
        &self,
        block: u8,
        topic: u8,
    ) -> impl Iterator<Item = (&PlannedFrame, &CopyEntry)> {
        self.frames.iter().flat_map(move |f| {
            f.entries
                .iter()
                .filter(move |e| e.block == block && e.topic == topic)
                .map(move |e| (f, e))
        })
    }
}

/// Why a node cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The schema does not number (unknown type, too many blocks).
    #[error("schema cannot be numbered: {}", numbering(.0))]
    Numbering(fcan_core::numbering::NumberingError),
    /// The node announced more instances than its schema allows, or counts for a
    /// different number of arrays.
    #[error("announced instance counts {counts:?} do not fit the schema's arrays (max {max:?})")]
    BadCounts {
        /// What the node announced.
        counts: Vec<u8>,
        /// The schema's ceilings.
        max: Vec<u32>,
    },
    /// Even with every s2m class merged the plan needs more frames than the node takes.
    #[error("plan needs {needed} frames but the node accepts at most {limit} (limits.max_frames)")]
    TooManyFrames {
        /// Frames needed.
        needed: usize,
        /// `limits.max_frames`.
        limit: u32,
    },
    /// The plan needs more copy entries than the node takes.
    #[error("plan needs {needed} copy entries but the node accepts at most {limit} (limits.max_copy_entries)")]
    TooManyEntries {
        /// Entries needed.
        needed: usize,
        /// `limits.max_copy_entries`.
        limit: u32,
    },
    /// The bus ran out of data identifiers.
    #[error("no free data identifier left on this bus ({0} in use)")]
    OutOfIds(usize),
}

/// [`PlanError::Numbering`]'s message. The type name comes from the node's blob: escaped.
fn numbering(e: &fcan_core::numbering::NumberingError) -> String {
    use fcan_core::numbering::{NumberingError, MAX_BLOCKS};
    match e {
        NumberingError::UnknownType(t) => format!(
            "an instance array names type `{}`, which the schema does not define",
            crate::text::Untrusted(t)
        ),
        NumberingError::TooManyBlocks(n) => {
            format!("{n} blocks, more than the {MAX_BLOCKS} a node may have")
        }
    }
}

/// One topic of one block to place.
#[derive(Clone, Copy, Debug)]
struct Item {
    block: u8,
    topic: u8,
    size: usize,
}

/// Frames of one (direction, period) class before identifiers are assigned.
#[derive(Clone, Debug)]
struct Bin {
    used: usize,
    /// Byte 0 is a presence mask.
    masked: bool,
    entries: Vec<CopyEntry>,
}

/// Plans one node. Identifiers are taken from `ids`; on error none are taken.
pub fn plan_node(
    schema: &Schema,
    counts: &[u8],
    mtu: Mtu,
    ids: &mut IdAllocator,
) -> Result<Plan, PlanError> {
    let numbering = Numbering::of(schema).map_err(PlanError::Numbering)?;
    if counts.len() != schema.instances.len()
        || counts
            .iter()
            .zip(&schema.instances)
            .any(|(c, a)| *c as u32 > a.max_count)
    {
        return Err(PlanError::BadCounts {
            counts: counts.to_vec(),
            max: schema.instances.iter().map(|a| a.max_count).collect(),
        });
    }

    // Classes keyed by (direction, period); BTreeMap keeps the plan deterministic.
    let mut classes: BTreeMap<(DataDirection, u32), Vec<Item>> = BTreeMap::new();
    let mut groups: Vec<(DataDirection, u32, Item)> = Vec::new();
    for block in &numbering.blocks {
        if block.index >= counts[block.array] as u32 {
            continue;
        }
        let ty = &schema.types[block.type_index];
        let layout = &numbering.layouts[block.type_index];
        for (t, topic) in ty.topics.iter().enumerate() {
            let item = Item {
                block: block.number,
                topic: t as u8,
                size: layout.topics[t].size,
            };
            if item.size == 0 {
                continue;
            }
            if item.size > mtu.payload() {
                groups.push((topic.dir, topic.period_us, item));
            } else {
                classes
                    .entry((topic.dir, topic.period_us))
                    .or_default()
                    .push(item);
            }
        }
    }

    let group_frames: usize = groups
        .iter()
        .map(|(_, _, it)| topic_frames(mtu, it.size))
        .sum();
    // On-commit topics get a frame each, so every frame that arrives is one commit of one
    // topic. Only when that does not fit the node's frames do they share.
    let mut packed = pack_classes(&classes, mtu, true);
    if group_frames + packed_frames(&packed) > schema.limits.max_frames as usize {
        packed = pack_classes(&classes, mtu, false);
    }
    // Merge periodic s2m classes into the fastest until the plan fits.
    while group_frames + packed_frames(&packed) > schema.limits.max_frames as usize {
        let periodic: Vec<u32> = classes
            .keys()
            .filter(|(d, p)| *d == DataDirection::S2m && *p != 0)
            .map(|(_, p)| *p)
            .collect();
        if periodic.len() < 2 {
            return Err(PlanError::TooManyFrames {
                needed: group_frames + packed_frames(&packed),
                limit: schema.limits.max_frames,
            });
        }
        // Fold the two fastest periods into the faster of them.
        let (fast, next) = (periodic[0], periodic[1]);
        let moved = classes
            .remove(&(DataDirection::S2m, next))
            .unwrap_or_default();
        classes
            .entry((DataDirection::S2m, fast))
            .or_default()
            .extend(moved);
        packed = pack_classes(&classes, mtu, false);
    }

    let mut frames: Vec<(DataDirection, u32, Bin, (u8, u8))> = Vec::new();
    for ((dir, period), bins) in &packed {
        for bin in bins {
            frames.push((*dir, *period, bin.clone(), (1, 0)));
        }
    }
    for (dir, period, item) in &groups {
        let parts = topic_frames(mtu, item.size);
        let per = mtu.payload() - 1;
        for k in 0..parts {
            let start = k * per;
            let len = per.min(item.size - start);
            let entry = CopyEntry {
                block: item.block,
                topic: item.topic,
                src_offset: start as u16,
                len: len as u8,
                dst_offset: 1,
            };
            frames.push((
                *dir,
                *period,
                Bin {
                    used: len + 1,
                    masked: false,
                    entries: vec![entry],
                },
                (parts as u8, k as u8),
            ));
        }
    }

    let entries: usize = frames.iter().map(|f| f.2.entries.len()).sum();
    if entries > schema.limits.max_copy_entries as usize {
        return Err(PlanError::TooManyEntries {
            needed: entries,
            limit: schema.limits.max_copy_entries,
        });
    }

    // Fastest first, so the plan reads naturally and group parts stay contiguous.
    frames.sort_by_key(|(dir, period, _, _)| (rate_rank(*dir, *period), *dir));
    let mut taken = Vec::with_capacity(frames.len());
    let mut out = Vec::with_capacity(frames.len());
    for (index, (dir, period, bin, (parts, part))) in frames.into_iter().enumerate() {
        let Some(std_id) = ids.take(band_of(dir, period)) else {
            for id in taken {
                ids.release(id);
            }
            return Err(PlanError::OutOfIds(ids.in_use()));
        };
        taken.push(std_id);
        out.push(PlannedFrame {
            header: FrameHeader {
                index: index as u8,
                std_id,
                dir,
                sequenced: parts > 1,
                masked: bin.masked,
                len: bin.used as u8,
                group_parts: parts,
                group_index: part,
                period_us: if dir == DataDirection::S2m { period } else { 0 },
            },
            entries: bin.entries,
        });
    }
    Ok(Plan { frames: out })
}

fn packed_frames(packed: &BTreeMap<(DataDirection, u32), Vec<Bin>>) -> usize {
    packed.values().map(Vec::len).sum()
}

/// First-fit decreasing per class; with `solo_on_commit`, on-commit s2m topics each get
/// a frame of their own.
///
/// Classes sent per publication (m2s, on-commit s2m) share a frame only behind a
/// presence mask (`fcan_core::presence`): a shared frame of such a class gives byte 0 to
/// the mask and carries at most `MAX_MASKED_TOPICS` topics.
fn pack_classes(
    classes: &BTreeMap<(DataDirection, u32), Vec<Item>>,
    mtu: Mtu,
    solo_on_commit: bool,
) -> BTreeMap<(DataDirection, u32), Vec<Bin>> {
    classes
        .iter()
        .map(|(&(dir, period), items)| {
            // What a class may share a frame with: a periodic frame samples every topic
            // in it, a per-publication frame needs the mask byte and a bit per topic.
            let per_publication = needs_mask(dir, period, 2);
            let (room, max_topics) = if solo_on_commit && (dir, period) == (DataDirection::S2m, 0) {
                (0, 1) // nothing fits beside a topic: one frame each
            } else if per_publication {
                (mtu.payload() - MASK_LEN, MAX_MASKED_TOPICS)
            } else {
                (mtu.payload(), usize::MAX)
            };
            let mut sorted = items.clone();
            // Stable: equal sizes keep block/topic order, so plans are reproducible.
            sorted.sort_by_key(|it| std::cmp::Reverse(it.size));
            let mut bins: Vec<Vec<Item>> = Vec::new();
            for it in sorted {
                let fits = bins.iter().position(|b| {
                    b.len() < max_topics
                        && b.iter().map(|i| i.size).sum::<usize>() + it.size <= room
                });
                match fits {
                    Some(at) => bins[at].push(it),
                    // A topic alone fills up to the whole payload, mask or not.
                    None => bins.push(vec![it]),
                }
            }
            let bins = bins
                .into_iter()
                .map(|items| {
                    let masked = needs_mask(dir, period, items.len());
                    let mut used = if masked { MASK_LEN } else { 0 };
                    let mut entries = Vec::with_capacity(items.len());
                    for it in items {
                        entries.push(CopyEntry {
                            block: it.block,
                            topic: it.topic,
                            src_offset: 0,
                            len: it.size as u8,
                            dst_offset: used as u8,
                        });
                        used += it.size;
                    }
                    Bin {
                        used,
                        masked,
                        entries,
                    }
                })
                .collect();
            ((dir, period), bins)
        })
        .collect()
}

/// Lower rank = more urgent. Commands (m2s) are treated as the most urgent: the master
/// cannot know their rate, and a stale command is the costliest delay.
fn rate_rank(dir: DataDirection, period_us: u32) -> u64 {
    match (dir, period_us) {
        (DataDirection::M2s, _) => 0,
        (DataDirection::S2m, 0) => u64::MAX,
        (DataDirection::S2m, p) => p as u64,
    }
}

/// Identifier bands, by urgency. Each is a sub-range of [`DATA_ID_RANGE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Band {
    /// m2s commands and s2m topics at ≤ 1 ms.
    Fast = 0,
    /// s2m at ≤ 10 ms.
    Control = 1,
    /// s2m at ≤ 100 ms.
    Slow = 2,
    /// s2m slower than 100 ms, and on-commit topics.
    Background = 3,
}

const BANDS: [(Band, std::ops::Range<u16>); 4] = [
    (Band::Fast, 0x100..0x200),
    (Band::Control, 0x200..0x2C0),
    (Band::Slow, 0x2C0..0x380),
    (Band::Background, 0x380..0x400),
];

/// The band a frame of this direction and period belongs to.
pub(crate) fn band_of(dir: DataDirection, period_us: u32) -> Band {
    match (dir, period_us) {
        (DataDirection::M2s, _) => Band::Fast,
        (DataDirection::S2m, 0) => Band::Background,
        (DataDirection::S2m, p) if p <= 1_000 => Band::Fast,
        (DataDirection::S2m, p) if p <= 10_000 => Band::Control,
        (DataDirection::S2m, p) if p <= 100_000 => Band::Slow,
        _ => Band::Background,
    }
}

/// Bus-wide data identifier allocation. Faster bands hold lower identifiers; a band
/// that is full borrows from the next slower band (then the faster ones), so a bus only
/// runs out when all 768 identifiers are in use.
#[derive(Clone, Debug, Default)]
pub struct IdAllocator {
    used: std::collections::BTreeSet<u16>,
}

impl IdAllocator {
    /// An allocator with every data identifier free.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the lowest free identifier of `band` (or of the nearest band with room).
    pub(crate) fn take(&mut self, band: Band) -> Option<u16> {
        let start = band as usize;
        let order = (start..BANDS.len()).chain((0..start).rev());
        for b in order {
            if let Some(id) = BANDS[b].1.clone().find(|id| !self.used.contains(id)) {
                self.used.insert(id);
                return Some(id);
            }
        }
        None
    }

    /// Returns an identifier to the pool.
    pub(crate) fn release(&mut self, id: u16) {
        self.used.remove(&id);
    }

    /// Identifiers in use.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// Sanity: the bands tile the data range exactly.
const _: () = {
    assert!(BANDS[0].1.start == DATA_ID_RANGE.start);
    assert!(BANDS[3].1.end == DATA_ID_RANGE.end);
};

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::ir::{BlockType, Field, InstanceArray, Limits, Topic};
    use fcan_core::types::ScalarType;

    fn field(name: &str, ty: ScalarType, len: Option<u32>) -> Field {
        Field {
            name: name.into(),
            ty,
            len,
        }
    }

    fn topic(name: &str, dir: DataDirection, period_us: u32, fields: Vec<Field>) -> Topic {
        Topic {
            name: name.into(),
            dir,
            period_us,
            fields,
            ros: None,
        }
    }

    /// A motor: 5-byte target, 12-byte trajectory (m2s), 13-byte feedback at 1 ms,
    /// 20-byte diagnostics at 100 ms, 1-byte state on commit.
    fn motor_schema(max_count: u32, max_frames: u32) -> Schema {
        use DataDirection::*;
        use ScalarType::*;
        Schema {
            protocol: 2,
            node: "md{i}".into(),
            allocation: "static".into(),
            limits: Limits {
                max_frames,
                max_copy_entries: 255,
                ..Limits::default()
            },
            types: vec![BlockType {
                name: "Motor".into(),
                params: vec![],
                topics: vec![
                    topic(
                        "target",
                        M2s,
                        0,
                        vec![field("type", U8, None), field("value", F32, None)],
                    ),
                    topic("trajectory", M2s, 0, vec![field("p", F32, Some(3))]),
                    topic(
                        "feedback",
                        S2m,
                        1_000,
                        vec![field("ok", Bool, None), field("v", F32, Some(3))],
                    ),
                    topic("diag", S2m, 100_000, vec![field("bits", U32, Some(5))]),
                    topic("state", S2m, 0, vec![field("on", Bool, None)]),
                ],
                services: vec![],
            }],
            instances: vec![InstanceArray {
                ty: "Motor".into(),
                max_count,
                ns: "motor{i}".into(),
            }],
        }
    }

    fn check_invariants(schema: &Schema, counts: &[u8], mtu: Mtu, plan: &Plan) {
        let numbering = Numbering::of(schema).unwrap();
        for (i, f) in plan.frames.iter().enumerate() {
            assert_eq!(f.header.index as usize, i);
            assert!(fcan_core::id::is_data_id(f.header.std_id));
            assert!(f.header.len as usize <= mtu.payload());
            let mut used = vec![false; f.header.len as usize];
            for e in &f.entries {
                let start = e.dst_offset as usize;
                for b in &mut used[start..start + e.len as usize] {
                    assert!(!*b, "entries overlap in frame {i}");
                    *b = true;
                }
                if f.header.sequenced || f.header.masked {
                    assert!(e.dst_offset >= 1);
                }
            }
            // Shared per-publication frames, and only they, are masked, with a bit per topic.
            let topics = fcan_core::presence::all_of(f.entries.iter().map(|e| (e.block, e.topic)));
            let distinct = topics.map_or(usize::MAX, |m| m.count_ones() as usize);
            assert_eq!(
                f.header.masked,
                needs_mask(f.header.dir, f.header.period_us, distinct),
                "frame {i}: {f:?}"
            );
        }
        // Every wired topic is fully covered exactly once; unwired blocks are absent.
        for block in &numbering.blocks {
            let wired = block.index < counts[block.array] as u32;
            for (t, layout) in numbering.layouts[block.type_index]
                .topics
                .iter()
                .enumerate()
            {
                let pieces: Vec<_> = plan.frames_of(block.number, t as u8).collect();
                if !wired {
                    assert!(pieces.is_empty());
                    continue;
                }
                let covered: usize = pieces.iter().map(|(_, e)| e.len as usize).sum();
                assert_eq!(covered, layout.size, "block {} topic {t}", block.number);
                if layout.size <= mtu.payload() {
                    assert_eq!(
                        pieces.len(),
                        1,
                        "a topic that fits one frame is never split"
                    );
                }
            }
        }
    }

    #[test]
    fn eight_motors_on_fd_pack_into_few_frames() {
        let s = motor_schema(8, 48);
        let counts = [8];
        let plan = plan_node(&s, &counts, Mtu::Fd, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &counts, Mtu::Fd, &plan);
        // 40 topics; one frame per topic would be 40. The 8 on-commit `state` topics get
        // a frame each; the other 32 topics pack into 8.
        let packed = plan
            .frames
            .iter()
            .filter(|f| !(f.header.dir == DataDirection::S2m && f.header.period_us == 0))
            .count();
        assert!(
            packed <= 8,
            "{packed} frames for the periodic and m2s topics"
        );
        assert_eq!(plan.frames.len(), packed + 8);
    }

    #[test]
    fn classic_splits_large_topics_into_sequenced_groups() {
        let s = motor_schema(2, 48);
        let counts = [2];
        let plan = plan_node(&s, &counts, Mtu::Classic, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &counts, Mtu::Classic, &plan);
        let (f, _) = plan.frames_of(0, 1).next().unwrap(); // 12-byte trajectory
        assert_eq!(f.header.group_parts, 2);
        assert!(f.header.sequenced);
        let parts: Vec<_> = plan.frames_of(0, 1).map(|(f, _)| f.header.index).collect();
        assert_eq!(parts[1], parts[0] + 1, "group parts are contiguous");
    }

    #[test]
    fn on_commit_topics_get_a_frame_each_unless_frames_run_short() {
        // 4 motors on FD: the 1-byte on-commit `state` topics would fit one frame.
        let s = motor_schema(4, 48);
        let plan = plan_node(&s, &[4], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        let state_frames: Vec<u8> = (0..4)
            .map(|b| plan.frames_of(b, 4).next().unwrap().0.header.index)
            .collect();
        let mut distinct = state_frames.clone();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            4,
            "one frame per on-commit topic: {state_frames:?}"
        );
        // With 8 frames allowed (m2s 2, feedback 1, diag 2, state 4 = 9) they share.
        let s = motor_schema(4, 8);
        let plan = plan_node(&s, &[4], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        assert!(plan.frames.len() <= 8);
        check_invariants(&s, &[4], Mtu::Fd, &plan);
    }

    #[test]
    fn shared_m2s_frames_are_masked_on_both_links() {
        // Eight motors' 5-byte targets and 12-byte trajectories on FD: shared, masked,
        // at most 8 topics and 63 payload bytes each.
        let s = motor_schema(8, 48);
        let plan = plan_node(&s, &[8], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &[8], Mtu::Fd, &plan);
        let m2s: Vec<_> = plan
            .frames
            .iter()
            .filter(|f| f.header.dir == DataDirection::M2s)
            .collect();
        assert!(m2s.iter().any(|f| f.header.masked));
        for f in &m2s {
            assert!(f.entries.len() <= 8);
            if f.header.masked {
                assert_eq!(f.entries.iter().map(|e| e.dst_offset).min(), Some(1));
            }
        }
        // Classical: three 2-byte m2s topics share 7 bytes behind the mask; a 7-byte and
        // an 8-byte one ride alone, unmasked.
        let mut s = motor_schema(1, 48);
        let ty = &mut s.types[0];
        ty.topics = ["a", "b", "c"]
            .iter()
            .map(|n| {
                topic(
                    n,
                    DataDirection::M2s,
                    0,
                    vec![field("v", ScalarType::U16, None)],
                )
            })
            .collect();
        ty.topics.push(topic(
            "seven",
            DataDirection::M2s,
            0,
            vec![field("v", ScalarType::U8, Some(7))],
        ));
        ty.topics.push(topic(
            "eight",
            DataDirection::M2s,
            0,
            vec![field("v", ScalarType::U64, None)],
        ));
        let plan = plan_node(&s, &[1], Mtu::Classic, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &[1], Mtu::Classic, &plan);
        let shared: Vec<_> = plan.frames.iter().filter(|f| f.header.masked).collect();
        assert_eq!(shared.len(), 1, "{plan:?}");
        assert_eq!(shared[0].header.len, 7);
        assert_eq!(shared[0].entries.len(), 3);
        assert_eq!(plan.frames.len(), 3);
    }

    #[test]
    fn shared_on_commit_frames_are_masked() {
        // 4 motors and 8 frames: the on-commit `state` topics share, behind a mask.
        let s = motor_schema(4, 8);
        let plan = plan_node(&s, &[4], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &[4], Mtu::Fd, &plan);
        let (f, e) = plan.frames_of(0, 4).next().unwrap();
        assert!(f.header.masked && f.entries.len() > 1);
        assert!(e.dst_offset >= 1);
    }

    #[test]
    fn unwired_instances_are_not_planned() {
        let s = motor_schema(4, 48);
        let counts = [1];
        let plan = plan_node(&s, &counts, Mtu::Fd, &mut IdAllocator::new()).unwrap();
        check_invariants(&s, &counts, Mtu::Fd, &plan);
    }

    #[test]
    fn faster_frames_get_lower_ids() {
        let s = motor_schema(2, 48);
        let plan = plan_node(&s, &[2], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        let id_of = |t: u8| plan.frames_of(0, t).next().unwrap().0.header.std_id;
        assert!(
            id_of(2) < id_of(3),
            "1 ms feedback beats 100 ms diagnostics"
        );
        assert!(id_of(3) < id_of(4), "periodic beats on-commit");
    }

    #[test]
    fn classes_merge_when_frames_run_short_and_fail_cleanly_when_impossible() {
        // One motor on FD: m2s 1 frame, feedback 1, diag 1, state 1 = 4 frames. With 3
        // allowed, diagnostics ride with the 1 ms feedback.
        let s = motor_schema(1, 3);
        let plan = plan_node(&s, &[1], Mtu::Fd, &mut IdAllocator::new()).unwrap();
        assert_eq!(plan.frames.len(), 3);
        check_invariants(&s, &[1], Mtu::Fd, &plan);
        let (diag_frame, _) = plan.frames_of(0, 3).next().unwrap();
        assert_eq!(diag_frame.header.period_us, 1_000);
        let mut ids = IdAllocator::new();
        let err = plan_node(&motor_schema(1, 2), &[1], Mtu::Fd, &mut ids).unwrap_err();
        assert!(
            matches!(err, PlanError::TooManyFrames { limit: 2, .. }),
            "{err}"
        );
        assert_eq!(ids.in_use(), 0, "a failed plan takes no identifiers");
    }

    #[test]
    fn counts_beyond_the_schema_are_refused() {
        let s = motor_schema(2, 48);
        let err = plan_node(&s, &[3], Mtu::Fd, &mut IdAllocator::new()).unwrap_err();
        assert!(matches!(err, PlanError::BadCounts { .. }));
        let err = plan_node(&s, &[1, 1], Mtu::Fd, &mut IdAllocator::new()).unwrap_err();
        assert!(matches!(err, PlanError::BadCounts { .. }));
    }

    #[test]
    fn allocator_borrows_from_other_bands_and_runs_out_at_768() {
        let mut ids = IdAllocator::new();
        let first = ids.take(Band::Background).unwrap();
        assert_eq!(first, 0x380);
        let mut n = 1;
        while ids.take(Band::Background).is_some() {
            n += 1;
        }
        assert_eq!(n, 768);
        ids.release(0x150);
        assert_eq!(ids.take(Band::Slow), Some(0x150));
    }
}
