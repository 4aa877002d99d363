#![no_std]
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// The protocol version this crate implements: ANNOUNCE's first byte, and the value a
/// schema's `protocol:` key must have.
pub const PROTOCOL_VERSION: u8 = 2;

pub mod dataframe;
pub mod frame;
pub mod group;
pub mod hash;
pub mod id;
pub mod limits;
pub mod msg;
pub mod pack;
pub mod presence;
pub mod segment;
pub mod timing;
pub mod types;

#[cfg(feature = "alloc")]
pub mod arena;
#[cfg(feature = "alloc")]
pub mod blob;
#[cfg(feature = "alloc")]
pub mod ir;
#[cfg(feature = "alloc")]
pub mod numbering;
#[cfg(feature = "alloc")]
pub mod validate;
