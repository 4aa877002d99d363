//! The C ABI's data types: what `fcan.h` declares. Fixed-width integers and pointers
//! only; every struct is `#[repr(C)]` and names its padding, so the C compiler and
//! rustc agree on every offset on every target (checked in `layout` tests).
//!
//! Names are the C names (`fcan_frame_t`, …): cbindgen copies them into the header
//! unchanged, so the Rust source and the header read alike.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};

use fcan_runtime_nostd::fcan_core::frame::{CanId, Frame};

/// The ABI version [`fcan_node_desc_t::abi`] must carry: generated descriptors name the
/// version of `fcan.h` they were generated against, and `fcan_node_init` refuses another
/// (a library and generated code from different releases never meet silently).
pub const FCAN_ABI_VERSION: u32 = 1;

/// `fcan_frame_t::flags`: a 29-bit extended identifier (otherwise 11-bit standard).
pub const FCAN_FRAME_EXTENDED: u8 = 1;
/// `fcan_frame_t::flags`: a CAN FD frame (otherwise Classical CAN).
pub const FCAN_FRAME_FD: u8 = 2;
/// `fcan_frame_t::flags`: CAN FD with bit-rate switching (only with `FCAN_FRAME_FD`).
pub const FCAN_FRAME_BRS: u8 = 4;

/// One CAN or CAN FD frame, as the node takes and gives it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fcan_frame_t {
    /// The identifier (11 or 29 bits, see `flags`).
    pub id: u32,
    /// Payload bytes: 0..=8 for Classical CAN, a legal FD length (0..=8, 12, 16, 20, 24,
    /// 32, 48, 64) for CAN FD.
    pub len: u8,
    /// `FCAN_FRAME_EXTENDED | FCAN_FRAME_FD | FCAN_FRAME_BRS`.
    pub flags: u8,
    /// Zero.
    pub reserved: [u8; 2],
    /// The payload; bytes past `len` are not read.
    pub data: [u8; 64],
}

impl fcan_frame_t {
    /// The frame the runtime takes; `None` for one that is not legal for its kind (an
    /// identifier too wide, a length no frame of that kind has). BRS is read only on an
    /// FD frame.
    pub fn to_frame(&self) -> Option<Frame> {
        let id = if self.flags & FCAN_FRAME_EXTENDED != 0 {
            CanId::extended(self.id)?
        } else {
            CanId::standard(u16::try_from(self.id).ok()?)?
        };
        let data = self.data.get(..self.len as usize)?;
        if self.flags & FCAN_FRAME_FD == 0 {
            return Frame::classic(id, data).ok();
        }
        let frame = Frame::fd(id, data).ok()?;
        Some(if self.flags & FCAN_FRAME_BRS != 0 {
            frame
        } else {
            frame.without_brs()
        })
    }

    /// The C frame for a frame of the runtime.
    pub fn from_frame(f: &Frame) -> fcan_frame_t {
        let (id, mut flags) = match f.id() {
            CanId::Standard(id) => (id as u32, 0),
            CanId::Extended(id) => (id, FCAN_FRAME_EXTENDED),
        };
        if f.is_fd() {
            flags |= FCAN_FRAME_FD;
            if f.is_brs() {
                flags |= FCAN_FRAME_BRS;
            }
        }
        let mut out = fcan_frame_t {
            id,
            len: f.len() as u8,
            flags,
            reserved: [0; 2],
            data: [0; 64],
        };
        let n = f.data().len().min(out.data.len());
        if let (Some(dst), Some(src)) = (out.data.get_mut(..n), f.data().get(..n)) {
            dst.copy_from_slice(src);
        }
        out
    }
}

/// `fcan_topic_desc_t::dir`: master to node (a command the node takes).
pub const FCAN_DIR_M2S: u8 = 0;
/// `fcan_topic_desc_t::dir`: node to master (feedback the node publishes).
pub const FCAN_DIR_S2M: u8 = 1;

/// One topic of a block type (generated, in flash).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_topic_desc_t {
    /// s2m: period in µs, 0 = sent on publish. m2s: 0.
    pub period_us: u32,
    /// Packed size in bytes.
    pub size: u16,
    /// Offset within the block's topic area.
    pub offset: u16,
    /// m2s only: offset within the block's staging area, 0xFFFF when the topic fits one
    /// Classical frame.
    pub stage_offset: u16,
    /// `FCAN_DIR_M2S` or `FCAN_DIR_S2M`.
    pub dir: u8,
    /// Zero.
    pub reserved: u8,
}

