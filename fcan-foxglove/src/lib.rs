//! A Foxglove WebSocket server for an fcan bus: open Foxglove or Lichtblick, connect to
//! `ws://127.0.0.1:8765`, and every node's topics are channels with JSON Schemas (plot
//! `/motor_driver1/motor0/feedback.position`), its parameters are in the Parameters
//! panel, its services callable, its command topics publishable — all built at run time
//! from the schema blobs the nodes serve, like every other face of the master
//! (`docs/foxglove.md`).
//!
//! * [`mapping`]: what Foxglove is told, sans I/O (channels, schemas, services,
//!   parameters, value conversions, which nodes to serve).
//! * [`FoxgloveServer`]: the shell that runs the `foxglove` crate's WebSocket server
//!   for one [`MasterApi`](fcan_master::MasterApi) (an in-process
//!   [`fcan_master::Master`] or a remote one).
//!
//! What the server says about itself (nodes served, publishes refused) are `tracing`
//! events with the target `fcan::foxglove`, like the `foxglove` crate's own: they reach
//! the subscriber the application installs (`fcan serve` prints them on stderr), and
//! nothing is printed without one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fcan_foxglove::{FoxgloveOptions, FoxgloveServer};
//! use fcan_master::{Master, MasterOptions};
//! let bus = fcan_master::transport::open("socketcan:can0", None)?;
//! let master = Master::start(bus, MasterOptions::default()).await?;
//! let server = FoxgloveServer::start(master, "127.0.0.1:8765".parse()?, FoxgloveOptions::default()).await?;
//! println!("Foxglove: {}", server.url());
//! tokio::signal::ctrl_c().await?;
//! drop(server); // stops serving; the master goes on
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod gate;
pub mod mapping;
mod server;

pub use server::{FoxgloveCounters, FoxgloveError, FoxgloveOptions, FoxgloveServer};

/// The `foxglove` crate this server is built on (its types appear in [`mapping`]).
pub use foxglove;
