//! The two identifier spaces: the configuration plane on 29-bit extended IDs and the data
//! plane on 11-bit standard IDs. See `docs/protocol.md` §2.
//!
//! ```text
//! extended ID (29 bits)
//!  28 | 27..24 | 23  | 22..16  | 15..8       | 7   | 6..0
//!   1 | opcode | dir | node id | transfer id | eot | segment index
//! ```

use crate::frame::CanId;

/// A node id: 7 bits, `0x7F` is broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NodeId(u8);

impl NodeId {
    /// The broadcast address (master → every node).
    pub const BROADCAST: NodeId = NodeId(0x7F);
    /// Largest unicast node id.
    pub const MAX: u8 = 0x7E;

    /// A unicast node id (`0..=0x7E`), or `None`.
    ///
    /// ```
    /// use fcan_core::id::NodeId;
    /// assert_eq!(NodeId::new(5).unwrap().get(), 5);
    /// assert!(NodeId::new(0x7F).is_none()); // broadcast is not a node
    /// ```
    pub const fn new(raw: u8) -> Option<NodeId> {
        if raw <= Self::MAX {
            Some(NodeId(raw))
        } else {
            None
        }
    }

    /// The raw 7-bit value.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// Whether this is the broadcast address.
    pub const fn is_broadcast(self) -> bool {
        self.0 == 0x7F
    }
}

impl core::fmt::Display for NodeId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.is_broadcast() {
            f.write_str("*")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Who sent a configuration-plane frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Direction {
    /// Master → node (the node id is the destination).
    ToNode = 0,
    /// Node → master (the node id is the source).
    ToMaster = 1,
}

/// Configuration-plane operations. Lower values win arbitration.
///
/// Requests and their replies share an opcode and differ in [`Direction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Opcode {
    /// Master heartbeat (to node, broadcast) / node heartbeat (to master).
    Heartbeat = 0x1,
    /// START (to node). No reply opcode: the node answers with [`Opcode::Result`].
    Start = 0x2,
    /// Service request (to node) / response (to master).
    Service = 0x3,
    /// PARAM_SET (to node); answered by [`Opcode::Result`].
    ParamSet = 0x4,
    /// PARAM_GET (to node) / PARAM_VALUE (to master).
    ParamGet = 0x5,
    /// ACK/NAK of a configuration command (to master).
    Result = 0x6,
    /// ANNOUNCE_ACK (to node). Above FRAME_DEFINE so that, queued together, the ack
    /// reaches the node first even through controllers that send by priority.
    AnnounceAck = 0x7,
    /// FRAME_DEFINE (to node); answered by [`Opcode::Result`].
    FrameDefine = 0x8,
    /// DISCOVER (to node, usually broadcast) / ANNOUNCE (to master).
    Discover = 0x9,
    /// STATS_READ (to node) / STATS (to master): the node's counters.
    Stats = 0xA,
    /// SCHEMA_READ (to node) / SCHEMA_DATA (to master). Bulk: lowest priority.
    Schema = 0xB,
    /// UPDATE requests (to node) / STATUS and PROGRESS (to master): firmware update
    /// (`docs/protocol.md` §3.14). The lowest priority of all, below schema download:
    /// bulk that no one waits for by the millisecond. Only with the `update` feature: a
    /// firmware that takes no updates treats 0xF as reserved (malformed, as §3.14 says),
    /// and its flash pays nothing for it.
    #[cfg(feature = "update")]
    Update = 0xF,
}

impl Opcode {
    /// Every opcode but UPDATE, in wire order.
    const WITHOUT_UPDATE: [Opcode; 11] = [
        Opcode::Heartbeat,
        Opcode::Start,
        Opcode::Service,
        Opcode::ParamSet,
        Opcode::ParamGet,
        Opcode::Result,
        Opcode::AnnounceAck,
        Opcode::FrameDefine,
        Opcode::Discover,
        Opcode::Stats,
        Opcode::Schema,
    ];
    /// Every opcode, in wire order.
    #[cfg(not(feature = "update"))]
    pub const ALL: [Opcode; 11] = Opcode::WITHOUT_UPDATE;
    /// Every opcode, in wire order (UPDATE, 0xF, last).
    #[cfg(feature = "update")]
    pub const ALL: [Opcode; 12] = {
        let mut all = [Opcode::Update; 12];
        let mut i = 0;
        while i < Opcode::WITHOUT_UPDATE.len() {
            all[i] = Opcode::WITHOUT_UPDATE[i];
            i += 1;
        }
        all
    };

    /// The opcode for a 4-bit value, or `None` for a reserved value.
    pub const fn from_u8(v: u8) -> Option<Opcode> {
        Some(match v {
            0x1 => Opcode::Heartbeat,
            0x2 => Opcode::Start,
            0x3 => Opcode::Service,
            0x4 => Opcode::ParamSet,
            0x5 => Opcode::ParamGet,
            0x6 => Opcode::Result,
            0x7 => Opcode::AnnounceAck,
            0x8 => Opcode::FrameDefine,
            0x9 => Opcode::Discover,
            0xA => Opcode::Stats,
            0xB => Opcode::Schema,
            #[cfg(feature = "update")]
            0xF => Opcode::Update,
            _ => return None,
        })
    }
}

