//! The `defmt` feature's check: every public type a firmware may log implements
//! `defmt::Format`, the runtime's own and the fcan-core types its API hands out. A
//! missing derive is a compile error here, in every build with the feature (`.ci/firmware.sh`
//! builds it for the firmware target). Nothing of it reaches the binary.
//!
//! Not listed, on purpose: `Node`, `Context`, `Mailbox` and its halves, `ClassicCan`,
//! `Buffers`, `Parts`, `PartsRef` and `update::SimFlash` hold RAM buffers, queues, a driver
//! or a simulated flash rather than values worth a log line.

use crate::codegen::{
    ArrayDesc, BlockDesc, LimitsDesc, NodeDesc, ParamDesc, PlanEntry, PlanFrame, ServiceCall,
    ServiceDesc, ServiceOutcome, SvcSlot, TopicDesc, TopicState, TypeDesc,
};
use crate::{
    CompleteError, ConfigError, Controller, Deferred, DeferredToken, Event, NodeConfig, Param,
    PublishError, Received, Reply, Stamped, TopicRead, TxRefused,
};
use fcan_core::frame::{CanId, Frame, FrameError, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{IdError, NodeId};
use fcan_core::msg::{BusMode, ConfigMessage, Counters, DataDirection, FaultCode, NodeState};
use fcan_core::pack::{OutOfSpace, ReadError};
use fcan_core::types::{Scalar, ScalarType, ValueError};

/// A marker type that is not `defmt::Format`: `Deferred` and `Param` must not need it.
#[allow(dead_code)] // only named as a type parameter
struct NotFormat;

const _: fn() = || {
    fn is_format<T: defmt::Format + ?Sized>() {}
    // The runtime's API.
    is_format::<TxRefused>();
    is_format::<DeferredToken>();
    is_format::<Reply<u32>>();
    is_format::<Controller>();
    is_format::<Event>();
    is_format::<ConfigError>();
    is_format::<PublishError>();
    is_format::<CompleteError>();
    is_format::<Stamped>();
    is_format::<NodeConfig<'static>>();
    is_format::<TopicRead<'static>>();
    is_format::<Received<f32>>();
    is_format::<Deferred<NotFormat>>();
    is_format::<Param<f32, NotFormat>>();
    #[cfg(feature = "update")]
    is_format::<crate::FlashError>();
    // What generated code names.
    is_format::<ServiceCall<'static>>();
    is_format::<ServiceOutcome>();
    is_format::<TopicDesc>();
    is_format::<ParamDesc>();
    is_format::<ServiceDesc>();
    is_format::<TypeDesc>();
    is_format::<BlockDesc>();
    is_format::<ArrayDesc>();
    is_format::<LimitsDesc>();
    is_format::<NodeDesc>();
    is_format::<PlanEntry>();
    is_format::<PlanFrame>();
    is_format::<TopicState>();
    is_format::<SvcSlot>();
    // fcan-core's types in the runtime's API (fcan-core's `defmt` feature).
    is_format::<NodeId>();
    is_format::<IdError>();
    is_format::<NodeState>();
    is_format::<FaultCode>();
    is_format::<BusMode>();
    is_format::<Counters>();
    is_format::<Frame>();
    is_format::<CanId>();
    is_format::<FrameError>();
    is_format::<Mtu>();
    is_format::<HashPrefix>();
    is_format::<DataDirection>();
    is_format::<ScalarType>();
    is_format::<Scalar>();
    is_format::<ValueError>();
    is_format::<OutOfSpace>();
    is_format::<ReadError>();
    is_format::<ConfigMessage<'static>>();
    #[cfg(feature = "update")]
    {
        is_format::<fcan_core::msg::UpdateOffer<'static>>();
        is_format::<fcan_core::msg::UpdateReason>();
    }
};
