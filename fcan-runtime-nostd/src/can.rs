//! Adapters to `embedded-can` drivers.
//!
//! fcan's own frame type ([`fcan_core::frame::Frame`]) carries both Classical CAN and
//! CAN FD frames; [`crate::Transmit`] takes it, so an FD driver implements `Transmit`
//! directly (embedded-can has no FD trait yet). A Classical CAN driver implementing
//! [`embedded_can::nb::Can`] is wrapped in [`ClassicCan`].

use crate::api::{Transmit, TxRefused};
use embedded_can::{ExtendedId, Id, StandardId};
use fcan_core::frame::{CanId, Frame};

/// Wraps an [`embedded_can::nb::Can`] driver (Classical CAN only) as a [`Transmit`].
///
/// A node on a classical driver must be configured with `fd_capable: false`: it then
/// never produces an FD frame (it NAKs an ANNOUNCE_ACK that asks for an FD bus mode). An
/// FD frame reaching this adapter anyway is refused ([`TxRefused`]): the node counts
/// `tx_refused` and retries, which makes the misconfiguration visible instead of silently
/// dropping configuration traffic.
///
/// `embedded-can` lets a driver replace a pending lower-priority frame and hand it back;
/// the adapter offers that frame to the driver once more and drops it if it is refused
/// again. Configure drivers not to replace pending frames where they allow it.
///
/// ```
/// use fcan_runtime_nostd::{ClassicCan, Transmit};
/// use fcan_core::frame::{CanId, Frame};
///
/// # #[derive(Debug)] struct E;
/// # impl embedded_can::Error for E { fn kind(&self) -> embedded_can::ErrorKind { embedded_can::ErrorKind::Other } }
/// # struct F { id: embedded_can::Id, data: [u8; 8], len: usize }
/// # impl embedded_can::Frame for F {
/// #   fn new(id: impl Into<embedded_can::Id>, data: &[u8]) -> Option<Self> {
/// #     if data.len() > 8 { return None }
/// #     let mut d = [0; 8]; d[..data.len()].copy_from_slice(data);
/// #     Some(F { id: id.into(), data: d, len: data.len() }) }
/// #   fn new_remote(_: impl Into<embedded_can::Id>, _: usize) -> Option<Self> { None }
/// #   fn is_extended(&self) -> bool { matches!(self.id, embedded_can::Id::Extended(_)) }
/// #   fn is_remote_frame(&self) -> bool { false }
/// #   fn id(&self) -> embedded_can::Id { self.id }
/// #   fn dlc(&self) -> usize { self.len }
/// #   fn data(&self) -> &[u8] { &self.data[..self.len] }
/// # }
/// /// A driver that accepts everything.
/// struct Driver(usize);
/// impl embedded_can::nb::Can for Driver {
///     type Frame = F;
///     type Error = E;
///     fn transmit(&mut self, _: &F) -> nb::Result<Option<F>, E> { self.0 += 1; Ok(None) }
///     fn receive(&mut self) -> nb::Result<F, E> { Err(nb::Error::WouldBlock) }
/// }
///
/// let mut can = ClassicCan(Driver(0));
/// let f = Frame::classic(CanId::Standard(0x123), &[1, 2]).unwrap();
/// assert!(can.transmit(&f).is_ok());
/// assert!(can.transmit(&Frame::fd(CanId::Standard(1), &[0; 12]).unwrap()).is_err());
/// assert_eq!(can.0 .0, 1);
/// assert!(can.receive_frame().is_none());
/// ```
#[derive(Debug)]
pub struct ClassicCan<C>(pub C);

impl<C: embedded_can::nb::Can> Transmit for ClassicCan<C> {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        let out: C::Frame = to_embedded(frame).ok_or(TxRefused)?;
        match self.0.transmit(&out) {
            Ok(None) => Ok(()),
            Ok(Some(replaced)) => {
                // Our frame is queued; give the one it displaced one more chance.
                let _ = self.0.transmit(&replaced);
                Ok(())
            }
            Err(_) => Err(TxRefused),
        }
    }
}

impl<C: embedded_can::nb::Can> ClassicCan<C> {
    /// Reads one frame from the driver, if one is waiting and it is a data frame fcan can
    /// represent (remote frames are skipped).
    pub fn receive_frame(&mut self) -> Option<Frame> {
        let f = self.0.receive().ok()?;
        from_embedded(&f)
    }
}

/// Converts an `embedded-can` frame to an fcan frame; `None` for remote frames and
/// payloads over 8 bytes.
///
/// ```
/// # use fcan_runtime_nostd::from_embedded;
/// # let _ = from_embedded::<NoFrame>;
/// # struct NoFrame;
/// # impl embedded_can::Frame for NoFrame {
/// #   fn new(_: impl Into<embedded_can::Id>, _: &[u8]) -> Option<Self> { None }
/// #   fn new_remote(_: impl Into<embedded_can::Id>, _: usize) -> Option<Self> { None }
/// #   fn is_extended(&self) -> bool { false }
/// #   fn is_remote_frame(&self) -> bool { false }
/// #   fn id(&self) -> embedded_can::Id { embedded_can::Id::Standard(embedded_can::StandardId::ZERO) }
/// #   fn dlc(&self) -> usize { 0 }
/// #   fn data(&self) -> &[u8] { &[] }
/// # }
/// ```
pub fn from_embedded<F: embedded_can::Frame>(f: &F) -> Option<Frame> {
    if f.is_remote_frame() {
        return None;
    }
    let id = match f.id() {
        Id::Standard(s) => CanId::Standard(s.as_raw()),
        Id::Extended(e) => CanId::Extended(e.as_raw()),
    };
    Frame::classic(id, f.data()).ok()
}

/// Converts an fcan frame to an `embedded-can` frame; `None` for FD frames (and for any
/// frame the driver's type cannot build).
pub fn to_embedded<F: embedded_can::Frame>(f: &Frame) -> Option<F> {
    if f.is_fd() {
        return None;
    }
    let id: Id = match f.id() {
        CanId::Standard(s) => StandardId::new(s)?.into(),
        CanId::Extended(e) => ExtendedId::new(e)?.into(),
    };
    F::new(id, f.data())
}
