//! The node behind `fcan_node_t`: the runtime's `Node` over buffers in the application's
//! RAM area, and the `extern "C"` functions of `fcan.h`.
//!
//! Re-entry. The runtime's `poll` holds the node while it runs the application's
//! handlers and hands them a `Context` (topics, parameters, publish). C handlers get the
//! `fcan_node_t *` instead, so while a handler runs the context's address is kept in the
//! node (`active`) and the topic, parameter and publish calls go through it; every other
//! call made while the node is busy (from the transmit or event callback, an interrupt
//! during `poll`) returns `FCAN_ERR_REENTRANT` and changes nothing.

use core::ffi::c_void;
use core::ptr::{addr_of, addr_of_mut};

use fcan_runtime_nostd::codegen::{
    NodeDesc, Parts, PartsRef, PlanEntry, PlanFrame, ServiceCall, ServiceOutcome, Storage, SvcSlot,
    TopicState,
};
use fcan_runtime_nostd::fcan_core::frame::Frame;
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::{
    CompleteError, ConfigError, Context, Controller, DeferredToken, Event, Node, NodeConfig,
    PublishError, Transmit, TxRefused,
};

use crate::abi::*;
use crate::arena::{Arena, RAM_ALIGN};
use crate::desc;

/// The node's buffers, in the application's RAM area.
struct CStorage {
    topic: &'static mut [u8],
    stage: &'static mut [u8],
    params: &'static mut [u8],
    param_changed: &'static mut [u32],
    topics: &'static mut [TopicState],
    frames: &'static mut [PlanFrame],
    m2s_index: &'static mut [u8],
    entries: &'static mut [PlanEntry],
    svc: &'static mut [SvcSlot],
    svc_buf: &'static mut [u8],
    svc_buf_len: usize,
}

impl Storage for CStorage {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            topic: self.topic,
            stage: self.stage,
            params: self.params,
            param_changed: self.param_changed,
            topics: self.topics,
            frames: self.frames,
            m2s_index: self.m2s_index,
            entries: self.entries,
            svc: self.svc,
            svc_buf: self.svc_buf,
            svc_buf_len: self.svc_buf_len,
        }
    }

    fn parts_ref(&self) -> PartsRef<'_> {
        PartsRef {
            topic: self.topic,
            params: self.params,
            topics: self.topics,
            frames: self.frames,
            svc: self.svc,
        }
    }
}

/// What `fcan_node_t *` points to: the first thing in the application's RAM area.
pub(crate) struct CNode {
    node: Node<CStorage, &'static NodeDesc>,
    callbacks: fcan_callbacks_t,
    /// Inside `fcan_node_ingest` or `fcan_node_poll`.
    busy: bool,
    /// While a service or parameter handler runs: the context `poll` handed it.
    active: *mut Context<'static>,
    /// Where updates are written (`fcan_node_set_update`); NULL: none taken.
    #[cfg(feature = "update")]
    update: *const fcan_update_t,
}

