//! The C descriptor tables (`fcan_node_desc_t`, in the application's flash) read into the
//! runtime's own descriptor (`NodeDesc`) in the node's RAM area.
//!
//! The runtime's tables hold Rust slices and enums, which have no C layout; the C tables
//! hold plain integers and pointers. Reading one into the other at `fcan_node_init`
//! validates every enum byte and scalar on the way (a hand-edited table cannot make the
//! runtime read an invalid value), then `NodeDesc::check` checks the tables against each
//! other. The cost is RAM for the copy: `FCAN_RAM_*` in `fcan.h` (docs/firmware-c.md).

use fcan_runtime_nostd::codegen::{
    ArrayDesc, BlockDesc, LimitsDesc, NodeDesc, ParamDesc, ServiceDesc, TopicDesc, TypeDesc,
};
use fcan_runtime_nostd::fcan_core::hash::HashPrefix;
use fcan_runtime_nostd::fcan_core::msg::DataDirection;
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
unsafe fn table<'a, T>(p: *const T, n: u16) -> Result<&'a [T], Code> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, n as usize) })
}

fn scalar_type(code: u8) -> Result<ScalarType, Code> {
    ScalarType::ALL
        .iter()
        .copied()
        .find(|t| *t as u8 == code)
        .ok_or(FCAN_ERR_DESC)
}

/// A value held as its packed little-endian bytes in the low bytes of `bits`.
fn scalar(ty: ScalarType, bits: u64) -> Result<Scalar, Code> {
    let bytes = bits.to_le_bytes();
    let packed = bytes.get(..ty.size()).ok_or(FCAN_ERR_DESC)?;
    Scalar::read(ty, packed).map_err(|_| FCAN_ERR_DESC)
}

fn topic(t: &fcan_topic_desc_t) -> Result<TopicDesc, Code> {
    let dir = match t.dir {
        FCAN_DIR_M2S => DataDirection::M2s,
        FCAN_DIR_S2M => DataDirection::S2m,
        _ => return Err(FCAN_ERR_DESC),
    };
    Ok(TopicDesc {
        dir,
        period_us: t.period_us,
        size: t.size,
        offset: t.offset,
        stage_offset: t.stage_offset,
    })
}

fn param(p: &fcan_param_desc_t) -> Result<ParamDesc, Code> {
    let ty = scalar_type(p.scalar_type)?;
    let bound = |flag: u8, bits: u64| -> Result<Option<Scalar>, Code> {
        if p.flags & flag != 0 {
            scalar(ty, bits).map(Some)
        } else {
            Ok(None)
        }
    };
    Ok(ParamDesc {
        ty,
        count: p.count,
        offset: p.offset,
        default: scalar(ty, p.default_bits)?,
        min: bound(FCAN_PARAM_HAS_MIN, p.min_bits)?,
        max: bound(FCAN_PARAM_HAS_MAX, p.max_bits)?,
    })
}

/// Copies `src` through `f` into `n` new elements of the arena.
fn copy_into<S, T: Copy>(
    arena: &mut Arena,
    src: &[S],
    empty: T,
    f: impl Fn(&S) -> Result<T, Code>,
) -> Result<&'static [T], Code> {
    let out = arena.slice(src.len(), empty).ok_or(FCAN_ERR_RAM)?;
    if arena.is_dry() {
        // Still read every entry, so measuring refuses what init would.
        for s in src {
            f(s)?;
        }
        return Ok(out);
    }
    for (o, s) in out.iter_mut().zip(src) {
        *o = f(s)?;
    }
    Ok(out)
}

const EMPTY_TOPIC: TopicDesc = TopicDesc {
    dir: DataDirection::M2s,
    period_us: 0,
    size: 0,
    offset: 0,
    stage_offset: 0,
};
const EMPTY_PARAM: ParamDesc = ParamDesc {
    ty: ScalarType::U8,
    count: 0,
    offset: 0,
    default: Scalar::U8(0),
    min: None,
    max: None,
};
const EMPTY_SERVICE: ServiceDesc = ServiceDesc {
    request_size: 0,
    response_size: 0,
};
const EMPTY_TYPE: TypeDesc = TypeDesc {
    name: "",
    topics: &[],
    params: &[],
    services: &[],
    topic_bytes: 0,
    stage_bytes: 0,
    param_bytes: 0,
};
const EMPTY_BLOCK: BlockDesc = BlockDesc {
    type_index: 0,
    array: 0,
    index: 0,
    topic_offset: 0,
    stage_offset: 0,
    param_offset: 0,
    topic_slot: 0,
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

/// Reads the C tables into the arena. A measuring arena takes the same room and checks
/// the same values; the descriptor it returns has empty tables.
///
/// # Safety
/// Every pointer in `d` (and in the tables it points to) is valid for its count, and
/// the tables outlive the node.
pub unsafe fn read(arena: &mut Arena, d: &fcan_node_desc_t) -> Result<NodeDesc, Code> {
    if d.abi != FCAN_ABI_VERSION {
        return Err(FCAN_ERR_DESC);
    }
    // SAFETY (every `table` call): the caller's contract.
    let c_types = unsafe { table(d.types, d.n_types)? };
    let types = arena.slice(c_types.len(), EMPTY_TYPE).ok_or(FCAN_ERR_RAM)?;
    let dry = arena.is_dry();
    for (i, ct) in c_types.iter().enumerate() {
        let topics = copy_into(
            arena,
            unsafe { table(ct.topics, ct.n_topics)? },
            EMPTY_TOPIC,
            topic,
        )?;
        let params = copy_into(
            arena,
            unsafe { table(ct.params, ct.n_params)? },
            EMPTY_PARAM,
            param,
        )?;
        let services = copy_into(
            arena,
            unsafe { table(ct.services, ct.n_services)? },
            EMPTY_SERVICE,
            |s: &fcan_service_desc_t| {
                Ok(ServiceDesc {
                    request_size: s.request_size,
                    response_size: s.response_size,
                })
            },
        )?;
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
    let blocks = copy_into(
        arena,
        unsafe { table(d.blocks, d.n_blocks)? },
        EMPTY_BLOCK,
        |b: &fcan_block_desc_t| {
            Ok(BlockDesc {
                type_index: b.type_index,
                array: b.array,
                index: b.index,
                topic_offset: b.topic_offset,
                stage_offset: b.stage_offset,
                param_offset: b.param_offset,
                topic_slot: b.topic_slot,
            })
        },
    )?;
    let arrays = copy_into(
        arena,
        unsafe { table(d.arrays, d.n_arrays)? },
        EMPTY_ARRAY,
        |a: &fcan_array_desc_t| {
            Ok(ArrayDesc {
                type_index: a.type_index,
                max_count: a.max_count,
                first_block: a.first_block,
            })
        },
    )?;
    let blob = if d.blob_len == 0 || d.blob.is_null() {
        return Err(FCAN_ERR_DESC);
    } else {
        // SAFETY: the caller's contract (the blob is `const`, in flash).
        unsafe { core::slice::from_raw_parts(d.blob, d.blob_len as usize) }
    };
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
