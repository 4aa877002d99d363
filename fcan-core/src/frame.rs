//! CAN and CAN FD frames as fcan sees them: an identifier, up to 64 payload bytes, and
//! whether the frame is FD.
//!
//! This is the one frame type every part of fcan exchanges (runtime, master, router,
//! simulated bus). Drivers convert to and from their own types at the edge.

/// Largest payload of a Classical CAN frame.
pub const CLASSIC_MAX_LEN: usize = 8;
/// Largest payload of a CAN FD frame.
pub const FD_MAX_LEN: usize = 64;

/// The payload lengths a CAN FD frame can carry (DLC 0..=15).
pub const FD_LENGTHS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];

/// Rounds `len` up to the next length a CAN FD DLC can express.
///
/// Returns `None` above 64. Senders pad the extra bytes with zeros; receivers ignore them
/// because every fcan payload knows its own length.
///
/// ```
/// use fcan_core::frame::fd_padded_len;
/// assert_eq!(fd_padded_len(8), Some(8));
/// assert_eq!(fd_padded_len(9), Some(12));
/// assert_eq!(fd_padded_len(49), Some(64));
/// assert_eq!(fd_padded_len(65), None);
/// ```
pub const fn fd_padded_len(len: usize) -> Option<usize> {
    let mut i = 0;
    while i < FD_LENGTHS.len() {
        if FD_LENGTHS[i] as usize >= len {
            return Some(FD_LENGTHS[i] as usize);
        }
        i += 1;
    }
    None
}

/// The data-length code for a payload length that is already a legal FD length.
pub const fn fd_dlc(len: usize) -> Option<u8> {
    let mut i = 0;
    while i < FD_LENGTHS.len() {
        if FD_LENGTHS[i] as usize == len {
            return Some(i as u8);
        }
        i += 1;
    }
    None
}

/// Which kind of frames a link carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mtu {
    /// Classical CAN: 8-byte payloads.
    Classic,
    /// CAN FD: 64-byte payloads (with bit-rate switching when the link allows).
    Fd,
}

impl Mtu {
    /// Payload bytes of one full frame on this link.
    pub const fn payload(self) -> usize {
        match self {
            Mtu::Classic => CLASSIC_MAX_LEN,
            Mtu::Fd => FD_MAX_LEN,
        }
    }

    /// The length a frame carrying `len` meaningful bytes goes out with on this link, or
    /// `None` when `len` does not fit one frame.
    pub const fn wire_len(self, len: usize) -> Option<usize> {
        match self {
            Mtu::Classic if len <= CLASSIC_MAX_LEN => Some(len),
            Mtu::Classic => None,
            Mtu::Fd => fd_padded_len(len),
        }
    }
}

/// A CAN identifier: 11-bit standard or 29-bit extended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CanId {
    /// 11-bit identifier (fcan's data plane).
    Standard(u16),
    /// 29-bit identifier (fcan's configuration plane and services).
    Extended(u32),
}

impl CanId {
    /// Largest standard identifier.
    pub const STANDARD_MAX: u16 = 0x7FF;
    /// Largest extended identifier.
    pub const EXTENDED_MAX: u32 = 0x1FFF_FFFF;

    /// A standard ID, or `None` when `raw` has more than 11 bits.
    pub const fn standard(raw: u16) -> Option<CanId> {
        if raw <= Self::STANDARD_MAX {
            Some(CanId::Standard(raw))
        } else {
            None
        }
    }

    /// An extended ID, or `None` when `raw` has more than 29 bits.
    pub const fn extended(raw: u32) -> Option<CanId> {
        if raw <= Self::EXTENDED_MAX {
            Some(CanId::Extended(raw))
        } else {
            None
        }
    }

    /// The raw identifier bits.
    pub const fn raw(self) -> u32 {
        match self {
            CanId::Standard(id) => id as u32,
            CanId::Extended(id) => id,
        }
    }

    /// The key CAN arbitration sorts by: lower wins. A standard frame beats an extended
    /// frame whose top 11 bits are equal (its IDE bit is dominant), so standard IDs are
    /// placed as if followed by 18 zero bits and a 0 IDE bit, extended IDs with a 1.
    ///
    /// ```
    /// use fcan_core::frame::CanId;
    /// let std = CanId::Standard(0x400);
    /// let ext = CanId::Extended(0x400 << 18);
    /// assert!(std.arbitration_key() < ext.arbitration_key());
    /// assert!(CanId::Extended(0x3FF << 18).arbitration_key() < std.arbitration_key());
    /// ```
    pub const fn arbitration_key(self) -> u64 {
        match self {
            // base ID, then SRR/IDE (0 for standard: RTR=0, IDE=0), then 18 zero bits.
            CanId::Standard(id) => (id as u64) << 20,
            // base ID, then SRR=1, IDE=1, then the 18-bit extension.
            CanId::Extended(id) => {
                let base = (id >> 18) as u64;
                let ext = (id & 0x3_FFFF) as u64;
                (base << 20) | (0b11 << 18) | ext
            }
        }
    }
}

