//! Following the first bytes of a multi-frame transfer without reassembling all of it.
//!
//! The router learns from two messages that may span several frames: ANNOUNCE (node →
//! master; its boot_id) and FRAME_DEFINE (master → node; its identifier, direction and
//! plan index). Both keep what the router needs in their fixed part
//! ([`Announce::FIXED_LEN`], [`FrameDefine::HEADER_LEN`] bytes), which is at most the
//! first two frames on Classical CAN and the first frame on CAN FD. So instead of a
//! reassembly buffer for the whole message (up to 1542 bytes for a FRAME_DEFINE), a
//! capture slot keeps just that prefix, following the segmentation rules of
//! `docs/protocol.md` §2.3 (in-order segments, restart on segment 0, timeout).
//!
//! The prefix is then decoded by fcan-core's own decoder, followed by zeros standing in
//! for the variable part, so the router restates no byte offset.

use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::{Announce, FrameDefine};
use fcan_core::segment::{TransferKey, TRANSFER_TIMEOUT_US};

/// Bytes of the longest prefix captured.
pub(crate) const PREFIX_MAX: usize = if Announce::FIXED_LEN > FrameDefine::HEADER_LEN {
    Announce::FIXED_LEN
} else {
    FrameDefine::HEADER_LEN
};

/// How many prefix bytes the router needs from a transfer of this kind, or `None` when it
/// does not follow such transfers.
pub(crate) fn wanted(id: &ConfigId) -> Option<usize> {
    match (id.opcode, id.dir) {
        (Opcode::Discover, Direction::ToMaster) => Some(Announce::FIXED_LEN),
        (Opcode::FrameDefine, Direction::ToNode) => Some(FrameDefine::HEADER_LEN),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    key: Option<TransferKey>,
    next: u8,
    have: u8,
    last_us: u32,
    buf: [u8; PREFIX_MAX],
}

impl Slot {
    const EMPTY: Slot = Slot {
        key: None,
        next: 0,
        have: 0,
        last_us: 0,
        buf: [0; PREFIX_MAX],
    };

    fn expired(&self, now_us: u32) -> bool {
        now_us.wrapping_sub(self.last_us) > TRANSFER_TIMEOUT_US
    }

    fn append(&mut self, data: &[u8], want: usize) {
        let have = self.have as usize;
        let take = want.saturating_sub(have).min(data.len());
        if let (Some(dst), Some(src)) = (self.buf.get_mut(have..have + take), data.get(..take)) {
            dst.copy_from_slice(src);
            self.have = (have + take) as u8;
        }
    }
}

/// What one frame did to the captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Captured {
    /// Not a transfer the router follows, or still waiting for more segments.
    Nothing,
    /// The prefix is complete and was copied to the output buffer.
    Done,
    /// The transfer could not be followed (no slot, a gap).
    Missed,
}

/// `SLOTS` transfers followed at once.
#[derive(Clone, Debug)]
pub(crate) struct Captures<const SLOTS: usize> {
    slots: [Slot; SLOTS],
}

impl<const SLOTS: usize> Captures<SLOTS> {
    pub(crate) const fn new() -> Self {
        Captures {
            slots: [Slot::EMPTY; SLOTS],
        }
    }

    /// Takes one frame; on [`Captured::Done`], `out[..want]` holds the prefix.
    pub(crate) fn push(
        &mut self,
        id: ConfigId,
        data: &[u8],
        now_us: u32,
        out: &mut [u8; PREFIX_MAX],
    ) -> Captured {
        let Some(want) = wanted(&id) else {
            return Captured::Nothing;
        };
        let key = TransferKey::from(id);
        if id.segment == 0 {
            // A new start replaces an unfinished transfer with the same key.
            self.cancel(key);
            if let (Some(src), Some(dst)) = (data.get(..want), out.get_mut(..want)) {
                dst.copy_from_slice(src);
                return Captured::Done;
            }
            if id.eot {
                // Shorter than its fixed part: malformed; the receiver rejects it.
                return Captured::Nothing;
            }
            let Some(slot) = self.free_slot(now_us) else {
                return Captured::Missed;
            };
            *slot = Slot {
                key: Some(key),
                next: 1,
                have: 0,
                last_us: now_us,
                buf: [0; PREFIX_MAX],
            };
            slot.append(data, want);
            return Captured::Nothing;
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.key == Some(key)) else {
            return Captured::Nothing;
        };
        if id.segment < slot.next {
            return Captured::Nothing; // duplicate
        }
        if id.segment > slot.next || slot.expired(now_us) {
            slot.key = None;
            return Captured::Missed;
        }
        slot.append(data, want);
        slot.next = slot.next.saturating_add(1);
        slot.last_us = now_us;
        if slot.have as usize >= want {
            slot.key = None;
            if let (Some(src), Some(dst)) = (slot.buf.get(..want), out.get_mut(..want)) {
                dst.copy_from_slice(src);
                return Captured::Done;
            }
            return Captured::Missed;
        }
        if id.eot {
            slot.key = None;
        }
        Captured::Nothing
    }

    /// Frees slots silent for longer than the transfer timeout.
    pub(crate) fn expire(&mut self, now_us: u32) {
        for s in self.slots.iter_mut() {
            if s.key.is_some() && s.expired(now_us) {
                s.key = None;
            }
        }
    }

