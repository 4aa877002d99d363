//! Segmentation and reassembly of configuration-plane transfers (`docs/protocol.md` §2.3).
//!
//! A message longer than one frame is cut into segments: every segment but the last fills
//! its frame (8 bytes on Classical CAN, 64 on CAN FD), the last carries the rest (FD:
//! zero-padded to a legal length) and has the EOT bit. The segment index lives in the
//! identifier, so segments carry no header byte. Neither side allocates: the
//! [`Segmenter`] reads from borrowed slices and the [`ReassemblyPool`] owns fixed buffers.

use crate::frame::{Frame, Mtu, CLASSIC_MAX_LEN, FD_MAX_LEN};
use crate::id::{ConfigId, Direction, NodeId, Opcode, MAX_SEGMENTS};

/// Abandon a partial transfer when no segment of it arrived for this long.
pub const TRANSFER_TIMEOUT_US: u32 = 100_000;

/// The largest message one transfer can carry on a link.
///
/// ```
/// use fcan_core::{frame::Mtu, segment::max_transfer_len};
/// assert_eq!(max_transfer_len(Mtu::Classic), 1024);
/// assert_eq!(max_transfer_len(Mtu::Fd), 8192);
/// ```
pub const fn max_transfer_len(mtu: Mtu) -> usize {
    MAX_SEGMENTS * mtu.payload()
}

/// How many frames a message of `len` bytes needs on a link.
///
/// ```
/// use fcan_core::{frame::Mtu, segment::segment_count};
/// assert_eq!(segment_count(Mtu::Classic, 0), 1);
/// assert_eq!(segment_count(Mtu::Classic, 8), 1);
/// assert_eq!(segment_count(Mtu::Classic, 9), 2);
/// assert_eq!(segment_count(Mtu::Fd, 130), 3);
/// ```
pub const fn segment_count(mtu: Mtu, len: usize) -> usize {
    if len == 0 {
        1
    } else {
        len.div_ceil(mtu.payload())
    }
}

/// A message is longer than one transfer can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TooLong;

/// Cuts one message, given as a header and a body so neither needs copying together,
/// into frames.
///
/// ```
/// use fcan_core::frame::Mtu;
/// use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
/// use fcan_core::segment::Segmenter;
///
/// let id = ConfigId::single(Opcode::Schema, Direction::ToMaster, NodeId::new(1).unwrap(), 7);
/// let frames: Vec<_> = Segmenter::new(id, Mtu::Classic, &[1, 2, 3], &[4; 10]).unwrap().collect();
/// assert_eq!(frames.len(), 2);
/// assert_eq!(frames[0].data(), &[1, 2, 3, 4, 4, 4, 4, 4]);
/// assert_eq!(frames[1].data(), &[4, 4, 4, 4, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct Segmenter<'a> {
    id: ConfigId,
    mtu: Mtu,
    head: &'a [u8],
    body: &'a [u8],
    next: usize,
    count: usize,
}

impl<'a> Segmenter<'a> {
    /// Prepares to send `head` followed by `body` under `id` (its segment fields are
    /// overwritten).
    pub fn new(id: ConfigId, mtu: Mtu, head: &'a [u8], body: &'a [u8]) -> Result<Self, TooLong> {
        let len = head.len() + body.len();
        if len > max_transfer_len(mtu) {
            return Err(TooLong);
        }
        Ok(Segmenter {
            id,
            mtu,
            head,
            body,
            next: 0,
            count: segment_count(mtu, len),
        })
    }

    /// Total frames of this transfer.
    pub fn segment_count(&self) -> usize {
        self.count
    }

    /// Whether every frame has been taken.
    pub fn is_done(&self) -> bool {
        self.next >= self.count
    }

    /// The next frame, without consuming it (a driver may refuse it; retry later).
    pub fn peek(&self) -> Option<Frame> {
        self.frame(self.next)
    }

    /// Moves past the frame [`Segmenter::peek`] returned.
    pub fn advance(&mut self) {
        if self.next < self.count {
            self.next += 1;
        }
    }

    /// Frame `k` of the transfer.
    pub fn frame(&self, k: usize) -> Option<Frame> {
        if k >= self.count {
            return None;
        }
        let step = self.mtu.payload();
        let total = self.head.len() + self.body.len();
        let start = k * step;
        let end = (start + step).min(total);
        let mut buf = [0u8; FD_MAX_LEN];
        for (i, slot) in buf[..end - start].iter_mut().enumerate() {
            let at = start + i;
            *slot = if at < self.head.len() {
                self.head[at]
            } else {
                self.body[at - self.head.len()]
            };
        }
        let id = self.id.with_segment(k as u8, k + 1 == self.count);
        Frame::padded(self.mtu, id.can_id(), &buf[..end - start]).ok()
    }
}

