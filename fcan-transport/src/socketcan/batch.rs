//! Batched SocketCAN I/O: many frames per system call, and the raw frame layout.
//!
//! [`recv_many`] reads up to [`MAX_BATCH`] frames with one `recvmmsg(2)`, [`send_many`]
//! writes up to [`MAX_BATCH`] with one `sendmmsg(2)`, both through `nix`'s safe wrappers
//! (so this crate keeps `#![forbid(unsafe_code)]`). Frames travel as the kernel's
//! `struct can_frame` (16 bytes, [`CAN_MTU`]) or `struct canfd_frame` (72 bytes,
//! [`CANFD_MTU`]); [`decode`] reads those bytes, and [`Slot::encode`] writes them with the
//! `socketcan` crate's frame types.
//!
//! `nix`'s message headers hold raw pointers, so they are neither `Send` nor kept in the
//! transport: each thread keeps one set of [`MAX_BATCH`] headers, borrowed only for the
//! duration of one system call (no `.await` in between), so the calls allocate nothing.

use std::cell::RefCell;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::RawFd;

use ::socketcan::frame::AsPtr;
use fcan_core::frame::{CanId, Frame};
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};

use super::{to_socketcan, Incoming, CANFD_MTU, CAN_MTU};
use crate::error_frame::classify;
use crate::TransportError;

/// The most frames one `recvmmsg`/`sendmmsg` call moves. 64 is where the benchmark in
/// `docs/performance.md` stops gaining (the per-call cost is then a few percent of the
/// per-frame cost), and 64 FD frames (4.6 KiB) keep the transport's buffers small.
pub const MAX_BATCH: usize = 64;

/// `struct canfd_frame`'s size: every slot can hold either frame layout.
const SLOT: usize = CANFD_MTU as usize;

/// One frame's bytes in the kernel's layout, and how many of them are used.
#[derive(Clone, Copy)]
pub struct Slot {
    bytes: [u8; SLOT],
    len: usize,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            bytes: [0; SLOT],
            len: 0,
        }
    }
}

