//! embassy-stm32's FDCAN as an [`FdCanPort`] (feature `stm32-fdcan`; embassy-stm32 0.6,
//! checked against its source).
//!
//! - **Frames keep their kind.** embassy-stm32's `FdFrame::new_standard` and
//!   `new_extended` build a header without the FD flag, and its transmit path then sends
//!   ≤ 8 bytes as Classical and longer frames as FD *without* BRS. [`to_fdcan`] builds
//!   the header itself from [`crate::convert::wire_header`]:
//!   `Header::new_fd(id, len, false, brs)` for an FD frame (the driver writes FDF when
//!   the header says FD, at any length, and BRS as the header says),
//!   `Header::new(id, len, false)` for a Classical one.
//! - **Transmit FIFO.** In its default priority-queue mode the driver, when its three
//!   transmit buffers are full, cancels a pending lower-priority frame to make room,
//!   which reorders and (for FD frames) loses the node's frames. [`config`] sets
//!   `TxBufferMode::Fifo`: a full FIFO refuses, and the node offers the frame again.
//! - **No non-blocking write in the driver**: `CanTx::write_fd` waits for room. The
//!   port polls it once (`embassy_futures::poll_once`): room → queued, none → refused.
//! - **Bus-off**: the driver's interrupt starts recovery by itself
//!   (`automatic_bus_off_recovery`, on in [`config`]); the state is read from PSR
//!   (`Properties::bus_error_mode`).
//! - **Timestamps**: embassy-stm32's `time` feature (on with this one) turns the
//!   controller's receive timestamp into an embassy-time `Instant`.

use core::task::Poll;

use embassy_futures::poll_once;
use embassy_stm32::can::config::{FdCanConfig, TxBufferMode};
use embassy_stm32::can::enums::BusErrorMode;
use embassy_stm32::can::frame::{FdFrame, Header};
use embassy_stm32::can::{Can, CanRx, CanTx, Properties};
use fcan_core::frame::Frame;

use crate::convert::{frame_from_wire, wire_header};
use crate::port::{BusState, FdCanPort, Received, Refused, RxError};
use crate::time::instant_us;

/// `base` with what the port needs: the transmit FIFO (frames leave in the node's order,
/// none cancelled) and automatic bus-off recovery. Give it to
/// `CanConfigurator::set_config` before starting the controller.
pub fn config(base: FdCanConfig) -> FdCanConfig {
    base.set_tx_buffer_mode(TxBufferMode::Fifo)
        .set_automatic_bus_off_recovery(true)
}

/// The FDCAN frame for an fcan frame: FD exactly when the node's frame is (at any
/// length), BRS exactly as it says; `None` for an identifier out of range.
pub fn to_fdcan(frame: &Frame) -> Option<FdFrame> {
    let h = wire_header(frame)?;
    let header = if h.fd {
        Header::new_fd(h.id, h.len, false, h.brs)
    } else {
        Header::new(h.id, h.len, false)
    };
    FdFrame::new(header, frame.data()).ok()
}

/// The fcan frame for a received FDCAN frame; `None` for a remote frame.
pub fn from_fdcan(frame: &FdFrame) -> Option<Frame> {
    let h = frame.header();
    frame_from_wire(
        *h.id(),
        frame.data(),
        h.fdcan(),
        h.bit_rate_switching(),
        h.rtr(),
    )
}

/// An FDCAN controller, started (with [`config`]), as an [`FdCanPort`].
pub struct FdCan<'d> {
    tx: CanTx<'d>,
    rx: CanRx<'d>,
    properties: Properties,
    displaced: u32,
}

impl<'d> FdCan<'d> {
    /// The port over a started controller.
    pub fn new(can: Can<'d>) -> Self {
        let (tx, rx, properties) = can.split();
        FdCan {
            tx,
            rx,
            properties,
            displaced: 0,
        }
    }

    /// Filters, error counters.
    pub fn properties(&self) -> &Properties {
        &self.properties
    }