/// Everything `fcan_node_init` places, in order. A measuring arena reserves the same
/// bytes and returns `Ok(None)`.
///
/// # Safety
/// As `desc::read`.
unsafe fn carve(
    arena: &mut Arena,
    d: &fcan_node_desc_t,
) -> Result<Option<(*mut CNode, &'static NodeDesc, CStorage)>, i32> {
    let dry = arena.is_dry();
    let at = arena.place::<CNode>();
    if at.is_none() && !dry {
        return Err(FCAN_ERR_RAM);
    }
    // SAFETY: the caller's contract.
    let nd = unsafe { desc::read(arena, d)? };
    let nd_at = arena.place::<NodeDesc>();
    if nd_at.is_none() && !dry {
        return Err(FCAN_ERR_RAM);
    }
    // SAFETY: the caller's contract.
    let (svc_slots, svc_buf_len) = unsafe { desc::service_slots(d)? };
    let frames = nd.limits.max_frames as usize;
    let ram = FCAN_ERR_RAM;
    let storage = CStorage {
        topic: arena.slice(nd.topic_bytes, 0u8).ok_or(ram)?,
        stage: arena.slice(nd.stage_bytes, 0u8).ok_or(ram)?,
        params: arena.slice(nd.param_bytes, 0u8).ok_or(ram)?,
        param_changed: arena
            .slice(nd.blocks.len().max(d.n_blocks as usize), 0u32)
            .ok_or(ram)?,
        topics: arena.slice(nd.topic_slots, TopicState::EMPTY).ok_or(ram)?,
        frames: arena.slice(frames, PlanFrame::EMPTY).ok_or(ram)?,
        m2s_index: arena.slice(frames, 0u8).ok_or(ram)?,
        entries: arena
            .slice(nd.limits.max_copy_entries as usize, PlanEntry::EMPTY)
            .ok_or(ram)?,
        svc: arena.slice(svc_slots, SvcSlot::EMPTY).ok_or(ram)?,
        svc_buf: arena
            .slice(svc_slots.checked_mul(svc_buf_len).ok_or(ram)?, 0u8)
            .ok_or(ram)?,
        svc_buf_len,
    };
    match (at, nd_at) {
        (Some(at), Some(nd_at)) => {
            // SAFETY: `nd_at` is in the area, aligned and unused (`Arena::place`).
            let nd: &'static NodeDesc = unsafe {
                nd_at.write(nd);
                &*nd_at
            };
            Ok(Some((at, nd, storage)))
        }
        _ => Ok(None),
    }
}

/// Bytes of RAM `fcan_node_init` needs for `desc` (in an area aligned to 8 bytes), or 0
/// when the descriptor is refused (NULL, inconsistent, another `FCAN_ABI_VERSION`).
///
/// Generated code sizes its area with `FCAN_RAM_BYTES(...)`, an upper bound of this.
///
/// # Safety
/// `desc` is NULL or a descriptor whose tables are valid (generated ones are).
#[no_mangle]
pub unsafe extern "C" fn fcan_node_ram_needed(desc: *const fcan_node_desc_t) -> u32 {
    // SAFETY: the caller's contract.
    let Some(d) = (unsafe { desc.as_ref() }) else {
        return 0;
    };
    let mut arena = Arena::measure();
    // SAFETY: the caller's contract.
    match unsafe { carve(&mut arena, d) } {
        Ok(_) => u32::try_from(arena.used()).unwrap_or(0),
        Err(_) => 0,
    }
}

fn config_error(e: ConfigError) -> i32 {
    match e {
        ConfigError::CountsLength | ConfigError::CountTooLarge { .. } => FCAN_ERR_CONFIG,
        ConfigError::BadDesc | ConfigError::ParamTooLarge => FCAN_ERR_DESC,
        _ => FCAN_ERR_RAM,
    }
}

/// Builds a node in `ram` (`ram_bytes` bytes, aligned to 8; `fcan_node_ram_needed` says
/// how many) for the schema `desc` and boots it (listening, then announcing). Returns the
/// node, which lives in `ram`; NULL on error, with the `FCAN_ERR_*` in `*error` (when
/// `error` is not NULL). Call again on the same area to reboot the node.
///
/// # Safety
/// `ram` is valid for `ram_bytes` bytes and used by nothing else while the node lives;
/// `desc` and its tables outlive the node (generated ones are `const`); `config.counts`
/// holds `config.n_counts` bytes (read during the call only).
#[no_mangle]
pub unsafe extern "C" fn fcan_node_init(
    ram: *mut c_void,
    ram_bytes: u32,
    desc: *const fcan_node_desc_t,
    config: *const fcan_node_config_t,
    error: *mut i32,
) -> *mut fcan_node_t {
    // SAFETY: the caller's contract.
    let r = unsafe { init(ram, ram_bytes, desc, config) };
    let (node, code) = match r {
        Ok(n) => (n, FCAN_OK),
        Err(e) => (core::ptr::null_mut(), e),
    };
    // SAFETY: NULL or the caller's writable `int32_t`.
    if let Some(e) = unsafe { error.as_mut() } {
        *e = code;
    }
    node
}

