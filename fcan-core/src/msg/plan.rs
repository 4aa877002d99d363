//! FRAME_DEFINE: one data frame of a node's frame plan and its copy entries.

use super::{DecodeError, EncodeError};
use crate::pack::{Reader, Writer};

/// Which way a data frame flows. One byte (0, 1) where a table holds it, so C tables of
/// the same layout can be read as the runtime's (`fcan-node-c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DataDirection {
    /// Master → node (commands, `dir: m2s` topics).
    M2s = 0,
    /// Node → master (feedback, `dir: s2m` topics).
    S2m = 1,
}

/// FRAME_DEFINE flag bits.
pub mod frame_flags {
    /// The frame flows node → master.
    pub const S2M: u8 = 1 << 0;
    /// Byte 0 of the frame is a publication sequence number (frames of a multi-frame
    /// group, `docs/protocol.md` §4.3).
    pub const SEQUENCED: u8 = 1 << 1;
    /// Byte 0 of the frame is a presence mask saying which of its topics the frame
    /// delivers (`docs/protocol.md` §4.2, [`crate::presence`]).
    pub const MASKED: u8 = 1 << 2;
    /// Bits this protocol version defines.
    pub const KNOWN: u8 = S2M | SEQUENCED | MASKED;
}

/// Copies `len` bytes between a topic's packed value (at `src_offset`) and a data frame's
/// payload (at `dst_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CopyEntry {
    /// Global block number, see [`crate::numbering`].
    pub block: u8,
    /// Topic index within the block's type.
    pub topic: u8,
    /// Byte offset within the topic's packed value.
    pub src_offset: u16,
    /// Bytes to copy.
    pub len: u8,
    /// Byte offset within the frame payload.
    pub dst_offset: u8,
}

impl CopyEntry {
    /// Encoded size of one entry.
    pub const LEN: usize = 6;

    fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.block)?;
        w.u8(self.topic)?;
        w.u16(self.src_offset)?;
        w.u8(self.len)?;
        Ok(w.u8(self.dst_offset)?)
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CopyEntry {
            block: r.u8()?,
            topic: r.u8()?,
            src_offset: r.u16()?,
            len: r.u8()?,
            dst_offset: r.u8()?,
        })
    }
}

/// The fixed part of a FRAME_DEFINE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameHeader {
    /// Position in the plan, `0..max_frames`. Index 0 clears any previous plan first.
    pub index: u8,
    /// Standard ID the frame uses (within [`crate::id::DATA_ID_RANGE`]).
    pub std_id: u16,
    /// Direction.
    pub dir: DataDirection,
    /// Whether byte 0 carries a publication sequence number.
    pub sequenced: bool,
    /// Whether byte 0 carries a presence mask (the frame is shared by several m2s or
    /// on-commit topics, [`crate::presence::needs_mask`]).
    pub masked: bool,
    /// Meaningful payload bytes (the frame goes out padded to a legal length).
    pub len: u8,
    /// Number of frames in this frame's group (1 = an ordinary frame).
    pub group_parts: u8,
    /// This frame's position in its group (0 for an ordinary frame).
    pub group_index: u8,
    /// s2m: transmit period in µs; 0 = on commit. m2s: 0 (reserved).
    pub period_us: u32,
}

/// FRAME_DEFINE (master → node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameDefine<'a> {
    /// The fixed part.
    pub header: FrameHeader,
    /// The copy entries.
    pub entries: Entries<'a>,
}

/// The copy entries of a FRAME_DEFINE: a zero-copy view when decoded, a slice when built.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Entries<'a> {
    /// Encoded entries, `CopyEntry::LEN` bytes each.
    Wire(&'a [u8]),
    /// Entries to encode.
    List(&'a [CopyEntry]),
}

impl Entries<'_> {
    /// Number of entries.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        match self {
            Entries::Wire(b) => b.len() / CopyEntry::LEN,
            Entries::List(l) => l.len(),
        }
    }

    /// The `i`-th entry.
    pub fn get(&self, i: usize) -> Option<CopyEntry> {
        match self {
            Entries::Wire(b) => {
                let raw = b.get(i * CopyEntry::LEN..(i + 1) * CopyEntry::LEN)?;
                CopyEntry::decode(&mut Reader::new(raw)).ok()
            }
            Entries::List(l) => l.get(i).copied(),
        }
    }

    /// Every entry in order.
    pub fn iter(&self) -> impl Iterator<Item = CopyEntry> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}

impl PartialEq for Entries<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for Entries<'_> {}

impl<'a> FrameDefine<'a> {
    /// Size of the fixed part.
    pub const HEADER_LEN: usize = 12;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        let h = &self.header;
        let n: u8 = self
            .entries
            .len()
            .try_into()
            .map_err(|_| EncodeError::TooLong)?;
        let mut flags = 0;
        if h.dir == DataDirection::S2m {
            flags |= frame_flags::S2M;
        }
        if h.sequenced {
            flags |= frame_flags::SEQUENCED;
        }
        if h.masked {
            flags |= frame_flags::MASKED;
        }
        w.u8(h.index)?;
        w.u16(h.std_id)?;
        w.u8(flags)?;
        w.u8(h.len)?;
        w.u8(h.group_parts)?;
        w.u8(h.group_index)?;
        w.u32(h.period_us)?;
        w.u8(n)?;
        for e in self.entries.iter() {
            e.encode(w)?;
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let index = r.u8()?;
        let std_id = r.u16()?;
        let flags = r.u8()?;
        if flags & !frame_flags::KNOWN != 0 {
            return Err(DecodeError::ReservedBits);
        }
        let header = FrameHeader {
            index,
            std_id,
            dir: if flags & frame_flags::S2M != 0 {
                DataDirection::S2m
            } else {
                DataDirection::M2s
            },
            sequenced: flags & frame_flags::SEQUENCED != 0,
            masked: flags & frame_flags::MASKED != 0,
            len: r.u8()?,
            group_parts: r.u8()?,
            group_index: r.u8()?,
            period_us: r.u32()?,
        };
        let n = r.u8()? as usize;
        let entries = Entries::Wire(r.bytes(n * CopyEntry::LEN)?);
        Ok(FrameDefine { header, entries })
    }
}
