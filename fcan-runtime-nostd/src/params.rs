//! Parameters: schema defaults at boot, PARAM_SET validated element by element with the
//! one range rule of `fcan_core::types::check_range`, PARAM_GET, and the changed mask
//! handed to the application after a batch.
//!
//! A value is checked completely before any byte of it is written, so a rejected
//! PARAM_SET leaves the old value in place.

use crate::desc::{NodeDesc, ParamDesc};
use crate::error::ConfigError;
use crate::plan::Nak;
use crate::storage::Parts;
use crate::wired::Wired;
use fcan_core::msg::{ParamSet, ResultCode};
use fcan_core::types::{check_range, Scalar, ScalarType, ValueError};

/// The byte range of a param in the param arena.
fn range(
    desc: &NodeDesc,
    block: u8,
    param: u8,
) -> Option<(core::ops::Range<usize>, &'static ParamDesc)> {
    let (bd, td) = desc.block(block)?;
    let pd = td.params.get(param as usize)?;
    let start = (bd.param_offset as usize).checked_add(pd.offset as usize)?;
    Some((start..start.checked_add(pd.size())?, pd))
}

/// A param's index checks: it exists (BadIndex) and its block is wired (NotWired).
fn locate(
    desc: &NodeDesc,
    wired: &Wired,
    block: u8,
    param: u8,
) -> Result<(core::ops::Range<usize>, &'static ParamDesc), Nak> {
    let found = range(desc, block, param).ok_or((ResultCode::BadIndex, 0))?;
    if !wired.get(block) {
        return Err((ResultCode::NotWired, 0));
    }
    Ok(found)
}

/// Writes every param's default, element by element. Fails when a default does not
/// have its param's type or a param lies outside the arena.
pub(crate) fn write_defaults(desc: &NodeDesc, p: &mut Parts<'_>) -> Result<(), ConfigError> {
    for (number, _) in desc.blocks.iter().enumerate() {
        let Some((_, td)) = desc.block(number as u8) else {
            return Err(ConfigError::BadDesc);
        };
        for (i, pd) in td.params.iter().enumerate() {
            let (r, _) = range(desc, number as u8, i as u8).ok_or(ConfigError::BadDesc)?;
            // The default's bits are its packed bytes, copied into every element; only a
            // bool's can be no value (every bit pattern is an integer or a float).
            if pd.ty == ScalarType::Bool && pd.default_bits > 1 {
                return Err(ConfigError::BadDesc);
            }
            let bits = pd.default_bits.to_le_bytes();
            let packed = bits.get(..pd.ty.size()).ok_or(ConfigError::BadDesc)?;
            let dst = p.params.get_mut(r).ok_or(ConfigError::ParamBytes)?;
            for chunk in dst.chunks_mut(pd.ty.size().max(1)) {
                chunk.copy_from_slice(packed.get(..chunk.len()).ok_or(ConfigError::BadDesc)?);
            }
        }
    }
    Ok(())
}

/// PARAM_SET: checks the value, writes it and marks the param changed.
pub(crate) fn set(
    desc: &NodeDesc,
    wired: &Wired,
    p: &mut Parts<'_>,
    m: &ParamSet<'_>,
) -> Result<(), Nak> {
    let (r, pd) = locate(desc, wired, m.block, m.param)?;
    let value = m.value.get(..r.len()).ok_or((ResultCode::BadLength, 0))?;
    let elem = pd.ty.size().max(1);
    // A bound whose bits are no value refuses every write (only a hand-made table can
    // hold one; generated and checked tables cannot).
    let (min, max) = match (pd.min(), pd.max()) {
        (Ok(min), Ok(max)) => (min, max),
        _ => return Err((ResultCode::BadValue, 0)),
    };
    for chunk in value.chunks(elem) {
        let v = Scalar::read(pd.ty, chunk).map_err(|e| match e {
            ValueError::BadBool => (ResultCode::BadValue, 0),
            ValueError::Truncated => (ResultCode::BadLength, 0),
        })?;
        check_range(pd.ty, &v, min, max).map_err(|e| (ResultCode::from(e), 0))?;
    }
    p.params
        .get_mut(r)
        .ok_or((ResultCode::BadIndex, 0))?
        .copy_from_slice(value);
    // `check_desc` guarantees at most 32 params per type, `check_sizes` one mask per block.
    if let Some(mask) = p.param_changed.get_mut(m.block as usize) {
        *mask |= 1u32.checked_shl(u32::from(m.param)).unwrap_or(0);
    }
    Ok(())
}

/// PARAM_GET: where the current value lives in the param arena.
pub(crate) fn get_range(
    desc: &NodeDesc,
    wired: &Wired,
    block: u8,
    param: u8,
) -> Result<core::ops::Range<usize>, Nak> {
    locate(desc, wired, block, param).map(|(r, _)| r)
}

/// A param's value for the application (`None` for an unknown or unwired param).
pub(crate) fn read<'a>(
    desc: &NodeDesc,
    wired: &Wired,
    params: &'a [u8],
    block: u8,
    param: u8,
) -> Option<&'a [u8]> {
    params.get(get_range(desc, wired, block, param).ok()?)
}
