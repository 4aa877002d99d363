/*
 * fcan.h: the C API of the fcan node runtime (libfcan_node.a).
 * Generated from fcan-node-c/src by cbindgen (fcan-node-c/scripts/header.sh). Do not edit.
 * docs/firmware-c.md is the guide; the functions' comments are the reference.
 */

#ifndef FCAN_H
#define FCAN_H

#include <stdint.h>
/* The RAM bounds differ between 32- and 64-bit targets (the node holds pointers). */
#if UINTPTR_MAX > 0xFFFFFFFFu
#define FCAN_PTR64 1
#else
#define FCAN_PTR32 1
#endif

// The ABI version [`fcan_node_desc_t::abi`] must carry: generated descriptors name the
// version of `fcan.h` they were generated against, and `fcan_node_init` refuses another
// (a library and generated code from different releases never meet silently).
#define FCAN_ABI_VERSION 1

// `fcan_frame_t::flags`: a 29-bit extended identifier (otherwise 11-bit standard).
#define FCAN_FRAME_EXTENDED 1

// `fcan_frame_t::flags`: a CAN FD frame (otherwise Classical CAN).
#define FCAN_FRAME_FD 2

// `fcan_frame_t::flags`: CAN FD with bit-rate switching (only with `FCAN_FRAME_FD`).
#define FCAN_FRAME_BRS 4

// `fcan_topic_desc_t::dir`: master to node (a command the node takes).
#define FCAN_DIR_M2S 0

// `fcan_topic_desc_t::dir`: node to master (feedback the node publishes).
#define FCAN_DIR_S2M 1

// `fcan_param_desc_t::flags`: `min_bits` holds a lower bound.
#define FCAN_PARAM_HAS_MIN 1

// `fcan_param_desc_t::flags`: `max_bits` holds an upper bound.
#define FCAN_PARAM_HAS_MAX 2

// The wire codes of the scalar types (`fcan_param_desc_t::scalar_type`), as in the schema blob.
#define FCAN_TYPE_BOOL 1

// `u8`.
#define FCAN_TYPE_U8 2

// `i8`.
#define FCAN_TYPE_I8 3

// `u16`.
#define FCAN_TYPE_U16 4

// `i16`.
#define FCAN_TYPE_I16 5

// `u32`.
#define FCAN_TYPE_U32 6

// `i32`.
#define FCAN_TYPE_I32 7

// `u64`.
#define FCAN_TYPE_U64 8

// `i64`.
#define FCAN_TYPE_I64 9

// `f32`.
#define FCAN_TYPE_F32 10

// `f64`.
#define FCAN_TYPE_F64 11

// `fcan_node_config_t::controller`: Classical CAN only; the node never sends an FD
// frame and refuses an FD bus mode.
#define FCAN_CONTROLLER_CLASSIC 0

// `fcan_node_config_t::controller`: CAN FD with bit-rate switching (and Classical CAN).
#define FCAN_CONTROLLER_FD 1

// A service handler's answer: the response (`*response_len` bytes) is written.
#define FCAN_REPLY_OK 0

// Deferred: the master is told ACCEPTED; answer later with `fcan_node_complete`.
#define FCAN_REPLY_ACCEPTED 1

// Cannot take it now; the master may retry.
#define FCAN_REPLY_BUSY 2

// The handler failed (APP_ERROR to the master).
#define FCAN_REPLY_FAILED 3

// The request bytes did not decode (BAD_REQUEST to the master).
#define FCAN_REPLY_BAD_REQUEST 4

// Event: a master acknowledged the node.
#define FCAN_EVENT_ACKNOWLEDGED 1

// Event: START, data frames flow from now on.
#define FCAN_EVENT_STARTED 2

// Event: no master heartbeat for the master-lost timeout while running. Bring the
// outputs to their safe state; the node is SUSPENDED and announces again.
#define FCAN_EVENT_MASTER_LOST 3

// Event: another node answers to this node id; the node is in FAULT and silent.
#define FCAN_EVENT_ID_COLLISION 4

// Event: the master cleared the plan (re-provisioning); data stops until START.
#define FCAN_EVENT_PLAN_RESET 5

// Done.
#define FCAN_OK 0

// A NULL pointer, a misaligned RAM area, or an argument out of range.
#define FCAN_ERR_ARG -1

