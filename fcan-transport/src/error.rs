//! What can go wrong on a link, kept apart from "nothing arrived".
//!
//! A transport reports two kinds of trouble through one type:
//!
//! * **bus events** ([`TransportError::is_bus_event`]): the link is still usable, but the
//!   bus told us something the engine must know (a frame was destroyed, the controller went
//!   bus-off, came back, or turned error-passive). The next `recv` may well deliver frames.
//! * **link failures**: the transport cannot be used as asked (no such interface, no
//!   permission, the link is closed, an I/O error, a frame this link cannot carry).
//!
//! Silence is never an error: a `recv` that sees nothing just keeps waiting, and the
//! engine bounds its wait with a timer.

use fcan_core::frame::Mtu;

/// Why a frame was destroyed on the bus (the error-frame classes of ISO 11898-1, plus the
/// controller-side losses SocketCAN reports the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BusErrorKind {
    /// A transmitter read back a different bit than it sent.
    Bit,
    /// Six equal bits in a row where stuffing forbids them.
    Stuff,
    /// A fixed-form bit had the wrong value. The simulated bus also reports this when a
    /// Classical-CAN-only node destroys a CAN FD frame (a real classical controller flags a
    /// form, stuff or CRC error there, depending on the frame).
    Form,
    /// The CRC did not match the frame (e.g. a bit flipped on the wire).
    Crc,
    /// Nobody acknowledged the frame (alone on the bus, or wrong bit rate).
    NoAck,
    /// The transmitter gave up sending a frame in time.
    TxTimeout,
    /// The controller's receive buffer overflowed: frames were lost.
    RxOverflow,
    /// The transceiver reported a wiring fault (CAN_H/CAN_L open or shorted).
    Transceiver,
    /// Any other protocol violation, or one the driver did not classify.
    Other,
}

impl core::fmt::Display for BusErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            BusErrorKind::Bit => "bit error",
            BusErrorKind::Stuff => "stuff error",
            BusErrorKind::Form => "form error",
            BusErrorKind::Crc => "CRC error",
            BusErrorKind::NoAck => "no acknowledgement",
            BusErrorKind::TxTimeout => "transmit timeout",
            BusErrorKind::RxOverflow => "receive buffer overflow",
            BusErrorKind::Transceiver => "transceiver fault",
            BusErrorKind::Other => "protocol error",
        })
    }
}

/// Every error a [`Transport`](super::Transport) reports.
///
/// Non-exhaustive (a new link kind brings new failures): a match outside this crate keeps
/// a catch-all arm, or asks [`is_bus_event`](Self::is_bus_event) /
/// [`is_fatal`](Self::is_fatal). One that lists every variant does not compile:
///
/// ```compile_fail,E0004
/// use fcan_transport::TransportError;
/// fn retry(e: &TransportError) -> bool {
///     match e {
///         TransportError::BusOff | TransportError::ErrorPassive => true,
///         TransportError::Restarted | TransportError::BusError(_) => true,
///         TransportError::TxQueueFull => true,
///         TransportError::FdNotSupported { .. } | TransportError::InvalidFrame(_) => false,
///         TransportError::NoSuchInterface(_) | TransportError::PermissionDenied(_) => false,
///         TransportError::InvalidSpec { .. } | TransportError::Io(_) => false,
///         TransportError::Closed => false,
///     }
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The controller is bus-off: it neither sends nor receives until it is restarted.
    #[error("bus-off: the CAN controller left the bus after too many errors")]
    BusOff,
    /// The controller's error counters passed the warning or error-passive threshold; it
    /// still takes part in traffic.
    #[error("the CAN controller is error-passive (error counters high)")]
    ErrorPassive,
    /// The controller came back from bus-off.
    #[error("the CAN controller restarted after bus-off")]
    Restarted,
    /// A frame on the bus was destroyed and is lost (unless its sender retransmits it).
    #[error("bus error: {0}")]
    BusError(BusErrorKind),
    /// The transmit queue is full (`ENOBUFS` on SocketCAN); retry later.
    #[error("transmit queue full (ENOBUFS): retry later")]
    TxQueueFull,
    /// A CAN FD frame was offered to a link that only carries Classical CAN.
    #[error("{iface} is a Classical CAN link: it cannot carry CAN FD frames")]
    FdNotSupported {
        /// The link's name.
        iface: String,
        /// The link's MTU.
        mtu: Mtu,
    },
    /// The frame cannot be put on any bus (an identifier wider than its format).
    #[error("invalid frame: {0}")]
    InvalidFrame(String),
    /// No network interface of that name exists.
    #[error("no such CAN interface: {0}")]
    NoSuchInterface(String),
    /// The operating system refused access to the interface.
    #[error("permission denied opening CAN interface {0}")]
    PermissionDenied(String),
    /// A transport spec string (`socketcan:IFACE`, `sim`, …) was not understood.
    #[error("bad transport spec `{spec}`: {reason}; accepted: `socketcan:IFACE`, `sim`, `sim:classic`, `sim:drop=1%,…` (faults: docs/cli.md), `udp-multicast[:OPTION,…]` (python-can's udp_multicast bus), `slcan:PATH[,OPTION,…]` (a serial-line CAN adapter), `replay:FILE`")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Any other operating-system error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The transport was closed (or a replay ran out of frames); nothing more will arrive.
    #[error("transport closed")]
    Closed,
}

impl TransportError {
    /// Whether this is a bus event (the link stays usable) rather than a link failure.
    ///
    /// ```
    /// use fcan_transport::{BusErrorKind, TransportError};
    /// assert!(TransportError::BusOff.is_bus_event());
    /// assert!(TransportError::BusError(BusErrorKind::Crc).is_bus_event());
    /// assert!(!TransportError::Closed.is_bus_event());
    /// ```
    pub fn is_bus_event(&self) -> bool {
        matches!(
            self,
            TransportError::BusOff
                | TransportError::ErrorPassive
                | TransportError::Restarted
                | TransportError::BusError(_)
        )
    }

    /// Whether the transport cannot be used any more after this error.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            TransportError::Closed
                | TransportError::NoSuchInterface(_)
                | TransportError::PermissionDenied(_)
                | TransportError::InvalidSpec { .. }
        )
    }
}
