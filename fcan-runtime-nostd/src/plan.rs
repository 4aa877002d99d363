//! The frame plan: FRAME_DEFINE validation against the node's own schema and limits,
//! the START consistency check, and the sorted standard-ID index the data plane
//! searches.
//!
//! Validation runs to completion before anything is written, so a NAKed FRAME_DEFINE
//! leaves the plan exactly as it was.

use crate::desc::NodeDesc;
use crate::storage::Parts;
use crate::tables::{PlanEntry, PlanFrame};
use crate::wired::Wired;
use fcan_core::dataframe::{entry_fits, EntryTopic};
use fcan_core::id::DATA_ID_RANGE;
use fcan_core::msg::{DataDirection, FrameDefine, ResultCode};
use fcan_core::presence::{needs_mask, PresenceBits};
use fcan_core::timing::{At, Us};

/// Where an entry's topic lives, from the descriptor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// Offset of the topic's value in the topic arena.
    pub topic_base: usize,
    /// Offset of the topic's staging bytes in the staging arena (m2s groups only).
    pub stage_base: Option<usize>,
    /// The topic's packed size.
    pub size: usize,
}

impl PlanEntry {
    /// An entry naming topic slot `slot` of block `block` (for [`PlanEntry::place`]).
    pub(crate) fn of_topic(slot: u8, block: u8) -> PlanEntry {
        PlanEntry {
            slot,
            block,
            ..PlanEntry::EMPTY
        }
    }

    /// The entry's topic slot, as the per-topic state table and presence bits use it.
    pub(crate) fn slot(&self) -> u16 {
        self.slot as u16
    }

    /// Where the entry's topic lives (`None` only for an entry not checked against this
    /// descriptor, which the plan never holds).
    pub(crate) fn place(&self, desc: &NodeDesc) -> Option<Place> {
        let (bd, td) = desc.block(self.block)?;
        let t = td
            .topics
            .get((self.slot as u16).checked_sub(bd.topic_slot)? as usize)?;
        let stage_base = (t.dir == DataDirection::M2s && t.stage_offset != u16::MAX)
            .then(|| bd.stage_offset as usize + t.stage_offset as usize);
        Some(Place {
            topic_base: bd.topic_offset as usize + t.offset as usize,
            stage_base,
            size: t.size as usize,
        })
    }

    /// Where the entry's bytes live in the topic arena.
    pub(crate) fn topic_abs(&self, desc: &NodeDesc) -> Option<usize> {
        Some(self.place(desc)?.topic_base + self.src as usize)
    }
}

/// How much of the plan tables is in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PlanCounts {
    /// Frames defined (`0..frames`).
    pub frames: u16,
    /// Entries used (`0..entries`).
    pub entries: u16,
    /// m2s frames in the sorted index (valid while running).
    pub m2s: u16,
}

impl PlanCounts {
    /// No plan.
    pub(crate) const EMPTY: PlanCounts = PlanCounts {
        frames: 0,
        entries: 0,
        m2s: 0,
    };
}

/// A NAK: the result code and its detail.
pub(crate) type Nak = (ResultCode, u16);

/// Checks one copy entry and resolves it. `occupied` collects the frame bytes already
/// claimed by earlier entries (a frame is at most 64 bytes, so one bit each).
// Out of line: see `topics::copy`.
#[inline(never)]
fn check_entry(
    desc: &NodeDesc,
    wired: &Wired,
    d: &FrameDefine<'_>,
    i: usize,
    occupied: &mut u64,
) -> Result<PlanEntry, Nak> {
    let h = &d.header;
    let detail = i as u16;
    let bad = (ResultCode::BadEntry, detail);
    let e = d.entries.get(i).ok_or(bad)?;
    let (bd, td) = desc.block(e.block).ok_or(bad)?;
    if !wired.get(e.block) {
        return Err((ResultCode::NotWired, detail));
    }
    let topic = td.topics.get(e.topic as usize).ok_or(bad)?;
    let facts = EntryTopic {
        dir: topic.dir,
        size: topic.size,
        staged: topic.stage_offset != u16::MAX,
    };
    let first = d.entries.get(0).ok_or(bad)?;
    if !entry_fits(h, &e, facts, &first, occupied) {
        return Err(bad);
    }
    // `Node::configure` refuses a descriptor with more than 256 topic slots.
    let slot = u8::try_from(bd.topic_slot.saturating_add(e.topic as u16)).map_err(|_| bad)?;
    Ok(PlanEntry {
        src: e.src_offset,
        slot,
        block: e.block,
        len: e.len,
        dst: e.dst_offset,
    })
}