// The RAM area is smaller than `fcan_node_ram_needed` says.
#define FCAN_ERR_RAM -2

// The descriptor is inconsistent, or of another `FCAN_ABI_VERSION`.
#define FCAN_ERR_DESC -3

// The configuration does not fit the descriptor (counts: one per array, each ≤ its
// `max_count`; node id 0..=126).
#define FCAN_ERR_CONFIG -4

// Called from inside a callback where the node is busy (only topic, parameter and
// publish calls work inside `service` and `params_changed`).
#define FCAN_ERR_REENTRANT -5

// No such block, topic or parameter.
#define FCAN_ERR_INDEX -6

// The block is not wired on this board.
#define FCAN_ERR_NOT_WIRED -7

// Publish on an m2s topic.
#define FCAN_ERR_DIRECTION -8

// A length that does not match (publish: the topic's size; read: a buffer too small;
// complete: longer than the response).
#define FCAN_ERR_LENGTH -9

// A deferred token that no longer names a pending call (completed, expired, unknown).
#define FCAN_ERR_TOKEN -10

// A frame whose length or identifier is not legal for its kind.
#define FCAN_ERR_FRAME -11

// Bytes that do not decode as the message (a bool byte other than 0 or 1): generated
// `take_*` accessors return it, with the output zeroed.
#define FCAN_ERR_DECODE -12

// `fcan_node_state`: booted; listening, then announcing until a master acknowledges.
#define FCAN_STATE_UNPROVISIONED 0

// `fcan_node_state`: acknowledged; being configured.
#define FCAN_STATE_PROVISIONED 1

// `fcan_node_state`: started; data frames flow.
#define FCAN_STATE_RUNNING 2

// `fcan_node_state`: the master was lost while running; outputs must be safe.
#define FCAN_STATE_SUSPENDED 3

// `fcan_node_state`: stopped until reboot (node-id collision).
#define FCAN_STATE_FAULT 4

#if defined(FCAN_PTR32)
// RAM of the node itself and its descriptor, with the padding between all the parts
// (enough for a runtime built with firmware updates too, ~170 bytes more, which a
// workspace build that unifies features gives the library).
#define FCAN_RAM_FIXED 2000
#endif

#if defined(FCAN_PTR64)
// RAM of the node itself and its descriptor, with the padding between all the parts
// (enough for a runtime built with firmware updates too).
#define FCAN_RAM_FIXED 2176
#endif

#if defined(FCAN_PTR32)
// RAM per block type (its descriptor; its tables are read in place from flash).
#define FCAN_RAM_PER_TYPE 40
#endif

#if defined(FCAN_PTR64)
// RAM per block type (its descriptor; its tables are read in place from flash).
#define FCAN_RAM_PER_TYPE 72
#endif

// RAM per topic of a type: none, the table is read in place from flash.
#define FCAN_RAM_PER_TOPIC 0

// RAM per parameter of a type: none, the table is read in place from flash.
#define FCAN_RAM_PER_PARAM 0

// RAM per service of a type: none, the table is read in place from flash.
#define FCAN_RAM_PER_SERVICE 0

// RAM per block: its changed-parameter mask (the table is read in place from flash).
#define FCAN_RAM_PER_BLOCK 4

// RAM per instance array.
#define FCAN_RAM_PER_ARRAY 4

// RAM per topic state (one per topic of every block).
#define FCAN_RAM_PER_TOPIC_SLOT 12

// RAM per plan frame (`limits.max_frames`).
#define FCAN_RAM_PER_FRAME 21

// RAM per copy entry (`limits.max_copy_entries`).
#define FCAN_RAM_PER_ENTRY 6

// RAM per service slot, besides its buffer.
#define FCAN_RAM_PER_SERVICE_SLOT 24

#if defined(FCAN_UPDATE)
// `offered`: take the offer.
#define FCAN_UPDATE_ACCEPT 0
#endif

#if defined(FCAN_UPDATE)
// `offered`: refuse, the outputs are live (e.g. motors enabled).
#define FCAN_UPDATE_NOT_SAFE 4
#endif

#if defined(FCAN_UPDATE)
// `offered`: refuse, the supply is too low to finish writing flash.
#define FCAN_UPDATE_LOW_BATTERY 5
#endif

#if defined(FCAN_UPDATE)
// `offered`: refuse for a reason of the application's own.
#define FCAN_UPDATE_REFUSED 12
#endif

