//! The fcan PC master.
//!
//! The master discovers the nodes on a bus, reads (and caches) their schema blobs, plans
//! and provisions their frames and then serves their topics, services and parameters, all
//! built at run time from the blobs (see `docs/protocol.md` and the design brief).
//!
//! This crate currently provides the layer everything else stands on:
//!
//! * [`transport`]: the [`Transport`](transport::Transport) trait the engine talks to the
//!   bus through, with SocketCAN (classical and FD), an in-process simulated bus with a
//!   bit-timing model, arbitration and fault injection, and candump-format recording and
//!   replay.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The links to a bus the master runs on: the `fcan-transport` crate, re-exported so a
/// program that depends on the master alone names the same types.
pub use fcan_transport as transport;

pub mod cache;
pub mod engine;
pub mod master;
pub mod planner;
pub mod registry;
pub mod value;
pub use engine::Phase;
pub use master::{Master, MasterError, MasterOptions, NodeInfo, Sample, SchemaSource, Status};
pub mod dispatch;
pub mod text;
