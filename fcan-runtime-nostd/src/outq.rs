//! The outgoing queue of configuration-plane messages.
//!
//! Messages leave in the order they were queued, segment by segment; a frame the driver
//! refuses is offered again on the next poll, so nothing is lost or reordered. Small
//! messages are stored encoded; large ones (SCHEMA_DATA, OK service responses, big
//! parameter values, ANNOUNCE) are referenced and cut into frames lazily from where their
//! bytes already live (flash blob, service slot, param arena).

use crate::api::{Transmit, TxRefused};
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::services;
use crate::storage::Parts;
use crate::tables::SlotState;
use crate::wired::Wired;
use fcan_core::frame::{Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, MAX_SEGMENTS};
use fcan_core::msg::{Announce, ConfigMessage, Counters, NodeState};
use fcan_core::segment::Segmenter;

/// Messages the outgoing queue holds. A full queue holds back further requests in the
/// receive queue until there is room. Six (65 bytes each): a master has one provisioning
/// step or request in flight per node, plus heartbeats and the node's own ANNOUNCE, so
/// six only fill while the driver refuses frames, and then requests wait in the receive
/// queue rather than being lost. Eight cost 130 bytes of RAM more.
pub const OUT_QUEUE_LEN: usize = 6;
/// Largest message stored encoded in the queue (STATS is 41 bytes).
const INLINE: usize = 48;

/// The bytes of one queued message, or where to find them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Body {
    /// Encoded.
    Inline { len: u8, data: [u8; INLINE] },
    /// SCHEMA_DATA of `len` blob bytes from `offset`.
    Schema { offset: u32, len: u16 },
    /// OK response from service slot `slot`.
    Service { slot: u8, block: u8, service: u8 },
    /// PARAM_VALUE read from the param arena when sent.
    Param {
        block: u8,
        param: u8,
        start: u32,
        len: u16,
    },
    /// ANNOUNCE; the counts come from the wired bitmap.
    Announce {
        state: NodeState,
        caps: u8,
        boot_id: u32,
    },
}

/// One queued message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutMsg {
    /// The identifier, raw: a `ConfigId` has no all-zero value (no opcode is 0), and an
    /// empty queue of all-zero slots keeps an unconfigured node in `.bss`.
    pub id: u32,
    pub mtu: Mtu,
    pub brs: bool,
    pub body: Body,
    next: u8,
}

impl OutMsg {
    /// An unused slot of the queue.
    const EMPTY: OutMsg = OutMsg {
        id: 0,
        mtu: Mtu::Classic,
        brs: false,
        body: Body::Inline {
            len: 0,
            data: [0; INLINE],
        },
        next: 0,
    };

    /// A message of `body` under `id` (segment fields are set per frame).
    // Out of line: see `topics::copy`.
    #[inline(never)]
    pub(crate) fn new(id: ConfigId, mtu: Mtu, brs: bool, body: Body) -> OutMsg {
        OutMsg {
            id: id.to_raw(),
            mtu,
            brs,
            body,
            next: 0,
        }
    }

    /// A message stored encoded; `None` when it does not fit inline.
    // Out of line: see `topics::copy`.
    #[inline(never)]
    pub(crate) fn inline(
        id: ConfigId,
        mtu: Mtu,
        brs: bool,
        msg: &ConfigMessage<'_>,
    ) -> Option<OutMsg> {
        let mut data = [0u8; INLINE];
        let len = msg.encode_to_master(&mut data).ok()?;
        Some(Self::new(
            id,
            mtu,
            brs,
            Body::Inline {
                len: len as u8,
                data,
            },
        ))
    }
}

/// Where lazily referenced bodies are read from when their frames are built.
pub(crate) struct Sources<'a, 'p> {
    pub desc: &'a NodeDesc,
    pub wired: &'a Wired,
    pub parts: &'a mut Parts<'p>,
}

/// A ring of [`OUT_QUEUE_LEN`] messages, written here rather than taken from `heapless`:
/// measured on the eight-motor firmware, `heapless::Deque` (0.8) cost 122 bytes of flash
/// and 8 of RAM more than this ring, with the flash target not yet met.
pub(crate) struct OutQueue {
    msgs: [OutMsg; OUT_QUEUE_LEN],
    head: u8,
    len: u8,
}

impl OutQueue {
    pub(crate) const fn new() -> OutQueue {
        OutQueue {
            msgs: [OutMsg::EMPTY; OUT_QUEUE_LEN],
            head: 0,
            len: 0,
        }
    }

    /// Free places.
    pub(crate) fn free(&self) -> usize {
        OUT_QUEUE_LEN.saturating_sub(self.len as usize)
    }

    /// Appends; false (nothing queued) when full.
    // Out of line: inlined at each of a dozen reply sites, with its copy of a 65-byte
    // message, it cost ~470 B of flash, for a call that is not on the data path.
    #[inline(never)]
    pub(crate) fn push(&mut self, m: OutMsg) -> bool {
        let at = (self.head as usize + self.len as usize) % OUT_QUEUE_LEN;
        let Some(slot) = self
            .msgs
            .get_mut(at)
            .filter(|_| (self.len as usize) < OUT_QUEUE_LEN)
        else {
            return false;
        };
        *slot = m;
        self.len += 1;
        true
    }

