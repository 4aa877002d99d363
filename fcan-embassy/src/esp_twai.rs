//! esp-hal's TWAI (ESP32-C3, -C6, -S3, ...) as a [`ClassicPort`] (feature `esp-twai`;
//! esp-hal 1.2, checked against its source). Classical CAN only: the bus must be
//! Classical (docs/firmware-rust-chips.md).
//!
//! esp-hal implements `embedded_can::nb::Can` for its TWAI driver, so
//! `fcan_runtime_nostd::ClassicCan` could drive it from a polling loop; this port uses
//! the driver directly instead, for its async receive (`receive_async`, fed by the TWAI
//! interrupt) and its bus-off recovery, which the `nb` trait does not have.
//!
//! - **One transmit buffer**: the TWAI holds one frame; `transmit` refuses while it is
//!   busy, so frames leave in the node's order.
//! - **A frame given up on**: when the controller is error-passive with a frame pending
//!   (no other node acknowledges it), esp-hal aborts that frame and answers
//!   `TransmissionAborted`; the frame being offered is refused (the node re-offers it),
//!   the aborted one is lost and counted in [`EspTwai::aborted`].
//! - **Bus-off**: the state from the driver's status and error counters; recovery
//!   started with `initiate_recovery` when the loop sees bus-off.
//! - **Timestamps**: none; the loop stamps a frame when it takes it.

use esp_hal::twai::{ErrorKind, EspTwaiError, EspTwaiFrame, Twai};
use esp_hal::Async;
use fcan_core::frame::Frame;

use crate::convert::{frame_from_wire, ClassicFrame};
use crate::port::{BusState, ClassicPort, Received, Refused, RxError};

/// The TWAI frame for a Classical fcan frame; `None` for an identifier out of range.
pub fn to_twai(frame: &ClassicFrame) -> Option<EspTwaiFrame> {
    let h = frame.header()?;
    EspTwaiFrame::new(h.id, frame.data())
}

/// The fcan frame for a received TWAI frame; `None` for a remote frame.
pub fn from_twai(frame: &EspTwaiFrame) -> Option<Frame> {
    use embedded_can::Frame as _;
    frame_from_wire(
        embedded_can::Frame::id(frame),
        embedded_can::Frame::data(frame),
        false,
        false,
        frame.is_remote_frame(),
    )
}

/// A started TWAI controller in async mode, as a [`ClassicPort`].
pub struct EspTwai<'d> {
    twai: Twai<'d, Async>,
    aborted: u32,
}

impl<'d> EspTwai<'d> {
    /// The port over a started controller (`TwaiConfiguration::into_async().start()`).
    pub fn new(twai: Twai<'d, Async>) -> Self {
        EspTwai { twai, aborted: 0 }
    }

    /// Frames esp-hal gave up on (error-passive with the frame unacknowledged).
    pub fn aborted(&self) -> u32 {
        self.aborted
    }
}

impl ClassicPort for EspTwai<'_> {
    fn try_write(&mut self, frame: &ClassicFrame) -> Result<(), Refused> {
        let f = to_twai(frame).ok_or(Refused::Unsupported)?;
        match self.twai.transmit(&f) {
            Ok(()) => Ok(()),
            Err(nb::Error::Other(EspTwaiError::TransmissionAborted)) => {
                self.aborted = self.aborted.wrapping_add(1);
                Err(Refused::Full)
            }
            Err(_) => Err(Refused::Full),
        }
    }

    async fn read(&mut self) -> Result<Received, RxError> {
        match self.twai.receive_async().await {
            Ok(f) => Ok(Received {
                frame: from_twai(&f).ok_or(RxError::Skipped)?,
                at_us: None,
            }),
            Err(EspTwaiError::BusOff) => Err(RxError::BusOff),
            Err(EspTwaiError::EmbeddedHAL(ErrorKind::Overrun)) => Err(RxError::Overrun),
            Err(EspTwaiError::NonCompliantDlc(_) | EspTwaiError::InvalidDataLength(_)) => {
                Err(RxError::Skipped)
            }
            Err(_) => Err(RxError::Bus),
        }
    }

    fn bus_state(&mut self) -> Option<BusState> {
        Some(if self.twai.is_bus_off() {
            BusState::BusOff
        } else if self.twai.transmit_error_count() >= 128 || self.twai.receive_error_count() >= 128
        {
            BusState::ErrorPassive
        } else {
            BusState::ErrorActive
        })
    }

    fn recover(&mut self) {
        self.twai.initiate_recovery();
    }
}