/// `fcan_param_desc_t::flags`: `min_bits` holds a lower bound.
pub const FCAN_PARAM_HAS_MIN: u8 = 1;
/// `fcan_param_desc_t::flags`: `max_bits` holds an upper bound.
pub const FCAN_PARAM_HAS_MAX: u8 = 2;

/// The wire codes of the scalar types (`fcan_param_desc_t::scalar_type`), as in the schema blob.
pub const FCAN_TYPE_BOOL: u8 = 1;
/// `u8`.
pub const FCAN_TYPE_U8: u8 = 2;
/// `i8`.
pub const FCAN_TYPE_I8: u8 = 3;
/// `u16`.
pub const FCAN_TYPE_U16: u8 = 4;
/// `i16`.
pub const FCAN_TYPE_I16: u8 = 5;
/// `u32`.
pub const FCAN_TYPE_U32: u8 = 6;
/// `i32`.
pub const FCAN_TYPE_I32: u8 = 7;
/// `u64`.
pub const FCAN_TYPE_U64: u8 = 8;
/// `i64`.
pub const FCAN_TYPE_I64: u8 = 9;
/// `f32`.
pub const FCAN_TYPE_F32: u8 = 10;
/// `f64`.
pub const FCAN_TYPE_F64: u8 = 11;

/// One parameter of a block type (generated, in flash). A value is held as its packed
/// little-endian bytes in the low bytes of a `uint64_t` (`1.5f` is `0x3FC00000`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_param_desc_t {
    /// The value at boot (every element of an array).
    pub default_bits: u64,
    /// Inclusive lower bound when `flags & FCAN_PARAM_HAS_MIN`.
    pub min_bits: u64,
    /// Inclusive upper bound when `flags & FCAN_PARAM_HAS_MAX`.
    pub max_bits: u64,
    /// Element count (1 for a scalar).
    pub count: u16,
    /// Offset within the block's parameter area.
    pub offset: u16,
    /// `FCAN_TYPE_*`.
    pub scalar_type: u8,
    /// `FCAN_PARAM_HAS_MIN | FCAN_PARAM_HAS_MAX`.
    pub flags: u8,
    /// Zero.
    pub reserved: [u8; 2],
}

/// One service of a block type (generated, in flash).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_service_desc_t {
    /// Packed request size.
    pub request_size: u16,
    /// Packed response size.
    pub response_size: u16,
}

/// One block type (generated, in flash).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_type_desc_t {
    /// The type's name (NUL-terminated), for a debugger; the runtime does not read it.
    pub name: *const c_char,
    /// `n_topics` topics, in schema order.
    pub topics: *const fcan_topic_desc_t,
    /// `n_params` parameters, in schema order (the index is the changed-mask bit).
    pub params: *const fcan_param_desc_t,
    /// `n_services` services, in schema order.
    pub services: *const fcan_service_desc_t,
    /// Topics of the type.
    pub n_topics: u16,
    /// Parameters of the type (at most 32).
    pub n_params: u16,
    /// Services of the type.
    pub n_services: u16,
    /// Bytes of topic area one instance needs.
    pub topic_bytes: u16,
    /// Bytes of staging area one instance needs.
    pub stage_bytes: u16,
    /// Bytes of parameter area one instance needs.
    pub param_bytes: u16,
}

/// One block: an instance of an instance array (generated, in flash).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_block_desc_t {
    /// Offset of the block's topic area in the node's topic arena.
    pub topic_offset: u16,
    /// Offset of the block's staging area.
    pub stage_offset: u16,
    /// Offset of the block's parameter area.
    pub param_offset: u16,
    /// The block's first per-topic state entry.
    pub topic_slot: u16,
    /// Index into `fcan_node_desc_t::types`.
    pub type_index: u8,
    /// Index of its instance array.
    pub array: u8,
    /// Index within the array.
    pub index: u8,
    /// Zero.
    pub reserved: u8,
}

/// One instance array (generated, in flash).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_array_desc_t {
    /// Index into `fcan_node_desc_t::types`.
    pub type_index: u8,
    /// The schema's `max_count`.
    pub max_count: u8,
    /// Block number of instance 0.
    pub first_block: u8,
    /// Zero.
    pub reserved: u8,
}

