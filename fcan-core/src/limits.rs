//! Limits every node runtime enforces, as one set of constants and checks shared by the
//! runtime (which refuses to boot, or NAKs, past them), schema validation (so
//! `fcan-codegen check` refuses a schema whose firmware could not boot) and the master.

/// Bytes of each of a node's configuration reassembly buffers: the longest
/// FRAME_DEFINE (12 + 64 entries × 6 = 396 bytes) or PARAM_SET (2 + the largest
/// parameter) a node can take. A node may have more; the reference runtime has exactly
/// this, and schemas are checked against it so that every firmware boots.
pub const CONFIG_REASSEMBLY_BYTES: usize = 400;

/// Bytes of a PARAM_SET before the value: block and param index.
pub const PARAM_SET_HEADER_LEN: usize = 2;

/// The largest packed parameter (all elements of an array) a node can receive:
/// [`CONFIG_REASSEMBLY_BYTES`] − [`PARAM_SET_HEADER_LEN`] = 398 bytes.
pub const MAX_PARAM_BYTES: usize = CONFIG_REASSEMBLY_BYTES - PARAM_SET_HEADER_LEN;

/// Whether a parameter of `size` packed bytes fits one PARAM_SET a node can reassemble.
///
/// ```
/// use fcan_core::limits::{param_fits, MAX_PARAM_BYTES};
/// assert!(param_fits(MAX_PARAM_BYTES));
/// assert!(!param_fits(MAX_PARAM_BYTES + 1)); // e.g. `u8[399]`; `u8[500]` too
/// ```
pub const fn param_fits(size: usize) -> bool {
    size <= MAX_PARAM_BYTES
}

/// The largest arena (topic, staging, parameter bytes, or topic-state entries) of one
/// node: the runtime's descriptor tables hold offsets into them as `u16`.
pub const MAX_ARENA: usize = u16::MAX as usize;