// Alignment the application's RAM area must have (`uint64_t`).
#define RAM_ALIGN 8

// A node, in the RAM the application gave `fcan_node_init`. Opaque.
typedef struct fcan_node_t fcan_node_t;

// One topic of a block type (generated, in flash).
typedef struct {
  // s2m: period in µs, 0 = sent on publish. m2s: 0.
  uint32_t period_us;
  // Packed size in bytes.
  uint16_t size;
  // Offset within the block's topic area.
  uint16_t offset;
  // m2s only: offset within the block's staging area, 0xFFFF when the topic fits one
  // Classical frame.
  uint16_t stage_offset;
  // `FCAN_DIR_M2S` or `FCAN_DIR_S2M`.
  uint8_t dir;
  // Zero.
  uint8_t reserved;
} fcan_topic_desc_t;

// One parameter of a block type (generated, in flash). A value is held as its packed
// little-endian bytes in the low bytes of a `uint64_t` (`1.5f` is `0x3FC00000`).
typedef struct {
  // The value at boot (every element of an array).
  uint64_t default_bits;
  // Inclusive lower bound when `flags & FCAN_PARAM_HAS_MIN`.
  uint64_t min_bits;
  // Inclusive upper bound when `flags & FCAN_PARAM_HAS_MAX`.
  uint64_t max_bits;
  // Element count (1 for a scalar).
  uint16_t count;
  // Offset within the block's parameter area.
  uint16_t offset;
  // `FCAN_TYPE_*`.
  uint8_t scalar_type;
  // `FCAN_PARAM_HAS_MIN | FCAN_PARAM_HAS_MAX`.
  uint8_t flags;
  // Zero.
  uint8_t reserved[2];
} fcan_param_desc_t;

// One service of a block type (generated, in flash).
typedef struct {
  // Packed request size.
  uint16_t request_size;
  // Packed response size.
  uint16_t response_size;
} fcan_service_desc_t;

// One block type (generated, in flash).
typedef struct {
  // The type's name (NUL-terminated), for a debugger; the runtime does not read it.
  const char *name;
  // `n_topics` topics, in schema order.
  const fcan_topic_desc_t *topics;
  // `n_params` parameters, in schema order (the index is the changed-mask bit).
  const fcan_param_desc_t *params;
  // `n_services` services, in schema order.
  const fcan_service_desc_t *services;
  // Topics of the type.
  uint16_t n_topics;
  // Parameters of the type (at most 32).
  uint16_t n_params;
  // Services of the type.
  uint16_t n_services;
  // Bytes of topic area one instance needs.
  uint16_t topic_bytes;
  // Bytes of staging area one instance needs.
  uint16_t stage_bytes;
  // Bytes of parameter area one instance needs.
  uint16_t param_bytes;
} fcan_type_desc_t;

// One instance array (generated, in flash).
typedef struct {
  // Index into `fcan_node_desc_t::types`.
  uint8_t type_index;
  // The schema's `max_count`.
  uint8_t max_count;
  // Block number of instance 0.
  uint8_t first_block;
  // Zero.
  uint8_t reserved;
} fcan_array_desc_t;

// One block: an instance of an instance array (generated, in flash).
typedef struct {
  // Offset of the block's topic area in the node's topic arena.
  uint16_t topic_offset;
  // Offset of the block's staging area.
  uint16_t stage_offset;
  // Offset of the block's parameter area.
  uint16_t param_offset;
  // The block's first per-topic state entry.
  uint16_t topic_slot;
  // Index into `fcan_node_desc_t::types`.
  uint8_t type_index;
  // Index of its instance array.
  uint8_t array;
  // Index within the array.
  uint8_t index;
  // Zero.
  uint8_t reserved;
} fcan_block_desc_t;

