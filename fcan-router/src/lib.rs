//! The fcan router: one uplink (the master's bus) and `N` downlink CAN / CAN FD buses.
//!
//! One CAN bus runs out of bandwidth long before a robot runs out of motors. The router
//! lets the master see one bus while the traffic of each downlink stays on that downlink:
//!
//! * broadcast configuration traffic (DISCOVER, the master's HEARTBEAT …) goes to every
//!   downlink;
//! * it learns which downlink holds which node from the nodes' own traffic (ANNOUNCE,
//!   HEARTBEAT, any node → master frame) and which node each data identifier belongs to
//!   from the FRAME_DEFINEs it forwards, so m2s data frames go only to the downlink that
//!   needs them and everything the nodes send goes only up;
//! * a node id heard on two downlinks is a collision: counted, reported as an [`Event`],
//!   never silently merged;
//! * a CAN FD frame never reaches a Classical CAN downlink: it is dropped and counted,
//!   never truncated; and an ANNOUNCE coming up a Classical CAN path has its FD
//!   capability cleared, so the master plans only Classical frames for that node;
//! * nodes silent for `NODE_OFFLINE_TIMEOUT_US` are forgotten, a new boot_id forgets a
//!   node's plan, so a node moved to another downlink works once it announces there.
//!
//! The rules, and why, are in `docs/router.md`.
//!
//! # Layers
//!
//! * [`Router`]: the core. `#![no_std]` without the `std` feature, no allocation, no
//!   panics; tables sized at compile time (`N` downlinks, `IDS` data identifiers). Sans-IO
//!   like smoltcp: the driver calls [`Router::route`] for every received frame and sends
//!   it where the returned [`Route`] says, calls [`Router::poll`] now and then, and reads
//!   [`Router::counters`] and [`Router::pop_event`]. Usable on a microcontroller bridging
//!   USB or one FD bus to several buses, and on a PC.
//! * `bridge` (feature `std`, on by default): the core driven by tokio over
//!   `fcan_transport` links (SocketCAN, simulated buses).
//! * the `fcan-router` binary: `fcan-router --uplink socketcan:can0 --downlink
//!   socketcan:can1 --downlink socketcan:can2`.
#![cfg_attr(not(feature = "std"), no_std)]
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

#[cfg(test)]
extern crate std;

mod capture;
mod counters;
mod event;
mod link;
mod router;
mod tables;

#[cfg(feature = "std")]
pub mod bridge;

pub use counters::{Counters, DropCounters, DropReason, LearnCounters, LinkCounters};
pub use event::Event;
pub use link::{Link, LinkSet};
pub use router::{Route, Router, RouterConfig, CAPTURE_SLOTS, EVENT_QUEUE};
pub use tables::{NodeEntry, StdEntry, DATA_IDS, NODE_SLOTS};

#[cfg(test)]
mod tests;
