//! The receive queue: configuration-plane frames wait here from `receive` until `poll`
//! handles them, so `receive` only copies and can run from an interrupt's context.

use fcan_core::frame::FD_MAX_LEN;

/// Configuration-plane frames the receive queue holds between polls; more are dropped
/// and counted ([`crate::Node::rx_overflows`]).
///
/// Sized in messages, not frames: the segments before the last of a master→node
/// transfer are reassembled in `receive` itself when nothing waits before them (that is
/// only copying), so a long transfer (a FRAME_DEFINE of up to 50 Classical segments)
/// takes one slot, its last segment. Single-frame requests, service frames and frames
/// that arrive while others wait take one slot each. A master has one provisioning step
/// or request in flight per node, so eight slots hold what a few masters' requests,
/// heartbeats and retries put between two polls; and since at most eight 8-byte extended
/// frames end within a millisecond at 1 Mbit/s, a main loop that polls every millisecond
/// never loses a frame even to a burst of single frames (`tests/rx_depth.rs` proves both
/// at line rate). Sixteen slots (+576 B of RAM) were used before segments were taken in
/// `receive`.
///
/// A slot holds only what a configuration frame needs (the raw extended identifier, the
/// length and 64 payload bytes: 72 bytes with alignment), not a whole `Frame`.
pub const RX_QUEUE_LEN: usize = 8;

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

/// A ring of [`RX_QUEUE_LEN`] frames, written here rather than taken from `heapless`:
/// measured on the eight-motor firmware, `heapless::Deque` (0.8) cost 140 bytes of flash
/// and 8 of RAM more than this ring (its by-value `push_back`/`pop_front` of 72-byte
/// frames), with the flash target not yet met.
pub(crate) struct RxQueue {
    frames: [RxFrame; RX_QUEUE_LEN],
    head: u8,
    len: u8,
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
        let at = (self.head as usize + self.len as usize) % RX_QUEUE_LEN;
        let Some(slot) = self
            .frames
            .get_mut(at)
            .filter(|_| (self.len as usize) < RX_QUEUE_LEN)
        else {
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

    /// Takes the oldest frame.
    pub(crate) fn pop(&mut self) -> Option<RxFrame> {
        let f = self
            .frames
            .get(self.head as usize)
            .filter(|_| self.len > 0)?;
        self.head = ((self.head as usize + 1) % RX_QUEUE_LEN) as u8;
        self.len -= 1;
        Some(*f)
    }

    /// Whether no frame waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}
