//! Linux SocketCAN, Classical CAN and CAN FD, with batched I/O.
//!
//! [`SocketCanTransport::open`] reads the interface's MTU from
//! `/sys/class/net/IFACE/mtu`: 72 (or more) is a CAN FD interface and gets a `CanFdSocket`
//! (which also carries classical frames); 16 is classical-only and gets a `CanSocket`, and
//! sending an FD frame there fails with [`TransportError::FdNotSupported`] before it
//! reaches the kernel.
//!
//! All error classes are enabled on the socket, so the kernel's error frames (bus-off,
//! restarts, protocol violations, missing ACK, controller problems) come out of `recv` as
//! [bus events](TransportError::is_bus_event). Own frames are not received back
//! (`recv_own_msgs` off), but other sockets on the host see them (loopback on, the kernel
//! default), which is what lets two transports on one `vcan` talk.
//!
//! # Batched I/O
//!
//! One non-blocking socket per interface, registered with tokio's reactor
//! ([`AsyncFd`]). `recv` drains the socket with `recvmmsg(2)`, up to [`RX_BATCH`] frames
//! per system call, into a buffer inside the transport and hands them out one by one; a
//! frame read from the kernel is in that buffer before the call returns, so dropping a
//! `recv` future loses nothing. [`Transport::send_batch`] writes up to
//! [`batch::MAX_BATCH`] frames per `sendmmsg(2)`. The system calls live in
//! [`batch`], through `nix`'s safe wrappers.
//!
//! Socket buffers: the receive buffer is raised to [`RX_BUFFER`] bytes (the kernel
//! doubles the value for its bookkeeping, and without `CAP_NET_ADMIN` caps it at
//! `net.core.rmem_max`) because a full receive buffer drops frames silently, and each
//! frame costs 768 bytes of it (`skb` overhead, not 16/72 bytes): 2,731 frames measured
//! in the VM, against about 550 with the default. The send buffer is
//! raised to [`TX_BUFFER`] so a whole batch (and its loopback copies) fits. See
//! [`SocketCanTransport::buffer_sizes`] for what the kernel granted.
//!
//! # A full transmit queue
//!
//! The kernel signals a full socket send buffer with `EAGAIN` and wakes writers when room
//! comes back (tokio readiness: the transport waits for it). A full *device queue* (the
//! qdisc, `txqueuelen` frames, 10 on CAN devices by default) is `ENOBUFS` instead, and
//! the kernel raises no readiness when it drains, so nothing can be waited for: `send`
//! returns [`TransportError::TxQueueFull`] at once (the caller decides, as before), and
//! `send_batch` sleeps and retries with a bounded backoff ([`ENOBUFS_BACKOFF`], doubling
//! up to [`ENOBUFS_BACKOFF_MAX`]) — no busy loop and no dropped frame. Only if the queue
//! takes nothing for [`ENOBUFS_PATIENCE`] does it stop and report what it sent (or
//! `TxQueueFull` if nothing), so a bus that never drains (no ACK, bus-off) cannot stall
//! its caller. (Sleeping rather than polling for `POLLOUT`: a full qdisc does not clear
//! `POLLOUT` on CAN sockets, so readiness would return at once and spin.)
//!
//! Receive timestamps are taken on tokio's clock when the frame is read (not the kernel's
//! socket timestamp, which is on the realtime clock).

pub mod batch;
// The crate's only `unsafe`: handing the socket to tokio's reactor.
#[allow(unsafe_code)]
mod reactor;

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use ::socketcan::frame::{CanAnyFrame, CanDataFrame, CanFdFrame};
use ::socketcan::id::FdFlags;
use ::socketcan::{EmbeddedFrame, ExtendedId, Id, Socket, SocketOptions, StandardId};
use fcan_core::frame::{CanId, Frame, Mtu};
use nix::sys::socket::{getsockopt, setsockopt, sockopt};
use tokio::io::unix::AsyncFd;

use self::batch::{decode, recv_many, send_many, Slot, MAX_BATCH};
use super::error_frame::classify;
use super::{check_id, check_mtu, now, Received, Transport, TransportError};

/// `CANFD_MTU`: the MTU of a CAN FD capable interface.
pub const CANFD_MTU: u32 = 72;
/// `CAN_MTU`: the MTU of a Classical-CAN-only interface.
pub const CAN_MTU: u32 = 16;

/// Frames `recv` takes from the kernel per `recvmmsg` call (and so the most it buffers).
pub const RX_BATCH: usize = 32;
/// The receive buffer asked for, in bytes: the kernel makes it 2 MiB, 2,731 frames (768
/// bytes each), about 0.3 s of a fully loaded 1 Mbit/s bus, so a busy task that reads
/// late loses nothing.
pub const RX_BUFFER: usize = 1 << 20;
/// The send buffer asked for, in bytes: room for several [`MAX_BATCH`] batches in flight.
pub const TX_BUFFER: usize = 256 << 10;
/// The first wait after `ENOBUFS` in `send_batch` (tokio's timer resolution).
pub const ENOBUFS_BACKOFF: Duration = Duration::from_millis(1);
/// The longest single wait after `ENOBUFS`: a 10-frame queue drains in about 1.3 ms at
/// 1 Mbit/s and 10 ms at 125 kbit/s.
pub const ENOBUFS_BACKOFF_MAX: Duration = Duration::from_millis(8);
/// How long `send_batch` keeps retrying a queue that stays full (no frame taken) before
/// it gives up.
pub const ENOBUFS_PATIENCE: Duration = Duration::from_millis(200);

