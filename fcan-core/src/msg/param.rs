//! PARAM_SET, PARAM_GET and PARAM_VALUE.

use super::{DecodeError, EncodeError};
use crate::pack::{Reader, Writer};

/// Bit 7 of the param byte in PARAM_SET: this write ends a batch, so the node calls
/// `on_params_changed` for every block touched since the last commit.
pub const COMMIT: u8 = 0x80;
/// Parameter indices fit in the low 7 bits of the param byte.
pub const PARAM_INDEX_MASK: u8 = 0x7F;

/// PARAM_SET (master → node). Answered by RESULT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamSet<'a> {
    /// Global block number.
    pub block: u8,
    /// Parameter index within the block's type (`0..=127`).
    pub param: u8,
    /// Whether this write ends a batch.
    pub commit: bool,
    /// The packed value (its length follows from the parameter's type; bytes beyond it
    /// are padding).
    pub value: &'a [u8],
}

impl<'a> ParamSet<'a> {
    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        if self.param > PARAM_INDEX_MASK {
            return Err(EncodeError::BadField);
        }
        w.u8(self.block)?;
        w.u8(self.param | if self.commit { COMMIT } else { 0 })?;
        Ok(w.bytes(self.value)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let block = r.u8()?;
        let p = r.u8()?;
        Ok(ParamSet {
            block,
            param: p & PARAM_INDEX_MASK,
            commit: p & COMMIT != 0,
            value: r.rest(),
        })
    }
}

/// PARAM_GET (master → node), answered by [`ParamValue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamGet {
    /// Global block number.
    pub block: u8,
    /// Parameter index.
    pub param: u8,
}

impl ParamGet {
    /// Encoded size.
    pub const LEN: usize = 2;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.block)?;
        Ok(w.u8(self.param)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ParamGet {
            block: r.u8()?,
            param: r.u8()?,
        })
    }
}

/// PARAM_VALUE (node → master): the current value of one parameter. A PARAM_GET for an
/// index the node does not have is answered by a RESULT NAK instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamValue<'a> {
    /// Global block number.
    pub block: u8,
    /// Parameter index.
    pub param: u8,
    /// The packed value (trailing bytes are padding).
    pub value: &'a [u8],
}

impl<'a> ParamValue<'a> {
    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.block)?;
        w.u8(self.param)?;
        Ok(w.bytes(self.value)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(ParamValue {
            block: r.u8()?,
            param: r.u8()?,
            value: r.rest(),
        })
    }
}