// Everything the runtime knows about a node's schema: `fcan-codegen c` emits one as a
// `const` (flash) in the node's `.c` file, with the tables it points to.
typedef struct {
  // `FCAN_ABI_VERSION` of the header the tables were generated against.
  uint32_t abi;
  // Bytes of the schema blob.
  uint32_t blob_len;
  // The schema blob (protobuf `FileDescriptorSet`) the node serves to the master.
  const uint8_t *blob;
  // The first 8 bytes of the blob's SHA-256, announced.
  uint8_t hash[8];
  // `n_types` block types.
  const fcan_type_desc_t *types;
  // `n_arrays` instance arrays, in numbering order.
  const fcan_array_desc_t *arrays;
  // `n_blocks` blocks, by block number.
  const fcan_block_desc_t *blocks;
  // Block types.
  uint16_t n_types;
  // Instance arrays.
  uint16_t n_arrays;
  // Blocks (at most 255).
  uint16_t n_blocks;
  // The schema's `limits.max_frames`.
  uint16_t max_frames;
  // The schema's `limits.max_copy_entries`.
  uint16_t max_copy_entries;
  // The schema's `limits.service_buffer`.
  uint16_t service_buffer;
  // The schema's `limits.service_reassembly` (service slots).
  uint8_t service_reassembly;
  // Zero.
  uint8_t reserved[3];
  // Total topic arena bytes.
  uint32_t topic_bytes;
  // Total staging arena bytes.
  uint32_t stage_bytes;
  // Total parameter arena bytes.
  uint32_t param_bytes;
  // Total per-topic state entries.
  uint32_t topic_slots;
  // Largest packed service request.
  uint32_t max_request;
  // Largest packed service response.
  uint32_t max_response;
} fcan_node_desc_t;

// One CAN or CAN FD frame, as the node takes and gives it.
typedef struct {
  // The identifier (11 or 29 bits, see `flags`).
  uint32_t id;
  // Payload bytes: 0..=8 for Classical CAN, a legal FD length (0..=8, 12, 16, 20, 24,
  // 32, 48, 64) for CAN FD.
  uint8_t len;
  // `FCAN_FRAME_EXTENDED | FCAN_FRAME_FD | FCAN_FRAME_BRS`.
  uint8_t flags;
  // Zero.
  uint8_t reserved[2];
  // The payload; bytes past `len` are not read.
  uint8_t data[64];
} fcan_frame_t;

// Hands a frame to the CAN controller. Return 0 when taken, anything else when the
// controller is full: the node keeps the frame and offers it again on a later poll.
// Must not block and must not call back into the node.
typedef int32_t (*fcan_transmit_fn)(void *user, const fcan_frame_t *frame);

// A deferred service call: keep it and hand it to `fcan_node_complete` with the
// response. Compared whole: a token kept past its call never completes another.
typedef struct {
  // Service slot holding the call.
  uint8_t slot;
  // Transfer id of the request.
  uint8_t transfer;
  // The block the call is for.
  uint8_t block;
  // The service index within the block's type.
  uint8_t service;
  // Calls the slot had taken when it took this one.
  uint32_t generation;
} fcan_deferred_t;

// One service request, handed to the `service` callback from `fcan_node_poll`.
typedef struct {
  // Block number (always a wired instance).
  uint8_t block;
  // Service index within the block's type (always valid).
  uint8_t service;
  // Zero.
  uint8_t reserved[2];
  // Bytes at `request`: exactly the service's request size.
  uint32_t request_len;
  // The packed request (valid during the callback only).
  const uint8_t *request;
  // The token to keep if the reply is deferred (`FCAN_REPLY_ACCEPTED`).
  fcan_deferred_t token;
} fcan_service_call_t;

// Runs a service handler (generated code supplies it: it decodes the request and calls
// the application's typed handler). Write at most `response_cap` bytes to `response`,
// set `*response_len`, return an `FCAN_REPLY_*`.
typedef int32_t (*fcan_service_fn)(void *user, fcan_node_t *node, const fcan_service_call_t *call, uint8_t *response, uint32_t response_cap, uint32_t *response_len);

// A batch of parameter writes ended: `changed` has bit `i` set for every parameter
// `i` of `block` written since the last batch.
typedef void (*fcan_params_changed_fn)(void *user, fcan_node_t *node, uint8_t block, uint32_t changed);

// Something the application must react to (`FCAN_EVENT_*`). The node may not be
// called from here (`FCAN_ERR_REENTRANT`): note it and act after `fcan_node_poll`.
typedef void (*fcan_event_fn)(void *user, fcan_node_t *node, uint32_t event);