unsafe fn init(
    ram: *mut c_void,
    ram_bytes: u32,
    desc: *const fcan_node_desc_t,
    config: *const fcan_node_config_t,
) -> Result<*mut fcan_node_t, i32> {
    if ram.is_null() || (ram as usize) % RAM_ALIGN != 0 {
        return Err(FCAN_ERR_ARG);
    }
    // SAFETY: the caller's contract (NULL checked).
    let (Some(d), Some(cfg)) = (unsafe { desc.as_ref() }, unsafe { config.as_ref() }) else {
        return Err(FCAN_ERR_ARG);
    };
    if cfg.callbacks.transmit.is_none() {
        return Err(FCAN_ERR_ARG);
    }
    let node_id = NodeId::new(cfg.node_id).ok_or(FCAN_ERR_CONFIG)?;
    let controller = match cfg.controller {
        FCAN_CONTROLLER_CLASSIC => Controller::Classic,
        FCAN_CONTROLLER_FD => Controller::Fd,
        _ => return Err(FCAN_ERR_ARG),
    };
    let counts: &[u8] = if cfg.n_counts == 0 {
        &[]
    } else if cfg.counts.is_null() {
        return Err(FCAN_ERR_ARG);
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(cfg.counts, cfg.n_counts as usize) }
    };
    // SAFETY: the caller's contract (aligned, checked above).
    let mut arena = unsafe { Arena::new(ram.cast(), ram_bytes as usize) };
    // SAFETY: the caller's contract.
    let (at, nd, storage) = unsafe { carve(&mut arena, d)? }.ok_or(FCAN_ERR_RAM)?;
    nd.check().map_err(config_error)?;
    // SAFETY: `at` is the start of the area, aligned and unused until now (`carve`).
    unsafe {
        at.write(CNode {
            node: Node::unconfigured(nd, storage),
            callbacks: cfg.callbacks,
            busy: false,
            active: core::ptr::null_mut(),
            #[cfg(feature = "update")]
            update: core::ptr::null(),
        });
    }
    // SAFETY: just written.
    let cnode = unsafe { &mut *at };
    cnode
        .node
        .configure(NodeConfig {
            node_id,
            boot_id: cfg.boot_id,
            counts,
            controller,
        })
        .map_err(config_error)?;
    Ok(at.cast())
}

/// The node behind a handle, for a call that needs it whole: `None` while it is busy.
///
/// # Safety
/// `node` is NULL or a handle `fcan_node_init` returned, whose area is still the node's.
unsafe fn whole<'a>(node: *mut fcan_node_t) -> Result<&'a mut CNode, i32> {
    let c = node.cast::<CNode>();
    if c.is_null() {
        return Err(FCAN_ERR_ARG);
    }
    // SAFETY: the caller's contract; `busy` is read through the raw pointer, as the
    // handlers' calls read it while `poll` holds `node`.
    if unsafe { addr_of!((*c).busy).read() } {
        return Err(FCAN_ERR_REENTRANT);
    }
    // SAFETY: not busy: no other reference to the node is live.
    Ok(unsafe { &mut *c })
}

/// Takes one received frame, stamped with the node clock `now_us` (µs, wrapping). Data
/// frames update their topics at once; configuration frames are queued for
/// `fcan_node_poll`. Returns `FCAN_OK`, `FCAN_ERR_FRAME` for an illegal frame (not
/// taken), `FCAN_ERR_REENTRANT` from inside a callback.
///
/// Not from an interrupt that may preempt `fcan_node_poll` (it would be refused): queue
/// frames in the interrupt and ingest them from the loop.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `frame` points to a frame.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_ingest(
    node: *mut fcan_node_t,
    frame: *const fcan_frame_t,
    now_us: u32,
) -> i32 {
    // SAFETY: the caller's contract.
    let c = match unsafe { whole(node) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: the caller's contract.
    let Some(f) = (unsafe { frame.as_ref() }) else {
        return FCAN_ERR_ARG;
    };
    match f.to_frame() {
        Some(f) => {
            c.node.receive(&f, now_us);
            FCAN_OK
        }
        None => FCAN_ERR_FRAME,
    }
}

struct Tx(fcan_callbacks_t);

impl Transmit for Tx {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        let f = fcan_frame_t::from_frame(frame);
        match self.0.transmit {
            // SAFETY: the application's callback, with its own `user` pointer and a frame
            // that lives through the call.
            Some(cb) if unsafe { cb(self.0.user, &f) } == 0 => Ok(()),
            _ => Err(TxRefused),
        }
    }
}