/// Everything the runtime knows about a node's schema: `fcan-codegen c` emits one as a
/// `const` (flash) in the node's `.c` file, with the tables it points to.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_node_desc_t {
    /// `FCAN_ABI_VERSION` of the header the tables were generated against.
    pub abi: u32,
    /// Bytes of the schema blob.
    pub blob_len: u32,
    /// The schema blob (protobuf `FileDescriptorSet`) the node serves to the master.
    pub blob: *const u8,
    /// The first 8 bytes of the blob's SHA-256, announced.
    pub hash: [u8; 8],
    /// `n_types` block types.
    pub types: *const fcan_type_desc_t,
    /// `n_arrays` instance arrays, in numbering order.
    pub arrays: *const fcan_array_desc_t,
    /// `n_blocks` blocks, by block number.
    pub blocks: *const fcan_block_desc_t,
    /// Block types.
    pub n_types: u16,
    /// Instance arrays.
    pub n_arrays: u16,
    /// Blocks (at most 255).
    pub n_blocks: u16,
    /// The schema's `limits.max_frames`.
    pub max_frames: u16,
    /// The schema's `limits.max_copy_entries`.
    pub max_copy_entries: u16,
    /// The schema's `limits.service_buffer`.
    pub service_buffer: u16,
    /// The schema's `limits.service_reassembly` (service slots).
    pub service_reassembly: u8,
    /// Zero.
    pub reserved: [u8; 3],
    /// Total topic arena bytes.
    pub topic_bytes: u32,
    /// Total staging arena bytes.
    pub stage_bytes: u32,
    /// Total parameter arena bytes.
    pub param_bytes: u32,
    /// Total per-topic state entries.
    pub topic_slots: u32,
    /// Largest packed service request.
    pub max_request: u32,
    /// Largest packed service response.
    pub max_response: u32,
}

/// `fcan_node_config_t::controller`: Classical CAN only; the node never sends an FD
/// frame and refuses an FD bus mode.
pub const FCAN_CONTROLLER_CLASSIC: u8 = 0;
/// `fcan_node_config_t::controller`: CAN FD with bit-rate switching (and Classical CAN).
pub const FCAN_CONTROLLER_FD: u8 = 1;

/// A deferred service call: keep it and hand it to `fcan_node_complete` with the
/// response. Compared whole: a token kept past its call never completes another.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_deferred_t {
    /// Service slot holding the call.
    pub slot: u8,
    /// Transfer id of the request.
    pub transfer: u8,
    /// The block the call is for.
    pub block: u8,
    /// The service index within the block's type.
    pub service: u8,
    /// Calls the slot had taken when it took this one.
    pub generation: u32,
}

/// One service request, handed to the `service` callback from `fcan_node_poll`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_service_call_t {
    /// Block number (always a wired instance).
    pub block: u8,
    /// Service index within the block's type (always valid).
    pub service: u8,
    /// Zero.
    pub reserved: [u8; 2],
    /// Bytes at `request`: exactly the service's request size.
    pub request_len: u32,
    /// The packed request (valid during the callback only).
    pub request: *const u8,
    /// The token to keep if the reply is deferred (`FCAN_REPLY_ACCEPTED`).
    pub token: fcan_deferred_t,
}

/// A service handler's answer: the response (`*response_len` bytes) is written.
pub const FCAN_REPLY_OK: i32 = 0;
/// Deferred: the master is told ACCEPTED; answer later with `fcan_node_complete`.
pub const FCAN_REPLY_ACCEPTED: i32 = 1;
/// Cannot take it now; the master may retry.
pub const FCAN_REPLY_BUSY: i32 = 2;
/// The handler failed (APP_ERROR to the master).
pub const FCAN_REPLY_FAILED: i32 = 3;
/// The request bytes did not decode (BAD_REQUEST to the master).
pub const FCAN_REPLY_BAD_REQUEST: i32 = 4;

/// Event: a master acknowledged the node.
pub const FCAN_EVENT_ACKNOWLEDGED: u32 = 1;
/// Event: START, data frames flow from now on.
pub const FCAN_EVENT_STARTED: u32 = 2;
/// Event: no master heartbeat for the master-lost timeout while running. Bring the
/// outputs to their safe state; the node is SUSPENDED and announces again.
pub const FCAN_EVENT_MASTER_LOST: u32 = 3;
/// Event: another node answers to this node id; the node is in FAULT and silent.
pub const FCAN_EVENT_ID_COLLISION: u32 = 4;
/// Event: the master cleared the plan (re-provisioning); data stops until START.
pub const FCAN_EVENT_PLAN_RESET: u32 = 5;

