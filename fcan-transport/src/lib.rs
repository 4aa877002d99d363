//! Links to a CAN bus for fcan's PC side: the [`Transport`] trait and its implementations.
//!
//! The master's engine (`fcan-master`) and the router's bridge (`fcan-router`) talk to a
//! bus only through [`Transport`], so the same code runs on
//!
//! * real hardware or `vcan` through Linux SocketCAN ([`socketcan::SocketCanTransport`],
//!   Linux only),
//! * an in-process simulated bus ([`sim::SimBus`]) with a bit-timing model and
//!   arbitration, for tests, measurements and the demo,
//! * a recorded candump log ([`replay::ReplayTransport`]),
//! * a bus shared with python-can's `udp_multicast` interface over IP multicast
//!   ([`udp_multicast::UdpMulticastTransport`], Linux only, loopback unless asked),
//! * a serial-line CAN adapter speaking the slcan (Lawicel) ASCII protocol, or a pty
//!   that does ([`slcan::SlcanTransport`], Unix),
//!
//! and any of them can be wrapped (smoltcp `phy` style) by a
//! [`fault::FaultInjector`] or a [`recorder::Recorder`]. [`open`] builds one from a spec
//! string such as `socketcan:can0`.
//!
//! # Time
//!
//! Receive timestamps and every wait in this module use tokio's clock. In a normal runtime
//! that is the monotonic wall clock; under `#[tokio::test(start_paused = true)]` (or
//! `tokio::time::pause`) it is a virtual clock that only moves when every task waits, so
//! a test of the engine on a [`sim::SimBus`] is deterministic and takes no real time.
//!
//! One idea per file:
//!
//! | file | idea |
//! |---|---|
//! | `error.rs` | [`TransportError`], [`BusErrorKind`] |
//! | `error_frame.rs` | Linux error frames ↔ [`TransportError`] |
//! | `spec.rs` | [`open`] a transport from `socketcan:IFACE` / `sim` / `sim:drop=1%,…` / `replay:FILE` / `udp-multicast:…` / `slcan:PATH,…` |
//! | `socketcan/` | SocketCAN, classical and FD; `batch.rs`: `recvmmsg`/`sendmmsg` |
//! | `sim/` | simulated bus: bit timing, arbitration model, async endpoints |
//! | `fault.rs` | fault injection wrapper |
//! | `origin.rs` | [`NodeOrigin`], [`DeviceWatchdog`]: a device a driver presents as a node |
//! | `candump.rs` | `candump -L` log format: writer and reader |
//! | `replay.rs` | a transport that plays a candump log |
//! | `recorder.rs` | a wrapper that logs all traffic in candump format |
//! | `udp_multicast.rs` | python-can's `udp_multicast` bus: MessagePack frames to an IP multicast group |
//! | `slcan.rs` | serial-line adapters (slcan / Lawicel ASCII): the spec, the open handshake, the serial I/O |
//! | `slcan/codec.rs` | the slcan lines sans I/O: bytes → frames and replies, frames → bytes |

#![warn(missing_docs)]
// `deny`, not `forbid`: `socketcan/reactor.rs` holds the one `unsafe` call (registering
// a socket with tokio), with its SAFETY argument.
#![deny(unsafe_code)]

use core::future::Future;
use std::time::Instant;

use fcan_core::frame::{Frame, Mtu};

pub mod candump;
mod error;
pub mod error_frame;
pub mod fault;
mod origin;
pub mod recorder;
pub mod replay;
pub mod sim;
pub mod slcan;
#[cfg(target_os = "linux")]
pub mod socketcan;
pub mod spec;
#[cfg(target_os = "linux")]
pub mod udp_multicast;

pub use error::{BusErrorKind, TransportError};
pub use origin::{DeviceWatchdog, NodeOrigin};
pub use spec::{open, AnyTransport};

/// A frame taken off the bus, with the time it arrived.
///
/// Exhaustive on purpose: every [`Transport`] implementation, including those outside
/// this crate, builds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The frame.
    pub frame: Frame,
    /// When it arrived, on tokio's clock (see the [module docs](self#time)). For the
    /// simulated bus this is the end of the frame on the virtual wire.
    pub at: Instant,
}

/// A link to one CAN bus, as the master's engine uses it.
///
/// The engine owns its transport in one task and `select!`s between [`recv`](Self::recv)
/// and its timers and commands; so `recv` must be **cancel-safe** (dropping the future
/// loses no frame), which every implementation here is.
///
/// Bus trouble comes back as `Err` with a [bus event](TransportError::is_bus_event) (the
/// link stays usable); silence never does: `recv` simply waits.
pub trait Transport: Send {
    /// The link's name (interface name, `sim#2`, log file …), for messages and for the
    /// interface column of candump logs.
    fn name(&self) -> &str;

    /// Which frames the link carries. The frame planner packs payloads to this MTU, so it
    /// must be known before any data-plane frame is built.
    fn mtu(&self) -> Mtu;

