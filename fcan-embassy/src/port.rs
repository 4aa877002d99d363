//! The driver traits the adapter is written against, one per controller kind, and the
//! one view of a port the run loop ([`crate::Runner`]) takes.
//!
//! A driver implements [`FdCanPort`] (CAN FD controllers: sends any fcan frame, FD or
//! Classical, exactly as the node built it) or [`ClassicPort`] (Classical-only
//! controllers: bxCAN, TWAI, MCP2515; is only ever given a [`ClassicFrame`]). The loop
//! takes either through [`Fd`] or [`Classic`], which implement [`CanPort`]: the
//! controller kind the node must be configured with ([`CanPort::CONTROLLER`]) and the
//! refusal of an FD frame before it reaches a Classical controller live there.
//!
//! Every method but `read` must return at once. `read` must be cancel-safe: the loop
//! drops it when a deadline comes first, and polls it once (with a no-op waker) to drain
//! the controller's receive FIFO, and a frame must not be lost either way.

use crate::convert::ClassicFrame;
use fcan_core::frame::Frame;
use fcan_runtime_nostd::Controller;

/// Why a driver did not take a frame. Either way the frame stays with the node, which
/// offers it again, in order, at a later poll (`TxRefused`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refused {
    /// The controller's transmit FIFO has no room now (or it is bus-off).
    Full,
    /// The controller cannot send this frame: an FD frame for a Classical-only controller
    /// (the node was configured `Controller::Fd` on a Classical port), or an identifier
    /// out of range. Retrying does not help; the counter makes it visible.
    Unsupported,
}

/// A frame the controller received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Received {
    /// The frame, FD or Classical as it was on the wire.
    pub frame: Frame,
    /// When it was received, on the run loop's clock (wrapping µs), if the driver knows
    /// (a hardware timestamp); `None`: the loop stamps it when it takes it.
    pub at_us: Option<u32>,
}

/// What went wrong on the receive side; the loop counts it and goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RxError {
    /// A bus error the controller saw (stuff, form, acknowledge, bit, CRC).
    Bus,
    /// The receive FIFO overflowed: frames were lost.
    Overrun,
    /// The controller is bus-off.
    BusOff,
    /// A frame fcan does not take: a remote frame, a length its kind cannot carry.
    Skipped,
}

/// The controller's fault confinement state (ISO 11898-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BusState {
    /// Both error counters below 128: sends active error frames.
    ErrorActive,
    /// An error counter at 128 or more: sends passive error frames.
    ErrorPassive,
    /// Transmit error counter past 255: off the bus until recovery (128 × 11 recessive
    /// bits once recovery started).
    BusOff,
}

/// A CAN FD controller's driver, as the adapter needs it.
#[allow(async_fn_in_trait)]
pub trait FdCanPort {
    /// Queues `frame` for transmission without waiting: FD exactly when `frame.is_fd()`
    /// (also at 8 bytes or fewer), BRS exactly when `frame.is_brs()`
    /// ([`crate::convert::wire_header`]). Frames must leave in the order they were
    /// queued (a transmit FIFO, not a priority queue that cancels pending frames).
    fn try_write(&mut self, frame: &Frame) -> Result<(), Refused>;
    /// The next received frame (FD or Classical), or a receive-side error. Cancel-safe.
    async fn read(&mut self) -> Result<Received, RxError>;
    /// The fault confinement state, if the driver can tell.
    fn bus_state(&mut self) -> Option<BusState> {
        None
    }
    /// Starts bus-off recovery; called once each time the loop sees the controller enter
    /// bus-off. Nothing to do for a controller that recovers by itself.
    fn recover(&mut self) {}
}

/// A Classical-only CAN controller's driver (bxCAN, TWAI, MCP2515), as the adapter needs
/// it. It must sit on a Classical bus: an FD frame from another node makes it send error
/// frames, which no configuration of the node can prevent.
#[allow(async_fn_in_trait)]
pub trait ClassicPort {
    /// Queues `frame` for transmission without waiting, in order.
    fn try_write(&mut self, frame: &ClassicFrame) -> Result<(), Refused>;
    /// The next received Classical frame, or a receive-side error. Cancel-safe.
    async fn read(&mut self) -> Result<Received, RxError>;
    /// The fault confinement state, if the driver can tell.
    fn bus_state(&mut self) -> Option<BusState> {
        None
    }
    /// Starts bus-off recovery (see [`FdCanPort::recover`]).
    fn recover(&mut self) {}
}

/// What the run loop needs of a port: implemented by [`Fd`] and [`Classic`].
#[allow(async_fn_in_trait)]
pub trait CanPort {
    /// The controller kind to configure the node with (`NodeConfig::controller`).
    const CONTROLLER: Controller;
    /// Queues one frame of the node's.
    fn send(&mut self, frame: &Frame) -> Result<(), Refused>;
    /// The next received frame. Cancel-safe.
    async fn read(&mut self) -> Result<Received, RxError>;
    /// The fault confinement state, if the driver can tell.
    fn bus_state(&mut self) -> Option<BusState>;
    /// Starts bus-off recovery.
    fn recover(&mut self);
}

/// An [`FdCanPort`] for the run loop: the node may use FD and BRS.
#[derive(Debug)]
pub struct Fd<P>(pub P);

/// A [`ClassicPort`] for the run loop: the node must be `Controller::Classic`; an FD
/// frame reaching it anyway is refused ([`Refused::Unsupported`]), never sent.
#[derive(Debug)]
pub struct Classic<P>(pub P);

impl<P: FdCanPort> CanPort for Fd<P> {
    const CONTROLLER: Controller = Controller::Fd;
    fn send(&mut self, frame: &Frame) -> Result<(), Refused> {
        self.0.try_write(frame)
    }
    async fn read(&mut self) -> Result<Received, RxError> {
        self.0.read().await
    }
    fn bus_state(&mut self) -> Option<BusState> {
        self.0.bus_state()
    }
    fn recover(&mut self) {
        self.0.recover()
    }
}

impl<P: ClassicPort> CanPort for Classic<P> {
    const CONTROLLER: Controller = Controller::Classic;
    fn send(&mut self, frame: &Frame) -> Result<(), Refused> {
        let c = ClassicFrame::new(*frame).ok_or(Refused::Unsupported)?;
        self.0.try_write(&c)
    }
    async fn read(&mut self) -> Result<Received, RxError> {
        let r = self.0.read().await?;
        // A Classical controller never hands over an FD frame; a driver that did is wrong
        // about its kind, and the frame is not taken.
        if r.frame.is_fd() {
            return Err(RxError::Skipped);
        }
        Ok(r)
    }
    fn bus_state(&mut self) -> Option<BusState> {
        self.0.bus_state()
    }
    fn recover(&mut self) {
        self.0.recover()
    }
}
