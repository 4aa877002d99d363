//! The runtime's RAM on the heap: [`fcan_runtime_nostd::codegen::Storage`] over `Vec`s sized at
//! run time, where a firmware has `Buffers` sized by const generics. Sized exactly as the
//! generated `Buffers` type would be for the schema, and checked by the runtime
//! ([`fcan_runtime_nostd::Node::configure`] refuses buffers smaller than its tables).

use fcan_core::arena::Arena;
use fcan_runtime_nostd::codegen::{
    NodeDesc, Parts, PartsRef, PlanEntry, PlanFrame, Storage, SvcSlot, TopicState,
};

/// Every buffer of one fake node.
#[derive(Debug)]
pub struct VecStorage {
    topic: Vec<u8>,
    stage: Vec<u8>,
    params: Vec<u8>,
    param_changed: Vec<u32>,
    topics: Vec<TopicState>,
    frames: Vec<PlanFrame>,
    m2s_index: Vec<u8>,
    entries: Vec<PlanEntry>,
    svc: Vec<SvcSlot>,
    svc_buf: Vec<u8>,
    svc_buf_len: usize,
}

impl VecStorage {
    /// Buffers for `desc`, sized as the generated `Buffers` type for the schema laid out
    /// by `arena`: the arenas, one changed mask per block, `limits.max_frames` plan
    /// frames, `limits.max_copy_entries` entries, `limits.service_reassembly` service
    /// slots (at least one) of `arena.svc_buf` bytes each.
    pub fn new(desc: &NodeDesc, arena: &Arena) -> VecStorage {
        let l = &desc.limits;
        let slots = (l.service_reassembly as usize).max(1);
        VecStorage {
            topic: vec![0; desc.topic_bytes],
            stage: vec![0; desc.stage_bytes],
            params: vec![0; desc.param_bytes],
            param_changed: vec![0; desc.blocks.len()],
            topics: vec![TopicState::EMPTY; desc.topic_slots],
            frames: vec![PlanFrame::EMPTY; l.max_frames as usize],
            m2s_index: vec![0; l.max_frames as usize],
            entries: vec![PlanEntry::EMPTY; l.max_copy_entries as usize],
            svc: vec![SvcSlot::EMPTY; slots],
            svc_buf: vec![0; slots * arena.svc_buf],
            svc_buf_len: arena.svc_buf,
        }
    }
}

impl Storage for VecStorage {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            topic: &mut self.topic,
            stage: &mut self.stage,
            params: &mut self.params,
            param_changed: &mut self.param_changed,
            topics: &mut self.topics,
            frames: &mut self.frames,
            m2s_index: &mut self.m2s_index,
            entries: &mut self.entries,
            svc: &mut self.svc,
            svc_buf: &mut self.svc_buf,
            svc_buf_len: self.svc_buf_len,
        }
    }

    fn parts_ref(&self) -> PartsRef<'_> {
        PartsRef {
            topic: &self.topic,
            params: &self.params,
            topics: &self.topics,
            frames: &self.frames,
            svc: &self.svc,
        }
    }
}