/// Validates a FRAME_DEFINE and, only when every check passes, writes it into the plan.
/// The caller has checked the node's state; `mtu` is the payload size of the
/// acknowledged bus mode.
pub(crate) fn define(
    desc: &NodeDesc,
    wired: &Wired,
    p: &mut Parts<'_>,
    plan: &mut PlanCounts,
    mtu: usize,
    d: &FrameDefine<'_>,
) -> Result<(), Nak> {
    let h = &d.header;
    // Index k ≤ frames held: the plan is cut to k frames and this one appended (§3.7).
    // k = held appends; k = 0 clears (re-provisioning); k < held redefines frame k — a
    // retry whose RESULT was lost is acknowledged again instead of refused.
    let base_frames = h.index as u16;
    let base_entries = if base_frames == plan.frames {
        plan.entries
    } else if base_frames < plan.frames {
        p.frames
            .get(base_frames as usize)
            .map_or(0, |f| f.first_entry)
    } else {
        return Err((ResultCode::BadPlan, 0));
    };
    let max_frames = desc.limits.max_frames;
    if h.index as u16 >= max_frames || h.index as usize >= p.frames.len() {
        return Err((ResultCode::LimitFrames, max_frames));
    }
    let others = p.frames.get(..base_frames as usize).unwrap_or(&[]);
    if !DATA_ID_RANGE.contains(&h.std_id) || others.iter().any(|f| f.std_id == h.std_id) {
        return Err((ResultCode::BadStdId, 0));
    }
    if h.len == 0 || h.len as usize > mtu {
        return Err((ResultCode::BadLength, 0));
    }
    let group_ok = h.group_parts >= 1
        && h.group_index < h.group_parts
        && (h.group_parts == 1 || (h.sequenced && d.entries.len() > 0));
    // A period past MAX_PERIOD_US would look already due on the wrapping clock and
    // send the frame on every poll.
    if !group_ok
        || (h.dir == DataDirection::M2s && h.period_us != 0)
        || !fcan_core::timing::period_ok(h.period_us)
    {
        return Err((ResultCode::BadPlan, 0));
    }
    let n = d.entries.len();
    let max_entries = desc.limits.max_copy_entries;
    let Ok(entry_count) = u8::try_from(n) else {
        return Err((ResultCode::LimitEntries, max_entries));
    };
    let total = base_entries as usize + n;
    if total > max_entries as usize || total > p.entries.len() {
        return Err((ResultCode::LimitEntries, max_entries));
    }
    // Pass 1: check everything, write nothing.
    let mut occupied = 0u64;
    let mut bits = PresenceBits::new();
    let mut first_slot = None;
    let mut shared = false;
    for i in 0..n {
        let e = check_entry(desc, wired, d, i, &mut occupied)?;
        if h.masked && bits.bit(e.slot()).is_none() {
            // More topics than the mask has bits.
            return Err((ResultCode::BadEntry, i as u16));
        }
        shared |= *first_slot.get_or_insert(e.slot()) != e.slot();
    }
    // A frame shared by topics sent per publication must say which it delivers, and only
    // such a frame has a mask (which also keeps masks off sequenced groups).
    let topics = if shared { 2 } else { n.min(1) };
    if h.masked != needs_mask(h.dir, h.period_us, topics) {
        return Err((ResultCode::BadPlan, 0));
    }
    // Pass 2: the same checks cannot fail now; write.
    let mut occupied = 0u64;
    for i in 0..n {
        let e = check_entry(desc, wired, d, i, &mut occupied)?;
        if let Some(slot) = p.entries.get_mut(base_entries as usize + i) {
            *slot = e;
        }
    }
    let frame = PlanFrame {
        std_id: h.std_id,
        s2m: h.dir == DataDirection::S2m,
        sequenced: h.sequenced,
        masked: h.masked,
        len: h.len,
        group_parts: h.group_parts,
        group_index: h.group_index,
        period: Us(h.period_us),
        first_entry: base_entries,
        entry_count,
        next_due: At(0),
        pending: 0,
    };
    if let Some(slot) = p.frames.get_mut(h.index as usize) {
        *slot = frame;
    }
    plan.frames = base_frames + 1;
    plan.entries = total as u16;
    plan.m2s = 0;
    Ok(())
}

