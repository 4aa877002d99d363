//! The element types of the node's tables (`crate::Storage` holds arrays of them): the
//! plan's frames and copy entries, the per-topic state, the service slots. Only their
//! layout and unused values live here; what they mean is in `plan`, `topics` and
//! `services`, so the storage and the logic that uses it do not depend on each other.

use fcan_core::group::GroupProgress;
use fcan_core::timing::{At, Us};

/// One copy entry as it came on the wire, checked at FRAME_DEFINE: 6 bytes, where a
/// form resolved to arena offsets took 16 (96 entries: 576 B instead of 1,536 B on the
/// eight-motor node). The offsets are looked up in the node's descriptor when the entry
/// is used (`PlanEntry::place`: two indexed table reads). Opaque outside the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlanEntry {
    /// Offset within the topic value.
    pub(crate) src: u16,
    /// The topic's state slot (`BlockDesc::topic_slot` + topic index): at most 256
    /// slots per node, which `Node::configure` checks.
    pub(crate) slot: u8,
    /// The topic's block; the topic's index in it is `slot - topic_slot`.
    pub(crate) block: u8,
    /// Bytes copied.
    pub(crate) len: u8,
    /// Offset within the frame payload.
    pub(crate) dst: u8,
}

impl PlanEntry {
    /// The unused value, as `Buffers::new` fills its tables: for a [`crate::codegen::Storage`]
    /// of your own (a PC node sizing its tables at run time).
    pub const EMPTY: PlanEntry = PlanEntry {
        src: 0,
        slot: 0,
        block: 0,
        len: 0,
        dst: 0,
    };
}

/// One data frame of the plan. Opaque outside the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlanFrame {
    pub(crate) std_id: u16,
    pub(crate) s2m: bool,
    pub(crate) sequenced: bool,
    /// Byte 0 is a presence mask (`fcan_core::presence`).
    pub(crate) masked: bool,
    pub(crate) len: u8,
    pub(crate) group_parts: u8,
    pub(crate) group_index: u8,
    /// s2m: the period; zero = on commit.
    pub(crate) period: Us,
    pub(crate) first_entry: u16,
    /// At most 255 (FRAME_DEFINE counts entries in a byte); a `u8` keeps the frame at
    /// 20 bytes of RAM.
    pub(crate) entry_count: u8,
    /// s2m periodic: when the frame (group) is next due.
    pub(crate) next_due: At,
    /// s2m on-commit: the presence bits (`fcan_core::presence`) of the topics published
    /// since the frame was last sent; non-zero = due. An unmasked frame has one topic,
    /// bit 0.
    pub(crate) pending: u8,
}

impl PlanFrame {
    /// The unused value, as `Buffers::new` fills its tables: for a [`crate::codegen::Storage`]
    /// of your own (a PC node sizing its tables at run time).
    pub const EMPTY: PlanFrame = PlanFrame {
        std_id: 0,
        s2m: false,
        sequenced: false,
        masked: false,
        len: 0,
        // 0 reads as 1 (`group_parts.max(1)`); zero keeps an unused plan all-zero.
        group_parts: 0,
        group_index: 0,
        period: Us(0),
        first_entry: 0,
        entry_count: 0,
        next_due: At(0),
        pending: 0,
    };

    /// The range of this frame's entries in the entry table.
    pub(crate) fn entries(&self) -> core::ops::Range<usize> {
        let start = self.first_entry as usize;
        start..start.saturating_add(self.entry_count as usize)
    }
}

/// Per-topic state: the generation counter and age of m2s values, the "published but not
/// sent" flag of s2m values, and the progress of a multi-frame group being staged.
/// Opaque outside the runtime.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TopicState {
    /// Bumped once per complete update (m2s: a frame or a whole group applied; s2m: a
    /// publish). 0 = never written.
    pub(crate) generation: u32,
    /// When the current value arrived (m2s) or was published (s2m).
    pub(crate) received_at: At,
    /// s2m: published and not sent yet (held until START).
    pub(crate) unsent: bool,
    /// m2s groups: the assembly of a publication in several frames (three bytes, so 12
    /// bytes a topic; all-zero when idle).
    pub(crate) group: GroupProgress,
}

impl TopicState {
    /// The unused value, as `Buffers::new` fills its tables: for a [`crate::codegen::Storage`]
    /// of your own (a PC node sizing its tables at run time).
    pub const EMPTY: TopicState = TopicState {
        generation: 0,
        received_at: At(0),
        unsent: false,
        group: GroupProgress::IDLE,
    };

    /// No group is being staged any more.
    pub(crate) fn stop_staging(&mut self) {
        self.group.stop();
    }
}

/// Where a slot is in a call's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) enum SlotState {
    /// Unused.
    Free,
    /// Segments of a request are arriving.
    Receiving,
    /// The request is complete; the handler runs at the next poll.
    Ready,
    /// The handler answered ACCEPTED; waiting for `complete`.
    Deferred,
    /// `complete` delivered the response; it goes out at the next poll.
    Completed,
    /// The OK response is queued and being sent from the slot.
    Responding,
    /// A deferred call was not completed in time; EXPIRED goes out at the next poll.
    Expired,
}

/// One service slot. Opaque outside the runtime.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SvcSlot {
    pub(crate) state: SlotState,
    pub(crate) transfer: u8,
    pub(crate) block: u8,
    pub(crate) service: u8,
    pub(crate) next_seg: u8,
    pub(crate) seg_len: u8,
    /// Body bytes received so far (padding included), saturating.
    pub(crate) received: u16,
    /// Receiving: last segment; Deferred: acceptance or the master's last repeat.
    pub(crate) last: At,
    /// Calls this slot has taken (wrapping): part of the deferred token.
    pub(crate) generation: u32,
    pub(crate) req_size: u16,
    pub(crate) resp_size: u16,
    /// Length of the response body written after the request.
    pub(crate) resp_len: u16,
}

impl SvcSlot {
    /// The unused value, as `Buffers::new` fills its tables: for a [`crate::codegen::Storage`]
    /// of your own (a PC node sizing its tables at run time).
    pub const EMPTY: SvcSlot = SvcSlot {
        state: SlotState::Free,
        transfer: 0,
        block: 0,
        service: 0,
        next_seg: 0,
        seg_len: 0,
        received: 0,
        last: At(0),
        req_size: 0,
        resp_size: 0,
        resp_len: 0,
        generation: 0,
    };
}