// The application's side of the node. `transmit` is required; a NULL `service`
// answers every call APP_ERROR, NULL `params_changed`/`event` ignore them.
typedef struct {
  // Passed back to every callback.
  void *user;
  // Required.
  fcan_transmit_fn transmit;
  // Service requests (generated: `fcan_<node>_callbacks`).
  fcan_service_fn service;
  // Parameter batches (generated: `fcan_<node>_callbacks`).
  fcan_params_changed_fn params_changed;
  // Events.
  fcan_event_fn event;
} fcan_callbacks_t;

// How a board configures its node at boot.
typedef struct {
  // This node's id on the bus, 0..=126 (127 is the broadcast address).
  uint8_t node_id;
  // `FCAN_CONTROLLER_CLASSIC` or `FCAN_CONTROLLER_FD`.
  uint8_t controller;
  // Entries at `counts`: one per instance array.
  uint8_t n_counts;
  // Zero.
  uint8_t reserved;
  // Random per boot (a hardware RNG, ADC noise): tells the master the node rebooted.
  uint32_t boot_id;
  // Instances wired on this board, one per instance array, each ≤ its `max_count`.
  const uint8_t *counts;
  // The application's callbacks.
  fcan_callbacks_t callbacks;
} fcan_node_config_t;

#if defined(FCAN_UPDATE)
// An offer the master made to write a new firmware (`fcan_update_t::offered`).
typedef struct {
  // Image size in bytes.
  uint32_t size;
  // Bytes at `node`.
  uint32_t node_len;
  // Bytes at `version`.
  uint32_t version_len;
  // Zero.
  uint32_t reserved;
  // SHA-256 of the image.
  uint8_t image_sha256[32];
  // SHA-256 of the schema blob the new firmware will announce.
  uint8_t schema_sha256[32];
  // The node schema name the image was built for (not NUL-terminated; checked against
  // this node's by the runtime before the callback runs).
  const uint8_t *node;
  // The new firmware's version string, for people (not NUL-terminated).
  const uint8_t *version;
} fcan_update_offer_t;
#endif

#if defined(FCAN_UPDATE)
// Whether to take an offer now, the node being in `state` (`FCAN_STATE_*`): return
// `FCAN_UPDATE_ACCEPT` or a refusal (`FCAN_UPDATE_NOT_SAFE`, …).
typedef int32_t (*fcan_update_offered_fn)(void *user, const fcan_update_offer_t *offer, int32_t state);
#endif

#if defined(FCAN_UPDATE)
// Prepares the staging area for an image of `size` bytes. 0 = done, else a flash error.
typedef int32_t (*fcan_update_begin_fn)(void *user, uint32_t size);
#endif

#if defined(FCAN_UPDATE)
// Writes `len` bytes at `offset` of the staging area. 0 = done, else a flash error.
typedef int32_t (*fcan_update_write_fn)(void *user, uint32_t offset, const uint8_t *data, uint32_t len);
#endif

#if defined(FCAN_UPDATE)
// Reads `len` bytes at `offset` of the staging area back into `buf`. 0 = done.
typedef int32_t (*fcan_update_read_fn)(void *user, uint32_t offset, uint8_t *buf, uint32_t len);
#endif

#if defined(FCAN_UPDATE)
// Marks the staged image (`size` bytes, this SHA-256, already checked by the node) as
// the one to boot, atomically. 0 = done.
typedef int32_t (*fcan_update_mark_fn)(void *user, uint32_t size, const uint8_t *sha256);
#endif

#if defined(FCAN_UPDATE)
// Reboots into the marked image; called from `fcan_node_poll` once the node's last
// answer is on the bus. On a board it does not return.
typedef void (*fcan_update_reboot_fn)(void *user);
#endif

#if defined(FCAN_UPDATE)
// Where a node writes firmware updates: the application's staging flash (an A/B slot or
// a bootloader's download area: never the running image). Given to
// `fcan_node_set_update`, which keeps the pointer: make it `static const`.
typedef struct {
  // Passed back to every callback.
  void *user;
  // Bytes the staging area holds: the largest image accepted.
  uint32_t capacity;
  // The largest chunk the master may send at once (a multiple of the flash's write
  // unit); 0 = 256.
  uint16_t chunk;
  // Zero.
  uint16_t reserved;
  // The running firmware's version (NUL-terminated, ASCII, at most 32 bytes sent).
  const char *version;
  // NULL: refuse while RUNNING, take the offer otherwise.
  fcan_update_offered_fn offered;
  // Required.
  fcan_update_begin_fn begin;
  // Required.
  fcan_update_write_fn write;
  // Required.
  fcan_update_read_fn read;
  // Required.
  fcan_update_mark_fn mark_bootable;
  // Required.
  fcan_update_reboot_fn reboot;
} fcan_update_t;
#endif

