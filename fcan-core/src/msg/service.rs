//! Service requests and responses.

use super::{DecodeError, EncodeError, ServiceStatus};
use crate::pack::{Reader, Writer};

/// A service request (master → node). The transfer id in the identifier is the
/// transaction id; the response echoes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServiceRequest<'a> {
    /// Global block number.
    pub block: u8,
    /// Service index within the block's type.
    pub service: u8,
    /// The packed request (trailing bytes are padding).
    pub body: &'a [u8],
}

impl<'a> ServiceRequest<'a> {
    /// Size without the body.
    pub const HEADER_LEN: usize = 2;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.block)?;
        w.u8(self.service)?;
        Ok(w.bytes(self.body)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(ServiceRequest {
            block: r.u8()?,
            service: r.u8()?,
            body: r.rest(),
        })
    }
}

/// A service response (node → master).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServiceResponse<'a> {
    /// Global block number (echoed).
    pub block: u8,
    /// Service index (echoed).
    pub service: u8,
    /// Outcome. Only `Ok` carries a body.
    pub status: ServiceStatus,
    /// The packed response (trailing bytes are padding).
    pub body: &'a [u8],
}

impl<'a> ServiceResponse<'a> {
    /// Size without the body.
    pub const HEADER_LEN: usize = 3;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.block)?;
        w.u8(self.service)?;
        w.u8(self.status as u8)?;
        Ok(w.bytes(self.body)?)
    }

    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(ServiceResponse {
            block: r.u8()?,
            service: r.u8()?,
            status: r.u8()?.try_into()?,
            body: r.rest(),
        })
    }
}
