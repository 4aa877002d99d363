//! The frame conversion rules, in one place: how an fcan [`Frame`] goes onto a
//! controller's wire and how a received frame comes back. Every driver implementation
//! (`stm32_fdcan`, `stm32_bxcan`, `esp_twai`, a firmware's own) builds its frames from
//! [`wire_header`] and [`frame_from_wire`], so the rules below hold for all of them:
//!
//! - **The frame kind is the node's.** An FD frame stays FD whatever its length (an FD
//!   frame of 8 bytes or fewer is FD on the wire, not Classical), a Classical frame stays
//!   Classical. Drivers that pick the kind from the length (embassy-stm32's
//!   `FdFrame::new_standard` sends ≤ 8 bytes as Classical and longer ones without BRS)
//!   must be given the header explicitly.
//! - **Bit-rate switching is the frame's.** BRS on exactly when the node's FD frame has
//!   it ([`Frame::is_brs`]: the bus mode the master chose); never on a Classical frame.
//! - **Identifiers keep their format**: an 11-bit identifier is a standard frame, a
//!   29-bit one an extended frame, whatever its value.
//! - **Received frames**: remote frames are not fcan's (skipped); an FD frame comes back
//!   as FD with its BRS bit, a Classical frame as Classical; a length the frame kind
//!   cannot carry is skipped.

use embedded_can::{ExtendedId, Id, StandardId};
use fcan_core::frame::{CanId, Frame, CLASSIC_MAX_LEN};

/// How a driver puts one fcan frame on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireHeader {
    /// The identifier, standard or extended as the frame's.
    pub id: Id,
    /// Payload length in bytes (a legal FD length for an FD frame).
    pub len: u8,
    /// An FD frame (FDF set), also when it carries 8 bytes or fewer.
    pub fd: bool,
    /// Bit-rate switching in the data phase (only ever on an FD frame).
    pub brs: bool,
}

/// By hand, not derived: `embedded_can::Id` is not `defmt::Format`; the raw identifier
/// is printed instead.
#[cfg(feature = "defmt")]
impl defmt::Format for WireHeader {
    fn format(&self, f: defmt::Formatter<'_>) {
        let (kind, raw) = match self.id {
            Id::Standard(id) => ("std", u32::from(id.as_raw())),
            Id::Extended(id) => ("ext", id.as_raw()),
        };
        defmt::write!(
            f,
            "WireHeader {{ id: {=str} {=u32:#x}, len: {=u8}, fd: {=bool}, brs: {=bool} }}",
            kind,
            raw,
            self.len,
            self.fd,
            self.brs
        )
    }
}

/// The fcan identifier as `embedded-can`'s; `None` for a value out of its format's range.
pub fn id_to_embedded(id: CanId) -> Option<Id> {
    Some(match id {
        CanId::Standard(s) => StandardId::new(s)?.into(),
        CanId::Extended(e) => ExtendedId::new(e)?.into(),
    })
}

/// An `embedded-can` identifier as fcan's.
pub fn id_from_embedded(id: Id) -> CanId {
    match id {
        Id::Standard(s) => CanId::Standard(s.as_raw()),
        Id::Extended(e) => CanId::Extended(e.as_raw()),
    }
}

/// The header to send `frame` with; `None` when its identifier is out of range (a frame
/// fcan never builds).
///
/// ```
/// use fcan_embassy::convert::wire_header;
/// use fcan_core::frame::{CanId, Frame};
/// // An FD frame of 8 bytes stays FD, with BRS as the frame says.
/// let h = wire_header(&Frame::fd(CanId::Standard(0x123), &[0; 8]).unwrap()).unwrap();
/// assert!(h.fd && h.brs && h.len == 8);
/// let h = wire_header(&Frame::fd(CanId::Standard(0x123), &[0; 8]).unwrap().without_brs()).unwrap();
/// assert!(h.fd && !h.brs);
/// ```
pub fn wire_header(frame: &Frame) -> Option<WireHeader> {
    Some(WireHeader {
        id: id_to_embedded(frame.id())?,
        len: frame.len() as u8,
        fd: frame.is_fd(),
        brs: frame.is_fd() && frame.is_brs(),
    })
}

