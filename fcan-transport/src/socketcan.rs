//! Linux SocketCAN, Classical CAN and CAN FD, through the `socketcan` crate (tokio).
//!
//! [`SocketCanTransport::open`] reads the interface's MTU from
//! `/sys/class/net/IFACE/mtu`: 72 (or more) is a CAN FD interface and gets a `CanFdSocket`
//! (which also carries classical frames); 16 is classical-only and gets a `CanSocket`, and
//! sending an FD frame there fails with [`TransportError::FdNotSupported`] before it
//! reaches the kernel.
//!
//! All error classes are enabled on the socket, so the kernel's error frames (bus-off,
//! restarts, protocol violations, missing ACK, controller problems) come out of `recv` as
//! [bus events](TransportError::is_bus_event). A write that meets a full queue
//! (`ENOBUFS`) is [`TransportError::TxQueueFull`]. Own frames are not received back
//! (`recv_own_msgs` off), but other sockets on the host see them (loopback on, the kernel
//! default), which is what lets two transports on one `vcan` talk.
//!
//! Receive timestamps are taken on tokio's clock when the frame is read (not the kernel's
//! socket timestamp, which is on the realtime clock).

use std::path::Path;

use ::socketcan::frame::{CanAnyFrame, CanDataFrame, CanFdFrame, CanFrame};
use ::socketcan::id::FdFlags;
use ::socketcan::{EmbeddedFrame, ExtendedId, Id, SocketOptions, StandardId};
use fcan_core::frame::{CanId, Frame, Mtu};

use super::error_frame::classify;
use super::{check_id, check_mtu, now, Received, Transport, TransportError};

/// `CANFD_MTU`: the MTU of a CAN FD capable interface.
pub const CANFD_MTU: u32 = 72;
/// `CAN_MTU`: the MTU of a Classical-CAN-only interface.
pub const CAN_MTU: u32 = 16;

enum Socket {
    Classic(::socketcan::tokio::CanSocket),
    Fd(::socketcan::tokio::CanFdSocket),
}

/// A SocketCAN interface (`can0`, `vcan0` …). See the [module docs](self).
pub struct SocketCanTransport {
    iface: String,
    mtu: Mtu,
    socket: Socket,
}

impl core::fmt::Debug for SocketCanTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SocketCanTransport")
            .field("iface", &self.iface)
            .field("mtu", &self.mtu)
            .finish()
    }
}

/// What a frame read from SocketCAN means to fcan.
#[derive(Debug)]
pub enum Incoming {
    /// A data frame.
    Frame(Frame),
    /// An error frame that is a bus event.
    Event(TransportError),
    /// Nothing for fcan (remote frame, lost arbitration, …).
    Ignored,
}

/// Maps an I/O error from opening, reading or writing `iface` to a [`TransportError`].
pub fn map_io_error(err: std::io::Error, iface: &str) -> TransportError {
    match err.raw_os_error() {
        Some(libc::ENOBUFS) => TransportError::TxQueueFull,
        Some(libc::ENODEV) | Some(libc::ENXIO) => TransportError::NoSuchInterface(iface.into()),
        Some(libc::EACCES) | Some(libc::EPERM) => TransportError::PermissionDenied(iface.into()),
        _ => match err.kind() {
            std::io::ErrorKind::NotFound => TransportError::NoSuchInterface(iface.into()),
            std::io::ErrorKind::PermissionDenied => TransportError::PermissionDenied(iface.into()),
            _ => TransportError::Io(std::io::Error::new(err.kind(), format!("{iface}: {err}"))),
        },
    }
}

