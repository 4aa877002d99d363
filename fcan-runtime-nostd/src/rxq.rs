//! The receive queue: configuration-plane frames wait here from `receive` until `poll`
//! handles them, so `receive` only copies and can run from an interrupt's context.

use fcan_core::frame::FD_MAX_LEN;

/// Configuration-plane frames the receive queue holds between polls; more are dropped
/// and counted ([`crate::Node::rx_overflows`]).
///
/// Sized for the burst between two polls, not for one message: a master sends the
/// segments of a configuration message back to back (on Classical CAN, 8 bytes a
/// segment, a FRAME_DEFINE of 12 + 6 bytes per copy entry is 3–7 segments for a few
/// entries and up to 50 for the longest [`crate::CONFIG_REASSEMBLY_BYTES`] takes); a
/// board's main loop typically drains its controller's receive FIFO into `receive` and
/// then polls once; and `poll` handles at most one queued frame per free place in the
/// outgoing queue. About seven 8-byte extended frames fit in a millisecond at 1 Mbit/s,
/// so 16 slots give a 1 ms poll loop a margin of two. Eight slots (−552 B of RAM) were
/// considered and not taken: the host end-to-end harness polls after every frame, so no
/// test shows that eight are enough on a real bus.
///
/// A slot holds only what a configuration frame needs (the raw extended identifier, the
/// length and 64 payload bytes: 72 bytes with alignment), not a whole `Frame`. Storing
/// the three as parallel arrays would save 48 bytes of RAM; measured on the eight-motor
/// firmware it cost 64–144 bytes of flash, so it was not kept.
pub const RX_QUEUE_LEN: usize = 16;

/// One queued frame: the raw extended identifier and its payload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxFrame {
    pub raw_id: u32,
    pub len: u8,
    pub data: [u8; FD_MAX_LEN],
}

impl RxFrame {
    const EMPTY: RxFrame = RxFrame {
        raw_id: 0,
        len: 0,
        data: [0; FD_MAX_LEN],
    };

    /// The payload.
    pub(crate) fn payload(&self) -> &[u8] {
        self.data.get(..self.len as usize).unwrap_or(&[])
    }
}

/// A fixed ring of [`RX_QUEUE_LEN`] frames.
pub(crate) struct RxQueue {
    frames: [RxFrame; RX_QUEUE_LEN],
    head: usize,
    len: usize,
}

impl RxQueue {
    pub(crate) const fn new() -> RxQueue {
        RxQueue {
            frames: [RxFrame::EMPTY; RX_QUEUE_LEN],
            head: 0,
            len: 0,
        }
    }

    /// Appends a copy of the frame; false when full.
    pub(crate) fn push(&mut self, raw_id: u32, data: &[u8]) -> bool {
        if self.len >= RX_QUEUE_LEN {
            return false;
        }
        let at = (self.head + self.len) % RX_QUEUE_LEN;
        let Some(slot) = self.frames.get_mut(at) else {
            return false;
        };
        let n = data.len().min(FD_MAX_LEN);
        slot.raw_id = raw_id;
        slot.len = n as u8;
        if let (Some(d), Some(s)) = (slot.data.get_mut(..n), data.get(..n)) {
            d.copy_from_slice(s);
        }
        self.len += 1;
        true
    }

    /// The oldest frame, left in place.
    pub(crate) fn peek(&self) -> Option<&RxFrame> {
        if self.len == 0 {
            return None;
        }
        self.frames.get(self.head)
    }

    /// Removes the oldest frame.
    pub(crate) fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % RX_QUEUE_LEN;
            self.len -= 1;
        }
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}