/// The fcan frame for a received one: `None` for a remote frame and for a length its
/// kind cannot carry. `brs` is ignored on a Classical frame.
pub fn frame_from_wire(id: Id, data: &[u8], fd: bool, brs: bool, remote: bool) -> Option<Frame> {
    if remote {
        return None;
    }
    let id = id_from_embedded(id);
    if fd {
        let f = Frame::fd(id, data).ok()?;
        Some(if brs { f } else { f.without_brs() })
    } else {
        Frame::classic(id, data).ok()
    }
}

/// A Classical CAN frame: what a [`crate::ClassicPort`] is given to send. Built only
/// from an fcan frame that is not FD (so at most 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClassicFrame(Frame);

impl ClassicFrame {
    /// `frame` if it is a Classical frame; `None` for an FD frame (also one of 8 bytes or
    /// fewer: a Classical-only controller must not send it as Classical, the node meant
    /// an FD bus).
    pub fn new(frame: Frame) -> Option<ClassicFrame> {
        (!frame.is_fd() && frame.len() <= CLASSIC_MAX_LEN).then_some(ClassicFrame(frame))
    }

    /// The frame.
    pub fn frame(&self) -> &Frame {
        &self.0
    }

    /// The payload, 0..=8 bytes.
    pub fn data(&self) -> &[u8] {
        self.0.data()
    }

    /// The header to send it with (`fd` and `brs` false).
    pub fn header(&self) -> Option<WireHeader> {
        wire_header(&self.0)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use fcan_core::frame::FD_LENGTHS;
    use std::vec::Vec;

    fn ids() -> [CanId; 4] {
        [
            CanId::Standard(0),
            CanId::Standard(0x7FF),
            CanId::Extended(0x1234_5678),
            CanId::Extended(0x1FFF_FFFF),
        ]
    }

    #[test]
    fn every_fd_length_both_formats_brs_on_and_off_round_trips() {
        for id in ids() {
            for &len in &FD_LENGTHS {
                let data: Vec<u8> = (0..len).map(|i| i.wrapping_mul(7)).collect();
                for brs in [true, false] {
                    let f = Frame::fd(id, &data).unwrap();
                    let f = if brs { f } else { f.without_brs() };
                    let h = wire_header(&f).unwrap();
                    assert!(h.fd, "{f:?}: FD at every length, 0..=8 too");
                    assert_eq!(h.brs, brs, "{f:?}");
                    assert_eq!(h.len, len, "{f:?}");
                    assert_eq!(id_from_embedded(h.id), id);
                    assert_eq!(
                        matches!(h.id, Id::Extended(_)),
                        matches!(id, CanId::Extended(_))
                    );
                    let back = frame_from_wire(h.id, &data, h.fd, h.brs, false).unwrap();
                    assert_eq!(back, f);
                    assert_eq!((back.is_fd(), back.is_brs()), (true, brs));
                    assert!(
                        ClassicFrame::new(f).is_none(),
                        "an FD frame is never Classical"
                    );
                }
            }
        }
    }

    #[test]
    fn classic_frames_round_trip_without_fd_or_brs() {
        for id in ids() {
            for len in 0..=8u8 {
                let data: Vec<u8> = (0..len).collect();
                let f = Frame::classic(id, &data).unwrap();
                let h = wire_header(&f).unwrap();
                assert_eq!((h.fd, h.brs, h.len), (false, false, len));
                // A received Classical frame ignores a stray BRS bit.
                let back = frame_from_wire(h.id, &data, false, true, false).unwrap();
                assert_eq!(back, f);
                assert!(!back.is_fd() && !back.is_brs());
                let c = ClassicFrame::new(f).unwrap();
                assert_eq!(c.data(), &data[..]);
                assert_eq!(c.header(), Some(h));
            }
        }
    }

    #[test]
    fn received_frames_fcan_does_not_take() {
        let id = Id::Standard(StandardId::new(0x10).unwrap());
        assert_eq!(frame_from_wire(id, &[], false, false, true), None, "remote");
        assert_eq!(frame_from_wire(id, &[0; 9], false, false, false), None);
        assert_eq!(
            frame_from_wire(id, &[0; 9], true, true, false),
            None,
            "no FD DLC"
        );
        assert_eq!(frame_from_wire(id, &[0; 65], true, true, false), None);
    }

    #[test]
    fn identifiers_out_of_range_are_refused() {
        let f = Frame::classic(CanId::Standard(0x800), &[]).unwrap();
        assert_eq!(wire_header(&f), None);
        let f = Frame::classic(CanId::Extended(0x2000_0000), &[]).unwrap();
        assert_eq!(wire_header(&f), None);
    }
}
