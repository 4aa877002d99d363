//! Device drivers for the fcan bus owner: off-the-shelf CAN devices (RobStride actuators,
//! MIT-mode actuators) on the same bus as fcan boards, each presented to the master — and
//! so to every face: CLI, Zenoh, ROS 2, Foxglove, MCAP, decode, the cycle API — as an
//! fcan node described by a schema the driver ships.
//!
//! | module | idea |
//! |---|---|
//! | [`device`] | the driver contract: a device, sans I/O |
//! | [`decode`] | devices' frames decoded offline, with no master (`fcan decode --device`) |
//! | [`message`] | a device's fcan messages by field name, laid out by fcan-core |
//! | [`host`] | every device as an fcan node run by the firmware's runtime; the routing |
//! | [`link`] | the I/O shell: a `Transport` around the real link |
//! | [`registry`] | **the one place a driver is registered**: [`registry::DRIVERS`], which everything that knows drivers by name iterates |
//! | [`robstride`] | RobStride RS00–RS06 (private protocol, 29-bit ids) |
//! | [`mit`] | generic MIT-mode actuators (11-bit ids) |
//! | [`cia402`] | CANopen CiA 402 drives (CiA 301 SDO/PDO/NMT, 11-bit ids) |
//! | [`spec`] | `--device` specs and bus files |
//! | [`sim`] | simulated devices |
//!
//! `docs/drivers.md` is the guide.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cia402;
pub mod decode;
pub mod device;
pub mod host;
pub mod link;
pub mod message;
pub mod mit;
pub mod registry;
pub mod robstride;
pub mod sim;
pub mod spec;

pub use device::{Device, Io, NodeEvent, Note, Served, Severity, Watchdog};
pub use host::{DeviceHost, HostError, Route};
pub use link::DeviceLink;