    /// Frames the driver cancelled to make room for a later one: only ever in its
    /// priority-queue mode (the controller was not started with [`config`]); each is a
    /// frame of the node's lost.
    pub fn displaced(&self) -> u32 {
        self.displaced
    }
}

impl FdCanPort for FdCan<'_> {
    fn try_write(&mut self, frame: &Frame) -> Result<(), Refused> {
        let f = to_fdcan(frame).ok_or(Refused::Unsupported)?;
        match poll_once(self.tx.write_fd(&f)) {
            Poll::Ready(None) => Ok(()),
            Poll::Ready(Some(_)) => {
                self.displaced = self.displaced.wrapping_add(1);
                Ok(())
            }
            Poll::Pending => Err(Refused::Full),
        }
    }

    async fn read(&mut self) -> Result<Received, RxError> {
        match self.rx.read_fd().await {
            Ok(envelope) => {
                let (f, ts) = envelope.parts();
                let frame = from_fdcan(&f).ok_or(RxError::Skipped)?;
                Ok(Received {
                    frame,
                    at_us: Some(instant_us(ts)),
                })
            }
            Err(_) => Err(RxError::Bus),
        }
    }

    fn bus_state(&mut self) -> Option<BusState> {
        Some(match self.properties.bus_error_mode() {
            BusErrorMode::ErrorActive => BusState::ErrorActive,
            BusErrorMode::ErrorPassive => BusState::ErrorPassive,
            BusErrorMode::BusOff => BusState::BusOff,
        })
    }
}

// Runs where embassy-stm32 builds for the host: `cargo test -p fcan-embassy --features
// stm32-fdcan,embassy-stm32/stm32g474re,embassy-stm32/dual-bank` (.ci/chips.sh).
#[cfg(test)]
mod tests {
    use super::*;
    use embassy_stm32::can::frame::FdFrame;
    use fcan_core::frame::{CanId, FD_LENGTHS};

    const IDS: [CanId; 2] = [CanId::Standard(0x123), CanId::Extended(0x1ABC_DEF0)];

    #[test]
    fn fd_frames_stay_fd_with_their_brs_at_every_length() {
        let data: [u8; 64] = core::array::from_fn(|i| i as u8);
        for id in IDS {
            for &len in &FD_LENGTHS {
                for brs in [true, false] {
                    let f = Frame::fd(id, &data[..len as usize]).unwrap();
                    let f = if brs { f } else { f.without_brs() };
                    let x = to_fdcan(&f).unwrap();
                    let h = x.header();
                    assert!(h.fdcan(), "{f:?}: FD on the wire at {len} bytes");
                    assert_eq!(h.bit_rate_switching(), brs, "{f:?}");
                    assert_eq!((h.len(), h.rtr()), (len, false));
                    assert_eq!(x.data(), f.data());
                    assert_eq!(from_fdcan(&x), Some(f));
                }
            }
        }
    }

    #[test]
    fn classic_frames_stay_classic() {
        for id in IDS {
            for len in 0..=8usize {
                let f = Frame::classic(id, &[0x5A; 8][..len]).unwrap();
                let x = to_fdcan(&f).unwrap();
                assert!(!x.header().fdcan() && !x.header().bit_rate_switching());
                assert_eq!(from_fdcan(&x), Some(f));
            }
        }
    }

    #[test]
    fn what_embassy_stm32s_own_constructors_would_have_sent() {
        // The reason `to_fdcan` builds the header itself: no FD flag, so the driver sends
        // ≤ 8 bytes as Classical and longer frames as FD without BRS.
        let short = FdFrame::new_standard(0x123, &[0; 8]).unwrap();
        assert!(!short.header().fdcan());
        let long = FdFrame::new_standard(0x123, &[0; 12]).unwrap();
        assert!(!long.header().fdcan() && !long.header().bit_rate_switching());
    }

    #[test]
    fn remote_frames_are_skipped() {
        let id = embedded_can::Id::Standard(embedded_can::StandardId::new(0x10).unwrap());
        let remote = FdFrame::new(Header::new(id, 0, true), &[]).unwrap();
        assert_eq!(from_fdcan(&remote), None);
    }
}