// A topic value's freshness, from `fcan_node_topic`.
typedef struct {
  // Bumped on every update; 0 = never received (m2s) or never published (s2m).
  uint32_t generation;
  // The node clock (the `now_us` of `fcan_node_ingest`/`fcan_node_publish`) at the
  // last update.
  uint32_t received_at_us;
} fcan_topic_info_t;

// The node's counters (what the master reads with STATS).
typedef struct {
  // Frames received and handled.
  uint32_t rx_handled;
  // Frames dropped: malformed payload or unknown opcode.
  uint32_t rx_malformed;
  // Frames dropped: not for this node, or a data id not in the plan.
  uint32_t rx_ignored;
  // Frames dropped: not allowed in the current state.
  uint32_t rx_bad_state;
  // Multi-frame transfers or groups abandoned.
  uint32_t reassembly_dropped;
  // Times the transmit callback refused a frame (kept and retried).
  uint32_t tx_refused;
  // Frames transmitted.
  uint32_t tx_frames;
  // NAKs sent.
  uint32_t naks_sent;
  // Service requests answered BUSY.
  uint32_t services_busy;
  // Times the master-lost watchdog fired.
  uint32_t master_lost;
} fcan_counters_t;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Bytes of RAM `fcan_node_init` needs for `desc` (in an area aligned to 8 bytes), or 0
// when the descriptor is refused (NULL, inconsistent, another `FCAN_ABI_VERSION`).
//
// Generated code sizes its area with `FCAN_RAM_BYTES(...)`, an upper bound of this.
//
// # Safety
// `desc` is NULL or a descriptor whose tables are valid (generated ones are).
uint32_t fcan_node_ram_needed(const fcan_node_desc_t *desc);

// Builds a node in `ram` (`ram_bytes` bytes, aligned to 8; `fcan_node_ram_needed` says
// how many) for the schema `desc` and boots it (listening, then announcing). Returns the
// node, which lives in `ram`; NULL on error, with the `FCAN_ERR_*` in `*error` (when
// `error` is not NULL). Call again on the same area to reboot the node.
//
// # Safety
// `ram` is valid for `ram_bytes` bytes and used by nothing else while the node lives;
// `desc` and its tables outlive the node (generated ones are `const`); `config.counts`
// holds `config.n_counts` bytes (read during the call only).
fcan_node_t *fcan_node_init(void *ram, uint32_t ram_bytes, const fcan_node_desc_t *desc, const fcan_node_config_t *config, int32_t *error);

// Takes one received frame, stamped with the node clock `now_us` (µs, wrapping). Data
// frames update their topics at once; configuration frames are queued for
// `fcan_node_poll`. Returns `FCAN_OK`, `FCAN_ERR_FRAME` for an illegal frame (not
// taken), `FCAN_ERR_REENTRANT` from inside a callback.
//
// Not from an interrupt that may preempt `fcan_node_poll` (it would be refused): queue
// frames in the interrupt and ingest them from the loop.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `frame` points to a frame.
int32_t fcan_node_ingest(fcan_node_t *node, const fcan_frame_t *frame, uint32_t now_us);

// Does the node's work due at `now_us`: handles queued configuration frames, runs
// service handlers and parameter batches (the `service` and `params_changed`
// callbacks), sends what is due through `transmit`, runs the timers. Call it after
// ingesting frames and at least by the time `fcan_node_poll_at` names.
//
// # Safety
// `node` is a handle from `fcan_node_init`.
int32_t fcan_node_poll(fcan_node_t *node, uint32_t now_us);

// When the node next needs `fcan_node_poll`, if before it hears anything: writes the
// time to `*deadline_us` and returns 1, or returns 0 (nothing scheduled; poll after the
// next frame). A time at or before `now_us` means now.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `deadline_us` is writable.
int32_t fcan_node_poll_at(fcan_node_t *node, uint32_t now_us, uint32_t *deadline_us);