enum Sock {
    Classic(::socketcan::CanSocket),
    Fd(::socketcan::CanFdSocket),
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Classic(s) => s.as_raw_fd(),
            Sock::Fd(s) => s.as_raw_fd(),
        }
    }
}

impl AsFd for Sock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Classic(s) => s.as_fd(),
            Sock::Fd(s) => s.as_fd(),
        }
    }
}

/// A SocketCAN interface (`can0`, `vcan0` …). See the [module docs](self).
pub struct SocketCanTransport {
    iface: String,
    mtu: Mtu,
    socket: AsyncFd<Sock>,
    /// Frames (or bus events) read from the kernel and not yet returned by `recv`.
    rx: VecDeque<Result<Received, TransportError>>,
    /// Scratch for one `recvmmsg`/`sendmmsg`.
    slots: Box<[Slot; MAX_BATCH]>,
    rx_batch: usize,
    stats: BatchStats,
}

/// Counters of the system calls a [`SocketCanTransport`] made, for measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// `recvmmsg` calls that returned frames.
    pub rx_calls: u64,
    /// Frames (and error frames) those calls returned.
    pub rx_frames: u64,
    /// `sendmmsg` calls that sent frames.
    pub tx_calls: u64,
    /// Frames those calls sent.
    pub tx_frames: u64,
    /// Times a send met `ENOBUFS` (a full device queue).
    pub enobufs: u64,
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
pub(crate) fn map_io_error(err: std::io::Error, iface: &str) -> TransportError {
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
pub(crate) fn interface_mtu(iface: &str) -> Result<Option<u32>, TransportError> {
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
        let sock = match mtu {
            Mtu::Classic => {
                let s = ::socketcan::CanSocket::open(iface).map_err(map)?;
                s.set_error_filter_accept_all().map_err(map)?;
                s.set_recv_own_msgs(false).map_err(map)?;
                s.set_nonblocking(true).map_err(map)?;
                Sock::Classic(s)
            }
            Mtu::Fd => {
                let s = ::socketcan::CanFdSocket::open(iface).map_err(map)?;
                s.set_error_filter_accept_all().map_err(map)?;
                s.set_recv_own_msgs(false).map_err(map)?;
                s.set_nonblocking(true).map_err(map)?;
                Sock::Fd(s)
            }
        };
        // Best effort: the *Force variants pass the sysctl caps when we may (CAP_NET_ADMIN),
        // the plain ones are capped by them; a refusal leaves the kernel default, which
        // still works, only with less slack.
        if setsockopt(&sock, sockopt::RcvBufForce, &RX_BUFFER).is_err() {
            let _ = setsockopt(&sock, sockopt::RcvBuf, &RX_BUFFER);
        }
        if setsockopt(&sock, sockopt::SndBufForce, &TX_BUFFER).is_err() {
            let _ = setsockopt(&sock, sockopt::SndBuf, &TX_BUFFER);
        }
        let socket = reactor::register(sock).map_err(map)?;
        Ok(SocketCanTransport {
            iface: iface.to_string(),
            mtu,
            socket,
            rx: VecDeque::with_capacity(MAX_BATCH),
            slots: Box::new([Slot::default(); MAX_BATCH]),
            rx_batch: RX_BATCH,
            stats: BatchStats::default(),
        })
    }

    /// The socket's receive and send buffer sizes in bytes, as the kernel reports them
    /// (twice the usable size: the kernel doubles what it is asked for, for bookkeeping).
    pub fn buffer_sizes(&self) -> Result<(usize, usize), TransportError> {
        let fd = self.socket.get_ref();
        let map = |e: nix::Error| map_io_error(e.into(), &self.iface);
        Ok((
            getsockopt(fd, sockopt::RcvBuf).map_err(map)?,
            getsockopt(fd, sockopt::SndBuf).map_err(map)?,
        ))
    }

    /// Sets how many frames one `recvmmsg` may read (1 to [`MAX_BATCH`], default
    /// [`RX_BATCH`]); 1 is one frame per system call, for comparison.
    pub fn set_rx_batch(&mut self, frames: usize) {
        self.rx_batch = frames.clamp(1, MAX_BATCH);
    }

    /// What the transport's system calls have done so far.
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// Reads what the kernel has (at least one frame or event) into `self.rx`. Cancel-safe:
    /// it only waits before the read, and the read's results are stored before it returns.
    async fn fill(&mut self) -> Result<(), TransportError> {
        let SocketCanTransport {
            iface,
            socket,
            rx,
            slots,
            rx_batch,
            stats,
            ..
        } = self;
        loop {
            let mut guard = socket
                .readable()
                .await
                .map_err(|e| map_io_error(e, iface))?;
            let slots = &mut slots[..*rx_batch];
            match guard.try_io(|s| recv_many(s.as_raw_fd(), slots)) {
                Ok(Ok(n)) => {
                    let at = now();
                    stats.rx_calls += 1;
                    stats.rx_frames += n as u64;
                    rx.extend(slots[..n].iter().map(|s| decode(s.bytes())).filter_map(
                        |i| match i {
                            Incoming::Frame(frame) => Some(Ok(Received { frame, at })),
                            Incoming::Event(e) => Some(Err(e)),
                            Incoming::Ignored => None,
                        },
                    ));
                    return Ok(());
                }
                Ok(Err(e)) => return Err(map_io_error(e, iface)),
                Err(_would_block) => continue,
            }
        }
    }

    /// Sends `self.slots[..count]` in order, waiting for socket-buffer room (readiness)
    /// and, for at most [`ENOBUFS_PATIENCE`], for a full device queue (backoff). Returns
    /// how many went out, and the error that stopped it short.
    async fn send_slots(&mut self, count: usize) -> (usize, Option<TransportError>) {
        let mut off = 0;
        let mut backoff = ENOBUFS_BACKOFF;
        let mut waited = Duration::ZERO;
        while off < count {
            let mut guard = match self.socket.writable().await {
                Ok(g) => g,
                Err(e) => return (off, Some(map_io_error(e, &self.iface))),
            };
            let slots = &self.slots[off..count];
            match guard.try_io(|s| send_many(s.as_raw_fd(), slots)) {
                Ok(Ok(n)) => {
                    self.stats.tx_calls += 1;
                    self.stats.tx_frames += n as u64;
                    off += n;
                    // Patience runs out only while nothing moves.
                    backoff = ENOBUFS_BACKOFF;
                    waited = Duration::ZERO;
                }
                Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.stats.enobufs += 1;
                    if waited >= ENOBUFS_PATIENCE {
                        return (off, Some(TransportError::TxQueueFull));
                    }
                    // No readiness comes when the queue drains: wait and retry.
                    drop(guard);
                    tokio::time::sleep(backoff).await;
                    waited += backoff;
                    backoff = (backoff * 2).min(ENOBUFS_BACKOFF_MAX);
                }
                Ok(Err(e)) => return (off, Some(map_io_error(e, &self.iface))),
                // EAGAIN: the send buffer is full; readiness was cleared, wait for it.
                Err(_would_block) => {}
            }
        }
        (off, None)
    }
}

