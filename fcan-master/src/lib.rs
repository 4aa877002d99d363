//! The fcan PC master.
//!
//! The master discovers the nodes on a bus, reads (and caches) their schema blobs, plans
//! and provisions their frames and then serves their topics, services and parameters, all
//! built at run time from the blobs (see `docs/protocol.md` and the design brief).
//!
//! Start at the front door, [`api`]: the [`MasterApi`] trait and every type of its
//! signatures (also re-exported here), the one error model ([`MasterError`],
//! [`ErrorKind`]) and [`MasterEvent`], with a runnable example. The same application
//! code runs on an in-process [`Master`] and on the remote client of `fcan-remote`.
//!
//! What it holds:
//!
//! * [`api`]: what an application does with a master ([`MasterApi`]) and the types it
//!   speaks; [`Master`] ([`master`]): the async, in-process master (one task owns the
//!   bus; handles are cheap), which implements it.
//! * [`engine`]: the same master sans I/O (frames and time in, frames and events out),
//!   with [`registry`] (names → targets), [`planner`] (frame plans), [`cache`] (schema
//!   blobs) and [`dispatch`] (samples to subscribers).
//! * [`serving`]: the one supervisor the faces (Foxglove, ROS 2, the remote API) run
//!   under, and the rule that keeps what they serve the running nodes.
//! * [`json`]: the JSON shapes of a node, an event, the status and a plan;
//!   [`observer`]: decoding a bus the master does not own (`fcan decode`).
//! * Re-exported so a program that depends on the master alone names the same types:
//!   [`transport`] (the `fcan-transport` crate: links to a bus) and [`value`],
//!   [`json_schema`], [`text`] (the `fcan-value` crate: dynamic values).
//!
//! Control loops on top of any [`MasterApi`] are the `fcan-cycle` crate.
//!
//! API conventions: every error is a `std::error::Error + Send + Sync + 'static`; the
//! enums that grow ([`MasterEvent`], [`MasterError`], [`ErrorKind`], …) and the structs
//! a user only reads ([`Status`], [`NodeInfo`], [`Sample`], …) are `#[non_exhaustive]`;
//! nodes are named by [`fcan_core::id::NodeId`].
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
pub mod dispatch;
pub mod engine;
pub mod json;
pub mod master;
pub mod observer;
pub mod planner;
pub mod registry;
pub mod serving;
pub mod update;

// The front door: the trait and every type of its signatures, at the crate root.
pub use api::{
    BusFrame, ErrorKind, MasterApi, MasterError, MasterEvent, NodeInfo, Sample, SchemaSource,
    Status, FRAMES_BACKLOG,
};
pub use engine::Phase;
/// How a driver arms a device's command watchdog (node info's `watchdog`).
pub use fcan_transport::DeviceWatchdog;
pub use master::{Master, MasterOptions};
