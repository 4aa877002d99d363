//! DISCOVER, ANNOUNCE and ANNOUNCE_ACK.

use super::{DecodeError, EncodeError, NodeState};
use crate::hash::HashPrefix;
use crate::msg::BusMode;
use crate::pack::{Reader, Writer};

/// DISCOVER (master → node, usually broadcast): "everyone, announce yourselves".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discover {
    /// The master's random session id, drawn at master start.
    pub session: u32,
}

impl Discover {
    /// Encoded size.
    pub const LEN: usize = 4;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        Ok(w.u32(self.session)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Discover { session: r.u32()? })
    }
}

/// Capability bits a node announces.
pub mod caps {
    /// The node's controller can send and receive CAN FD frames.
    pub const FD: u8 = 1 << 0;
    /// The node's controller supports bit-rate switching.
    pub const BRS: u8 = 1 << 1;
    /// Bits this protocol version defines; others must be 0.
    pub const KNOWN: u8 = FD | BRS;
}

/// ANNOUNCE (node → master): who the node is and what it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announce<'a> {
    /// Protocol version the node speaks ([`crate::PROTOCOL_VERSION`]).
    pub protocol: u8,
    /// The node's state when it announced.
    pub state: NodeState,
    /// Capability bits ([`caps`]).
    pub caps: u8,
    /// Random per boot; a change tells the master the node rebooted.
    pub boot_id: u32,
    /// Length of the schema blob in bytes.
    pub blob_len: u32,
    /// First 8 bytes of the blob's SHA-256.
    pub hash: HashPrefix,
    /// Instance count actually wired for each instance array, in array order (each ≤ the
    /// array's `max_count`).
    pub counts: &'a [u8],
}

impl<'a> Announce<'a> {
    /// Size without the counts.
    pub const FIXED_LEN: usize = 20;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        let n: u8 = self
            .counts
            .len()
            .try_into()
            .map_err(|_| EncodeError::TooLong)?;
        w.u8(self.protocol)?;
        w.u8(self.state as u8)?;
        w.u8(self.caps)?;
        w.u8(n)?;
        w.u32(self.boot_id)?;
        w.u32(self.blob_len)?;
        w.bytes(&self.hash.0)?;
        Ok(w.bytes(self.counts)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let protocol = r.u8()?;
        let state = r.u8()?.try_into()?;
        let caps = r.u8()?;
        if caps & !caps::KNOWN != 0 {
            return Err(DecodeError::ReservedBits);
        }
        let n = r.u8()? as usize;
        let boot_id = r.u32()?;
        let blob_len = r.u32()?;
        let hash = HashPrefix(r.array()?);
        let counts = r.bytes(n)?;
        Ok(Announce {
            protocol,
            state,
            caps,
            boot_id,
            blob_len,
            hash,
            counts,
        })
    }
}

/// ANNOUNCE_ACK (master → node): "I own you; stop announcing".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnounceAck {
    /// The boot_id being acknowledged; a node ignores an ack for another boot.
    pub boot_id: u32,
    /// The master's session id; a heartbeat with another session means a new master.
    pub session: u32,
    /// How the node must transmit from now on.
    pub mode: BusMode,
}

impl AnnounceAck {
    /// Encoded size.
    pub const LEN: usize = 9;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u32(self.boot_id)?;
        w.u32(self.session)?;
        Ok(w.u8(self.mode as u8)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(AnnounceAck {
            boot_id: r.u32()?,
            session: r.u32()?,
            mode: r.u8()?.try_into()?,
        })
    }
}
