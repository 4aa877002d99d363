//! All of a node's RAM, sized at compile time.
//!
//! [`Buffers`] owns fixed arrays whose lengths are const generics the generated code
//! computes from the schema. The engine never sees those constants: it borrows the
//! arrays as slices through the [`Storage`] trait, so only this thin layer is
//! monomorphised over the nine sizes and the engine is compiled once per node type.

use crate::desc::NodeDesc;
use crate::error::ConfigError;
use crate::tables::{PlanEntry, PlanFrame, SvcSlot, TopicState};

/// Every buffer of the node, borrowed mutably. Produced by [`Storage::parts`].
///
/// The element types are opaque: only the runtime reads and writes them.
pub struct Parts<'a> {
    /// Live topic values, all blocks back to back ([`crate::codegen::BlockDesc::topic_offset`]).
    pub topic: &'a mut [u8],
    /// Staging bytes for multi-frame m2s topics ([`crate::codegen::BlockDesc::stage_offset`]).
    pub stage: &'a mut [u8],
    /// Parameter values ([`crate::codegen::BlockDesc::param_offset`]).
    pub params: &'a mut [u8],
    /// One changed mask per block (bit `i`: param `i` of the block was written since the
    /// last commit).
    pub param_changed: &'a mut [u32],
    /// Per-topic state ([`crate::codegen::BlockDesc::topic_slot`]).
    pub topics: &'a mut [TopicState],
    /// The frame plan.
    pub frames: &'a mut [PlanFrame],
    /// Indices of the m2s plan frames sorted by standard ID (built at START).
    pub m2s_index: &'a mut [u8],
    /// The copy entries of every frame, back to back in plan order.
    pub entries: &'a mut [PlanEntry],
    /// Service slots.
    pub svc: &'a mut [SvcSlot],
    /// The service slots' buffers, `svc_buf_len` bytes each, back to back.
    pub svc_buf: &'a mut [u8],
    /// Bytes of one service slot buffer.
    pub svc_buf_len: usize,
}

impl Parts<'_> {
    /// The same buffers for a shorter borrow.
    pub(crate) fn reborrow(&mut self) -> Parts<'_> {
        Parts {
            topic: &mut *self.topic,
            stage: &mut *self.stage,
            params: &mut *self.params,
            param_changed: &mut *self.param_changed,
            topics: &mut *self.topics,
            frames: &mut *self.frames,
            m2s_index: &mut *self.m2s_index,
            entries: &mut *self.entries,
            svc: &mut *self.svc,
            svc_buf: &mut *self.svc_buf,
            svc_buf_len: self.svc_buf_len,
        }
    }
}

/// Every buffer of the node, borrowed shared. Produced by [`Storage::parts_ref`].
pub struct PartsRef<'a> {
    /// Live topic values.
    pub topic: &'a [u8],
    /// Parameter values.
    pub params: &'a [u8],
    /// Per-topic state.
    pub topics: &'a [TopicState],
    /// The frame plan.
    pub frames: &'a [PlanFrame],
    /// Service slots.
    pub svc: &'a [SvcSlot],
}

/// Where a [`crate::Node`] keeps its RAM. Implemented by [`Buffers`] (and by `&mut`
/// of any storage, so the buffers may live in a `static`).
pub trait Storage {
    /// Mutable views of every buffer.
    fn parts(&mut self) -> Parts<'_>;
    /// Shared views of the buffers the read accessors need.
    fn parts_ref(&self) -> PartsRef<'_>;
}

impl<S: Storage + ?Sized> Storage for &mut S {
    fn parts(&mut self) -> Parts<'_> {
        (**self).parts()
    }
    fn parts_ref(&self) -> PartsRef<'_> {
        (**self).parts_ref()
    }
}

/// All the node's RAM: topic arena, staging arena, param arena, per-topic state, frame
/// plan, copy entries and service slots, each `SVC_BUF` bytes.
///
/// Generated code names the sizes from the schema; [`crate::Node::new`] checks they are
/// large enough for the [`crate::codegen::NodeDesc`] and returns a [`crate::ConfigError`]
/// otherwise.
///
/// | const | at least |
/// |---|---|
/// | `TOPIC_BYTES` | [`crate::codegen::NodeDesc::topic_bytes`] |
/// | `STAGE_BYTES` | [`crate::codegen::NodeDesc::stage_bytes`] |
/// | `PARAM_BYTES` | [`crate::codegen::NodeDesc::param_bytes`] |
/// | `BLOCKS` | the number of blocks, `NodeDesc::blocks.len()` (one 32-bit changed-parameter mask each) |
/// | `TOPIC_SLOTS` | [`crate::codegen::NodeDesc::topic_slots`] |
/// | `FRAMES` | `limits.max_frames` |
/// | `ENTRIES` | `limits.max_copy_entries` |
/// | `SVC_SLOTS` | `limits.service_reassembly` (at least 1 when the node has services) |
/// | `SVC_BUF` | [`crate::codegen::NodeDesc::required_service_buffer`]: the largest request + response of one service |
///
/// ```
/// use fcan_runtime_nostd::codegen::Buffers;
/// // Small enough for a stack in a doc test; firmware puts it in a `static`.
/// let b: Buffers<16, 0, 8, 1, 2, 4, 8, 1, 16> = Buffers::new();
/// # let _ = b;
/// ```
pub struct Buffers<
    const TOPIC_BYTES: usize,
    const STAGE_BYTES: usize,
    const PARAM_BYTES: usize,
    const BLOCKS: usize,
    const TOPIC_SLOTS: usize,
    const FRAMES: usize,
    const ENTRIES: usize,
    const SVC_SLOTS: usize,
    const SVC_BUF: usize,
