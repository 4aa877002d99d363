//! RobStride actuators (RS00–RS06, CyberGear's protocol family): the private protocol on
//! 29-bit identifiers at 1 Mbit/s, Classical CAN.
//!
//! - `wire`: the frames, from RobStride's user manuals (chapter 4) and official sample
//!   program; `conformance/robstride/README.md` lists the sources and the choices made
//!   where they disagree.
//! - `model`: each model's quantization ranges and the parameter table.
//! - `unwrap`: the ±4π position unwrapped into a continuous angle.
//! - `sim`: a simulated motor.
mod driver;
pub mod model;
pub mod sim;
pub mod unwrap;
pub mod wire;
pub use driver::{
    RobStride, BLOB, CONFIRM_US, DRIVER, KEEPALIVE_MIN_US, LOST_US, PROBE_US, STATUS_US,
    UNWRAP_GAP_US, WATCHDOG_DEFAULT_MS, WATCHDOG_MAX_MS,
};
