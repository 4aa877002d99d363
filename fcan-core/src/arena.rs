//! The node runtime's RAM layout for a schema: where each block's topic values, staging
//! bytes and parameter values sit in the runtime's arenas, and how large each arena and
//! the service slot buffers are.
//!
//! Every size comes from [`crate::numbering`]; this module only adds them up. Code
//! generation turns an [`Arena`] into the static `NodeDesc` tables of a firmware, and the
//! PC's fake node (`fcan-fake`) builds the same tables at run time from a blob: both call
//! [`Arena::of`], so a fake node lays out its RAM exactly as the firmware would.

use alloc::vec;
use alloc::vec::Vec;

use crate::frame::Mtu;
use crate::ir::Schema;
use crate::msg::DataDirection;
use crate::numbering::{topic_frames, Numbering};

/// A topic needs no staging area: its staging offset in [`TypeArena::topics`].
pub const NO_STAGING: usize = u16::MAX as usize;

/// The runtime's arena layout for a schema: per type the offsets of its topics, staging
/// areas and params within one block's areas; per block the offsets of its areas in the
/// node's arenas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arena {
    /// Per type, in [`Schema::types`] order.
    pub types: Vec<TypeArena>,
    /// Per block, by block number.
    pub blocks: Vec<BlockArena>,
    /// Topic arena bytes.
    pub topic_bytes: usize,
    /// Staging arena bytes.
    pub stage_bytes: usize,
    /// Param arena bytes.
    pub param_bytes: usize,
    /// Topic state slots.
    pub topic_slots: usize,
    /// Largest service request (packed, no header).
    pub max_request: usize,
    /// Largest service response (packed, no header).
    pub max_response: usize,
    /// Bytes of one service slot buffer: at least the schema's `service_buffer`, a
    /// Classical frame, the largest request or response with its header, and the largest
    /// request + response of one service (a slot keeps both).
    pub svc_buf: usize,
}

/// One type's area layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeArena {
    /// Per topic: (size, offset in the topic area, offset in the staging area or
    /// [`NO_STAGING`]).
    pub topics: Vec<(usize, usize, usize)>,
    /// Per param: (size, offset in the param area).
    pub params: Vec<(usize, usize)>,
    /// Per service: (request size, response size).
    pub services: Vec<(usize, usize)>,
    /// Topic area bytes.
    pub topic_bytes: usize,
    /// Staging area bytes.
    pub stage_bytes: usize,
    /// Param area bytes.
    pub param_bytes: usize,
}

/// One block's arena offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockArena {
    /// Type index.
    pub type_index: usize,
    /// Array index.
    pub array: usize,
    /// Index in the array.
    pub index: u32,
    /// Index among all blocks of its type (what generated handlers receive as
    /// `instance`).
    pub ordinal: u32,
    /// Topic arena offset.
    pub topic_offset: usize,
    /// Staging arena offset.
    pub stage_offset: usize,
    /// Param arena offset.
    pub param_offset: usize,
    /// First topic slot.
    pub topic_slot: usize,
}

/// Whether an m2s topic of this size needs a staging area: it spans more than one
/// Classical CAN frame, so its parts are collected before the value is replaced whole.
pub fn needs_staging(dir: DataDirection, size: usize) -> bool {
    dir == DataDirection::M2s && topic_frames(Mtu::Classic, size) > 1
}

impl Arena {
    /// The layout of `schema`, numbered as `numbering` (`Numbering::of(schema)`).
    ///
    /// ```
    /// use fcan_core::arena::Arena;
    /// use fcan_core::ir::*;
    /// use fcan_core::numbering::Numbering;
    /// use fcan_core::types::ScalarType;
    /// let f = |n: &str| Field { name: n.into(), ty: ScalarType::F32, len: None };
    /// let schema = Schema {
    ///     protocol: 2, node: "n".into(), allocation: "static".into(), limits: Limits::default(),
    ///     types: vec![BlockType { name: "T".into(), params: vec![], services: vec![], topics: vec![
    ///         Topic { name: "cmd".into(), dir: fcan_core::msg::DataDirection::M2s, period_us: 0,
    ///                 fields: vec![f("a"), f("b"), f("c")], ros: None },
    ///     ]}],
    ///     instances: vec![InstanceArray { ty: "T".into(), max_count: 2, ns: "t{i}".into() }],
    /// };
    /// let a = Arena::of(&schema, &Numbering::of(&schema).unwrap());
    /// assert_eq!(a.topic_bytes, 24);             // 12 bytes a block
    /// assert_eq!(a.stage_bytes, 24);             // more than one Classical frame: staged
    /// assert_eq!(a.blocks[1].topic_offset, 12);
    /// ```
    pub fn of(schema: &Schema, numbering: &Numbering) -> Arena {
        let mut types = Vec::new();
        let (mut max_request, mut max_response, mut max_pair) = (0, 0, 0);
        for (t, l) in schema.types.iter().zip(&numbering.layouts) {
            let (mut off, mut stage) = (0, 0);
            let mut topics = Vec::new();
            for (tp, ml) in t.topics.iter().zip(&l.topics) {
                let st = if needs_staging(tp.dir, ml.size) {
                    let s = stage;
                    stage += ml.size;
                    s
                } else {
                    NO_STAGING
                };
                topics.push((ml.size, off, st));
                off += ml.size;
            }
            let mut poff = 0;
            let params = l
                .param_sizes
                .iter()
                .map(|&s| {
                    let p = (s, poff);
                    poff += s;
                    p
                })
                .collect();
            let services: Vec<(usize, usize)> = l
                .requests
                .iter()
                .zip(&l.responses)
                .map(|(a, b)| (a.size, b.size))
                .collect();
            for &(a, b) in &services {
                max_request = max_request.max(a);
                max_response = max_response.max(b);
                max_pair = max_pair.max(a + b);
            }
            types.push(TypeArena {
                topics,
                params,
                services,
                topic_bytes: off,
                stage_bytes: stage,
                param_bytes: poff,
            });
        }
        let mut blocks = Vec::new();
        let (mut to, mut so, mut po, mut slot) = (0, 0, 0, 0);
        let mut ordinals = vec![0u32; schema.types.len()];
        for b in &numbering.blocks {
            let (Some(tt), Some(ordinal)) =
                (types.get(b.type_index), ordinals.get_mut(b.type_index))
            else {
                continue;
            };
            blocks.push(BlockArena {
                type_index: b.type_index,
                array: b.array,
                index: b.index,
                ordinal: *ordinal,
                topic_offset: to,
                stage_offset: so,
                param_offset: po,
                topic_slot: slot,
            });
            *ordinal += 1;
            to += tt.topic_bytes;
            so += tt.stage_bytes;
            po += tt.param_bytes;
            slot += tt.topics.len();
        }
        let svc_buf = crate::limits::service_slot_bytes(
            schema.limits.service_buffer as usize,
            max_request,
            max_response,
            max_pair,
        );
        Arena {
            types,
            blocks,
            topic_bytes: to,
            stage_bytes: so,
            param_bytes: po,
            topic_slots: slot,
            max_request,
            max_response,
            svc_buf,
        }
    }

    /// The first arena too large for the runtime's tables, which address arenas with
    /// `u16` offsets: its name (`topic`, `staging`, `param`, `topic-state`) and size.
    pub fn too_large(&self) -> Option<(&'static str, usize)> {
        [
            ("topic", self.topic_bytes),
            ("staging", self.stage_bytes),
            ("param", self.param_bytes),
            ("topic-state", self.topic_slots),
        ]
        .into_iter()
        .find(|&(_, total)| total > u16::MAX as usize)
    }
}
