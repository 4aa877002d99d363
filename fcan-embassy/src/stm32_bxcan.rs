//! embassy-stm32's bxCAN as a [`ClassicPort`] (feature `stm32-bxcan`; embassy-stm32 0.6,
//! checked against its source). Classical CAN only: the bus must be Classical
//! (docs/firmware-rust-chips.md).
//!
//! - **FIFO scheduling.** [`BxCan::new`] turns on the controller's transmit FIFO
//!   scheduling (`TXFP`): frames leave in the node's order, and a full set of mailboxes
//!   refuses rather than cancelling a pending frame (what the priority mode does).
//! - **Bus-off**: embassy-stm32 enables the controller's automatic bus-off management
//!   (`ABOM`), so it recovers by itself; the driver exposes no error state, so
//!   [`ClassicPort::bus_state`] is `None` and the loop counts no bus-off here.
//! - **Timestamps**: embassy-stm32's `time` feature stamps each frame with an
//!   embassy-time `Instant` when its interrupt takes it.

use embassy_stm32::can::frame::Header;
use embassy_stm32::can::{Can, Frame as BxFrame};
use fcan_core::frame::Frame;

use crate::convert::{frame_from_wire, ClassicFrame};
use crate::port::{ClassicPort, Received, Refused, RxError};
use crate::time::instant_us;

/// The bxCAN frame for a Classical fcan frame; `None` for an identifier out of range.
pub fn to_bxcan(frame: &ClassicFrame) -> Option<BxFrame> {
    let h = frame.header()?;
    BxFrame::new(Header::new(h.id, h.len, false), frame.data()).ok()
}

/// The fcan frame for a received bxCAN frame; `None` for a remote frame.
pub fn from_bxcan(frame: &BxFrame) -> Option<Frame> {
    let h = frame.header();
    frame_from_wire(*h.id(), frame.data(), false, false, h.rtr())
}

/// A bxCAN controller, enabled, as a [`ClassicPort`].
pub struct BxCan<'d> {
    can: Can<'d>,
}

impl<'d> BxCan<'d> {
    /// The port over an enabled controller; turns on transmit FIFO scheduling.
    pub fn new(mut can: Can<'d>) -> Self {
        can.set_tx_fifo_scheduling(true);
        BxCan { can }
    }

    /// The controller (filters, sleep).
    pub fn can_mut(&mut self) -> &mut Can<'d> {
        &mut self.can
    }
}

impl ClassicPort for BxCan<'_> {
    fn try_write(&mut self, frame: &ClassicFrame) -> Result<(), Refused> {
        let f = to_bxcan(frame).ok_or(Refused::Unsupported)?;
        self.can
            .try_write(&f)
            .map(|_| ())
            .map_err(|_| Refused::Full)
    }

    async fn read(&mut self) -> Result<Received, RxError> {
        match self.can.read().await {
            Ok(envelope) => {
                let (f, ts) = envelope.parts();
                let frame = from_bxcan(&f).ok_or(RxError::Skipped)?;
                Ok(Received {
                    frame,
                    at_us: Some(instant_us(ts)),
                })
            }
            Err(_) => Err(RxError::Bus),
        }
    }
}

// Runs where embassy-stm32 builds for the host: `cargo test -p fcan-embassy --features
// stm32-bxcan,embassy-stm32/stm32f446re` (.ci/chips.sh).
#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::CanId;

    #[test]
    fn classic_frames_both_formats_every_length_round_trip() {
        for id in [CanId::Standard(0x7FF), CanId::Extended(0x1FFF_FFFF)] {
            for len in 0..=8usize {
                let f = Frame::classic(id, &[0xC3; 8][..len]).unwrap();
                let c = ClassicFrame::new(f).unwrap();
                let x = to_bxcan(&c).unwrap();
                assert_eq!((x.header().len() as usize, x.header().rtr()), (len, false));
                assert_eq!(from_bxcan(&x), Some(f));
            }
        }
    }

    #[test]
    fn remote_frames_are_skipped() {
        let id = embedded_can::Id::Standard(embedded_can::StandardId::new(0x10).unwrap());
        let remote = BxFrame::new(Header::new(id, 0, true), &[]).unwrap();
        assert_eq!(from_bxcan(&remote), None);
    }
}
