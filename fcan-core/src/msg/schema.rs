//! SCHEMA_READ and SCHEMA_DATA: the master downloads the node's blob in chunks.

use super::{DecodeError, EncodeError};
use crate::pack::{Reader, Writer};

/// SCHEMA_READ (master → node): send `len` bytes of the blob from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SchemaRead {
    /// First byte wanted.
    pub offset: u32,
    /// Bytes wanted; the node sends fewer at the end of the blob or when the chunk would
    /// not fit one transfer ([`SchemaData::max_chunk`]).
    pub len: u16,
}

impl SchemaRead {
    /// Encoded size.
    pub const LEN: usize = 6;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u32(self.offset)?;
        Ok(w.u16(self.len)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SchemaRead {
            offset: r.u32()?,
            len: r.u16()?,
        })
    }
}

/// SCHEMA_DATA (node → master): one chunk of the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SchemaData<'a> {
    /// Offset of `data` in the blob.
    pub offset: u32,
    /// The chunk. Empty when `offset` is at or past the end of the blob.
    pub data: &'a [u8],
}

impl<'a> SchemaData<'a> {
    /// Size without the data.
    pub const HEADER_LEN: usize = 6;

    /// Largest chunk one SCHEMA_DATA transfer carries on a link with `mtu`-byte frames.
    ///
    /// ```
    /// use fcan_core::msg::SchemaData;
    /// assert_eq!(SchemaData::max_chunk(8), 128 * 8 - 6);
    /// ```
    pub const fn max_chunk(mtu: usize) -> usize {
        crate::id::MAX_SEGMENTS * mtu - Self::HEADER_LEN
    }

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        let n: u16 = self
            .data
            .len()
            .try_into()
            .map_err(|_| EncodeError::TooLong)?;
        w.u32(self.offset)?;
        w.u16(n)?;
        Ok(w.bytes(self.data)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let offset = r.u32()?;
        let n = r.u16()? as usize;
        Ok(SchemaData {
            offset,
            data: r.bytes(n)?,
        })
    }
}
