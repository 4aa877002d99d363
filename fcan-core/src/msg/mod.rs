//! Configuration-plane and service messages: one struct per message, and
//! [`ConfigMessage`], which decodes a reassembled payload by its opcode and direction.
//!
//! Every decoder takes arbitrary bytes and returns a typed error; none panics. Bytes past
//! a message's own length are padding and ignored. Layouts: `docs/protocol.md` §3.
//!
//! ```
//! use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
//! use fcan_core::msg::{ConfigMessage, Start};
//!
//! let msg = ConfigMessage::Start(Start { frame_count: 4, master_timeout_ms: 300 });
//! let mut buf = [0u8; 64];
//! let n = msg.encode(&mut buf).unwrap();
//! assert_eq!(&buf[..n], &[4, 0x2C, 0x01]);
//! assert_eq!(ConfigMessage::decode(msg.opcode(), msg.direction(), &buf[..n]), Ok(msg));
//! ```

mod discovery;
mod heartbeat;
mod param;
mod plan;
mod result;
mod schema;
mod service;
mod status;
#[cfg(feature = "update")]
pub mod update;

pub use discovery::{caps, Announce, AnnounceAck, Discover};
pub use heartbeat::{MasterHeartbeat, NodeHeartbeat, Start};
pub use param::{ParamGet, ParamSet, ParamValue, COMMIT, PARAM_INDEX_MASK};
pub use plan::{frame_flags, CopyEntry, DataDirection, Entries, FrameDefine, FrameHeader};
pub use result::{CommandResult, Counters};
pub use schema::{SchemaData, SchemaRead};
pub use service::{ServiceRequest, ServiceResponse};
pub use status::{BusMode, FaultCode, NodeState, ResultCode, ServiceStatus};
#[cfg(feature = "update")]
pub use update::{
    UpdateOffer, UpdatePhase, UpdateReason, UpdateReply, UpdateRequest, UpdateStatus,
};

use crate::id::{Direction, Opcode};
use crate::pack::{OutOfSpace, ReadError, Reader, Writer};

/// Why bytes are not a valid message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DecodeError {
    /// Fewer bytes than the message needs.
    Truncated,
    /// An enumeration byte with no meaning.
    BadEnum(u8),
    /// A bool byte other than 0 or 1.
    BadBool,
    /// A reserved bit is set.
    ReservedBits,
    /// This opcode is not sent in this direction (e.g. a node sending START).
    WrongDirection,
    /// A string longer than its message allows, or not UTF-8.
    BadString,
}

impl From<ReadError> for DecodeError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated => DecodeError::Truncated,
            ReadError::BadBool => DecodeError::BadBool,
        }
    }
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("message truncated"),
            DecodeError::BadEnum(v) => write!(f, "unknown enumeration value {v}"),
            DecodeError::BadBool => f.write_str("bool byte is neither 0 nor 1"),
            DecodeError::ReservedBits => f.write_str("reserved bits set"),
            DecodeError::WrongDirection => f.write_str("opcode not valid in this direction"),
            DecodeError::BadString => f.write_str("string too long or not UTF-8"),
        }
    }
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EncodeError {
    /// The output buffer is too small.
    OutOfSpace,
    /// A variable part is longer than its length field can say.
    TooLong,
    /// A field holds a value its bits cannot carry.
    BadField,
    /// [`ConfigMessage::encode_to_master`] or [`ConfigMessage::encode_to_node`] was
    /// given a message of the other direction.
    WrongDirection,
}

impl From<OutOfSpace> for EncodeError {
    fn from(_: OutOfSpace) -> Self {
        EncodeError::OutOfSpace
    }
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::OutOfSpace => f.write_str("output buffer too small"),
            EncodeError::TooLong => f.write_str("variable part too long"),
            EncodeError::BadField => f.write_str("field value out of its bit range"),
            EncodeError::WrongDirection => f.write_str("message of the other direction"),
        }
    }
}

