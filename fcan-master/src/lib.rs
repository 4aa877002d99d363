//! The fcan PC master.
//!
//! The master discovers the nodes on a bus, reads (and caches) their schema blobs, plans
//! and provisions their frames and then serves their topics, services and parameters, all
//! built at run time from the blobs (see `docs/protocol.md` and the design brief).
//!
//! * [`Master`]: the async, in-process API (one task owns the bus; handles are cheap).
//! * [`engine`]: the same master sans I/O (frames and time in, frames and events out),
//!   with [`registry`] (names → targets), [`planner`] (frame plans), [`cache`] (schema
//!   blobs), [`value`] (dynamic values) and [`dispatch`] (samples to subscribers).
//! * [`transport`]: the links to a bus, re-exported from `fcan-transport`.
//!
//! API conventions: every error is a `std::error::Error + Send + Sync + 'static`; the
//! enums that grow ([`engine::Event`], [`MasterError`], …) and the structs a user only
//! reads ([`Status`], [`NodeInfo`], [`Sample`], …) are `#[non_exhaustive]`; nodes are
//! named by [`fcan_core::id::NodeId`].
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The links to a bus the master runs on: the `fcan-transport` crate, re-exported so a
/// program that depends on the master alone names the same types.
pub use fcan_transport as transport;

/// Dynamic values (the `fcan-value` crate, re-exported: a program that depends on the
/// master alone names the same types).
pub use fcan_value as value;
pub use fcan_value::{json_schema, text};

pub mod api;
pub mod cache;
pub mod cycle;
pub mod engine;
pub mod json;
pub mod master;
pub mod observer;
pub mod planner;
pub mod registry;
pub mod serving;
pub use api::MasterApi;
pub use engine::Phase;
pub use master::{
    BusFrame, Master, MasterError, MasterOptions, NodeInfo, Sample, SchemaSource, Status,
};
pub mod dispatch;