/// Segment index field: 7 bits, so one transfer has at most this many frames.
pub const MAX_SEGMENTS: usize = 128;

/// The fields of a configuration-plane (extended) identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConfigId {
    /// What the frame is.
    pub opcode: Opcode,
    /// Who sent it.
    pub dir: Direction,
    /// Destination (to node) or source (to master).
    pub node: NodeId,
    /// Chosen by the requester, echoed by the reply; groups the segments of one transfer.
    pub transfer: u8,
    /// Index of this frame within its transfer (`0..MAX_SEGMENTS`).
    pub segment: u8,
    /// Set on the last frame of a transfer (and on a single-frame transfer).
    pub eot: bool,
}

/// Why an identifier is not a valid configuration-plane identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IdError {
    /// A standard ID, or an extended ID without the configuration-plane marker bit.
    NotConfigPlane,
    /// The opcode field holds a reserved value.
    UnknownOpcode(u8),
    /// A node sent from the broadcast address.
    BroadcastSource,
}

impl core::fmt::Display for IdError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IdError::NotConfigPlane => f.write_str("not a configuration-plane identifier"),
            IdError::UnknownOpcode(op) => write!(f, "reserved opcode {op:#x}"),
            IdError::BroadcastSource => f.write_str("node frame from the broadcast address"),
        }
    }
}

const MARKER: u32 = 1 << 28;

impl ConfigId {
    /// A single-frame (segment 0, end of transfer) identifier.
    // Out of line: a node builds its reply identifiers in many places (~90 B of flash).
    #[inline(never)]
    pub const fn single(opcode: Opcode, dir: Direction, node: NodeId, transfer: u8) -> ConfigId {
        ConfigId {
            opcode,
            dir,
            node,
            transfer,
            segment: 0,
            eot: true,
        }
    }

    /// Packs the fields into a 29-bit extended identifier.
    ///
    /// ```
    /// use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
    /// let id = ConfigId::single(Opcode::Heartbeat, Direction::ToMaster, NodeId::new(3).unwrap(), 9);
    /// let raw = id.to_raw();
    /// assert_eq!(raw, 0x1000_0000 | 0x1 << 24 | 1 << 23 | 3 << 16 | 9 << 8 | 0x80);
    /// assert_eq!(ConfigId::from_raw(raw), Ok(id));
    /// ```
    pub const fn to_raw(self) -> u32 {
        MARKER
            | (self.opcode as u32) << 24
            | (self.dir as u32) << 23
            | (self.node.get() as u32) << 16
            | (self.transfer as u32) << 8
            | (self.eot as u32) << 7
            | (self.segment as u32 & 0x7F)
    }

    /// The [`CanId`] of this identifier.
    pub const fn can_id(self) -> CanId {
        CanId::Extended(self.to_raw())
    }

    /// Unpacks a raw extended identifier.
    pub const fn from_raw(raw: u32) -> Result<ConfigId, IdError> {
        if raw & !CanId::EXTENDED_MAX != 0 || raw & MARKER == 0 {
            return Err(IdError::NotConfigPlane);
        }
        let op = ((raw >> 24) & 0xF) as u8;
        let opcode = match Opcode::from_u8(op) {
            Some(o) => o,
            None => return Err(IdError::UnknownOpcode(op)),
        };
        let dir = if raw & (1 << 23) != 0 {
            Direction::ToMaster
        } else {
            Direction::ToNode
        };
        let node = NodeId(((raw >> 16) & 0x7F) as u8);
        if node.is_broadcast() && matches!(dir, Direction::ToMaster) {
            return Err(IdError::BroadcastSource);
        }
        Ok(ConfigId {
            opcode,
            dir,
            node,
            transfer: ((raw >> 8) & 0xFF) as u8,
            segment: (raw & 0x7F) as u8,
            eot: raw & 0x80 != 0,
        })
    }

    /// Unpacks a [`CanId`]; standard IDs are never configuration-plane.
    pub const fn from_can_id(id: CanId) -> Result<ConfigId, IdError> {
        match id {
            CanId::Extended(raw) => Self::from_raw(raw),
            CanId::Standard(_) => Err(IdError::NotConfigPlane),
        }
    }

    /// The same identifier with other segment fields.
    pub const fn with_segment(mut self, segment: u8, eot: bool) -> ConfigId {
        self.segment = segment;
        self.eot = eot;
        self
    }
}

/// The standard IDs the master may assign to data frames.
///
/// Every configuration-plane identifier has bit 28 set, so its top 11 bits are at least
/// `0x400`; data IDs stay below that and therefore win arbitration against all
/// configuration and service traffic. `0x000..0x100` is left to the application
/// (emergency stop, time sync) and `0x400..=0x7FF` is never used by fcan.
pub const DATA_ID_RANGE: core::ops::Range<u16> = 0x100..0x400;

/// Whether `id` may carry an fcan data frame.
///
/// ```
/// use fcan_core::id::is_data_id;
/// assert!(is_data_id(0x100) && is_data_id(0x3FF));
/// assert!(!is_data_id(0x0FF) && !is_data_id(0x400));
/// ```
pub const fn is_data_id(id: u16) -> bool {
    id >= DATA_ID_RANGE.start && id < DATA_ID_RANGE.end
}
