//! Building a data frame's payload from its copy entries (protocol §4): the one builder
//! of the node (s2m frames) and the master (m2s frames). Byte 0 of a masked frame is its
//! presence mask and of a sequenced one its sequence number; both are the caller's, the
//! builder returns the mask of the topics it delivered.

use crate::presence::PresenceBits;

/// One copy entry of a data frame: its topic (any key that names one topic to the
/// caller) and where its bytes are in the topic's value and in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Piece<K> {
    /// The topic.
    pub topic: K,
    /// Offset in the topic's packed value.
    pub src: u16,
    /// Offset in the frame's payload.
    pub dst: u8,
    /// Bytes.
    pub len: u8,
}

/// Fills `buf` (the frame's payload, zeroed first): every piece whose topic is
/// delivered (`delivered(topic, bit)`, `bit` being the topic's presence bit in this
/// frame, `None` past the eighth topic) gets its bytes from the topic's value
/// (`value(topic)`; `None` or too short: left zero). The bytes of other topics stay
/// zero. Returns the mask of the delivered topics' presence bits.
///
/// ```
/// use fcan_core::dataframe::{build, Piece};
/// // A frame shared by topics 'a' (2 bytes) and 'b' (1 byte), after a mask byte.
/// let pieces = [
///     Piece { topic: 'a', src: 0, dst: 1, len: 2 },
///     Piece { topic: 'b', src: 0, dst: 3, len: 1 },
/// ];
/// let mut buf = [0xEE; 4];
/// let mask = build(&mut buf, pieces, |t, _| t == 'b', |t| match t {
///     'a' => Some(&[1, 2][..]),
///     _ => Some(&[3][..]),
/// });
/// buf[0] = mask;
/// assert_eq!(buf, [0b10, 0, 0, 3]);
/// ```
pub fn build<'v, K: Copy + PartialEq + Default>(
    buf: &mut [u8],
    pieces: impl IntoIterator<Item = Piece<K>>,
    mut delivered: impl FnMut(K, Option<u8>) -> bool,
    mut value: impl FnMut(K) -> Option<&'v [u8]>,
) -> u8 {
    buf.fill(0);
    let mut bits = PresenceBits::new();
    let mut mask = 0u8;
    for p in pieces {
        let bit = bits.bit(p.topic);
        if !delivered(p.topic, bit) {
            continue;
        }
        if let Some(b) = bit {
            mask |= 1 << b;
        }
        let (s, d, l) = (p.src as usize, p.dst as usize, p.len as usize);
        if let (Some(from), Some(to)) = (
            value(p.topic).and_then(|v| v.get(s..s + l)),
            buf.get_mut(d..d + l),
        ) {
            to.copy_from_slice(from);
        }
    }
    mask
}

/// What the receiver of a FRAME_DEFINE knows of the topic a copy entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EntryTopic {
    /// Its direction.
    pub dir: crate::msg::DataDirection,
    /// Its packed size.
    pub size: u16,
    /// Whether the node keeps a staging copy of it (an m2s topic over 8 bytes), which an
    /// m2s group needs.
    pub staged: bool,
}

/// Whether copy entry `e` of a frame with header `h` is valid (protocol §4.1): the
/// topic flows the frame's way, the entry copies at least one byte, within the topic
/// and within the frame, not into byte 0 of a sequenced or masked frame, not over bytes
/// an earlier entry of the frame claimed (`occupied`, one bit per frame byte, updated
/// when valid), and a group's entries all name the topic of its first entry (`first`),
/// which, for an m2s group, the node stages. The one rule of the node (which NAKs an
/// entry that breaks it) and of the master's planner (which never plans one).
///
/// ```
/// use fcan_core::dataframe::{entry_fits, EntryTopic};
/// use fcan_core::msg::{CopyEntry, DataDirection, FrameHeader};
/// let h = FrameHeader { index: 0, std_id: 0x120, dir: DataDirection::M2s, sequenced: false,
///     masked: false, len: 8, group_parts: 1, group_index: 0, period_us: 0 };
/// let topic = EntryTopic { dir: DataDirection::M2s, size: 5, staged: false };
/// let e = CopyEntry { block: 0, topic: 0, src_offset: 0, len: 5, dst_offset: 0 };
/// let mut occupied = 0;
/// assert!(entry_fits(&h, &e, topic, &e, &mut occupied));
/// // The same bytes again overlap.
/// assert!(!entry_fits(&h, &e, topic, &e, &mut occupied));
/// ```
pub fn entry_fits(
    h: &crate::msg::FrameHeader,
    e: &crate::msg::CopyEntry,
    topic: EntryTopic,
    first: &crate::msg::CopyEntry,
    occupied: &mut u64,
) -> bool {
    if topic.dir != h.dir || e.len == 0 {
        return false;
    }
    let src_end = (e.src_offset as usize).saturating_add(e.len as usize);
    let dst_end = (e.dst_offset as usize).saturating_add(e.len as usize);
    if src_end > topic.size as usize || dst_end > h.len as usize || dst_end > 64 {
        return false;
    }
    // Byte 0 of a sequenced frame is its sequence number, of a masked one its mask.
    if (h.sequenced || h.masked) && e.dst_offset == 0 {
        return false;
    }
    // dst_end <= 64, so the shift stays within the word.
    let bits = if e.len >= 64 {
        u64::MAX
    } else {
        ((1u64 << e.len) - 1) << e.dst_offset
    };
    if *occupied & bits != 0 {
        return false;
    }
    if h.group_parts > 1 {
        // A group carries one topic, and an m2s group needs somewhere to stage it.
        if first.block != e.block || first.topic != e.topic {
            return false;
        }
        if h.dir == crate::msg::DataDirection::M2s && !topic.staged {
            return false;
        }
    }
    *occupied |= bits;
    true
}
