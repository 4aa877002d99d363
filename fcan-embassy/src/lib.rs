//! An fcan node on a real CAN controller, async: the run loop ([`run_node`],
//! [`Runner`]) and the driver traits it is written against ([`FdCanPort`],
//! [`ClassicPort`]), with implementations for embassy-stm32's FDCAN and bxCAN and
//! esp-hal's TWAI behind features. `#![no_std]`, no allocation.
//!
//! Sans-IO core, thin shells (as smoltcp, as the rest of fcan): the loop knows neither
//! chip nor executor. Each wake it
//!
//! 1. takes the frames the controller received, each with its time
//!    (`Node::receive`), waking on the first and draining a bounded burst;
//! 2. polls the node (and its application) at the clock's time; the node's frames go to
//!    the port's non-blocking `try_write`, and a frame the controller refuses stays with
//!    the node (`TxRefused`), which offers it again, in order, at the next poll;
//! 3. sleeps until the node's `poll_at` or the next frame, whichever first
//!    (`embassy_futures::select`), or `tx_retry_us` after a refusal, when the FIFO has
//!    room again;
//! 4. looks at the controller's bus state: entering bus-off is counted and recovery
//!    started, getting back is counted ([`Stats`]).
//!
//! | controller | port | kind | feature |
//! |---|---|---|---|
//! | STM32 FDCAN (G0, G4, H5, H7, L5, U5) | `stm32_fdcan::FdCan` | FD + BRS, Classical | `stm32-fdcan` |
//! | STM32 bxCAN (F0–F4, F7, L4) | `stm32_bxcan::BxCan` | Classical only | `stm32-bxcan` |
//! | ESP32 TWAI (C3, C6, S3, ...) | `esp_twai::EspTwai` | Classical only | `esp-twai` |
//! | anything else | your [`FdCanPort`] or [`ClassicPort`] | | — |
//!
//! The chip itself is the firmware's choice (`embassy-stm32/stm32g474re`,
//! `esp-hal/esp32c3`): this crate enables no chip feature. A Classical-only controller
//! must sit on a Classical bus: an FD frame from any other node makes it send error
//! frames, and `Controller::Classic` (which only keeps this node's own frames
//! Classical) cannot change that. docs/firmware-rust-chips.md is the guide;
//! `examples/nucleo-g474re` the board example. Nothing here has run on hardware yet.
//!
//! ```
//! use fcan_embassy::{ClassicPort, Classic, Received, Refused, RxError, Runner, RunConfig, Clock, CanPort};
//! use fcan_embassy::convert::ClassicFrame;
//!
//! /// A controller that takes every frame and never receives one.
//! struct Sink(u32);
//! impl ClassicPort for Sink {
//!     fn try_write(&mut self, _: &ClassicFrame) -> Result<(), Refused> { self.0 += 1; Ok(()) }
//!     async fn read(&mut self) -> Result<Received, RxError> { core::future::pending().await }
//! }
//! struct Manual(u32);
//! impl Clock for Manual {
//!     fn now_us(&mut self) -> u32 { self.0 }
//!     async fn sleep_until(&mut self, at_us: u32) { self.0 = at_us }
//! }
//! assert_eq!(<Classic<Sink> as CanPort>::CONTROLLER, fcan_runtime_nostd::Controller::Classic);
//! let runner = Runner::new(Classic(Sink(0)), Manual(0), RunConfig::default());
//! assert_eq!(runner.stats().tx_frames, 0);
//! ```

#![no_std]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod convert;
#[cfg(feature = "esp-twai")]
pub mod esp_twai;
mod port;
mod run;
#[cfg(feature = "stm32-bxcan")]
pub mod stm32_bxcan;
#[cfg(feature = "stm32-fdcan")]
pub mod stm32_fdcan;
#[cfg(feature = "embassy-time")]
pub mod time;

pub use port::{
    BusState, CanPort, Classic, ClassicPort, Fd, FdCanPort, Received, Refused, RxError,
};
pub use run::{run_node, Clock, Firmware, Next, RunConfig, Runner, Stats, Wake};
#[cfg(feature = "embassy-time")]
pub use time::EmbassyClock;