/// Hands a frame to the CAN controller. Return 0 when taken, anything else when the
/// controller is full: the node keeps the frame and offers it again on a later poll.
/// Must not block and must not call back into the node.
pub type fcan_transmit_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: *const fcan_frame_t) -> i32>;

/// Runs a service handler (generated code supplies it: it decodes the request and calls
/// the application's typed handler). Write at most `response_cap` bytes to `response`,
/// set `*response_len`, return an `FCAN_REPLY_*`.
pub type fcan_service_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        node: *mut fcan_node_t,
        call: *const fcan_service_call_t,
        response: *mut u8,
        response_cap: u32,
        response_len: *mut u32,
    ) -> i32,
>;

/// A batch of parameter writes ended: `changed` has bit `i` set for every parameter
/// `i` of `block` written since the last batch.
pub type fcan_params_changed_fn = Option<
    unsafe extern "C" fn(user: *mut c_void, node: *mut fcan_node_t, block: u8, changed: u32),
>;

/// Something the application must react to (`FCAN_EVENT_*`). The node may not be
/// called from here (`FCAN_ERR_REENTRANT`): note it and act after `fcan_node_poll`.
pub type fcan_event_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, node: *mut fcan_node_t, event: u32)>;

/// The application's side of the node. `transmit` is required; a NULL `service`
/// answers every call APP_ERROR, NULL `params_changed`/`event` ignore them.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_callbacks_t {
    /// Passed back to every callback.
    pub user: *mut c_void,
    /// Required.
    pub transmit: fcan_transmit_fn,
    /// Service requests (generated: `fcan_<node>_callbacks`).
    pub service: fcan_service_fn,
    /// Parameter batches (generated: `fcan_<node>_callbacks`).
    pub params_changed: fcan_params_changed_fn,
    /// Events.
    pub event: fcan_event_fn,
}

/// How a board configures its node at boot.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_node_config_t {
    /// This node's id on the bus, 0..=126 (127 is the broadcast address).
    pub node_id: u8,
    /// `FCAN_CONTROLLER_CLASSIC` or `FCAN_CONTROLLER_FD`.
    pub controller: u8,
    /// Entries at `counts`: one per instance array.
    pub n_counts: u8,
    /// Zero.
    pub reserved: u8,
    /// Random per boot (a hardware RNG, ADC noise): tells the master the node rebooted.
    pub boot_id: u32,
    /// Instances wired on this board, one per instance array, each ≤ its `max_count`.
    pub counts: *const u8,
    /// The application's callbacks.
    pub callbacks: fcan_callbacks_t,
}

/// A topic value's freshness, from `fcan_node_topic`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fcan_topic_info_t {
    /// Bumped on every update; 0 = never received (m2s) or never published (s2m).
    pub generation: u32,
    /// The node clock (the `now_us` of `fcan_node_ingest`/`fcan_node_publish`) at the
    /// last update.
    pub received_at_us: u32,
}

/// The node's counters (what the master reads with STATS).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fcan_counters_t {
    /// Frames received and handled.
    pub rx_handled: u32,
    /// Frames dropped: malformed payload or unknown opcode.
    pub rx_malformed: u32,
    /// Frames dropped: not for this node, or a data id not in the plan.
    pub rx_ignored: u32,
    /// Frames dropped: not allowed in the current state.
    pub rx_bad_state: u32,
    /// Multi-frame transfers or groups abandoned.
    pub reassembly_dropped: u32,
    /// Times the transmit callback refused a frame (kept and retried).
    pub tx_refused: u32,
    /// Frames transmitted.
    pub tx_frames: u32,
    /// NAKs sent.
    pub naks_sent: u32,
    /// Service requests answered BUSY.
    pub services_busy: u32,
    /// Times the master-lost watchdog fired.
    pub master_lost: u32,
}

/// A node, in the RAM the application gave `fcan_node_init`. Opaque.
pub struct fcan_node_t {
    _private: [u8; 0],
}

