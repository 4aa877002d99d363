//! Generic MIT-mode actuators: the 8-byte MIT frame on 11-bit identifiers (CubeMars,
//! Damiao, MyActuator, RobStride in MIT mode), with configurable ranges.
//!
//! - [`wire`]: the command, the special frames (enter, exit, zero, clear error) and the
//!   reply in its two layouts (CubeMars/Mini Cheetah, Damiao); sans I/O.
//! - [`sim`]: a simulated motor that answers each frame with one reply and moves under
//!   the MIT law.
//!
//! Sources and hand-written vectors: `conformance/mit/`.
mod driver;
pub mod sim;
pub mod wire;
pub use driver::{Mit, BLOB, CONFIRM_US};
