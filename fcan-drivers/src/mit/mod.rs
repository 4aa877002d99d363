//! Generic MIT-mode actuators: the 8-byte MIT frame on 11-bit identifiers (CubeMars,
//! Damiao, MyActuator, RobStride in MIT mode), with configurable ranges.
pub mod sim;
pub mod wire;
mod driver;
pub use driver::{Mit, BLOB, CONFIRM_US};