/// Done.
pub const FCAN_OK: i32 = 0;
/// A NULL pointer, a misaligned RAM area, or an argument out of range.
pub const FCAN_ERR_ARG: i32 = -1;
/// The RAM area is smaller than `fcan_node_ram_needed` says.
pub const FCAN_ERR_RAM: i32 = -2;
/// The descriptor is inconsistent, or of another `FCAN_ABI_VERSION`.
pub const FCAN_ERR_DESC: i32 = -3;
/// The configuration does not fit the descriptor (counts: one per array, each ≤ its
/// `max_count`; node id 0..=126).
pub const FCAN_ERR_CONFIG: i32 = -4;
/// Called from inside a callback where the node is busy (only topic, parameter and
/// publish calls work inside `service` and `params_changed`).
pub const FCAN_ERR_REENTRANT: i32 = -5;
/// No such block, topic or parameter.
pub const FCAN_ERR_INDEX: i32 = -6;
/// The block is not wired on this board.
pub const FCAN_ERR_NOT_WIRED: i32 = -7;
/// Publish on an m2s topic.
pub const FCAN_ERR_DIRECTION: i32 = -8;
/// A length that does not match (publish: the topic's size; read: a buffer too small;
/// complete: longer than the response).
pub const FCAN_ERR_LENGTH: i32 = -9;
/// A deferred token that no longer names a pending call (completed, expired, unknown).
pub const FCAN_ERR_TOKEN: i32 = -10;
/// A frame whose length or identifier is not legal for its kind.
pub const FCAN_ERR_FRAME: i32 = -11;
/// Bytes that do not decode as the message (a bool byte other than 0 or 1): generated
/// `take_*` accessors return it, with the output zeroed.
pub const FCAN_ERR_DECODE: i32 = -12;

/// `fcan_node_state`: booted; listening, then announcing until a master acknowledges.
pub const FCAN_STATE_UNPROVISIONED: i32 = 0;
/// `fcan_node_state`: acknowledged; being configured.
pub const FCAN_STATE_PROVISIONED: i32 = 1;
/// `fcan_node_state`: started; data frames flow.
pub const FCAN_STATE_RUNNING: i32 = 2;
/// `fcan_node_state`: the master was lost while running; outputs must be safe.
pub const FCAN_STATE_SUSPENDED: i32 = 3;
/// `fcan_node_state`: stopped until reboot (node-id collision).
pub const FCAN_STATE_FAULT: i32 = 4;

// RAM per part of a node, for `FCAN_RAM_BYTES` (defined in the header's trailer, see
// cbindgen.toml): upper bounds of what `fcan_node_ram_needed` counts, alignment padding
// included. `crate::layout` checks them against the real sizes on every target the
// library is built for, so a runtime change that outgrows one fails the build.

/// RAM of the node itself and its descriptor, with the padding between all the parts
/// (enough for a runtime built with firmware updates too, ~170 bytes more, which a
/// workspace build that unifies features gives the library).
#[cfg(target_pointer_width = "32")]
pub const FCAN_RAM_FIXED: u32 = 2000;
/// RAM of the node itself and its descriptor, with the padding between all the parts
/// (enough for a runtime built with firmware updates too).
#[cfg(target_pointer_width = "64")]
pub const FCAN_RAM_FIXED: u32 = 2176;
/// RAM per block type (its descriptor; its tables are read in place from flash).
#[cfg(target_pointer_width = "32")]
pub const FCAN_RAM_PER_TYPE: u32 = 40;
/// RAM per block type (its descriptor; its tables are read in place from flash).
#[cfg(target_pointer_width = "64")]
pub const FCAN_RAM_PER_TYPE: u32 = 72;
/// RAM per topic of a type: none, the table is read in place from flash.
pub const FCAN_RAM_PER_TOPIC: u32 = 0;
/// RAM per parameter of a type: none, the table is read in place from flash.
pub const FCAN_RAM_PER_PARAM: u32 = 0;
/// RAM per service of a type: none, the table is read in place from flash.
pub const FCAN_RAM_PER_SERVICE: u32 = 0;
/// RAM per block: its changed-parameter mask (the table is read in place from flash).
pub const FCAN_RAM_PER_BLOCK: u32 = 4;
/// RAM per instance array.
pub const FCAN_RAM_PER_ARRAY: u32 = 4;
/// RAM per topic state (one per topic of every block).
pub const FCAN_RAM_PER_TOPIC_SLOT: u32 = 12;
/// RAM per plan frame (`limits.max_frames`).
pub const FCAN_RAM_PER_FRAME: u32 = 21;
/// RAM per copy entry (`limits.max_copy_entries`).
pub const FCAN_RAM_PER_ENTRY: u32 = 6;
/// RAM per service slot, besides its buffer.
pub const FCAN_RAM_PER_SERVICE_SLOT: u32 = 24;