    /// Transfers being followed.
    pub(crate) fn in_progress(&self) -> usize {
        self.slots.iter().filter(|s| s.key.is_some()).count()
    }

    fn cancel(&mut self, key: TransferKey) {
        for s in self.slots.iter_mut() {
            if s.key == Some(key) {
                s.key = None;
            }
        }
    }

    fn free_slot(&mut self, now_us: u32) -> Option<&mut Slot> {
        let i = self
            .slots
            .iter()
            .position(|s| s.key.is_none() || s.expired(now_us))?;
        self.slots.get_mut(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::Mtu;
    use fcan_core::id::NodeId;
    use fcan_core::msg::{ConfigMessage, DataDirection, Entries, FrameHeader};
    use fcan_core::segment::Segmenter;
    use std::vec::Vec;

    fn define(index: u8, std_id: u16) -> Vec<u8> {
        let entries = [fcan_core::msg::CopyEntry {
            block: 0,
            topic: 1,
            src_offset: 0,
            len: 4,
            dst_offset: 0,
        }; 3];
        let msg = ConfigMessage::FrameDefine(FrameDefine {
            header: FrameHeader {
                index,
                std_id,
                dir: DataDirection::M2s,
                sequenced: false,
                masked: false,
                len: 8,
                group_parts: 1,
                group_index: 0,
                period_us: 0,
            },
            entries: Entries::List(&entries),
        });
        let mut buf = [0u8; 64];
        let n = msg.encode(&mut buf).unwrap();
        buf[..n].to_vec()
    }

    fn id(transfer: u8) -> ConfigId {
        ConfigId::single(
            Opcode::FrameDefine,
            Direction::ToNode,
            NodeId::new(3).unwrap(),
            transfer,
        )
    }

    #[test]
    fn classic_prefix_spans_two_segments() {
        let payload = define(2, 0x123);
        let mut c: Captures<2> = Captures::new();
        let mut out = [0u8; PREFIX_MAX];
        let frames: Vec<_> = Segmenter::new(id(7), Mtu::Classic, &payload, &[])
            .unwrap()
            .collect();
        assert!(frames.len() > 2);
        let mut done = 0;
        for (k, f) in frames.iter().enumerate() {
            let cid = ConfigId::from_can_id(f.id()).unwrap();
            let r = c.push(cid, f.data(), 10, &mut out);
            if r == Captured::Done {
                assert_eq!(k, 1);
                done += 1;
            }
        }
        assert_eq!(done, 1);
        assert_eq!(
            &out[..FrameDefine::HEADER_LEN],
            &payload[..FrameDefine::HEADER_LEN]
        );
        assert_eq!(c.in_progress(), 0);
    }

    #[test]
    fn fd_prefix_is_in_the_first_frame() {
        let payload = define(0, 0x200);
        let mut c: Captures<1> = Captures::new();
        let mut out = [0u8; PREFIX_MAX];
        let f = Segmenter::new(id(1), Mtu::Fd, &payload, &[])
            .unwrap()
            .next()
            .unwrap();
        let cid = ConfigId::from_can_id(f.id()).unwrap();
        assert_eq!(c.push(cid, f.data(), 0, &mut out), Captured::Done);
        assert_eq!(c.in_progress(), 0);
    }

    #[test]
    fn gaps_no_slot_duplicates_and_timeouts() {
        let mut c: Captures<1> = Captures::new();
        let mut out = [0u8; PREFIX_MAX];
        let s0 = id(1).with_segment(0, false);
        let s1 = id(1).with_segment(1, false);
        let s2 = id(1).with_segment(2, true);
        // gap: segment 2 after 0
        assert_eq!(c.push(s0, &[0; 8], 0, &mut out), Captured::Nothing);
        assert_eq!(c.push(s2, &[0; 8], 0, &mut out), Captured::Missed);
        // no slot for a second transfer
        assert_eq!(c.push(s0, &[0; 8], 0, &mut out), Captured::Nothing);
        let other = id(2).with_segment(0, false);
        assert_eq!(c.push(other, &[0; 8], 0, &mut out), Captured::Missed);
        // duplicate of segment 0 restarts; duplicate of 1 ignored
        assert_eq!(c.push(s0, &[0; 8], 0, &mut out), Captured::Nothing);
        // a segment after the timeout
        assert_eq!(
            c.push(s1, &[0; 8], TRANSFER_TIMEOUT_US + 1, &mut out),
            Captured::Missed
        );
        // an expired slot is reused
        assert_eq!(c.push(s0, &[0; 8], 0, &mut out), Captured::Nothing);
        assert_eq!(
            c.push(other, &[0; 8], 2 * TRANSFER_TIMEOUT_US, &mut out),
            Captured::Nothing
        );
        c.expire(4 * TRANSFER_TIMEOUT_US);
        assert_eq!(c.in_progress(), 0);
        // a short single-frame transfer is not captured
        assert_eq!(c.push(id(3), &[1, 2, 3], 0, &mut out), Captured::Nothing);
        // not followed at all
        let hb = ConfigId::single(
            Opcode::Heartbeat,
            Direction::ToMaster,
            NodeId::new(1).unwrap(),
            0,
        );
        assert_eq!(c.push(hb, &[0; 8], 0, &mut out), Captured::Nothing);
    }
}
