//! The fcan remote API over Zenoh: one bus-owner daemon serves a [`Master`]'s bus to any
//! program on any machine, and [`RemoteMaster`] is a client with the same
//! [`MasterApi`](fcan_master::MasterApi) as the in-process master, so application code
//! runs unchanged in-process or remote.
//!
//! The key space and JSON shapes are documented in `docs/remote.md`:
//!
//! * [`keys`]: building and parsing the key expressions;
//! * [`wire`]: the JSON shapes (sample attachment, error reply, registry);
//! * [`server`]: the server, [`Server`], serving one bus on a Zenoh session;
//! * [`client`]: the client, [`RemoteMaster`];
//! * [`session`]: opening Zenoh sessions with the safe defaults (loopback only, no
//!   scouting).
//!
//! [`Master`]: fcan_master::Master
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod keys;
pub mod server;
pub mod session;
pub mod wire;

pub use client::{ClientOptions, RemoteMaster};
pub use server::{Delivery, Server, ServerOptions};
pub use session::SessionConfig;
/// The `zenoh` crate this one is built on (its `Session` is what the server and client
/// take), re-exported so a user names the same version.
pub use zenoh;

/// Why a session or a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// Zenoh failed.
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// The Zenoh configuration is not usable.
    #[error("zenoh configuration: {0}")]
    Config(String),
    /// A bus name that is not key-safe.
    #[error("bus name `{0}` is not key-safe: use letters, digits, `_` and `-`")]
    BadBus(String),
    /// Another server already serves a bus of this name where this session is connected:
    /// two would each take the other's samples for commands.
    #[error("a bus `{0}` is already served through this Zenoh network (another fcan daemon?): give this one another name (--bus NAME=SPEC) or stop the other")]
    AlreadyServed(String),
}