impl Transport for SocketCanTransport {
    fn name(&self) -> &str {
        &self.iface
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    /// Writes one frame (one system call). A full device queue (`ENOBUFS`) is
    /// [`TransportError::TxQueueFull`] at once; a full socket buffer is waited out.
    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        check_mtu(&self.iface, self.mtu, frame)?;
        self.slots[0].encode(frame)?;
        loop {
            let mut guard = self
                .socket
                .writable()
                .await
                .map_err(|e| map_io_error(e, &self.iface))?;
            let slot = &self.slots[..1];
            match guard.try_io(|s| send_many(s.as_raw_fd(), slot)) {
                Ok(Ok(_)) => {
                    self.stats.tx_calls += 1;
                    self.stats.tx_frames += 1;
                    return Ok(());
                }
                Ok(Err(e)) => {
                    if e.raw_os_error() == Some(libc::ENOBUFS) {
                        self.stats.enobufs += 1;
                    }
                    return Err(map_io_error(e, &self.iface));
                }
                Err(_would_block) => {}
            }
        }
    }

    /// Writes up to [`MAX_BATCH`] frames per `sendmmsg`. Waits out a full device queue
    /// for at most [`ENOBUFS_PATIENCE`] (see the [module docs](self#a-full-transmit-queue)).
    async fn send_batch(&mut self, frames: &[Frame]) -> Result<usize, TransportError> {
        let mut sent = 0;
        while sent < frames.len() {
            let chunk = &frames[sent..frames.len().min(sent + MAX_BATCH)];
            let mut count = 0;
            let mut refused = None;
            for f in chunk {
                let encoded =
                    check_mtu(&self.iface, self.mtu, f).and_then(|()| self.slots[count].encode(f));
                if let Err(e) = encoded {
                    refused = Some(e);
                    break;
                }
                count += 1;
            }
            let (n, err) = if count > 0 {
                self.send_slots(count).await
            } else {
                (0, None)
            };
            sent += n;
            if let Some(e) = err.or(refused) {
                return if sent == 0 { Err(e) } else { Ok(sent) };
            }
        }
        Ok(sent)
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            if let Some(r) = self.rx.pop_front() {
                return r;
            }
            self.fill().await?;
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
