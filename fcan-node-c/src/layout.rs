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

/// Regions the node's area is cut into besides the per-type tables (node, descriptor,
/// blocks, arrays, type table, ten buffers), each preceded by at most `RAM_ALIGN - 1`
/// bytes of padding.
const FIXED_REGIONS: usize = 15;
const PAD: usize = RAM_ALIGN - 1;

const fn fits(size: usize, bound: u32) -> bool {
    size <= bound as usize
}

const _: () = {
    assert!(fits(
        size_of::<CNode>() + size_of::<NodeDesc>() + FIXED_REGIONS * PAD,
        FCAN_RAM_FIXED
    ));
    // A type: its descriptor and the padding before its topic, parameter and service
    // tables.
    assert!(fits(size_of::<TypeDesc>() + 3 * PAD, FCAN_RAM_PER_TYPE));
    assert!(fits(size_of::<TopicDesc>(), FCAN_RAM_PER_TOPIC));
    assert!(fits(size_of::<ParamDesc>(), FCAN_RAM_PER_PARAM));
    assert!(fits(size_of::<ServiceDesc>(), FCAN_RAM_PER_SERVICE));
    assert!(fits(
        size_of::<BlockDesc>() + size_of::<u32>(),
        FCAN_RAM_PER_BLOCK
    ));
    assert!(fits(size_of::<ArrayDesc>(), FCAN_RAM_PER_ARRAY));
    assert!(fits(size_of::<TopicState>(), FCAN_RAM_PER_TOPIC_SLOT));
    assert!(fits(size_of::<PlanFrame>() + 1, FCAN_RAM_PER_FRAME));
    assert!(fits(size_of::<PlanEntry>(), FCAN_RAM_PER_ENTRY));
    assert!(fits(size_of::<SvcSlot>(), FCAN_RAM_PER_SERVICE_SLOT));
    // Everything placed in the area fits its 8-byte alignment.
    assert!(align_of::<CNode>() <= RAM_ALIGN);
    assert!(align_of::<NodeDesc>() <= RAM_ALIGN);
    assert!(align_of::<ParamDesc>() <= RAM_ALIGN);
    assert!(align_of::<TypeDesc>() <= RAM_ALIGN);
    assert!(align_of::<SvcSlot>() <= RAM_ALIGN);
};