impl Iterator for Segmenter<'_> {
    type Item = Frame;
    fn next(&mut self) -> Option<Frame> {
        let f = self.peek()?;
        self.advance();
        Some(f)
    }
}

/// What identifies one transfer in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransferKey {
    /// Opcode.
    pub opcode: Opcode,
    /// Direction.
    pub dir: Direction,
    /// Node (source or destination).
    pub node: NodeId,
    /// Transfer id.
    pub transfer: u8,
}

impl TransferKey {
    /// The key in one word, for storage whose empty value must be all zero.
    fn packed(self) -> u32 {
        u32::from_le_bytes([
            self.opcode as u8,
            self.dir as u8,
            self.node.get(),
            self.transfer,
        ])
    }
}

impl From<ConfigId> for TransferKey {
    fn from(id: ConfigId) -> Self {
        TransferKey {
            opcode: id.opcode,
            dir: id.dir,
            node: id.node,
            transfer: id.transfer,
        }
    }
}

/// Why a segment was not taken. Every case leaves the pool consistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReassemblyError {
    /// A later segment arrived without its transfer's earlier ones (the partial
    /// transfer, if any, is dropped).
    Gap,
    /// A segment that is already in the buffer (ignored).
    Duplicate,
    /// A non-final segment that does not fill its frame (the transfer is dropped).
    ShortSegment,
    /// The message is longer than the slot (the transfer is dropped).
    Overflow,
    /// Every slot is busy with another transfer.
    NoSlot,
}

impl core::fmt::Display for ReassemblyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ReassemblyError::Gap => "segment out of order",
            ReassemblyError::Duplicate => "duplicate segment",
            ReassemblyError::ShortSegment => "non-final segment shorter than its frame",
            ReassemblyError::Overflow => "transfer longer than the reassembly buffer",
            ReassemblyError::NoSlot => "no free reassembly slot",
        })
    }
}

/// One reassembly buffer of `N` bytes.
#[derive(Clone, Debug)]
struct Slot<const N: usize> {
    /// The transfer held ([`TransferKey::packed`]): an `Option<TransferKey>` would put
    /// its `None` in a niche (a 2), and an empty pool would not be all-zero bytes (a
    /// node's `static` would then need an initialiser image in flash).
    key: Option<u32>,
    next: u8,
    /// Length of every non-final segment of this transfer (its first segment's).
    seg_len: usize,
    len: usize,
    last_us: u32,
    buf: [u8; N],
}

impl<const N: usize> Slot<N> {
    const EMPTY: Self = Slot {
        key: None,
        next: 0,
        seg_len: 0,
        len: 0,
        last_us: 0,
        buf: [0; N],
    };

    fn expired(&self, now_us: u32) -> bool {
        now_us.wrapping_sub(self.last_us) > TRANSFER_TIMEOUT_US
    }
}

/// `SLOTS` concurrent transfers of up to `N` bytes each, no allocation.
///
/// Single-frame transfers never touch a slot: their payload is returned as it came.
///
/// ```
/// use fcan_core::frame::Mtu;
/// use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
/// use fcan_core::segment::{ReassemblyPool, Segmenter};
///
/// let id = ConfigId::single(Opcode::Service, Direction::ToNode, NodeId::new(4).unwrap(), 1);
/// let msg: Vec<u8> = (0..20).collect();
/// let mut pool: ReassemblyPool<2, 64> = ReassemblyPool::new();
/// let mut done = None;
/// for f in Segmenter::new(id, Mtu::Classic, &msg, &[]).unwrap() {
///     let cid = ConfigId::from_can_id(f.id()).unwrap();
///     if let Some(m) = pool.push(cid, f.data(), 0).unwrap() {
///         done = Some(m.to_vec());
///     }
/// }
/// assert_eq!(done.unwrap(), msg);
/// ```
#[derive(Clone, Debug)]
pub struct ReassemblyPool<const SLOTS: usize, const N: usize> {
    slots: [Slot<N>; SLOTS],
    dropped: u32,
}

impl<const SLOTS: usize, const N: usize> Default for ReassemblyPool<SLOTS, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SLOTS: usize, const N: usize> ReassemblyPool<SLOTS, N> {
    /// An empty pool.
    pub const fn new() -> Self {
        ReassemblyPool {
            slots: [Slot::EMPTY; SLOTS],
            dropped: 0,
        }
    }