#if defined(FCAN_UPDATE)
// Gives the node a staging area for firmware updates (`update`, kept: make it
// `static const`), or takes it away (NULL). From the next poll the node announces that
// it takes updates and answers the master's offers through the callbacks. Returns
// `FCAN_ERR_ARG` when a required callback is missing. Only in the update build
// (`FCAN_UPDATE`, `libfcan_node_update.a`).
//
// # Safety
// `node` is a handle from `fcan_node_init`; `update` is NULL or outlives the node.
int32_t fcan_node_set_update(fcan_node_t *node, const fcan_update_t *update);
#endif

// The `user` pointer of the node's callbacks (`fcan_node_config_t.callbacks.user`):
// how a handler, which gets the node, finds the application's own state. Works
// everywhere, callbacks included; NULL for a NULL node.
//
// # Safety
// `node` is NULL or a handle from `fcan_node_init`.
void *fcan_node_user(fcan_node_t *node);

// Sets an s2m topic's value (`len` must be its packed size). Periodic frames carry it
// at their next period; on-publish frames go out at the next poll while running.
// Works from the main loop and from inside `service` / `params_changed`.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `bytes` holds `len` bytes.
int32_t fcan_node_publish(fcan_node_t *node, uint8_t block, uint8_t topic, const uint8_t *bytes, uint32_t len);

// Copies a topic's current value (m2s: as last received, whole; s2m: as last published)
// to `out` (`cap` bytes) and, when `info` is not NULL, its generation and time. Returns
// the bytes copied or an `FCAN_ERR_*`. Works from the main loop and from inside
// `service` / `params_changed`.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `out` holds `cap` bytes; `info` is NULL or
// writable.
int32_t fcan_node_topic(fcan_node_t *node, uint8_t block, uint8_t topic, uint8_t *out, uint32_t cap, fcan_topic_info_t *info);

// Copies a parameter's packed value to `out` (`cap` bytes). Returns the bytes copied or
// an `FCAN_ERR_*`. Works from the main loop and from inside `service` /
// `params_changed`.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `out` holds `cap` bytes.
int32_t fcan_node_param(fcan_node_t *node, uint8_t block, uint8_t param, uint8_t *out, uint32_t cap);

// Completes a deferred service call with its packed response (`len` bytes); it goes
// out from the next poll. `FCAN_ERR_TOKEN` when the call is no longer pending (it was
// completed, or answered EXPIRED after the deferred-service timeout).
//
// # Safety
// `node` is a handle from `fcan_node_init`; `token` points to a token; `response`
// holds `len` bytes.
int32_t fcan_node_complete(fcan_node_t *node, const fcan_deferred_t *token, const uint8_t *response, uint32_t len);

// The node's state, as the wire numbers it (`FCAN_STATE_*`), or a negative
// `FCAN_ERR_*`.
//
// # Safety
// `node` is a handle from `fcan_node_init`.
int32_t fcan_node_state(fcan_node_t *node);

// Copies the node's counters to `*out`.
//
// # Safety
// `node` is a handle from `fcan_node_init`; `out` is writable.
int32_t fcan_node_counters(fcan_node_t *node, fcan_counters_t *out);

// A short English description of an `FCAN_ERR_*` (a static NUL-terminated string).
const char *fcan_strerror(int32_t code);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FCAN_H */

/*
 * Bytes of RAM a node needs (an upper bound of fcan_node_ram_needed), from the counts
 * of its schema: generated headers define FCAN_<NODE>_RAM_BYTES with it and declare the
 * area as uint64_t (8-byte aligned).
 */
#define FCAN_RAM_BYTES(types, topics, params, services, blocks, arrays, topic_bytes, \
                       stage_bytes, param_bytes, topic_slots, frames, entries, svc_slots, \
                       svc_buf) \
    (FCAN_RAM_FIXED + (types) * FCAN_RAM_PER_TYPE + (topics) * FCAN_RAM_PER_TOPIC + \
     (params) * FCAN_RAM_PER_PARAM + (services) * FCAN_RAM_PER_SERVICE + \
     (blocks) * FCAN_RAM_PER_BLOCK + (arrays) * FCAN_RAM_PER_ARRAY + (topic_bytes) + \
     (stage_bytes) + (param_bytes) + (topic_slots) * FCAN_RAM_PER_TOPIC_SLOT + \
     (frames) * FCAN_RAM_PER_FRAME + (entries) * FCAN_RAM_PER_ENTRY + \
     (svc_slots) * (FCAN_RAM_PER_SERVICE_SLOT + (svc_buf)))
