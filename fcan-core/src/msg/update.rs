//! UPDATE (opcode 0xF): firmware update over the bus (`docs/protocol.md` §3.14).
//!
//! The master offers an image, the node accepts (saying from which offset, for a resumed
//! transfer) or refuses with a reason, the master sends the image in DATA chunks that the
//! node acknowledges with PROGRESS, then COMMIT: the node reads the image back from its
//! staging area, checks its SHA-256 and only then marks it bootable and reboots. Every
//! master→node message starts with a kind byte, and so does every node→master one.

use super::{DecodeError, EncodeError};
use crate::pack::{Reader, Writer};

/// Longest node schema name an OFFER carries (the schema's `node:` field, as in the blob).
pub const NAME_MAX: usize = 64;
/// Longest firmware version string an OFFER or a STATUS carries.
pub const VERSION_MAX: usize = 32;
/// Bytes of the DATA header before the chunk: kind, offset, length.
pub const DATA_HEADER_LEN: usize = 7;

/// A SHA-256 digest as the update plane carries it (the image's, or the schema blob's).
pub type Sha256 = [u8; 32];

macro_rules! kinds {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        #[non_exhaustive]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum $name { $($(#[$vm])* $var = $val,)* }

        impl $name {
            /// The value for a wire byte, or `None` for an unknown one.
            pub const fn from_u8(v: u8) -> Option<$name> {
                match v { $($val => Some($name::$var),)* _ => None }
            }
        }

        impl TryFrom<u8> for $name {
            type Error = DecodeError;
            fn try_from(v: u8) -> Result<Self, Self::Error> {
                $name::from_u8(v).ok_or(DecodeError::BadEnum(v))
            }
        }
    };
}

kinds! {
    /// Where a node's update stands (the `phase` byte of STATUS).
    UpdatePhase {
        /// No transfer: nothing offered, or the last one ended (see the reason).
        Idle = 0,
        /// An offer was accepted; DATA is taken from `offset` on.
        Receiving = 1,
        /// COMMIT arrived with every byte in; the node is reading the image back.
        Verifying = 2,
        /// The image checked out and is marked bootable; the node reboots into it.
        Verified = 3,
    }
}

kinds! {
    /// Why an offer was refused or a transfer ended without an update (the `reason` byte
    /// of STATUS). `None` when nothing went wrong.
    UpdateReason {
        /// Nothing went wrong.
        None = 0,
        /// The node was built with update support but has no staging area to write to.
        Unsupported = 1,
        /// The image does not fit the node's staging area.
        TooLarge = 2,
        /// The image is for another board: its schema's node name is not this node's.
        WrongBoard = 3,
        /// The application refuses now (e.g. RUNNING with motors enabled).
        NotSafe = 4,
        /// The application refuses: the supply is too low to finish writing flash.
        LowBattery = 5,
        /// The node is verifying an image and takes no other offer until it is done.
        Busy = 6,
        /// DATA or COMMIT without an accepted offer, or COMMIT of another image.
        NoOffer = 7,
        /// COMMIT before every byte of the image was stored.
        Incomplete = 8,
        /// The image read back from the staging area does not have the offered SHA-256.
        HashMismatch = 9,
        /// The flash refused an erase, write, read or the final mark.
        FlashError = 10,
        /// The offer itself is not acceptable (size 0).
        BadOffer = 11,
        /// The application refuses for a reason of its own.
        Refused = 12,
        /// ABORT from the master ended the transfer.
        Aborted = 13,
    }
}

/// OFFER: what the master proposes to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UpdateOffer<'a> {
    /// Image size in bytes.
    pub size: u32,
    /// SHA-256 of the image bytes.
    pub image: Sha256,
    /// SHA-256 of the schema blob the new firmware will announce (the master knows then
    /// what to expect after the reboot).
    pub schema: Sha256,
    /// The node schema name the image was built for (the blob's `node` field): a node
    /// whose own schema names another node refuses with [`UpdateReason::WrongBoard`].
    pub node: &'a str,
    /// The new firmware's version string, for people.
    pub version: &'a str,
}

/// A master→node UPDATE message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpdateRequest<'a> {
    /// Kind 0: propose an image. Answered by STATUS.
    Offer(UpdateOffer<'a>),
    /// Kind 1: `data` is the image from `offset`. Answered by PROGRESS.
    Data {
        /// Offset of `data` in the image.
        offset: u32,
        /// The chunk, at most the `max_chunk` the node's STATUS gave.
        data: &'a [u8],
    },
    /// Kind 2: every byte was acknowledged; verify the image with this SHA-256 and boot
    /// it. Answered by STATUS (Verifying), then STATUS (Verified or Idle with a reason).
    Commit {
        /// The SHA-256 of the offer being committed.
        image: Sha256,
    },
    /// Kind 3: forget the transfer. Answered by STATUS.
    Abort,
    /// Kind 4: say where the update stands and which firmware runs. Answered by STATUS.
    Query,
}

/// A node→master UPDATE message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpdateReply<'a> {
    /// Kind 0: the state of the node's update, and its running firmware.
    Status(UpdateStatus<'a>),
    /// Kind 1: every byte before `next` is stored; send from there.
    Progress {
        /// The first byte the node still needs.
        next: u32,
    },
}