/// The MTU of `iface` as sysfs reports it; `Ok(None)` when sysfs is not there to ask.
pub fn interface_mtu(iface: &str) -> Result<Option<u32>, TransportError> {
    if iface.is_empty()
        || iface.len() > 15
        || iface.contains(['/', '\0'])
        || iface == "."
        || iface == ".."
    {
        return Err(TransportError::NoSuchInterface(iface.into()));
    }
    let net = Path::new("/sys/class/net");
    if !net.is_dir() {
        return Ok(None);
    }
    let dir = net.join(iface);
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let mtu = match read("mtu") {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(TransportError::NoSuchInterface(iface.into()))
        }
        Err(e) => return Err(map_io_error(e, iface)),
    };
    // ARPHRD_CAN = 280
    if let Ok(t) = read("type") {
        if t.trim() != "280" {
            return Err(TransportError::NoSuchInterface(format!(
                "{iface} (it exists, but is not a CAN interface: link type {})",
                t.trim()
            )));
        }
    }
    mtu.trim().parse().map(Some).map_err(|_| {
        TransportError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{iface}: unreadable MTU `{}`", mtu.trim()),
        ))
    })
}

/// Converts an fcan frame to the `socketcan` crate's frame.
pub fn to_socketcan(frame: &Frame) -> Result<CanAnyFrame, TransportError> {
    check_id(frame)?;
    let id: Id = match frame.id() {
        CanId::Standard(id) => StandardId::new(id).map(Id::Standard),
        CanId::Extended(id) => ExtendedId::new(id).map(Id::Extended),
    }
    .ok_or_else(|| TransportError::InvalidFrame(format!("identifier {:?}", frame.id())))?;
    let bad = || TransportError::InvalidFrame(format!("cannot encode {frame:?}"));
    if frame.is_fd() {
        let flags = if frame.is_brs() {
            FdFlags::BRS
        } else {
            FdFlags::empty()
        };
        CanFdFrame::with_flags(id, frame.data(), flags)
            .map(CanAnyFrame::Fd)
            .ok_or_else(bad)
    } else {
        CanDataFrame::new(id, frame.data())
            .map(CanAnyFrame::Normal)
            .ok_or_else(bad)
    }
}

fn convert_id(id: Id) -> CanId {
    match id {
        Id::Standard(s) => CanId::Standard(s.as_raw()),
        Id::Extended(e) => CanId::Extended(e.as_raw()),
    }
}

/// Converts a frame read from SocketCAN.
pub fn from_socketcan(frame: CanAnyFrame) -> Incoming {
    match frame {
        CanAnyFrame::Normal(f) => match Frame::classic(convert_id(f.id()), f.data()) {
            Ok(frame) => Incoming::Frame(frame),
            Err(_) => Incoming::Ignored,
        },
        CanAnyFrame::Fd(f) => {
            let data = f.data();
            match Frame::fd(convert_id(f.id()), data) {
                Ok(frame) if f.is_brs() => Incoming::Frame(frame),
                Ok(frame) => Incoming::Frame(frame.without_brs()),
                Err(_) => Incoming::Ignored,
            }
        }
        CanAnyFrame::Error(e) => match classify(e.error_bits(), e.data()) {
            Some(err) => Incoming::Event(err),
            None => Incoming::Ignored,
        },
        CanAnyFrame::Remote(_) => Incoming::Ignored,
    }
}

impl SocketCanTransport {
    /// Opens `iface`, choosing a classical or FD socket by the interface's MTU. Must be
    /// called inside a tokio runtime.
    ///
    /// Fails with [`TransportError::NoSuchInterface`] naming `iface` when it does not exist
    /// (or is not a CAN interface), [`TransportError::PermissionDenied`] when the OS says
    /// so.
    pub fn open(iface: &str) -> Result<SocketCanTransport, TransportError> {
        let mtu = match interface_mtu(iface)? {
            Some(m) if m >= CANFD_MTU => Mtu::Fd,
            Some(_) => Mtu::Classic,
            // No sysfs: try FD, which the kernel refuses on a classic interface only when
            // an FD frame is written.
            None => Mtu::Fd,
        };
        let map = |e| map_io_error(e, iface);
        let socket = match mtu {
            Mtu::Classic => {
                let s = ::socketcan::tokio::CanSocket::open(iface).map_err(map)?;
                s.set_error_filter_accept_all().map_err(map)?;
                s.set_recv_own_msgs(false).map_err(map)?;
                Socket::Classic(s)
            }
            Mtu::Fd => {
                let s = ::socketcan::tokio::CanFdSocket::open(iface).map_err(map)?;
                s.set_error_filter_accept_all().map_err(map)?;
                s.set_recv_own_msgs(false).map_err(map)?;
                Socket::Fd(s)
            }
        };
        Ok(SocketCanTransport {
            iface: iface.to_string(),
            mtu,
            socket,
        })
    }
}