/// The topic slot every entry of frame `f` names (groups carry one topic), if any.
fn group_slot(p: &Parts<'_>, f: &PlanFrame) -> Option<u16> {
    p.entries.get(f.entries())?.first().map(|e| e.slot())
}

/// START's check: exactly `frame_count` frames, and every group complete with its parts
/// in order, one direction and one topic.
pub(crate) fn check_start(p: &Parts<'_>, plan: &PlanCounts, frame_count: u8) -> Result<(), Nak> {
    let bad = (ResultCode::BadPlan, 0);
    if frame_count as u16 != plan.frames {
        return Err(bad);
    }
    let frames = p.frames.get(..plan.frames as usize).ok_or(bad)?;
    let mut i = 0usize;
    // Every iteration advances by at least one frame.
    while let Some(head) = frames.get(i) {
        if head.group_index != 0 {
            return Err(bad);
        }
        let parts = head.group_parts.max(1) as usize;
        for k in 1..parts {
            let part = frames.get(i + k).ok_or(bad)?;
            let same = part.group_index as usize == k
                && part.group_parts == head.group_parts
                && part.s2m == head.s2m
                && part.sequenced == head.sequenced
                && group_slot(p, part) == group_slot(p, head);
            if !same {
                return Err(bad);
            }
        }
        i += parts;
    }
    Ok(())
}

/// Sorts the m2s frames by standard ID for [`lookup`]; returns how many there are.
pub(crate) fn build_index(p: &mut Parts<'_>, plan: &PlanCounts) -> u16 {
    let mut n = 0usize;
    for fi in 0..plan.frames {
        let Some(f) = p.frames.get(fi as usize) else {
            break;
        };
        if f.s2m {
            continue;
        }
        let id = f.std_id;
        // Insertion sort: plans are small and this runs once per START.
        let mut at = n;
        while at > 0 {
            let prev = p.m2s_index.get(at - 1).copied().unwrap_or(0);
            let prev_id = p.frames.get(prev as usize).map_or(0, |f| f.std_id);
            if prev_id <= id {
                break;
            }
            if let Some(slot) = p.m2s_index.get_mut(at) {
                *slot = prev;
            }
            at -= 1;
        }
        // A plan has at most 256 frames: FRAME_DEFINE's index is a byte.
        if let (Some(slot), Ok(fi)) = (p.m2s_index.get_mut(at), u8::try_from(fi)) {
            *slot = fi;
        }
        n += 1;
    }
    n as u16
}

/// The m2s plan frame with standard ID `id`, by binary search over the sorted index.
pub(crate) fn lookup(p: &Parts<'_>, m2s: u16, id: u16) -> Option<u16> {
    let index = p.m2s_index.get(..m2s as usize)?;
    let pos = index
        .binary_search_by_key(&id, |&fi| p.frames.get(fi as usize).map_or(0, |f| f.std_id))
        .ok()?;
    index.get(pos).map(|&fi| fi as u16)
}
