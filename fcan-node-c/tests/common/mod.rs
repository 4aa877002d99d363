//! C tables for a generated Rust descriptor: what `fcan-codegen c` emits, built here from
//! the Rust backend's `NodeDesc` so the library's tests do not depend on a C compiler.
//! (The generated C itself is checked against the Rust tables in fcan-codegen's tests,
//! and run end to end in tests/tests/c_node.rs.)
#![allow(dead_code)]

use std::ffi::CString;

use fcan_core::msg::DataDirection;
use fcan_node::abi::*;
use fcan_runtime_nostd::codegen::NodeDesc;

fn leak<T>(v: Vec<T>) -> *const T {
    if v.is_empty() {
        return std::ptr::null();
    }
    Box::leak(v.into_boxed_slice()).as_ptr()
}

/// The C descriptor (leaked: it must outlive every node, as flash does).
pub fn c_desc(d: &NodeDesc) -> &'static fcan_node_desc_t {
    let types: Vec<fcan_type_desc_t> = d
        .types
        .iter()
        .map(|t| fcan_type_desc_t {
            name: CString::new(t.name).unwrap().into_raw(),
            topics: leak(
                t.topics
                    .iter()
                    .map(|x| fcan_topic_desc_t {
                        period_us: x.period_us,
                        size: x.size,
                        offset: x.offset,
                        stage_offset: x.stage_offset,
                        dir: match x.dir {
                            DataDirection::M2s => FCAN_DIR_M2S,
                            DataDirection::S2m => FCAN_DIR_S2M,
                        },
                        reserved: 0,
                    })
                    .collect(),
            ),
            params: leak(
                t.params
                    .iter()
                    .map(|p| fcan_param_desc_t {
                        default_bits: p.default_bits,
                        min_bits: p.min_bits,
                        max_bits: p.max_bits,
                        count: p.count,
                        offset: p.offset,
                        scalar_type: p.ty as u8,
                        flags: p.flags,
                        reserved: [0; 2],
                    })
                    .collect(),
            ),
            services: leak(
                t.services
                    .iter()
                    .map(|s| fcan_service_desc_t {
                        request_size: s.request_size,
                        response_size: s.response_size,
                    })
                    .collect(),
            ),
            n_topics: t.topics.len() as u16,
            n_params: t.params.len() as u16,
            n_services: t.services.len() as u16,
            topic_bytes: t.topic_bytes,
            stage_bytes: t.stage_bytes,
            param_bytes: t.param_bytes,
        })
        .collect();
    let n_types = types.len() as u16;
    Box::leak(Box::new(fcan_node_desc_t {
        abi: FCAN_ABI_VERSION,
        blob_len: d.blob.len() as u32,
        blob: d.blob.as_ptr(),
        hash: d.hash.0,
        types: leak(types),
        arrays: leak(
            d.arrays
                .iter()
                .map(|a| fcan_array_desc_t {
                    type_index: a.type_index,
                    max_count: a.max_count,
                    first_block: a.first_block,
                    reserved: 0,
                })
                .collect(),
        ),
        blocks: leak(
            d.blocks
                .iter()
                .map(|b| fcan_block_desc_t {
                    topic_offset: b.topic_offset,
                    stage_offset: b.stage_offset,
                    param_offset: b.param_offset,
                    topic_slot: b.topic_slot,
                    type_index: b.type_index,
                    array: b.array,
                    index: b.index,
                    reserved: 0,
                })
                .collect(),
        ),
        n_types,
        n_arrays: d.arrays.len() as u16,
        n_blocks: d.blocks.len() as u16,
        max_frames: d.limits.max_frames,
        max_copy_entries: d.limits.max_copy_entries,
        service_buffer: d.limits.service_buffer,
        service_reassembly: d.limits.service_reassembly,
        reserved: [0; 3],
        topic_bytes: d.topic_bytes as u32,
        stage_bytes: d.stage_bytes as u32,
        param_bytes: d.param_bytes as u32,
        topic_slots: d.topic_slots as u32,
        max_request: d.max_request as u32,
        max_response: d.max_response as u32,
    }))
}

/// `FCAN_RAM_BYTES(...)` of fcan.h, for a descriptor: the bound generated code sizes
/// its RAM with.
pub fn ram_bound(d: &NodeDesc) -> u32 {
    let topics: usize = d.types.iter().map(|t| t.topics.len()).sum();
    let params: usize = d.types.iter().map(|t| t.params.len()).sum();
    let services: usize = d.types.iter().map(|t| t.services.len()).sum();
    let svc_slots = if d.has_services() {
        d.limits.service_reassembly.max(1) as u32
    } else {
        0
    };
    FCAN_RAM_FIXED
        + d.types.len() as u32 * FCAN_RAM_PER_TYPE
        + topics as u32 * FCAN_RAM_PER_TOPIC
        + params as u32 * FCAN_RAM_PER_PARAM
        + services as u32 * FCAN_RAM_PER_SERVICE
        + d.blocks.len() as u32 * FCAN_RAM_PER_BLOCK
        + d.arrays.len() as u32 * FCAN_RAM_PER_ARRAY
        + (d.topic_bytes + d.stage_bytes + d.param_bytes) as u32
        + d.topic_slots as u32 * FCAN_RAM_PER_TOPIC_SLOT
        + d.limits.max_frames as u32 * FCAN_RAM_PER_FRAME
        + d.limits.max_copy_entries as u32 * FCAN_RAM_PER_ENTRY
        + svc_slots * (FCAN_RAM_PER_SERVICE_SLOT + d.required_service_buffer() as u32)
}

/// An 8-byte-aligned RAM area of `bytes` bytes (leaked, like a `static`).
pub fn ram(bytes: usize) -> *mut std::ffi::c_void {
    let words = vec![0u64; bytes.div_ceil(8) + 1].into_boxed_slice();
    Box::leak(words).as_mut_ptr().cast()
}
