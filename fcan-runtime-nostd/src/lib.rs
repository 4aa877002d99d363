//! The fcan node runtime: `#![no_std]`, no allocation, no panics on bus input.
//!
//! Modelled on smoltcp's interface: the application feeds received frames and the
//! current time, calls [`Node::poll`], and the node hands frames to transmit through
//! [`Transmit`]. All RAM is in [`Buffers`](crate::codegen::Buffers), sized at compile time from constants the
//! code generator computes from the schema; the schema itself arrives as static tables
//! ([`NodeDesc`](crate::codegen::NodeDesc)).
//!
//! ```text
//! loop {
//!     while let Some(frame) = can.receive_frame() { node.receive(&frame, clock.now_us()); }
//!     node.poll(clock.now_us(), &mut can, &mut app);
//!     if let Some(cmd) = node.topic(MOTOR0, CMD) { /* check cmd.generation, cmd.age_us(now) */ }
//!     // Optional: sleep until the node's next deadline or a CAN interrupt.
//!     if let Some(t) = node.poll_at(clock.now_us()) { sleep_until(t); }
//! }
//! ```
//!
//! Or the CAN receive interrupt pushes frames into a [`Mailbox`] through its
//! [`MailboxProducer`] (no `&mut Node` in the handler, no lock), and the loop calls
//! [`Node::receive_from`] with the [`MailboxConsumer`] instead of [`Node::receive`].
//!
//! What the node does, end to end:
//! - boot: listens silently for `LISTEN_WINDOW_US` + jitter from `boot_id`; an ANNOUNCE
//!   or HEARTBEAT with its id and another boot_id puts it in FAULT
//!   ([`Event::IdCollision`]) — its own frames heard back never do;
//! - announces with back-off (100 ms doubling to 2 s) until a master acknowledges, then
//!   heartbeats every second; a master heartbeat with another session makes it announce
//!   again;
//! - serves SCHEMA_READ from the static blob, validates FRAME_DEFINE against its own
//!   schema and limits (a NAK changes nothing), runs on START;
//! - data plane: m2s frames update topics with a generation and a timestamp (multi-frame
//!   groups whole or not at all), s2m frames go out periodically or after a publish;
//! - services: reassembly into slots, handlers from `poll`, deferred replies completed
//!   through [`Node::complete`] and sent from `poll` (EXPIRED after
//!   `DEFERRED_SERVICE_TIMEOUT_US` if the application never completes), BUSY when the
//!   slots are full;
//! - parameters: defaults at boot, PARAM_SET checked (type, NaN/inf, min/max) and NAKed
//!   with the reason, [`Dispatch::params_changed`](crate::codegen::Dispatch::params_changed) after each batch;
//! - master lost (watchdog from START): SUSPENDED, data stops, [`Event::MasterLost`],
//!   announces again.
//!
//! Configuration-plane messages are never lost or reordered: a frame the driver refuses
//! is offered again on the next poll.
//!
//! Features:
//! - `update`: firmware update over the bus (`Update`, `docs/protocol.md` §3.14).
//! - `defmt`: the public types (events, errors, [`NodeConfig`], [`TopicRead`],
//!   [`Received`], [`DeferredToken`], …) and the fcan-core types the API hands out
//!   ([`NodeId`](fcan_core::id::NodeId), [`NodeState`](fcan_core::msg::NodeState),
//!   [`FaultCode`](fcan_core::msg::FaultCode), [`Frame`](fcan_core::frame::Frame),
//!   [`Counters`](fcan_core::msg::Counters), …) implement `defmt::Format`, so a firmware
//!   logs them with `defmt::info!("{}", event)`. Off by default; the firmware links its
//!   own defmt logger. [`Node`], [`Context`] and [`Mailbox`] do not: they hold buffers,
//!   not values.

#![no_std]
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub use fcan_core;

mod api;
mod can;
mod config_plane;
mod context;
mod counters;
#[cfg(feature = "defmt")]
mod defmt_check;
mod desc;
mod dispatch;
mod error;
mod lifecycle;
mod mailbox;
mod node;
mod outq;
mod params;
mod plan;
mod rxq;
mod sched;
mod services;
mod state;
mod storage;
mod tables;
mod topics;
mod typed;
#[cfg(feature = "update")]
pub mod update;
#[cfg(feature = "update")]
mod update_transfer;
mod wake;
mod wired;

pub use api::{Controller, DeferredToken, Event, Reply, Transmit, TxRefused};
pub use can::{from_embedded, to_embedded, ClassicCan};
pub use context::Context;
pub use error::{CompleteError, ConfigError, PublishError};
pub use mailbox::{Mailbox, MailboxConsumer, MailboxProducer, Stamped};
pub use node::{Node, NodeConfig};
pub use outq::OUT_QUEUE_LEN;
pub use rxq::RX_QUEUE_LEN;
pub use topics::TopicRead;
pub use typed::{Deferred, Message, Param, ParamType, Received};
#[cfg(feature = "update")]
pub use update::{FlashError, Update};

/// What generated code, and a node built at run time (`fcan-fake`), build a node from:
/// the descriptor tables, the RAM buffers, their element types and the untyped dispatch
/// the generated `App` implements. A firmware author never names these: the generated
/// module does, so they stay out of the crate's documented surface.
#[doc(hidden)]
pub mod codegen {
    pub use crate::api::{ServiceCall, ServiceOutcome};
    pub use crate::desc::*;
    pub use crate::dispatch::Dispatch;
    pub use crate::storage::{Buffers, Parts, PartsRef, Storage};
    pub use crate::tables::{PlanEntry, PlanFrame, SvcSlot, TopicState};
    pub use crate::typed::finish;
}

/// Bytes of the node's configuration reassembly buffer: the longest
/// FRAME_DEFINE (12 + 64 entries × 6 = 396 bytes) or PARAM_SET (2 + the largest
/// parameter) it can take. Service requests use the service slots instead. The one
/// constant schema validation checks parameters against (`fcan_core::limits`).
pub use fcan_core::limits::CONFIG_REASSEMBLY_BYTES;

/// The protocol version the node announces.
pub use fcan_core::PROTOCOL_VERSION;
