//! DISCOVER, ANNOUNCE and ANNOUNCE_ACK.

use super::{DecodeError, EncodeError, NodeState};
use crate::frame::{Mtu, CLASSIC_MAX_LEN};
use crate::hash::HashPrefix;
use crate::msg::BusMode;
use crate::pack::{Reader, Writer};

/// DISCOVER (master → node, usually broadcast): "everyone, announce yourselves".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
    /// The node takes firmware updates over the bus (UPDATE, `docs/protocol.md` §3.14):
    /// it was built with the runtime's `update` feature and has a staging area.
    pub const UPDATE: u8 = 1 << 2;
    /// Bits this protocol version defines; others must be 0.
    pub const KNOWN: u8 = FD | BRS | UPDATE;

    /// The capability bits a path that carries only `mtu` frames cannot honour: [`FD`]
    /// and [`BRS`] on Classical CAN, none on CAN FD.
    ///
    /// The capabilities a master sees describe the whole path between it and the node:
    /// a node with an FD controller behind a Classical CAN bus (or a router's classic
    /// downlink) can only be spoken to in Classical CAN frames. A relay clears these bits
    /// with [`Announce::clear_caps`](super::Announce::clear_caps) as the ANNOUNCE passes,
    /// so the master chooses `BusMode::Classic` (`docs/protocol.md` §3.3).
    ///
    /// ```
    /// use fcan_core::frame::Mtu;
    /// use fcan_core::msg::caps;
    /// assert_eq!(caps::unusable_on(Mtu::Classic), caps::FD | caps::BRS);
    /// assert_eq!(caps::unusable_on(Mtu::Fd), 0);
    /// ```
    pub const fn unusable_on(mtu: super::Mtu) -> u8 {
        match mtu {
            super::Mtu::Classic => FD | BRS,
            super::Mtu::Fd => 0,
        }
    }
}

/// ANNOUNCE (node → master): who the node is and what it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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

    /// The boot id in an ANNOUNCE's first segment (a full Classical frame: protocol,
    /// state, caps, count, boot id), if those leading bytes are well-formed: this
    /// protocol version, a valid state, only known capability bits.
    pub(crate) fn peek_boot_id(head: &[u8]) -> Option<u32> {
        if head.len() != CLASSIC_MAX_LEN {
            return None;
        }
        let r = &mut Reader::new(head);
        let protocol = r.u8().ok()?;
        let state = NodeState::try_from(r.u8().ok()?).ok();
        let caps = r.u8().ok()?;
        let _count = r.u8().ok()?;
        let known = protocol == crate::PROTOCOL_VERSION && state.is_some();
        (known && caps & !caps::KNOWN == 0).then_some(r.u32().ok()?)
    }

    /// Offset of the capability byte: after `protocol` and `state`, as [`Self::encode`]
    /// writes them (a property test in `tests/prop_msg.rs` holds the two together).
    const CAPS_OFFSET: usize = 2;

    /// Clears the capability bits `clear` (only bits of [`caps::KNOWN`]; reserved bits
    /// are left as they are, so a malformed ANNOUNCE stays malformed) in an encoded
    /// ANNOUNCE, in place. `first_segment` is the payload of segment 0 of the ANNOUNCE
    /// transfer, or the whole encoded message: the capability byte always lies in the
    /// first Classical CAN frame.
    ///
    /// For relays (the fcan router) that forward an ANNOUNCE onto a path that cannot
    /// carry what its capabilities promise ([`caps::unusable_on`]). A transfer carries no
    /// checksum (`docs/protocol.md` §2.3), so no other byte changes. Returns the bits that
    /// were set and are now clear (0: the message was left as it was), or `None` when
    /// `first_segment` is too short to hold the capability byte.
    ///
    /// ```
    /// use fcan_core::hash::HashPrefix;
    /// use fcan_core::id::{Direction, Opcode};
    /// use fcan_core::msg::{caps, Announce, ConfigMessage, NodeState};
    /// let a = Announce {
    ///     protocol: 2, state: NodeState::Unprovisioned, caps: caps::FD | caps::BRS,
    ///     boot_id: 7, blob_len: 100, hash: HashPrefix([1; 8]), counts: &[3],
    /// };
    /// let mut buf = [0u8; 32];
    /// let n = ConfigMessage::Announce(a).encode(&mut buf).unwrap();
    /// assert_eq!(Announce::clear_caps(&mut buf[..8], caps::FD | caps::BRS), Some(caps::FD | caps::BRS));
    /// let m = ConfigMessage::decode(Opcode::Discover, Direction::ToMaster, &buf[..n]).unwrap();
    /// assert_eq!(m, ConfigMessage::Announce(Announce { caps: 0, ..a }));
    /// assert_eq!(Announce::clear_caps(&mut buf[..8], caps::FD), Some(0));
    /// assert_eq!(Announce::clear_caps(&mut buf[..2], caps::FD), None);
    /// ```
    pub fn clear_caps(first_segment: &mut [u8], clear: u8) -> Option<u8> {
        const { assert!(Announce::CAPS_OFFSET < CLASSIC_MAX_LEN) };
        let b = first_segment.get_mut(Self::CAPS_OFFSET)?;
        let cleared = *b & clear & caps::KNOWN;
        *b &= !cleared;
        Some(cleared)
    }

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
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