/// The runtime's `Dispatch` over the application's callbacks.
struct App {
    node: *mut CNode,
    cb: fcan_callbacks_t,
    #[cfg(feature = "update")]
    update: Option<crate::update::CUpdate>,
}

impl App {
    /// Runs `f` with `cx` reachable from the handle, as `fcan_node_publish` and the read
    /// calls look for it.
    fn with_cx<R>(&mut self, cx: &mut Context<'_>, f: impl FnOnce(*mut fcan_node_t) -> R) -> R {
        let ptr: *mut Context<'_> = cx;
        // SAFETY: `self.node` is the node `poll` runs for; `active` is a field outside
        // the `Node` that `poll` borrows, written through the raw pointer only. The
        // context outlives the call, and `active` is cleared before `cx` is used again.
        unsafe {
            let active = addr_of_mut!((*self.node).active);
            let prev = active.read();
            active.write(ptr.cast());
            let r = f(self.node.cast());
            active.write(prev);
            r
        }
    }
}

impl fcan_runtime_nostd::codegen::Dispatch for App {
    fn service(
        &mut self,
        cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome {
        let Some(cb) = self.cb.service else {
            return ServiceOutcome::Failed;
        };
        let c_call = fcan_service_call_t {
            block: call.block,
            service: call.service,
            reserved: [0; 2],
            request_len: call.request.len() as u32,
            request: call.request.as_ptr(),
            token: token_to_c(call.token),
        };
        let cap = response.len();
        let out = response.as_mut_ptr();
        let user = self.cb.user;
        let mut len: u32 = 0;
        let reply = self.with_cx(cx, |handle| {
            // SAFETY: the application's callback; every pointer lives through the call,
            // `out` holds `cap` bytes.
            unsafe { cb(user, handle, &c_call, out, cap as u32, &mut len) }
        });
        match reply {
            FCAN_REPLY_OK if (len as usize) <= cap => ServiceOutcome::Done(len as usize),
            FCAN_REPLY_ACCEPTED => ServiceOutcome::Accepted,
            FCAN_REPLY_BUSY => ServiceOutcome::Busy,
            FCAN_REPLY_BAD_REQUEST => ServiceOutcome::BadRequest,
            // FAILED, an unknown code, or a response longer than the buffer.
            _ => ServiceOutcome::Failed,
        }
    }

    fn params_changed(&mut self, cx: &mut Context<'_>, block: u8, changed: u32) {
        if let Some(cb) = self.cb.params_changed {
            let user = self.cb.user;
            // SAFETY: the application's callback.
            self.with_cx(cx, |handle| unsafe { cb(user, handle, block, changed) });
        }
    }

    #[cfg(feature = "update")]
    fn update(&mut self) -> Option<&mut dyn fcan_runtime_nostd::Update> {
        self.update
            .as_mut()
            .map(|u| u as &mut dyn fcan_runtime_nostd::Update)
    }

    fn event(&mut self, event: Event) {
        let code = match event {
            Event::Acknowledged => FCAN_EVENT_ACKNOWLEDGED,
            Event::Started => FCAN_EVENT_STARTED,
            Event::MasterLost => FCAN_EVENT_MASTER_LOST,
            Event::IdCollision => FCAN_EVENT_ID_COLLISION,
            Event::PlanReset => FCAN_EVENT_PLAN_RESET,
        };
        if let Some(cb) = self.cb.event {
            // SAFETY: the application's callback; the node is busy, so calls from it
            // are refused.
            unsafe { cb(self.cb.user, self.node.cast(), code) }
        }
    }
}

fn token_to_c(t: DeferredToken) -> fcan_deferred_t {
    fcan_deferred_t {
        slot: t.slot,
        transfer: t.transfer,
        block: t.block,
        service: t.service,
        generation: t.generation,
    }
}

/// Does the node's work due at `now_us`: handles queued configuration frames, runs
/// service handlers and parameter batches (the `service` and `params_changed`
/// callbacks), sends what is due through `transmit`, runs the timers. Call it after
/// ingesting frames and at least by the time `fcan_node_poll_at` names.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_poll(node: *mut fcan_node_t, now_us: u32) -> i32 {
    let c = node.cast::<CNode>();
    // SAFETY: the caller's contract; checks `busy`.
    if let Err(e) = unsafe { whole(node) } {
        return e;
    }
    // SAFETY: not busy, so nothing else borrows the node. The node is borrowed alone
    // (`addr_of_mut!`), so the handlers' calls may reach `busy` and `active`.
    unsafe {
        addr_of_mut!((*c).busy).write(true);
        let cb = addr_of!((*c).callbacks).read();
        let mut app = App {
            node: c,
            cb,
            #[cfg(feature = "update")]
            update: crate::update::CUpdate::of(addr_of!((*c).update).read()),
        };
        let n = &mut *addr_of_mut!((*c).node);
        n.poll(now_us, &mut Tx(cb), &mut app);
        addr_of_mut!((*c).busy).write(false);
    }
    FCAN_OK
}