impl Slot {
    /// Fills the slot with `frame` in the kernel's layout: a `can_frame` for Classical
    /// CAN, a `canfd_frame` for CAN FD (both accepted by an FD socket; a classical socket
    /// only ever gets the former, the transport checks the MTU first).
    pub fn encode(&mut self, frame: &Frame) -> Result<(), TransportError> {
        let f = to_socketcan(frame)?;
        let bytes = f.as_bytes();
        self.bytes[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        Ok(())
    }

    /// The bytes the kernel wrote or will read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

thread_local! {
    // One set of headers per thread, for both directions: every call sets each header's
    // buffer pointers afresh before the system call and is done with them when it returns.
    // The headers carry real address storage, not `()`: the kernel writes the sender's
    // address length back into each header, `nix` does not reset it, and a zero-sized
    // address would then meet a non-zero length on the next `recvmmsg` (EFAULT).
    static HEADERS: RefCell<MultiHeaders<SockaddrStorage>> =
        RefCell::new(MultiHeaders::preallocate(MAX_BATCH, None));
}

/// Reads up to `slots.len()` (at most [`MAX_BATCH`]) frames with one non-blocking
/// `recvmmsg`, setting each filled slot's length. Returns how many were read; `EAGAIN`
/// (nothing waiting) comes back as [`std::io::ErrorKind::WouldBlock`].
pub fn recv_many(fd: RawFd, slots: &mut [Slot]) -> std::io::Result<usize> {
    let take = slots.len().min(MAX_BATCH);
    let slots = &mut slots[..take];
    let mut lens = [0usize; MAX_BATCH];
    let n = HEADERS.with(|h| {
        let mut headers = h.borrow_mut();
        // One iovec per slot; the unused tail points at nothing and is not passed on.
        let n = slots.len();
        let mut it = slots.iter_mut();
        let mut iovs: [[IoSliceMut<'_>; 1]; MAX_BATCH] = std::array::from_fn(|_| {
            [match it.next() {
                Some(s) => IoSliceMut::new(&mut s.bytes),
                None => IoSliceMut::new(&mut []),
            }]
        });
        let got = recvmmsg(
            fd,
            &mut headers,
            iovs[..n].iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )?;
        let mut n = 0;
        for (len, msg) in lens.iter_mut().zip(got) {
            *len = msg.bytes;
            n += 1;
        }
        Ok::<_, nix::Error>(n)
    })?;
    for (slot, len) in slots.iter_mut().zip(&lens[..n]) {
        slot.len = *len;
    }
    Ok(n)
}

/// Writes the frames in `slots` (at most [`MAX_BATCH`]) with one non-blocking `sendmmsg`
/// and returns how many the kernel took, in order: frames `0..n`. An error (e.g.
/// `ENOBUFS` for a full queue, `EAGAIN` for a full socket send buffer) means the first
/// frame was not taken; the kernel reports an error on a later frame as a short count.
pub fn send_many(fd: RawFd, slots: &[Slot]) -> std::io::Result<usize> {
    const NO_ADDRESS: [Option<SockaddrStorage>; MAX_BATCH] = [None; MAX_BATCH];
    let slots = &slots[..slots.len().min(MAX_BATCH)];
    HEADERS
        .with(|h| {
            let mut headers = h.borrow_mut();
            let mut it = slots.iter();
            let iovs: [[IoSlice<'_>; 1]; MAX_BATCH] =
                std::array::from_fn(|_| [IoSlice::new(it.next().map_or(&[][..], Slot::bytes))]);
            let sent = sendmmsg(
                fd,
                &mut headers,
                iovs[..slots.len()].iter(),
                NO_ADDRESS,
                [],
                MsgFlags::MSG_DONTWAIT,
            )?;
            // `MultiResults` iterates over the messages sent.
            Ok(sent.count())
        })
        .map_err(|e: nix::Error| std::io::Error::from(e))
}

const EFF_FLAG: u32 = 0x8000_0000;
const RTR_FLAG: u32 = 0x4000_0000;
const ERR_FLAG: u32 = 0x2000_0000;
const EFF_MASK: u32 = 0x1FFF_FFFF;
const SFF_MASK: u32 = 0x0000_07FF;
const FD_BRS: u8 = 0x01;

/// Reads one frame in the kernel's layout (`linux/can.h`): a 16-byte `can_frame` or a
/// 72-byte `canfd_frame`. Anything else, or a length field the frame kind does not allow,
/// is [`Incoming::Ignored`]: bus input never panics here.
pub fn decode(bytes: &[u8]) -> Incoming {
    let fd = match bytes.len() {
        n if n == CAN_MTU as usize => false,
        n if n == SLOT => true,
        _ => return Incoming::Ignored,
    };
    let word = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let len = usize::from(bytes[4]);
    let data = &bytes[8..];
    if word & ERR_FLAG != 0 {
        // Error frames are always classic-sized; the class is in the identifier.
        return match classify(word & EFF_MASK, &data[..8]) {
            Some(e) => Incoming::Event(e),
            None => Incoming::Ignored,
        };
    }
    if word & RTR_FLAG != 0 {
        return Incoming::Ignored;
    }
    let id = if word & EFF_FLAG != 0 {
        CanId::Extended(word & EFF_MASK)
    } else {
        // The mask leaves 11 bits: the cast cannot truncate.
        CanId::Standard((word & SFF_MASK) as u16)
    };
    let Some(payload) = data.get(..len) else {
        return Incoming::Ignored;
    };
    let frame = if fd {
        Frame::fd(id, payload).map(|f| {
            if bytes[5] & FD_BRS != 0 {
                f
            } else {
                f.without_brs()
            }
        })
    } else {
        Frame::classic(id, payload)
    };
    match frame {
        Ok(f) => Incoming::Frame(f),
        Err(_) => Incoming::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::socketcan::frame::{CanAnyFrame, CanErrorFrame};

    #[test]
    fn frames_round_trip_through_the_kernel_layout() {
        let frames = [
            Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap(),
            Frame::classic(CanId::Extended(0x1ABC_DEF0), &[]).unwrap(),
            Frame::classic(CanId::Standard(0x7FF), &[8; 8]).unwrap(),
            Frame::fd(CanId::Standard(0x7FF), &[9; 64]).unwrap(),
            Frame::fd(CanId::Extended(0x10), &[7; 12])
                .unwrap()
                .without_brs(),
        ];
        for f in frames {
            let mut s = Slot::default();
            s.encode(&f).unwrap();
            assert_eq!(s.bytes().len(), if f.is_fd() { 72 } else { 16 });
            match decode(s.bytes()) {
                Incoming::Frame(g) => {
                    assert_eq!(g, f);
                    assert_eq!(g.is_brs(), f.is_brs());
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn error_and_odd_frames() {
        let e = CanErrorFrame::new_error(0x40, &[0; 8]).unwrap();
        assert!(matches!(
            decode(CanAnyFrame::Error(e).as_bytes()),
            Incoming::Event(TransportError::BusOff)
        ));
        let e = CanErrorFrame::new_error(0x02, &[0; 8]).unwrap();
        assert!(matches!(
            decode(CanAnyFrame::Error(e).as_bytes()),
            Incoming::Ignored
        ));
        // Remote frame, a truncated read, a bad length field: ignored, no panic.
        let mut rtr = [0u8; 16];
        rtr[..4].copy_from_slice(&(RTR_FLAG | 0x12).to_ne_bytes());
        assert!(matches!(decode(&rtr), Incoming::Ignored));
        assert!(matches!(decode(&[0; 15]), Incoming::Ignored));
        let mut bad = [0u8; 16];
        bad[4] = 9;
        assert!(matches!(decode(&bad), Incoming::Ignored));
        let mut bad_fd = [0u8; 72];
        bad_fd[4] = 13; // no FD DLC has 13 bytes
        assert!(matches!(decode(&bad_fd), Incoming::Ignored));
        bad_fd[4] = 200;
        assert!(matches!(decode(&bad_fd), Incoming::Ignored));
    }
}