    /// Queues `frame` for transmission. Returns once the frame is handed to the link (not
    /// when it is on the wire), like a SocketCAN write.
    ///
    /// Fails with [`TransportError::FdNotSupported`] for a CAN FD frame on a Classical CAN
    /// link, [`TransportError::TxQueueFull`] when the transmit queue is full (retry later),
    /// [`TransportError::BusOff`] while the controller is off the bus.
    fn send(&mut self, frame: &Frame) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Queues `frames` for transmission in order, as one batch where the link can (one
    /// `sendmmsg` per up to 64 frames on SocketCAN); the default sends them one by one.
    ///
    /// Like `write(2)`, it reports progress rather than all-or-nothing: `Ok(n)` means
    /// frames `0..n` were handed to the link, in order, and `n` is at least 1 for a
    /// non-empty `frames`. `n < frames.len()` (a partial send) means frame `n` failed and
    /// nothing after it was tried; call again with `&frames[n..]` to retry it (and get its
    /// error as `Err`). `Err` means no frame was sent, with the same errors as
    /// [`send`](Self::send). A transport may wait out a briefly full queue first (see
    /// [`socketcan`] for SocketCAN's bound on that wait).
    fn send_batch(
        &mut self,
        frames: &[Frame],
    ) -> impl Future<Output = Result<usize, TransportError>> + Send {
        async move {
            for (i, f) in frames.iter().enumerate() {
                if let Err(e) = self.send(f).await {
                    return if i == 0 { Err(e) } else { Ok(i) };
                }
            }
            Ok(frames.len())
        }
    }

    /// Waits for the next frame from the bus (frames this transport sent itself are not
    /// echoed back) or the next bus event. Cancel-safe.
    fn recv(&mut self) -> impl Future<Output = Result<Received, TransportError>> + Send;

    /// Which device driver presents node `node` on this link and how it arms the
    /// device's command watchdog, when a layer of the link does (`fcan-drivers`'
    /// `DeviceLink`: `robstride`, `200 ms`); `None` for an fcan board, and for every
    /// node of a plain link. The master shows it in node info.
    fn node_origin(&self, node: fcan_core::id::NodeId) -> Option<NodeOrigin> {
        let _ = node;
        None
    }
}

/// The current time on the clock [`Received::at`] uses (see the [module docs](self#time)).
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Checks a frame's identifier fits its format (an `fcan_core` [`CanId`] built directly
/// from its enum variant can be too wide), as every transport must before sending.
///
/// [`CanId`]: fcan_core::frame::CanId
pub(crate) fn check_id(frame: &Frame) -> Result<(), TransportError> {
    use fcan_core::frame::CanId;
    match frame.id() {
        CanId::Standard(id) if id > CanId::STANDARD_MAX => Err(TransportError::InvalidFrame(
            format!("standard identifier {id:#X} has more than 11 bits"),
        )),
        CanId::Extended(id) if id > CanId::EXTENDED_MAX => Err(TransportError::InvalidFrame(
            format!("extended identifier {id:#X} has more than 29 bits"),
        )),
        _ => Ok(()),
    }
}

/// The error for an FD frame on a classic link, or `Ok` when `frame` fits `mtu`.
pub(crate) fn check_mtu(name: &str, mtu: Mtu, frame: &Frame) -> Result<(), TransportError> {
    if frame.is_fd() && mtu == Mtu::Classic {
        Err(TransportError::FdNotSupported {
            iface: name.to_string(),
            mtu,
        })
    } else {
        Ok(())
    }
}

/// `frame` with its payload replaced by `data` (same identifier, FD and BRS flags).
/// `data` must be a length the frame kind allows.
pub(crate) fn rebuild(frame: &Frame, data: &[u8]) -> Frame {
    let f = if frame.is_fd() {
        Frame::fd(frame.id(), data)
    } else {
        Frame::classic(frame.id(), data)
    }
    .expect("same length as a valid frame");
    if frame.is_fd() && !frame.is_brs() {
        f.without_brs()
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::CanId;

    /// Accepts frames until `room` runs out, then reports a full queue.
    struct Queue {
        room: usize,
        sent: Vec<Frame>,
    }

    impl Transport for Queue {
        fn name(&self) -> &str {
            "queue"
        }
        fn mtu(&self) -> Mtu {
            Mtu::Classic
        }
        async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
            check_mtu("queue", Mtu::Classic, frame)?;
            if self.sent.len() == self.room {
                return Err(TransportError::TxQueueFull);
            }
            self.sent.push(*frame);
            Ok(())
        }
        async fn recv(&mut self) -> Result<Received, TransportError> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn default_send_batch_reports_progress_like_write() {
        let frames: Vec<Frame> = (0..5u8)
            .map(|i| Frame::classic(CanId::Standard(u16::from(i)), &[i]).unwrap())
            .collect();
        let mut q = Queue {
            room: 3,
            sent: Vec::new(),
        };
        assert_eq!(q.send_batch(&[]).await.unwrap(), 0);
        // Three fit: a partial send, in order; the rest is untried.
        assert_eq!(q.send_batch(&frames).await.unwrap(), 3);
        assert_eq!(q.sent, frames[..3]);
        // Retrying from the failed frame gets its error, and nothing is sent.
        assert!(matches!(
            q.send_batch(&frames[3..]).await,
            Err(TransportError::TxQueueFull)
        ));
        q.room = 10;
        assert_eq!(q.send_batch(&frames[3..]).await.unwrap(), 2);
        assert_eq!(q.sent, frames);
        // A frame the link cannot carry stops the batch there.
        let fd = Frame::fd(CanId::Standard(9), &[0; 12]).unwrap();
        assert_eq!(q.send_batch(&[frames[0], fd, frames[1]]).await.unwrap(), 1);
        assert!(matches!(
            q.send_batch(&[fd]).await,
            Err(TransportError::FdNotSupported { .. })
        ));
    }
}
