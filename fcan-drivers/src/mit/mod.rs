//! Generic MIT-mode actuators: the 8-byte MIT frame on 11-bit identifiers (CubeMars,
//! Damiao, MyActuator, RobStride in MIT mode), with configurable ranges.
//!
//! - [`wire`]: the command, the special frames (enter, exit, zero, clear error) and the
//!   reply in its two layouts (CubeMars/Mini Cheetah, Damiao), and their framing
//!   (Classical, or CAN FD for Damiao: [`wire::Framing`]); sans I/O.
//! - [`sim`]: a simulated motor that answers each frame with one reply and moves under
//!   the MIT law (as a Damiao: with its `TIMEOUT` register, honoured).
//! - Damiao's command watchdog (register 9, `TIMEOUT`), armed before every enable: the
//!   driver's module docs; vectors in `fcan-drivers/tests/mit_watchdog.rs`.
//!
//! Sources and hand-written vectors: `conformance/mit/`; for CAN FD,
//! `fcan-drivers/tests/mit_fd.rs`.
mod driver;
pub mod sim;
pub mod wire;
pub use driver::{
    Mit, BLOB, CONFIRM_US, DRIVER, KEEPALIVE_MIN_US, SILENCE_US, WATCHDOG_DEFAULT_MS,
    WATCHDOG_MAX_MS,
};