/// An offer the master made to write a new firmware (`fcan_update_t::offered`).
#[cfg(feature = "update")]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_update_offer_t {
    /// Image size in bytes.
    pub size: u32,
    /// Bytes at `node`.
    pub node_len: u32,
    /// Bytes at `version`.
    pub version_len: u32,
    /// Zero.
    pub reserved: u32,
    /// SHA-256 of the image.
    pub image_sha256: [u8; 32],
    /// SHA-256 of the schema blob the new firmware will announce.
    pub schema_sha256: [u8; 32],
    /// The node schema name the image was built for (not NUL-terminated; checked against
    /// this node's by the runtime before the callback runs).
    pub node: *const u8,
    /// The new firmware's version string, for people (not NUL-terminated).
    pub version: *const u8,
}

/// `offered`: take the offer.
#[cfg(feature = "update")]
pub const FCAN_UPDATE_ACCEPT: i32 = 0;
/// `offered`: refuse, the outputs are live (e.g. motors enabled).
#[cfg(feature = "update")]
pub const FCAN_UPDATE_NOT_SAFE: i32 = 4;
/// `offered`: refuse, the supply is too low to finish writing flash.
#[cfg(feature = "update")]
pub const FCAN_UPDATE_LOW_BATTERY: i32 = 5;
/// `offered`: refuse for a reason of the application's own.
#[cfg(feature = "update")]
pub const FCAN_UPDATE_REFUSED: i32 = 12;

/// Whether to take an offer now, the node being in `state` (`FCAN_STATE_*`): return
/// `FCAN_UPDATE_ACCEPT` or a refusal (`FCAN_UPDATE_NOT_SAFE`, …).
#[cfg(feature = "update")]
pub type fcan_update_offered_fn = Option<
    unsafe extern "C" fn(user: *mut c_void, offer: *const fcan_update_offer_t, state: i32) -> i32,
>;
/// Prepares the staging area for an image of `size` bytes. 0 = done, else a flash error.
#[cfg(feature = "update")]
pub type fcan_update_begin_fn = Option<unsafe extern "C" fn(user: *mut c_void, size: u32) -> i32>;
/// Writes `len` bytes at `offset` of the staging area. 0 = done, else a flash error.
#[cfg(feature = "update")]
pub type fcan_update_write_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, offset: u32, data: *const u8, len: u32) -> i32>;
/// Reads `len` bytes at `offset` of the staging area back into `buf`. 0 = done.
#[cfg(feature = "update")]
pub type fcan_update_read_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, offset: u32, buf: *mut u8, len: u32) -> i32>;
/// Marks the staged image (`size` bytes, this SHA-256, already checked by the node) as
/// the one to boot, atomically. 0 = done.
#[cfg(feature = "update")]
pub type fcan_update_mark_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, size: u32, sha256: *const u8) -> i32>;
/// Reboots into the marked image; called from `fcan_node_poll` once the node's last
/// answer is on the bus. On a board it does not return.
#[cfg(feature = "update")]
pub type fcan_update_reboot_fn = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// Where a node writes firmware updates: the application's staging flash (an A/B slot or
/// a bootloader's download area: never the running image). Given to
/// `fcan_node_set_update`, which keeps the pointer: make it `static const`.
#[cfg(feature = "update")]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fcan_update_t {
    /// Passed back to every callback.
    pub user: *mut c_void,
    /// Bytes the staging area holds: the largest image accepted.
    pub capacity: u32,
    /// The largest chunk the master may send at once (a multiple of the flash's write
    /// unit); 0 = 256.
    pub chunk: u16,
    /// Zero.
    pub reserved: u16,
    /// The running firmware's version (NUL-terminated, ASCII, at most 32 bytes sent).
    pub version: *const c_char,
    /// NULL: refuse while RUNNING, take the offer otherwise.
    pub offered: fcan_update_offered_fn,
    /// Required.
    pub begin: fcan_update_begin_fn,
    /// Required.
    pub write: fcan_update_write_fn,
    /// Required.
    pub read: fcan_update_read_fn,
    /// Required.
    pub mark_bootable: fcan_update_mark_fn,
    /// Required.
    pub reboot: fcan_update_reboot_fn,
}
