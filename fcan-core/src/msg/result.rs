//! RESULT (ACK/NAK) and STATS.

use super::{DecodeError, EncodeError, ResultCode};
use crate::id::Opcode;
use crate::pack::{Reader, Writer};

/// RESULT (node → master): the answer to START, FRAME_DEFINE, PARAM_SET, or a
/// PARAM_GET/SCHEMA_READ/STATS_READ the node cannot serve. The transfer id echoes the
/// request's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CommandResult {
    /// The opcode of the request answered.
    pub opcode: Opcode,
    /// `Ok` (ACK) or the NAK reason.
    pub code: ResultCode,
    /// Extra detail for a NAK: the entry index for `BadEntry`, the limit for
    /// `LimitFrames`/`LimitEntries`, otherwise 0.
    pub detail: u16,
}

impl CommandResult {
    /// Encoded size.
    pub const LEN: usize = 4;

    /// Whether this is an ACK.
    pub fn is_ack(&self) -> bool {
        self.code == ResultCode::Ok
    }

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.opcode as u8)?;
        w.u8(self.code as u8)?;
        Ok(w.u16(self.detail)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let op = r.u8()?;
        Ok(CommandResult {
            opcode: Opcode::from_u8(op).ok_or(DecodeError::BadEnum(op))?,
            code: r.u8()?.try_into()?,
            detail: r.u16()?,
        })
    }
}

/// The node's counters, all since boot, saturating at `u32::MAX`.
///
/// On the wire: a count byte, then that many `u32` in the order of the fields below.
/// Newer nodes may send more; a reader keeps the ones it knows and skips the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counters {
    /// Frames received and handled.
    pub rx_handled: u32,
    /// Frames dropped: malformed payload or unknown opcode.
    pub rx_malformed: u32,
    /// Frames dropped: not for this node, or a data ID not in the plan.
    pub rx_ignored: u32,
    /// Frames dropped: not allowed in the current state.
    pub rx_bad_state: u32,
    /// Multi-frame transfers or groups abandoned (gap, timeout, overflow).
    pub reassembly_dropped: u32,
    /// Times the driver refused a frame (queue full); the frame was kept and retried.
    pub tx_refused: u32,
    /// Frames transmitted.
    pub tx_frames: u32,
    /// NAKs sent.
    pub naks_sent: u32,
    /// Service requests answered BUSY.
    pub services_busy: u32,
    /// Times the master-lost watchdog fired.
    pub master_lost: u32,
}

impl Counters {
    /// Number of counters this version defines.
    pub const COUNT: usize = 10;
    /// Encoded size.
    pub const LEN: usize = 1 + 4 * Self::COUNT;

    /// The counters as an array, in wire order.
    pub fn to_array(&self) -> [u32; Self::COUNT] {
        [
            self.rx_handled,
            self.rx_malformed,
            self.rx_ignored,
            self.rx_bad_state,
            self.reassembly_dropped,
            self.tx_refused,
            self.tx_frames,
            self.naks_sent,
            self.services_busy,
            self.master_lost,
        ]
    }

    /// The counters from an array in wire order.
    pub fn from_array(a: [u32; Self::COUNT]) -> Self {
        Counters {
            rx_handled: a[0],
            rx_malformed: a[1],
            rx_ignored: a[2],
            rx_bad_state: a[3],
            reassembly_dropped: a[4],
            tx_refused: a[5],
            tx_frames: a[6],
            naks_sent: a[7],
            services_busy: a[8],
            master_lost: a[9],
        }
    }

    /// The sum of the counters that mean trouble, truncated to 16 bits: the heartbeat's
    /// `errors` field. Not counted: frames handled or sent; `rx_ignored` — on a shared
    /// bus most frames are for other nodes; and `tx_refused` — a full transmit mailbox is
    /// the driver's flow control on a busy bus, and the frame is sent later.
    pub fn error_summary(&self) -> u16 {
        let trouble = [
            self.rx_malformed,
            self.rx_bad_state,
            self.reassembly_dropped,
            self.naks_sent,
            self.services_busy,
            self.master_lost,
        ];
        trouble.iter().map(|&v| v as u64).sum::<u64>() as u16
    }

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(Self::COUNT as u8)?;
        for v in self.to_array() {
            w.u32(v)?;
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let n = r.u8()? as usize;
        let mut a = [0u32; Self::COUNT];
        for i in 0..n {
            let v = r.u32()?;
            if let Some(slot) = a.get_mut(i) {
                *slot = v;
            }
        }
        Ok(Self::from_array(a))
    }
}