/// Any configuration-plane message, borrowing its variable parts from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigMessage<'a> {
    /// `Heartbeat`, to node.
    MasterHeartbeat(MasterHeartbeat),
    /// `Heartbeat`, to master.
    NodeHeartbeat(NodeHeartbeat),
    /// `Start`, to node.
    Start(Start),
    /// `Service`, to node.
    ServiceRequest(ServiceRequest<'a>),
    /// `Service`, to master.
    ServiceResponse(ServiceResponse<'a>),
    /// `ParamSet`, to node.
    ParamSet(ParamSet<'a>),
    /// `ParamGet`, to node.
    ParamGet(ParamGet),
    /// `ParamGet`, to master.
    ParamValue(ParamValue<'a>),
    /// `Result`, to master.
    Result(CommandResult),
    /// `FrameDefine`, to node.
    FrameDefine(FrameDefine<'a>),
    /// `AnnounceAck`, to node.
    AnnounceAck(AnnounceAck),
    /// `Discover`, to node.
    Discover(Discover),
    /// `Discover`, to master.
    Announce(Announce<'a>),
    /// `Stats`, to node (no payload).
    StatsRead,
    /// `Stats`, to master.
    Stats(Counters),
    /// `Schema`, to node.
    SchemaRead(SchemaRead),
    /// `Schema`, to master.
    SchemaData(SchemaData<'a>),
    /// `Update`, to node.
    #[cfg(feature = "update")]
    UpdateRequest(UpdateRequest<'a>),
    /// `Update`, to master.
    #[cfg(feature = "update")]
    UpdateReply(UpdateReply<'a>),
}

impl<'a> ConfigMessage<'a> {
    /// The opcode this message travels under.
    pub fn opcode(&self) -> Opcode {
        use ConfigMessage::*;
        match self {
            MasterHeartbeat(_) | NodeHeartbeat(_) => Opcode::Heartbeat,
            Start(_) => Opcode::Start,
            ServiceRequest(_) | ServiceResponse(_) => Opcode::Service,
            ParamSet(_) => Opcode::ParamSet,
            ParamGet(_) | ParamValue(_) => Opcode::ParamGet,
            Result(_) => Opcode::Result,
            FrameDefine(_) => Opcode::FrameDefine,
            AnnounceAck(_) => Opcode::AnnounceAck,
            Discover(_) | Announce(_) => Opcode::Discover,
            StatsRead | Stats(_) => Opcode::Stats,
            SchemaRead(_) | SchemaData(_) => Opcode::Schema,
            #[cfg(feature = "update")]
            UpdateRequest(_) | UpdateReply(_) => Opcode::Update,
        }
    }

    /// The direction this message travels in.
    pub fn direction(&self) -> Direction {
        use ConfigMessage::*;
        match self {
            MasterHeartbeat(_) | Start(_) | ServiceRequest(_) | ParamSet(_) | ParamGet(_)
            | FrameDefine(_) | AnnounceAck(_) | Discover(_) | StatsRead | SchemaRead(_) => {
                Direction::ToNode
            }
            NodeHeartbeat(_) | ServiceResponse(_) | ParamValue(_) | Result(_) | Announce(_)
            | Stats(_) | SchemaData(_) => Direction::ToMaster,
            #[cfg(feature = "update")]
            UpdateRequest(_) => Direction::ToNode,
            #[cfg(feature = "update")]
            UpdateReply(_) => Direction::ToMaster,
        }
    }

    /// Encodes the payload into `buf`; returns its length.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        match self.direction() {
            Direction::ToNode => self.encode_to_node(buf),
            Direction::ToMaster => self.encode_to_master(buf),
        }
    }

    /// [`ConfigMessage::encode`] for a node→master message, the only kind a node sends:
    /// a node that calls this links none of the master→node encoders (on the example
    /// firmware, hundreds of bytes of flash).
    pub fn encode_to_master(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf);
        use ConfigMessage::*;
        match self {
            NodeHeartbeat(m) => m.encode(&mut w)?,
            ServiceResponse(m) => m.encode(&mut w)?,
            ParamValue(m) => m.encode(&mut w)?,
            Result(m) => m.encode(&mut w)?,
            Announce(m) => m.encode(&mut w)?,
            Stats(m) => m.encode(&mut w)?,
            SchemaData(m) => m.encode(&mut w)?,
            #[cfg(feature = "update")]
            UpdateReply(m) => m.encode(&mut w)?,
            _ => return Err(EncodeError::WrongDirection),
        }
        Ok(w.position())
    }

    /// [`ConfigMessage::encode`] for a master→node message.
    pub fn encode_to_node(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf);
        use ConfigMessage::*;
        match self {
            MasterHeartbeat(m) => m.encode(&mut w)?,
            Start(m) => m.encode(&mut w)?,
            ServiceRequest(m) => m.encode(&mut w)?,
            ParamSet(m) => m.encode(&mut w)?,
            ParamGet(m) => m.encode(&mut w)?,
            FrameDefine(m) => m.encode(&mut w)?,
            AnnounceAck(m) => m.encode(&mut w)?,
            Discover(m) => m.encode(&mut w)?,
            StatsRead => {}
            SchemaRead(m) => m.encode(&mut w)?,
            #[cfg(feature = "update")]
            UpdateRequest(m) => m.encode(&mut w)?,
            _ => return Err(EncodeError::WrongDirection),
        }
        Ok(w.position())
    }

    /// Decodes a complete (reassembled) payload.
    pub fn decode(opcode: Opcode, dir: Direction, payload: &'a [u8]) -> Result<Self, DecodeError> {
        match dir {
            Direction::ToNode => Self::decode_to_node(opcode, payload),
            Direction::ToMaster => Self::decode_to_master(opcode, payload),
        }
    }

    /// [`ConfigMessage::decode`] of a master→node message, the only kind a node takes: a
    /// node that calls this links none of the node→master decoders.
    pub fn decode_to_node(opcode: Opcode, payload: &'a [u8]) -> Result<Self, DecodeError> {
        let r = &mut Reader::new(payload);
        Ok(match opcode {
            Opcode::Heartbeat => Self::MasterHeartbeat(MasterHeartbeat::decode(r)?),
            Opcode::Start => Self::Start(Start::decode(r)?),
            Opcode::Service => Self::ServiceRequest(ServiceRequest::decode(r)?),
            Opcode::ParamSet => Self::ParamSet(ParamSet::decode(r)?),
            Opcode::ParamGet => Self::ParamGet(ParamGet::decode(r)?),
            Opcode::FrameDefine => Self::FrameDefine(FrameDefine::decode(r)?),
            Opcode::AnnounceAck => Self::AnnounceAck(AnnounceAck::decode(r)?),
            Opcode::Discover => Self::Discover(Discover::decode(r)?),
            Opcode::Stats => Self::StatsRead,
            Opcode::Schema => Self::SchemaRead(SchemaRead::decode(r)?),
            #[cfg(feature = "update")]
            Opcode::Update => Self::UpdateRequest(UpdateRequest::decode(r)?),
            Opcode::Result => return Err(DecodeError::WrongDirection),
        })
    }

    /// [`ConfigMessage::decode`] of a node→master message.
    pub fn decode_to_master(opcode: Opcode, payload: &'a [u8]) -> Result<Self, DecodeError> {
        let r = &mut Reader::new(payload);
        Ok(match opcode {
            Opcode::Heartbeat => Self::NodeHeartbeat(NodeHeartbeat::decode(r)?),
            Opcode::Service => Self::ServiceResponse(ServiceResponse::decode(r)?),
            Opcode::ParamGet => Self::ParamValue(ParamValue::decode(r)?),
            Opcode::Result => Self::Result(CommandResult::decode(r)?),
            Opcode::Discover => Self::Announce(Announce::decode(r)?),
            Opcode::Stats => Self::Stats(Counters::decode(r)?),
            Opcode::Schema => Self::SchemaData(SchemaData::decode(r)?),
            #[cfg(feature = "update")]
            Opcode::Update => Self::UpdateReply(UpdateReply::decode(r)?),
            Opcode::Start | Opcode::ParamSet | Opcode::FrameDefine | Opcode::AnnounceAck => {
                return Err(DecodeError::WrongDirection)
            }
        })
    }
}

/// The boot id a node→master frame names, read from the frame alone (no reassembly): the
/// first segment of an ANNOUNCE (always segmented: it is longer than a Classical frame)
/// or a whole node HEARTBEAT, and only when its leading bytes are well-formed. `None` for
/// any other frame: a foreign device on the bus may use any 29-bit identifier, and one
/// that parses as a configuration frame must not pass for a node.
///
/// How a node tells another node with its id (a collision) from its own frames heard
/// back.
///
/// ```
/// use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
/// use fcan_core::msg::{peek_boot_id, ConfigMessage, FaultCode, NodeHeartbeat, NodeState};
/// let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
///     state: NodeState::Running, fault: FaultCode::None, boot_id: 0xB007, errors: 0,
/// });
/// let mut buf = [0u8; 8];
/// let n = hb.encode(&mut buf).unwrap();
/// let id = ConfigId::single(Opcode::Heartbeat, Direction::ToMaster, NodeId::new(3).unwrap(), 0);
/// assert_eq!(peek_boot_id(&id, &buf[..n]), Some(0xB007));
/// assert_eq!(peek_boot_id(&id, &buf[..n - 1]), None);
/// ```
pub fn peek_boot_id(id: &crate::id::ConfigId, data: &[u8]) -> Option<u32> {
    if id.dir != Direction::ToMaster || id.segment != 0 {
        return None;
    }
    match (id.opcode, id.eot) {
        (Opcode::Discover, false) => Announce::peek_boot_id(data),
        (Opcode::Heartbeat, true) if data.len() == NodeHeartbeat::LEN => {
            NodeHeartbeat::decode(&mut Reader::new(data))
                .ok()
                .map(|h| h.boot_id)
        }
        _ => None,
    }
}