/// Error building a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrameError {
    /// More bytes than the frame kind can carry, or an FD length no DLC expresses.
    BadLength,
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::BadLength => f.write_str("payload length not valid for this frame kind"),
        }
    }
}

/// One CAN or CAN FD frame. Fixed size, no allocation.
#[derive(Clone, Copy)]
pub struct Frame {
    id: CanId,
    len: u8,
    fd: bool,
    brs: bool,
    data: [u8; FD_MAX_LEN],
}

impl Frame {
    /// A Classical CAN frame carrying `data` (0..=8 bytes).
    ///
    /// ```
    /// use fcan_core::frame::{CanId, Frame};
    /// let f = Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap();
    /// assert_eq!(f.data(), &[1, 2, 3]);
    /// assert!(!f.is_fd());
    /// assert!(Frame::classic(CanId::Standard(1), &[0; 9]).is_err());
    /// ```
    pub fn classic(id: CanId, data: &[u8]) -> Result<Frame, FrameError> {
        if data.len() > CLASSIC_MAX_LEN {
            return Err(FrameError::BadLength);
        }
        Ok(Self::raw(id, data, false, false))
    }

    /// A CAN FD frame with bit-rate switching; `data.len()` must be a legal FD length.
    pub fn fd(id: CanId, data: &[u8]) -> Result<Frame, FrameError> {
        if fd_dlc(data.len()).is_none() {
            return Err(FrameError::BadLength);
        }
        Ok(Self::raw(id, data, true, true))
    }

    /// A frame for a link of the given kind carrying `data`, zero-padded up to the next
    /// legal FD length when needed.
    ///
    /// ```
    /// use fcan_core::frame::{CanId, Frame, Mtu};
    /// let f = Frame::padded(Mtu::Fd, CanId::Standard(0x100), &[7; 10]).unwrap();
    /// assert_eq!(f.len(), 12);
    /// assert_eq!(&f.data()[10..], &[0, 0]);
    /// ```
    pub fn padded(mtu: Mtu, id: CanId, data: &[u8]) -> Result<Frame, FrameError> {
        let wire = mtu.wire_len(data.len()).ok_or(FrameError::BadLength)?;
        let mut f = Self::raw(id, data, mtu == Mtu::Fd, mtu == Mtu::Fd);
        f.len = wire as u8;
        Ok(f)
    }

    fn raw(id: CanId, data: &[u8], fd: bool, brs: bool) -> Frame {
        let mut buf = [0u8; FD_MAX_LEN];
        buf[..data.len()].copy_from_slice(data);
        Frame {
            id,
            len: data.len() as u8,
            fd,
            brs,
            data: buf,
        }
    }

    /// The identifier.
    pub const fn id(&self) -> CanId {
        self.id
    }

    /// The payload (including any FD padding).
    pub fn data(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }

    /// The payload, writable (including any FD padding); its length and the frame kind
    /// stay as they are. For relays that rewrite a byte of a message in place
    /// (`Announce::clear_caps`).
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data[..self.len as usize]
    }

    /// Payload length in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether this is a CAN FD frame.
    pub const fn is_fd(&self) -> bool {
        self.fd
    }

    /// Whether an FD frame uses bit-rate switching for its data phase.
    pub const fn is_brs(&self) -> bool {
        self.brs
    }

    /// The kind of link this frame needs.
    pub const fn mtu(&self) -> Mtu {
        if self.fd {
            Mtu::Fd
        } else {
            Mtu::Classic
        }
    }

    /// Clears bit-rate switching (an FD frame sent at the arbitration rate throughout).
    pub fn without_brs(mut self) -> Frame {
        self.brs = false;
        self
    }
}

impl PartialEq for Frame {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.fd == other.fd
            && self.brs == other.brs
            && self.data() == other.data()
    }
}
impl Eq for Frame {}

impl core::fmt::Debug for Frame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.id {
            CanId::Standard(id) => write!(f, "{id:03X}")?,
            CanId::Extended(id) => write!(f, "{id:08X}")?,
        }
        f.write_str(if self.fd { "##" } else { "#" })?;
        for b in self.data() {
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

/// By hand, not derived: the payload is the frame's `len` bytes, not its whole buffer.
#[cfg(feature = "defmt")]
impl defmt::Format for Frame {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Frame {{ id: {}, fd: {=bool}, brs: {=bool}, data: {=[u8]:02x} }}",
            self.id,
            self.fd,
            self.brs,
            self.data()
        )
    }
}
