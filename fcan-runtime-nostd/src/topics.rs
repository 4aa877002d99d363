//! Topic values: the data plane. m2s frames are copied into the topic arena (through the
//! staging arena for multi-frame groups, so a reader never sees a torn value); s2m
//! frames are built from it.

use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::storage::Parts;
use crate::tables::{PlanEntry, PlanFrame, TopicState};
use crate::wired::Wired;
use fcan_core::dataframe::{self, Piece};
use fcan_core::group::{stage_part, PartOutcome};
use fcan_core::msg::Counters;
use fcan_core::presence::PresenceBits;
use fcan_core::timing::At;

/// A read-only view of a topic's current value. Returned by [`crate::Node::topic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TopicRead<'a> {
    /// The packed value (exactly the topic's size).
    pub bytes: &'a [u8],
    /// How many complete updates the value has seen; 0 means never written. Compare with
    /// the previous read to know whether a command is new.
    pub generation: u32,
    /// The node clock when the value was last updated (received for m2s, published for
    /// s2m).
    pub received_at_us: u32,
}

impl TopicRead<'_> {
    /// Microseconds since the last update, on the wrapping clock.
    ///
    /// ```
    /// use fcan_runtime_nostd::TopicRead;
    /// let r = TopicRead { bytes: &[], generation: 1, received_at_us: u32::MAX - 9 };
    /// assert_eq!(r.age_us(10), 20);
    /// ```
    pub fn age_us(&self, now_us: u32) -> u32 {
        now_us.wrapping_sub(self.received_at_us)
    }
}

/// The current value of a topic of a wired block: what [`crate::Node::topic`] and
/// [`crate::Context::topic`] return.
pub(crate) fn read<'a>(
    desc: &NodeDesc,
    wired: &Wired,
    arena: &'a [u8],
    states: &[TopicState],
    block: u8,
    topic: u8,
) -> Option<TopicRead<'a>> {
    if !wired.get(block) {
        return None;
    }
    let (bd, td) = desc.block(block)?;
    let t = td.topics.get(topic as usize)?;
    let start = bd.topic_offset as usize + t.offset as usize;
    let bytes = arena.get(start..start + t.size as usize)?;
    let st = states.get(bd.topic_slot as usize + topic as usize)?;
    Some(TopicRead {
        bytes,
        generation: st.generation,
        received_at_us: st.received_at.0,
    })
}

/// Copies `len` bytes from `src[from..]` to `dst[to..]`; false when either range is out
/// of bounds (nothing copied).
// Out of line, like `OutQueue::push` and `segment`: LLVM's inlining at opt-level "s"
// copies small helpers into every caller; these four together (`OutMsg::new`,
// `OutMsg::inline`, `check_entry`, `topics::copy`) measured 280 B of flash on the
// eight-motor firmware (docs/performance.md, "Firmware size").
#[inline(never)]
pub(crate) fn copy(dst: &mut [u8], to: usize, src: &[u8], from: usize, len: usize) -> bool {
    let (Some(s), Some(d)) = (
        src.get(from..from.saturating_add(len)),
        dst.get_mut(to..to.saturating_add(len)),
    ) else {
        return false;
    };
    d.copy_from_slice(s);
    true
}

/// The mask with a bit for each topic of `entries` (`fcan_core::presence`).
pub(crate) fn all_bits(entries: &[PlanEntry]) -> u8 {
    let mut bits = PresenceBits::new();
    for e in entries {
        bits.bit(e.slot());
    }
    bits.all()
}

/// The presence bit of topic `slot` among `entries` as a mask value (`1 << bit`), 0 if
/// the frame has no bit for it.
pub(crate) fn bit_of_slot(entries: &[PlanEntry], slot: u16) -> u8 {
    let mut bits = PresenceBits::new();
    for e in entries {
        let b = bits.bit(e.slot());
        if e.slot() == slot {
            return b.map_or(0, |b| 1 << b);
        }
    }
    0
}