    /// Back to empty, in place (no pool-sized temporary): frees every slot and zeroes
    /// [`ReassemblyPool::dropped`].
    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.key = None;
            s.next = 0;
            s.seg_len = 0;
            s.len = 0;
            s.last_us = 0;
        }
        self.dropped = 0;
    }

    /// Transfers abandoned so far (gaps, overflows, short segments, timeouts).
    pub fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Transfers currently in progress.
    pub fn in_progress(&self) -> usize {
        self.slots.iter().filter(|s| s.key.is_some()).count()
    }

    /// Frees every slot whose transfer has been silent for longer than
    /// [`TRANSFER_TIMEOUT_US`]; returns how many were dropped.
    pub fn expire(&mut self, now_us: u32) -> usize {
        let mut n = 0;
        for s in self.slots.iter_mut() {
            if s.key.is_some() && s.expired(now_us) {
                s.key = None;
                n += 1;
            }
        }
        self.dropped = self.dropped.saturating_add(n as u32);
        n
    }

    /// Abandons any transfer in progress for `key`.
    pub fn cancel(&mut self, key: TransferKey) {
        for s in self.slots.iter_mut() {
            if s.key == Some(key.packed()) {
                s.key = None;
            }
        }
    }

    /// Takes one frame of a transfer. Returns the whole message once its last segment
    /// arrives, `Ok(None)` while more are expected.
    pub fn push<'x>(
        &'x mut self,
        id: ConfigId,
        data: &'x [u8],
        now_us: u32,
    ) -> Result<Option<&'x [u8]>, ReassemblyError> {
        let key = TransferKey::from(id);
        if !id.eot && !is_full_segment(data.len()) {
            self.cancel_counted(key);
            return Err(ReassemblyError::ShortSegment);
        }
        if id.segment == 0 {
            // A new start always replaces an unfinished transfer with the same key.
            self.cancel_counted(key);
            if id.eot {
                return Ok(Some(data));
            }
            let slot = self.free_slot(now_us).ok_or(ReassemblyError::NoSlot)?;
            let s = &mut self.slots[slot];
            let res = Self::append(s, data, now_us);
            if res.is_ok() {
                s.key = Some(key.packed());
                s.next = 1;
                s.seg_len = data.len();
            }
            return res.map(|_| None);
        }
        let Some(i) = self.slots.iter().position(|s| s.key == Some(key.packed())) else {
            return Err(ReassemblyError::Gap);
        };
        let s = &mut self.slots[i];
        if id.segment < s.next {
            return Err(ReassemblyError::Duplicate);
        }
        if id.segment > s.next || (!id.eot && data.len() != s.seg_len) {
            s.key = None;
            self.dropped = self.dropped.saturating_add(1);
            return Err(ReassemblyError::Gap);
        }
        if let Err(e) = Self::append(s, data, now_us) {
            s.key = None;
            self.dropped = self.dropped.saturating_add(1);
            return Err(e);
        }
        if !id.eot {
            s.next += 1;
            if s.next as usize >= MAX_SEGMENTS {
                s.key = None;
                self.dropped = self.dropped.saturating_add(1);
                return Err(ReassemblyError::Overflow);
            }
            return Ok(None);
        }
        s.key = None;
        Ok(Some(&s.buf[..s.len]))
    }

    fn cancel_counted(&mut self, key: TransferKey) {
        for s in self.slots.iter_mut() {
            if s.key == Some(key.packed()) {
                s.key = None;
                self.dropped = self.dropped.saturating_add(1);
            }
        }
    }

    fn free_slot(&mut self, now_us: u32) -> Option<usize> {
        if let Some(i) = self.slots.iter().position(|s| s.key.is_none()) {
            return Some(i);
        }
        let i = self.slots.iter().position(|s| s.expired(now_us))?;
        self.slots[i].key = None;
        self.dropped = self.dropped.saturating_add(1);
        Some(i)
    }

    /// Appends a segment. A slot that is starting (`key == None`) resets its length.
    fn append(s: &mut Slot<N>, data: &[u8], now_us: u32) -> Result<(), ReassemblyError> {
        if s.key.is_none() {
            s.len = 0;
        }
        s.last_us = now_us;
        let end = s.len + data.len();
        let dst = s.buf.get_mut(s.len..end).ok_or(ReassemblyError::Overflow)?;
        dst.copy_from_slice(data);
        s.len = end;
        Ok(())
    }
}

/// Whether a non-final segment fills its frame, as the sender rule requires.
fn is_full_segment(len: usize) -> bool {
    len == CLASSIC_MAX_LEN || len == FD_MAX_LEN
}
