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

pub use discovery::{caps, Announce, AnnounceAck, Discover};
pub use heartbeat::{MasterHeartbeat, NodeHeartbeat, Start};
pub use param::{ParamGet, ParamSet, ParamValue, COMMIT, PARAM_INDEX_MASK};
pub use plan::{frame_flags, CopyEntry, DataDirection, Entries, FrameDefine, FrameHeader};
pub use result::{CommandResult, Counters};
pub use schema::{SchemaData, SchemaRead};
pub use service::{ServiceRequest, ServiceResponse};
pub use status::{BusMode, FaultCode, NodeState, ResultCode, ServiceStatus};

use crate::id::{Direction, Opcode};
use crate::pack::{OutOfSpace, ReadError, Reader, Writer};

/// Why bytes are not a valid message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        }
    }
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    OutOfSpace,
    /// A variable part is longer than its length field can say.
    TooLong,
    /// A field holds a value its bits cannot carry.
    BadField,
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
        }
    }
}

/// Any configuration-plane message, borrowing its variable parts from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        }
    }

    /// Encodes the payload into `buf`; returns its length.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf);
        use ConfigMessage::*;
        match self {
            MasterHeartbeat(m) => m.encode(&mut w)?,
            NodeHeartbeat(m) => m.encode(&mut w)?,
            Start(m) => m.encode(&mut w)?,
            ServiceRequest(m) => m.encode(&mut w)?,
            ServiceResponse(m) => m.encode(&mut w)?,
            ParamSet(m) => m.encode(&mut w)?,
            ParamGet(m) => m.encode(&mut w)?,
            ParamValue(m) => m.encode(&mut w)?,
            Result(m) => m.encode(&mut w)?,
            FrameDefine(m) => m.encode(&mut w)?,
            AnnounceAck(m) => m.encode(&mut w)?,
            Discover(m) => m.encode(&mut w)?,
            Announce(m) => m.encode(&mut w)?,
            StatsRead => {}
            Stats(m) => m.encode(&mut w)?,
            SchemaRead(m) => m.encode(&mut w)?,
            SchemaData(m) => m.encode(&mut w)?,
        }
        Ok(w.position())
    }

    /// Decodes a complete (reassembled) payload.
    pub fn decode(opcode: Opcode, dir: Direction, payload: &'a [u8]) -> Result<Self, DecodeError> {
        let r = &mut Reader::new(payload);
        use Direction::{ToMaster as M, ToNode as N};
        Ok(match (opcode, dir) {
            (Opcode::Heartbeat, N) => Self::MasterHeartbeat(MasterHeartbeat::decode(r)?),
            (Opcode::Heartbeat, M) => Self::NodeHeartbeat(NodeHeartbeat::decode(r)?),
            (Opcode::Start, N) => Self::Start(Start::decode(r)?),
            (Opcode::Service, N) => Self::ServiceRequest(ServiceRequest::decode(r)?),
            (Opcode::Service, M) => Self::ServiceResponse(ServiceResponse::decode(r)?),
            (Opcode::ParamSet, N) => Self::ParamSet(ParamSet::decode(r)?),
            (Opcode::ParamGet, N) => Self::ParamGet(ParamGet::decode(r)?),
            (Opcode::ParamGet, M) => Self::ParamValue(ParamValue::decode(r)?),
            (Opcode::Result, M) => Self::Result(CommandResult::decode(r)?),
            (Opcode::FrameDefine, N) => Self::FrameDefine(FrameDefine::decode(r)?),
            (Opcode::AnnounceAck, N) => Self::AnnounceAck(AnnounceAck::decode(r)?),
            (Opcode::Discover, N) => Self::Discover(Discover::decode(r)?),
            (Opcode::Discover, M) => Self::Announce(Announce::decode(r)?),
            (Opcode::Stats, N) => Self::StatsRead,
            (Opcode::Stats, M) => Self::Stats(Counters::decode(r)?),
            (Opcode::Schema, N) => Self::SchemaRead(SchemaRead::decode(r)?),
            (Opcode::Schema, M) => Self::SchemaData(SchemaData::decode(r)?),
            (Opcode::Start | Opcode::ParamSet | Opcode::FrameDefine | Opcode::AnnounceAck, M)
            | (Opcode::Result, N) => return Err(DecodeError::WrongDirection),
        })
    }
}