/// Applies one m2s data frame (already matched to plan frame `fi`) to the topics.
pub(crate) fn apply_m2s(
    desc: &NodeDesc,
    p: &mut Parts<'_>,
    counters: &mut Counters,
    fi: u16,
    data: &[u8],
    now: At,
) {
    let Some(f) = p.frames.get(fi as usize).copied() else {
        return;
    };
    if data.len() < f.len as usize {
        bump(&mut counters.rx_malformed);
        return;
    }
    let Some(entries) = p.entries.get(f.entries()) else {
        return;
    };
    if f.group_parts <= 1 {
        // One frame is one atomic update of the topics it delivers: copy and bump.
        let mut mask = u8::MAX;
        if f.masked {
            let Some(&m) = data.first() else {
                bump(&mut counters.rx_malformed);
                return;
            };
            // A bit for a topic the frame does not carry: not from a conforming sender,
            // so none of its bytes are trusted.
            if m & !all_bits(entries) != 0 {
                bump(&mut counters.rx_malformed);
                return;
            }
            mask = m;
        }
        // An unmasked m2s frame has one topic: bit 0.
        let mut bits = PresenceBits::new();
        let mut bumped = 0u8;
        for e in entries.iter() {
            let bit = bits.bit(e.slot()).map_or(0, |b| 1u8 << b);
            if mask & bit == 0 {
                continue;
            }
            if let Some(at) = e.topic_abs(desc) {
                copy(p.topic, at, data, e.dst as usize, e.len as usize);
            }
            // The generation goes up once per topic per frame.
            if bumped & bit == 0 {
                bumped |= bit;
                if let Some(t) = p.topics.get_mut(e.slot as usize) {
                    t.generation = t.generation.wrapping_add(1).max(1);
                    t.received_at = now;
                }
            }
        }
        bump(&mut counters.rx_handled);
        return;
    }
    apply_group_part(desc, p, counters, fi, &f, data, now);
}

/// One part of a sequenced multi-frame group: staged until the last part arrives in
/// order with the same sequence byte, then copied to the live value in one go
/// (`fcan_core::group`, the assembler the master uses too).
fn apply_group_part(
    desc: &NodeDesc,
    p: &mut Parts<'_>,
    counters: &mut Counters,
    fi: u16,
    f: &PlanFrame,
    data: &[u8],
    now: At,
) {
    let Some(entries) = p.entries.get(f.entries()) else {
        return;
    };
    // Validation guarantees every entry of a group frame is of one topic.
    let Some(first) = entries.first().copied() else {
        bump(&mut counters.rx_handled);
        return;
    };
    let Some(seq) = data.first().copied() else {
        bump(&mut counters.rx_malformed);
        return;
    };
    // Validation guarantees an m2s group's topic has a staging area.
    let Some(place) = first.place(desc) else {
        return;
    };
    let Some(stage_base) = place.stage_base else {
        return;
    };
    let Some(ts) = p.topics.get_mut(first.slot as usize) else {
        return;
    };
    let head = fi.saturating_sub(f.group_index as u16);
    let outcome = ts.group.part(head, f.group_index, f.group_parts, seq);
    match outcome {
        PartOutcome::Started { overtaken } => {
            if overtaken {
                // A new publication overtook an unfinished one.
                bump(&mut counters.reassembly_dropped);
            }
            // Start from the live value so bytes the group does not carry stay as they
            // are.
            copy(p.stage, stage_base, p.topic, place.topic_base, place.size);
        }
        PartOutcome::Broken { .. } => {
            // Out of order, a lost part, or a part of another publication.
            bump(&mut counters.reassembly_dropped);
            return;
        }
        _ => {}
    }
    let Some(stage) = p
        .stage
        .get_mut(stage_base..stage_base.saturating_add(place.size))
    else {
        return;
    };
    stage_part(stage, data, entries.iter().map(|e| (e.src, e.dst, e.len)));
    bump(&mut counters.rx_handled);
    if matches!(outcome, PartOutcome::Complete) {
        copy(p.topic, place.topic_base, p.stage, stage_base, place.size);
        ts.generation = ts.generation.wrapping_add(1).max(1);
        ts.received_at = now;
    }
}

/// Fills `buf` with s2m plan frame `fi`: the sequence byte (when sequenced) or the
/// presence mask of the topics published since it was last sent (when masked), and the
/// copy entries of the topics it delivers from the live topic values; the bytes of a
/// masked frame's other topics stay zero. Returns the meaningful length.
pub(crate) fn build_s2m(
    desc: &NodeDesc,
    p: &Parts<'_>,
    fi: u16,
    seq: u8,
    buf: &mut [u8; 64],
) -> Option<usize> {
    let f = p.frames.get(fi as usize)?;
    let entries = p.entries.get(f.entries())?;
    let pending = f.pending & all_bits(entries);
    let pieces = entries.iter().map(|e| Piece {
        // One topic, one key: its slot, with its block for the lookup.
        topic: u16::from_le_bytes([e.slot, e.block]),
        src: e.src,
        dst: e.dst,
        len: e.len,
    });
    // An unmasked frame sends every entry (a periodic one may have more than eight
    // topics, which have no bit); a masked one the topics published since it last went.
    let delivered = |_, bit: Option<u8>| !f.masked || bit.is_some_and(|b| pending & (1 << b) != 0);
    let value = |key: u16| {
        let [slot, block] = key.to_le_bytes();
        let place = PlanEntry::of_topic(slot, block).place(desc)?;
        p.topic.get(place.topic_base..place.topic_base + place.size)
    };
    let mask = dataframe::build(buf, pieces, delivered, value);
    if f.masked {
        *buf.first_mut()? = mask;
    } else if f.sequenced {
        *buf.first_mut()? = seq;
    }
    Some(f.len as usize)
}
