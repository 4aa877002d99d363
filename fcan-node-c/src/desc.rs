//! The C descriptor tables (`fcan_node_desc_t`, in the application's flash) as the
//! runtime's own descriptor (`NodeDesc`).
//!
//! The per-entry tables — topics, parameters, services, blocks — have the runtime's
//! layout (`#[repr(C)]` on both sides, checked field by field in `crate::layout`), so
//! they are read in place, from flash: each entry is validated first (every enum byte,
//! every default and bound a value of its type), so the runtime never reads an invalid
//! value. What holds Rust slices — the node, its types — and the instance arrays (3 bytes
//! in Rust, 4 in C) are built in the node's RAM area at `fcan_node_init`;
//! `NodeDesc::check` then checks the tables against each other.

use fcan_runtime_nostd::codegen::{ArrayDesc, LimitsDesc, NodeDesc, TypeDesc};
use fcan_runtime_nostd::fcan_core::hash::HashPrefix;
use fcan_runtime_nostd::fcan_core::types::{Scalar, ScalarType};

use crate::abi::*;
use crate::arena::Arena;

/// Where the read fails: an `FCAN_ERR_*`.
pub type Code = i32;

/// `n` elements at `p`, as a slice (empty for `n == 0`, whatever `p` is).
///
/// # Safety
/// When `n > 0` and `p` is not null, `p` points to `n` initialised `T` that outlive the
/// node (generated tables are `const`, in flash).
unsafe fn table<T>(p: *const T, n: u16) -> Result<&'static [T], Code> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, n as usize) })
}

/// The C table `src` as the runtime's table of the same layout, once `valid` accepted
/// every entry.
///
/// # Safety
/// `S` and `T` have the same size, alignment and field offsets (`crate::layout`), and
/// every entry `valid` accepts is a valid `T`.
unsafe fn in_place<S, T>(
    src: &'static [S],
    valid: impl Fn(&S) -> bool,
) -> Result<&'static [T], Code> {
    if !src.iter().all(valid) {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY: the caller's contract; the same memory, shared and `'static`.
    Ok(unsafe { core::slice::from_raw_parts(src.as_ptr().cast::<T>(), src.len()) })
}

/// A direction byte the runtime's `DataDirection` has.
fn topic_ok(t: &fcan_topic_desc_t) -> bool {
    t.dir == FCAN_DIR_M2S || t.dir == FCAN_DIR_S2M
}

/// A scalar type the runtime has, known flags, and a default and bounds that are values
/// of the type (a bool of 2 is none).
fn param_ok(p: &fcan_param_desc_t) -> bool {
    let Some(ty) = ScalarType::ALL
        .iter()
        .copied()
        .find(|t| *t as u8 == p.scalar_type)
    else {
        return false;
    };
    let value = |bits| Scalar::from_bits(ty, bits).is_ok();
    p.flags & !(FCAN_PARAM_HAS_MIN | FCAN_PARAM_HAS_MAX) == 0
        && value(p.default_bits)
        && (p.flags & FCAN_PARAM_HAS_MIN == 0 || value(p.min_bits))
        && (p.flags & FCAN_PARAM_HAS_MAX == 0 || value(p.max_bits))
}

const EMPTY_TYPE: TypeDesc = TypeDesc {
    name: "",
    topics: &[],
    params: &[],
    services: &[],
    topic_bytes: 0,
    stage_bytes: 0,
    param_bytes: 0,
};
const EMPTY_ARRAY: ArrayDesc = ArrayDesc {
    type_index: 0,
    max_count: 0,
    first_block: 0,
};

/// The service slots and the bytes of each slot's buffer the node needs, from the C
/// tables (the rule `NodeDesc::required_service_buffer` applies, read before the
/// descriptor exists so a measuring arena counts them too).
///
/// # Safety
/// As [`read`].
pub unsafe fn service_slots(d: &fcan_node_desc_t) -> Result<(usize, usize), Code> {
    // SAFETY: the caller's contract.
    let types = unsafe { table(d.types, d.n_types)? };
    let mut any = false;
    let mut pair = 0usize;
    for t in types {
        // SAFETY: the caller's contract.
        for s in unsafe { table(t.services, t.n_services)? } {
            any = true;
            pair = pair.max(s.request_size as usize + s.response_size as usize);
        }
    }
    if !any {
        return Ok((0, 0));
    }
    let bytes = fcan_runtime_nostd::fcan_core::limits::service_slot_bytes(
        d.service_buffer as usize,
        d.max_request as usize,
        d.max_response as usize,
        pair,
    );
    Ok((d.service_reassembly.max(1) as usize, bytes))
}

/// The node's descriptor over the C tables, its type and array tables built in the
/// arena. A measuring arena takes the same room and checks the same values; the
/// descriptor it returns has empty type and array tables.
///
/// # Safety
/// Every pointer in `d` (and in the tables it points to) is valid for its count, and
/// the tables outlive the node.
pub unsafe fn read(arena: &mut Arena, d: &fcan_node_desc_t) -> Result<NodeDesc, Code> {
    if d.abi != FCAN_ABI_VERSION {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY (every `table` and `in_place` call): the caller's contract for the
    // pointers; the layouts are checked equal in `crate::layout`, and the validators
    // accept only valid enum bytes and values.
    let c_types = unsafe { table(d.types, d.n_types)? };
    let types = arena.slice(c_types.len(), EMPTY_TYPE).ok_or(FCAN_ERR_RAM)?;
    let dry = arena.is_dry();
    for (i, ct) in c_types.iter().enumerate() {
        let topics = unsafe { in_place(table(ct.topics, ct.n_topics)?, topic_ok)? };
        let params = unsafe { in_place(table(ct.params, ct.n_params)?, param_ok)? };
        let services = unsafe { in_place(table(ct.services, ct.n_services)?, |_| true)? };
        if let (false, Some(slot)) = (dry, types.get_mut(i)) {
            *slot = TypeDesc {
                // Not read by the runtime (a Rust diagnostic aid); reading the C string
                // would link UTF-8 validation (~1 KB of flash) for nothing.
                name: "",
                topics,
                params,
                services,
                topic_bytes: ct.topic_bytes,
                stage_bytes: ct.stage_bytes,
                param_bytes: ct.param_bytes,
            };
        }
    }
    let blocks = unsafe { in_place(table(d.blocks, d.n_blocks)?, |_| true)? };
    let c_arrays = unsafe { table(d.arrays, d.n_arrays)? };
    let arrays = arena
        .slice(c_arrays.len(), EMPTY_ARRAY)
        .ok_or(FCAN_ERR_RAM)?;
    if !dry {
        for (a, c) in arrays.iter_mut().zip(c_arrays) {
            *a = ArrayDesc {
                type_index: c.type_index,
                max_count: c.max_count,
                first_block: c.first_block,
            };
        }
    }
    if d.blob_len == 0 || d.blob.is_null() {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY: the caller's contract (the blob is `const`, in flash).
    let blob = unsafe { core::slice::from_raw_parts(d.blob, d.blob_len as usize) };
    Ok(NodeDesc {
        blob,
        hash: HashPrefix(d.hash),
        limits: LimitsDesc {
            max_frames: d.max_frames,
            max_copy_entries: d.max_copy_entries,
            service_buffer: d.service_buffer,
            service_reassembly: d.service_reassembly,
        },
        types,
        arrays,
        blocks,
        topic_bytes: d.topic_bytes as usize,
        stage_bytes: d.stage_bytes as usize,
        param_bytes: d.param_bytes as usize,
        topic_slots: d.topic_slots as usize,
        max_request: d.max_request as usize,
        max_response: d.max_response as usize,
    })
}