/// STATUS: the answer to OFFER, COMMIT, ABORT and QUERY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UpdateStatus<'a> {
    /// Where the update stands.
    pub phase: UpdatePhase,
    /// Why the last offer or transfer ended without an update, or `None`.
    pub reason: UpdateReason,
    /// Bytes of the image stored from offset 0 on (where a resumed transfer starts).
    pub offset: u32,
    /// The largest DATA chunk the node takes (0 when it takes none).
    pub max_chunk: u16,
    /// The version string of the firmware that runs now.
    pub version: &'a str,
}

impl UpdateOffer<'_> {
    /// Encoded size.
    pub fn len(&self) -> usize {
        1 + 4 + 32 + 32 + 1 + self.node.len() + 1 + self.version.len()
    }

    /// Never: an offer carries at least its fixed fields.
    pub fn is_empty(&self) -> bool {
        false
    }
}

fn short_str(w: &mut Writer, s: &str, max: usize) -> Result<(), EncodeError> {
    if s.len() > max {
        return Err(EncodeError::TooLong);
    }
    w.u8(s.len() as u8)?;
    Ok(w.bytes(s.as_bytes())?)
}

fn read_str<'a>(r: &mut Reader<'a>, max: usize) -> Result<&'a str, DecodeError> {
    let n = r.u8()? as usize;
    if n > max {
        return Err(DecodeError::BadString);
    }
    core::str::from_utf8(r.bytes(n)?).map_err(|_| DecodeError::BadString)
}

impl<'a> UpdateRequest<'a> {
    /// Encoded size of `Data` with a chunk of `len` bytes.
    pub const fn data_len(len: usize) -> usize {
        DATA_HEADER_LEN + len
    }

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        match self {
            UpdateRequest::Offer(o) => {
                w.u8(0)?;
                w.u32(o.size)?;
                w.bytes(&o.image)?;
                w.bytes(&o.schema)?;
                short_str(w, o.node, NAME_MAX)?;
                short_str(w, o.version, VERSION_MAX)?;
            }
            UpdateRequest::Data { offset, data } => {
                let n: u16 = data.len().try_into().map_err(|_| EncodeError::TooLong)?;
                w.u8(1)?;
                w.u32(*offset)?;
                w.u16(n)?;
                w.bytes(data)?;
            }
            UpdateRequest::Commit { image } => {
                w.u8(2)?;
                w.bytes(image)?;
            }
            UpdateRequest::Abort => w.u8(3)?,
            UpdateRequest::Query => w.u8(4)?,
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(match r.u8()? {
            0 => UpdateRequest::Offer(UpdateOffer {
                size: r.u32()?,
                image: r.array()?,
                schema: r.array()?,
                node: read_str(r, NAME_MAX)?,
                version: read_str(r, VERSION_MAX)?,
            }),
            1 => {
                let offset = r.u32()?;
                let n = r.u16()? as usize;
                UpdateRequest::Data {
                    offset,
                    data: r.bytes(n)?,
                }
            }
            2 => UpdateRequest::Commit { image: r.array()? },
            3 => UpdateRequest::Abort,
            4 => UpdateRequest::Query,
            k => return Err(DecodeError::BadEnum(k)),
        })
    }
}

impl<'a> UpdateReply<'a> {
    /// Encoded size of PROGRESS: one Classical CAN frame.
    pub const PROGRESS_LEN: usize = 5;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        match self {
            UpdateReply::Status(s) => {
                w.u8(0)?;
                w.u8(s.phase as u8)?;
                w.u8(s.reason as u8)?;
                w.u32(s.offset)?;
                w.u16(s.max_chunk)?;
                short_str(w, s.version, VERSION_MAX)?;
            }
            UpdateReply::Progress { next } => {
                w.u8(1)?;
                w.u32(*next)?;
            }
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(match r.u8()? {
            0 => UpdateReply::Status(UpdateStatus {
                phase: r.u8()?.try_into()?,
                reason: r.u8()?.try_into()?,
                offset: r.u32()?,
                max_chunk: r.u16()?,
                version: read_str(r, VERSION_MAX)?,
            }),
            1 => UpdateReply::Progress { next: r.u32()? },
            k => return Err(DecodeError::BadEnum(k)),
        })
    }
}

/// The node schema name a schema blob declares (its `node` field, field 2 of the
/// protobuf message), read in place without decoding the blob: what a node compares an
/// OFFER's name with, and what a master reads from an image's blob. `None` when the blob
/// does not start with the fields the codegen writes first (`protocol`, then `node`).
///
/// ```
/// use fcan_core::msg::update::schema_node_name;
/// // protocol = 2 (field 1, varint), node = "io_board" (field 2, 8 bytes)
/// let blob = [0x08, 0x02, 0x12, 8, b'i', b'o', b'_', b'b', b'o', b'a', b'r', b'd', 0x1A];
/// assert_eq!(schema_node_name(&blob), Some("io_board"));
/// assert_eq!(schema_node_name(&blob[..6]), None);
/// ```
pub fn schema_node_name(blob: &[u8]) -> Option<&str> {
    let mut r = Reader::new(blob);
    // Field 1 (protocol, varint) is omitted when 0, so it may be absent.
    let mut tag = varint(&mut r)?;
    if tag == 0x08 {
        varint(&mut r)?;
        tag = varint(&mut r)?;
    }
    if tag != 0x12 {
        return None;
    }
    let n = usize::try_from(varint(&mut r)?).ok()?;
    core::str::from_utf8(r.bytes(n).ok()?).ok()
}

fn varint(r: &mut Reader) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = r.u8().ok()?;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}