impl Transport for SocketCanTransport {
    fn name(&self) -> &str {
        &self.iface
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        check_mtu(&self.iface, self.mtu, frame)?;
        let f = to_socketcan(frame)?;
        let r = match (&self.socket, f) {
            (Socket::Classic(s), CanAnyFrame::Normal(d)) => s.write_frame(CanFrame::Data(d)).await,
            (Socket::Fd(s), f) => s.write_frame(&f).await,
            (Socket::Classic(_), _) => unreachable!("check_mtu refused FD frames"),
        };
        r.map_err(|e| map_io_error(e, &self.iface))
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            let read = match &self.socket {
                Socket::Classic(s) => s.read_frame().await.map(CanAnyFrame::from),
                Socket::Fd(s) => s.read_frame().await,
            };
            let at = now();
            match from_socketcan(read.map_err(|e| map_io_error(e, &self.iface))?) {
                Incoming::Frame(frame) => return Ok(Received { frame, at }),
                Incoming::Event(e) => return Err(e),
                Incoming::Ignored => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_convert_both_ways() {
        let frames = [
            Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap(),
            Frame::classic(CanId::Extended(0x1ABC_DEF0), &[]).unwrap(),
            Frame::fd(CanId::Standard(0x7FF), &[9; 64]).unwrap(),
            Frame::fd(CanId::Extended(0x10), &[7; 12])
                .unwrap()
                .without_brs(),
        ];
        for f in frames {
            let s = to_socketcan(&f).unwrap();
            match from_socketcan(s) {
                Incoming::Frame(g) => assert_eq!(g, f),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            to_socketcan(&Frame::classic(CanId::Standard(0x800), &[]).unwrap()),
            Err(TransportError::InvalidFrame(_))
        ));
    }

    #[test]
    fn error_frames_become_events() {
        let e = ::socketcan::CanErrorFrame::new_error(0x40, &[0; 8]).unwrap();
        assert!(matches!(
            from_socketcan(CanAnyFrame::Error(e)),
            Incoming::Event(TransportError::BusOff)
        ));
        let e = ::socketcan::CanErrorFrame::new_error(0x02, &[0; 8]).unwrap();
        assert!(matches!(
            from_socketcan(CanAnyFrame::Error(e)),
            Incoming::Ignored
        ));
    }

    #[test]
    fn io_errors_map() {
        let e = |n| std::io::Error::from_raw_os_error(n);
        assert!(matches!(
            map_io_error(e(libc::ENOBUFS), "can0"),
            TransportError::TxQueueFull
        ));
        assert!(matches!(
            map_io_error(e(libc::ENODEV), "can9"),
            TransportError::NoSuchInterface(n) if n == "can9"
        ));
        assert!(matches!(
            map_io_error(e(libc::EPERM), "can0"),
            TransportError::PermissionDenied(_)
        ));
        assert!(matches!(
            map_io_error(e(libc::ENETDOWN), "can0"),
            TransportError::Io(_)
        ));
    }

    #[test]
    fn bad_interface_names_are_refused() {
        for name in ["", "../etc", "a/b", "0123456789abcdefg"] {
            assert!(matches!(
                interface_mtu(name),
                Err(TransportError::NoSuchInterface(_))
            ));
        }
    }
}
