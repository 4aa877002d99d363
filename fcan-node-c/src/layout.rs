//! Compile-time checks that the header's `FCAN_RAM_*` bounds hold for the target being
//! built: the library is built for every target it ships for (`scripts/build-lib.sh`),
//! so a bound that a runtime change outgrows fails that build, not a board in the field.

use core::mem::{align_of, size_of};

use fcan_runtime_nostd::codegen::{
    ArrayDesc, BlockDesc, NodeDesc, ParamDesc, PlanEntry, PlanFrame, ServiceDesc, SvcSlot,
    TopicDesc, TopicState, TypeDesc,
};

use crate::abi::*;
use crate::arena::RAM_ALIGN;
use crate::node::CNode;

/// Regions the node's area is cut into (node, descriptor, the type and array tables, ten
/// buffers), each preceded by at most `RAM_ALIGN - 1` bytes of padding.
// Used only by the `const` assertions below, which Rust 1.85's dead-code lint misses.
#[allow(dead_code)]
const FIXED_REGIONS: usize = 14;
// Used only by the `const` assertions below, which Rust 1.85's dead-code lint misses.
#[allow(dead_code)]
const PAD: usize = RAM_ALIGN - 1;

// Used only by the `const` assertions below, which Rust 1.85's dead-code lint misses.
#[allow(dead_code)]
const fn fits(size: usize, bound: u32) -> bool {
    size <= bound as usize
}

/// The C table type `$c` has the runtime's `$r` layout: same size and alignment, and
/// each named field at the same offset (the C struct's `reserved` bytes lie in the Rust
/// struct's trailing padding).
macro_rules! same_layout {
    ($c:ty, $r:ty, $($cf:ident = $rf:ident),+ $(,)?) => {
        const _: () = {
            assert!(size_of::<$c>() == size_of::<$r>());
            assert!(align_of::<$c>() == align_of::<$r>());
            $(assert!(core::mem::offset_of!($c, $cf) == core::mem::offset_of!($r, $rf));)+
        };
    };
}

same_layout!(
    fcan_topic_desc_t,
    TopicDesc,
    period_us = period_us,
    size = size,
    offset = offset,
    stage_offset = stage_offset,
    dir = dir,
);
same_layout!(
    fcan_param_desc_t,
    ParamDesc,
    default_bits = default_bits,
    min_bits = min_bits,
    max_bits = max_bits,
    count = count,
    offset = offset,
    scalar_type = ty,
    flags = flags,
);
same_layout!(
    fcan_service_desc_t,
    ServiceDesc,
    request_size = request_size,
    response_size = response_size,
);
same_layout!(
    fcan_block_desc_t,
    BlockDesc,
    topic_offset = topic_offset,
    stage_offset = stage_offset,
    param_offset = param_offset,
    topic_slot = topic_slot,
    type_index = type_index,
    array = array,
    index = index,
);

const _: () = {
    assert!(fits(
        size_of::<CNode>() + size_of::<NodeDesc>() + FIXED_REGIONS * PAD,
        FCAN_RAM_FIXED
    ));
    // A type: its descriptor (its topic, parameter and service tables and the blocks
    // are read in place: no RAM; a block keeps its changed-parameter mask).
    assert!(fits(size_of::<TypeDesc>(), FCAN_RAM_PER_TYPE));
    assert!(fits(size_of::<u32>(), FCAN_RAM_PER_BLOCK));
    assert!(fits(size_of::<ArrayDesc>(), FCAN_RAM_PER_ARRAY));
    assert!(fits(size_of::<TopicState>(), FCAN_RAM_PER_TOPIC_SLOT));
    assert!(fits(size_of::<PlanFrame>() + 1, FCAN_RAM_PER_FRAME));
    assert!(fits(size_of::<PlanEntry>(), FCAN_RAM_PER_ENTRY));
    assert!(fits(size_of::<SvcSlot>(), FCAN_RAM_PER_SERVICE_SLOT));
    // Everything placed in the area fits its 8-byte alignment.
    assert!(align_of::<CNode>() <= RAM_ALIGN);
    assert!(align_of::<NodeDesc>() <= RAM_ALIGN);
    assert!(align_of::<TypeDesc>() <= RAM_ALIGN);
    assert!(align_of::<SvcSlot>() <= RAM_ALIGN);
};