/// When the node next needs `fcan_node_poll`, if before it hears anything: writes the
/// time to `*deadline_us` and returns 1, or returns 0 (nothing scheduled; poll after the
/// next frame). A time at or before `now_us` means now.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `deadline_us` is writable.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_poll_at(
    node: *mut fcan_node_t,
    now_us: u32,
    deadline_us: *mut u32,
) -> i32 {
    // SAFETY: the caller's contract.
    let c = match unsafe { whole(node) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    match c.node.poll_at(now_us) {
        Some(t) => {
            // SAFETY: the caller's contract.
            if let Some(d) = unsafe { deadline_us.as_mut() } {
                *d = t;
            }
            1
        }
        None => 0,
    }
}

fn publish_error(e: PublishError) -> i32 {
    match e {
        PublishError::NotWired => FCAN_ERR_NOT_WIRED,
        PublishError::WrongDirection => FCAN_ERR_DIRECTION,
        PublishError::BadLength => FCAN_ERR_LENGTH,
        _ => FCAN_ERR_INDEX,
    }
}

/// Where a read or publish goes: the node, or the context of the handler running.
enum Target<'a> {
    Node(&'a mut CNode),
    Cx(&'a mut Context<'static>),
}

/// # Safety
/// As `whole`.
unsafe fn target<'a>(node: *mut fcan_node_t) -> Result<Target<'a>, i32> {
    let c = node.cast::<CNode>();
    if c.is_null() {
        return Err(FCAN_ERR_ARG);
    }
    // SAFETY: the caller's contract; `active` is set only while a handler runs, and then
    // points to the context `poll` handed it (see `App::with_cx`).
    unsafe {
        let active = addr_of!((*c).active).read();
        if !active.is_null() {
            return Ok(Target::Cx(&mut *active));
        }
        whole(node).map(Target::Node)
    }
}

/// Gives the node a staging area for firmware updates (`update`, kept: make it
/// `static const`), or takes it away (NULL). From the next poll the node announces that
/// it takes updates and answers the master's offers through the callbacks. Returns
/// `FCAN_ERR_ARG` when a required callback is missing. Only in the update build
/// (`FCAN_UPDATE`, `libfcan_node_update.a`).
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `update` is NULL or outlives the node.
#[cfg(feature = "update")]
#[no_mangle]
pub unsafe extern "C" fn fcan_node_set_update(
    node: *mut fcan_node_t,
    update: *const fcan_update_t,
) -> i32 {
    // SAFETY: the caller's contract.
    let c = match unsafe { whole(node) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: NULL or the caller's table.
    if let Some(u) = unsafe { update.as_ref() } {
        if crate::update::CUpdate::of(u).is_none() {
            return FCAN_ERR_ARG;
        }
    }
    c.update = update;
    FCAN_OK
}

/// The `user` pointer of the node's callbacks (`fcan_node_config_t.callbacks.user`):
/// how a handler, which gets the node, finds the application's own state. Works
/// everywhere, callbacks included; NULL for a NULL node.
///
/// # Safety
/// `node` is NULL or a handle from `fcan_node_init`.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_user(node: *mut fcan_node_t) -> *mut c_void {
    let c = node.cast::<CNode>();
    if c.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: the caller's contract; `callbacks` is outside the `Node` that `poll`
    // borrows and is never written after init, so reading it during a callback is fine.
    unsafe { addr_of!((*c).callbacks.user).read() }
}

/// Sets an s2m topic's value (`len` must be its packed size). Periodic frames carry it
/// at their next period; on-publish frames go out at the next poll while running.
/// Works from the main loop and from inside `service` / `params_changed`.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `bytes` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_publish(
    node: *mut fcan_node_t,
    block: u8,
    topic: u8,
    bytes: *const u8,
    len: u32,
) -> i32 {
    if bytes.is_null() && len != 0 {
        return FCAN_ERR_ARG;
    }
    let data: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(bytes, len as usize) }
    };
    // SAFETY: the caller's contract.
    let r = match unsafe { target(node) } {
        Ok(Target::Node(c)) => c.node.publish(block, topic, data),
        Ok(Target::Cx(cx)) => cx.publish(block, topic, data),
        Err(e) => return e,
    };
    r.map_or_else(publish_error, |()| FCAN_OK)
}