> {
    topic: [u8; TOPIC_BYTES],
    stage: [u8; STAGE_BYTES],
    params: [u8; PARAM_BYTES],
    param_changed: [u32; BLOCKS],
    topics: [TopicState; TOPIC_SLOTS],
    frames: [PlanFrame; FRAMES],
    m2s_index: [u8; FRAMES],
    entries: [PlanEntry; ENTRIES],
    svc: [SvcSlot; SVC_SLOTS],
    svc_buf: [[u8; SVC_BUF]; SVC_SLOTS],
}

impl<
        const TOPIC_BYTES: usize,
        const STAGE_BYTES: usize,
        const PARAM_BYTES: usize,
        const BLOCKS: usize,
        const TOPIC_SLOTS: usize,
        const FRAMES: usize,
        const ENTRIES: usize,
        const SVC_SLOTS: usize,
        const SVC_BUF: usize,
    >
    Buffers<
        TOPIC_BYTES,
        STAGE_BYTES,
        PARAM_BYTES,
        BLOCKS,
        TOPIC_SLOTS,
        FRAMES,
        ENTRIES,
        SVC_SLOTS,
        SVC_BUF,
    >
{
    /// Zeroed buffers; `const` so they can initialise a `static`.
    pub const fn new() -> Self {
        Buffers {
            topic: [0; TOPIC_BYTES],
            stage: [0; STAGE_BYTES],
            params: [0; PARAM_BYTES],
            param_changed: [0; BLOCKS],
            topics: [TopicState::EMPTY; TOPIC_SLOTS],
            frames: [PlanFrame::EMPTY; FRAMES],
            m2s_index: [0; FRAMES],
            entries: [PlanEntry::EMPTY; ENTRIES],
            svc: [SvcSlot::EMPTY; SVC_SLOTS],
            svc_buf: [[0; SVC_BUF]; SVC_SLOTS],
        }
    }
}

impl<
        const TOPIC_BYTES: usize,
        const STAGE_BYTES: usize,
        const PARAM_BYTES: usize,
        const BLOCKS: usize,
        const TOPIC_SLOTS: usize,
        const FRAMES: usize,
        const ENTRIES: usize,
        const SVC_SLOTS: usize,
        const SVC_BUF: usize,
    > Default
    for Buffers<
        TOPIC_BYTES,
        STAGE_BYTES,
        PARAM_BYTES,
        BLOCKS,
        TOPIC_SLOTS,
        FRAMES,
        ENTRIES,
        SVC_SLOTS,
        SVC_BUF,
    >
{
    fn default() -> Self {
        Self::new()
    }
}

impl<
        const TOPIC_BYTES: usize,
        const STAGE_BYTES: usize,
        const PARAM_BYTES: usize,
        const BLOCKS: usize,
        const TOPIC_SLOTS: usize,
        const FRAMES: usize,
        const ENTRIES: usize,
        const SVC_SLOTS: usize,
        const SVC_BUF: usize,
    > Storage
    for Buffers<
        TOPIC_BYTES,
        STAGE_BYTES,
        PARAM_BYTES,
        BLOCKS,
        TOPIC_SLOTS,
        FRAMES,
        ENTRIES,
        SVC_SLOTS,
        SVC_BUF,
    >
{
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
            svc_buf: self.svc_buf.as_flattened_mut(),
            svc_buf_len: SVC_BUF,
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

/// Clears every buffer to what `Buffers::new` holds (parameters are written next).
pub(crate) fn wipe(p: &mut Parts<'_>) {
    p.topic.fill(0);
    p.stage.fill(0);
    p.params.fill(0);
    p.param_changed.fill(0);
    p.topics.fill(TopicState::EMPTY);
    p.frames.fill(PlanFrame::EMPTY);
    p.m2s_index.fill(0);
    p.entries.fill(PlanEntry::EMPTY);
    p.svc.fill(SvcSlot::EMPTY);
    p.svc_buf.fill(0);
}

/// Checks the buffers are at least what the descriptor needs.
pub(crate) fn check_sizes(desc: &NodeDesc, p: &Parts<'_>) -> Result<(), ConfigError> {
    if p.topic.len() < desc.topic_bytes {
        return Err(ConfigError::TopicBytes);
    }
    if p.stage.len() < desc.stage_bytes {
        return Err(ConfigError::StageBytes);
    }
    if p.params.len() < desc.param_bytes {
        return Err(ConfigError::ParamBytes);
    }
    if p.param_changed.len() < desc.blocks.len() {
        return Err(ConfigError::Blocks);
    }
    if p.topics.len() < desc.topic_slots {
        return Err(ConfigError::TopicSlots);
    }
    if p.frames.len() < desc.limits.max_frames as usize
        || p.m2s_index.len() < p.frames.len().min(desc.limits.max_frames as usize)
    {
        return Err(ConfigError::Frames);
    }
    if p.entries.len() < desc.limits.max_copy_entries as usize {
        return Err(ConfigError::Entries);
    }
    if desc.has_services() {
        if p.svc.len() < (desc.limits.service_reassembly as usize).max(1) {
            return Err(ConfigError::ServiceSlots);
        }
        if p.svc_buf_len < desc.required_service_buffer()
            || p.svc_buf.len() < p.svc_buf_len.saturating_mul(p.svc.len())
        {
            return Err(ConfigError::ServiceBuffer);
        }
    }
    Ok(())
}
