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

/// Bytes of one service slot buffer of a node: the one sizing rule, used by the code
/// generator to size the buffers (`fcan_core::arena`) and by the node to check them.
/// At least the schema's `limits.service_buffer`, one Classical frame, the largest
/// request and the largest response each with its header, and the largest request +
/// response of one service (a slot keeps the request while the handler writes the
/// response next to it).
///
/// ```
/// // A node whose largest service takes 7 bytes and answers 4; limit 16.
/// assert_eq!(fcan_core::limits::service_slot_bytes(16, 7, 4, 11), 16);
/// assert_eq!(fcan_core::limits::service_slot_bytes(0, 7, 4, 11), 11);
/// assert_eq!(fcan_core::limits::service_slot_bytes(0, 0, 0, 0), 8);
/// ```
pub const fn service_slot_bytes(
    service_buffer: usize,
    max_request: usize,
    max_response: usize,
    max_pair: usize,
) -> usize {
    let candidates = [
        service_buffer,
        crate::frame::CLASSIC_MAX_LEN,
        max_request + crate::msg::ServiceRequest::HEADER_LEN,
        max_response + crate::msg::ServiceResponse::HEADER_LEN,
        max_pair,
    ];
    let mut best = 0;
    let mut rest: &[usize] = &candidates;
    while let [c, more @ ..] = rest {
        if *c > best {
            best = *c;
        }
        rest = more;
    }
    best
}