fn copy_out(src: &[u8], out: *mut u8, cap: u32) -> i32 {
    if src.len() > cap as usize {
        return FCAN_ERR_LENGTH;
    }
    if !src.is_empty() {
        if out.is_null() {
            return FCAN_ERR_ARG;
        }
        // SAFETY: the caller's buffer holds `cap` ≥ `src.len()` bytes and is not the
        // node's own memory (it is the application's).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), out, src.len()) };
    }
    src.len() as i32
}

/// Copies a topic's current value (m2s: as last received, whole; s2m: as last published)
/// to `out` (`cap` bytes) and, when `info` is not NULL, its generation and time. Returns
/// the bytes copied or an `FCAN_ERR_*`. Works from the main loop and from inside
/// `service` / `params_changed`.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `out` holds `cap` bytes; `info` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_topic(
    node: *mut fcan_node_t,
    block: u8,
    topic: u8,
    out: *mut u8,
    cap: u32,
    info: *mut fcan_topic_info_t,
) -> i32 {
    // SAFETY: the caller's contract.
    let t = match unsafe { target(node) } {
        Ok(t) => t,
        Err(e) => return e,
    };
    let (wired, read) = match &t {
        Target::Node(c) => (c.node.is_wired(block), c.node.topic(block, topic)),
        Target::Cx(cx) => (cx.is_wired(block), cx.topic(block, topic)),
    };
    let Some(read) = read else {
        return if wired {
            FCAN_ERR_INDEX
        } else {
            FCAN_ERR_NOT_WIRED
        };
    };
    let n = copy_out(read.bytes, out, cap);
    if n >= 0 {
        // SAFETY: the caller's contract.
        if let Some(i) = unsafe { info.as_mut() } {
            *i = fcan_topic_info_t {
                generation: read.generation,
                received_at_us: read.received_at_us,
            };
        }
    }
    n
}

/// Copies a parameter's packed value to `out` (`cap` bytes). Returns the bytes copied or
/// an `FCAN_ERR_*`. Works from the main loop and from inside `service` /
/// `params_changed`.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `out` holds `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_param(
    node: *mut fcan_node_t,
    block: u8,
    param: u8,
    out: *mut u8,
    cap: u32,
) -> i32 {
    // SAFETY: the caller's contract.
    let t = match unsafe { target(node) } {
        Ok(t) => t,
        Err(e) => return e,
    };
    let (wired, value) = match &t {
        Target::Node(c) => (c.node.is_wired(block), c.node.param(block, param)),
        Target::Cx(cx) => (cx.is_wired(block), cx.param(block, param)),
    };
    match value {
        Some(v) => copy_out(v, out, cap),
        None if wired => FCAN_ERR_INDEX,
        None => FCAN_ERR_NOT_WIRED,
    }
}