    /// Drops everything (FAULT: the node goes silent).
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// The message first in line.
    fn front(&mut self) -> Option<&mut OutMsg> {
        let len = self.len;
        self.msgs.get_mut(self.head as usize).filter(|_| len > 0)
    }

    /// Removes the message first in line.
    fn pop_front(&mut self) {
        if self.len > 0 {
            self.head = ((self.head as usize + 1) % OUT_QUEUE_LEN) as u8;
            self.len -= 1;
        }
    }

    /// Sends queued frames in order until the queue is empty or the driver refuses one.
    /// Returns `Err` on a refusal (the frame stays first in line).
    pub(crate) fn pump(
        &mut self,
        src: &mut Sources<'_, '_>,
        counters: &mut Counters,
        tx: &mut impl Transmit,
    ) -> Result<(), TxRefused> {
        // Each iteration sends a frame or drops a message: bounded by the queue's frames.
        for _ in 0..OUT_QUEUE_LEN * MAX_SEGMENTS {
            let Some(m) = self.front().copied() else {
                return Ok(());
            };
            let (frame, last) = match build(&m, src) {
                Some(x) => x,
                None => {
                    // What it referenced is gone (cannot happen with consistent tables):
                    // drop the message rather than stall the queue.
                    self.finish(&m, src);
                    continue;
                }
            };
            if tx.transmit(&frame).is_err() {
                bump(&mut counters.tx_refused);
                return Err(TxRefused);
            }
            bump(&mut counters.tx_frames);
            if last {
                self.finish(&m, src);
            } else if let Some(cur) = self.front() {
                cur.next = cur.next.saturating_add(1);
            }
        }
        Ok(())
    }

    /// The message at the head is fully sent (or abandoned): release what it held.
    fn finish(&mut self, m: &OutMsg, src: &mut Sources<'_, '_>) {
        if let Body::Service { slot, .. } = m.body {
            if let Some(s) = src.parts.svc.get_mut(slot as usize) {
                if s.state == SlotState::Responding {
                    s.state = SlotState::Free;
                }
            }
        }
        self.pop_front();
    }
}

/// Frame `m.next` of the message `head` + `body`, and whether it is the last. Out of line:
/// inlined into each kind of body it cost ~600 B of flash.
#[inline(never)]
fn segment(m: &OutMsg, head: &[u8], body: &[u8]) -> Option<(Frame, bool)> {
    let k = m.next as usize;
    let s = Segmenter::new(ConfigId::from_raw(m.id).ok()?, m.mtu, head, body).ok()?;
    let f = s.frame(k)?;
    let f = if m.brs { f } else { f.without_brs() };
    Some((f, k + 1 >= s.segment_count()))
}

/// Frame `m.next` of a message, and whether it is the last.
fn build(m: &OutMsg, src: &Sources<'_, '_>) -> Option<(Frame, bool)> {
    let seg = |head: &[u8], body: &[u8]| segment(m, head, body);
    match m.body {
        Body::Inline { len, data } => seg(data.get(..len as usize)?, &[]),
        Body::Schema { offset, len } => {
            let start = offset as usize;
            // An empty chunk may name an offset past the end of the blob.
            let body = match len {
                0 => &[][..],
                _ => src.desc.blob.get(start..start.checked_add(len as usize)?)?,
            };
            let mut head = [0u8; 6];
            head.get_mut(..4)?.copy_from_slice(&offset.to_le_bytes());
            head.get_mut(4..)?.copy_from_slice(&len.to_le_bytes());
            seg(&head, body)
        }
        Body::Service {
            slot,
            block,
            service,
        } => {
            let body = services::response(src.parts, slot as usize)?;
            seg(&[block, service, 0], body)
        }
        Body::Param {
            block,
            param,
            start,
            len,
        } => {
            let s = start as usize;
            let body = src.parts.params.get(s..s.checked_add(len as usize)?)?;
            seg(&[block, param], body)
        }
        Body::Announce {
            state,
            caps,
            boot_id,
        } => {
            let mut counts = [0u8; 255];
            let n = src.desc.arrays.len().min(counts.len());
            for (a, c) in counts.iter_mut().take(n).enumerate() {
                *c = src.wired.count(src.desc, a as u8);
            }
            let msg = ConfigMessage::Announce(Announce {
                protocol: crate::PROTOCOL_VERSION,
                state,
                caps,
                boot_id,
                blob_len: src.desc.blob.len() as u32,
                hash: HashPrefix(src.desc.hash.0),
                counts: counts.get(..n)?,
            });
            let mut buf = [0u8; Announce::FIXED_LEN + 255];
            let len = msg.encode_to_master(&mut buf).ok()?;
            seg(buf.get(..len)?, &[])
        }
    }
}