/// Completes a deferred service call with its packed response (`len` bytes); it goes
/// out from the next poll. `FCAN_ERR_TOKEN` when the call is no longer pending (it was
/// completed, or answered EXPIRED after the deferred-service timeout).
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `token` points to a token; `response`
/// holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_complete(
    node: *mut fcan_node_t,
    token: *const fcan_deferred_t,
    response: *const u8,
    len: u32,
) -> i32 {
    // SAFETY: the caller's contract.
    let c = match unsafe { whole(node) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { token.as_ref() }) else {
        return FCAN_ERR_ARG;
    };
    if response.is_null() && len != 0 {
        return FCAN_ERR_ARG;
    }
    let data: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(response, len as usize) }
    };
    let token = DeferredToken {
        slot: t.slot,
        transfer: t.transfer,
        block: t.block,
        service: t.service,
        generation: t.generation,
    };
    match c.node.complete(token, data) {
        Ok(()) => FCAN_OK,
        Err(CompleteError::TooLong) => FCAN_ERR_LENGTH,
        Err(_) => FCAN_ERR_TOKEN,
    }
}

/// The node's state, as the wire numbers it (`FCAN_STATE_*`), or a negative
/// `FCAN_ERR_*`.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_state(node: *mut fcan_node_t) -> i32 {
    // SAFETY: the caller's contract.
    match unsafe { whole(node) } {
        Ok(c) => c.node.state() as u8 as i32,
        Err(e) => e,
    }
}

/// Copies the node's counters to `*out`.
///
/// # Safety
/// `node` is a handle from `fcan_node_init`; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn fcan_node_counters(
    node: *mut fcan_node_t,
    out: *mut fcan_counters_t,
) -> i32 {
    // SAFETY: the caller's contract.
    let c = match unsafe { whole(node) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: the caller's contract.
    let Some(out) = (unsafe { out.as_mut() }) else {
        return FCAN_ERR_ARG;
    };
    let k = c.node.counters();
    *out = fcan_counters_t {
        rx_handled: k.rx_handled,
        rx_malformed: k.rx_malformed,
        rx_ignored: k.rx_ignored,
        rx_bad_state: k.rx_bad_state,
        reassembly_dropped: k.reassembly_dropped,
        tx_refused: k.tx_refused,
        tx_frames: k.tx_frames,
        naks_sent: k.naks_sent,
        services_busy: k.services_busy,
        master_lost: k.master_lost,
    };
    FCAN_OK
}

/// A short English description of an `FCAN_ERR_*` (a static NUL-terminated string).
#[no_mangle]
pub extern "C" fn fcan_strerror(code: i32) -> *const core::ffi::c_char {
    let s: &'static core::ffi::CStr = match code {
        FCAN_OK => c"ok",
        FCAN_ERR_ARG => c"bad argument (NULL pointer, RAM not 8-byte aligned, or out of range)",
        FCAN_ERR_RAM => c"RAM area too small (see fcan_node_ram_needed)",
        FCAN_ERR_DESC => c"descriptor inconsistent or from another FCAN_ABI_VERSION",
        FCAN_ERR_CONFIG => c"configuration does not fit the schema (node id, instance counts)",
        FCAN_ERR_REENTRANT => c"node busy: called from inside a callback",
        FCAN_ERR_INDEX => c"no such block, topic or parameter",
        FCAN_ERR_NOT_WIRED => c"block not wired on this board",
        FCAN_ERR_DIRECTION => c"publish on a master-to-node topic",
        FCAN_ERR_LENGTH => c"length does not match",
        FCAN_ERR_TOKEN => c"deferred call no longer pending",
        FCAN_ERR_FRAME => c"frame length or identifier not legal for its kind",
        FCAN_ERR_DECODE => c"bytes do not decode as the message (a bool other than 0 or 1)",
        _ => c"unknown error",
    };
    s.as_ptr()
}
