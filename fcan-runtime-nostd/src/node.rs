//! The node: the application-facing API and the glue between the receive queue, the
//! message handlers, the timers, the scheduler and the outgoing queue.

use crate::api::{Dispatch, Event, ServiceCall, ServiceOutcome, Transmit};
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::error::{CompleteError, ConfigError, PublishError};
use crate::outq::{Body, OutMsg, OutQueue, Sources};
use crate::plan::{self, PlanCounts, PlanEntry, PlanFrame};
use crate::rxq::{RxQueue, RX_QUEUE_LEN};
use crate::services::{self, Ctx, SlotState, SvcAction, SvcSlot};
use crate::state::Core;
use crate::storage::{Parts, Storage};
use crate::topics::{self, TopicRead, TopicState};
use crate::wired::Wired;
use crate::{params, sched, CONFIG_REASSEMBLY_BYTES};
use fcan_core::frame::{CanId, Frame};
use fcan_core::id::{is_data_id, ConfigId, Direction, IdError, NodeId, Opcode};
use fcan_core::msg::{
    AnnounceAck, BusMode, ConfigMessage, Counters, FaultCode, FrameDefine, NodeState, ParamValue,
    ResultCode, SchemaData, SchemaRead, ServiceResponse, ServiceStatus, Start,
};
use fcan_core::segment::ReassemblyPool;

/// How a board configures its node at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeConfig<'a> {
    /// This node's id on the bus (from DIP switches, flash, ...).
    pub node_id: NodeId,
    /// Random per boot (a hardware RNG, or noise from an ADC): tells the master the node
    /// rebooted and breaks ties between two nodes with one id.
    pub boot_id: u32,
    /// Instances wired on this board, one per instance array, each ≤ its `max_count`.
    pub counts: &'a [u8],
    /// Whether the CAN controller and its driver can send and receive CAN FD frames. A
    /// node with `false` never sends an FD frame and NAKs (`Unsupported`) an
    /// ANNOUNCE_ACK that asks for an FD bus mode.
    pub fd_capable: bool,
}

/// An fcan node, driven by [`Node::receive`] and [`Node::poll`].
///
/// `B` holds all the node's RAM ([`crate::Buffers`], or `&mut` to one in a `static`).
/// The node never allocates, never panics on bus input, and every loop is bounded by a
/// table size.
///
/// ```
/// use fcan_runtime_nostd::*;
/// use fcan_runtime_nostd::fcan_core::{frame::Frame, hash::HashPrefix, id::NodeId};
/// use fcan_runtime_nostd::fcan_core::msg::{DataDirection, NodeState};
///
/// // What codegen emits for a schema with one type holding one 4-byte s2m topic.
/// static TOPICS: [TopicDesc; 1] = [TopicDesc {
///     dir: DataDirection::S2m, period_us: 10_000, size: 4, offset: 0, stage_offset: u16::MAX,
/// }];
/// static TYPES: [TypeDesc; 1] = [TypeDesc {
///     name: "Sensor", topics: &TOPICS, params: &[], services: &[],
///     topic_bytes: 4, stage_bytes: 0, param_bytes: 0,
/// }];
/// static NODE: NodeDesc = NodeDesc {
///     blob: b"blob", hash: HashPrefix([0; 8]),
///     limits: LimitsDesc { max_frames: 2, max_copy_entries: 2, service_buffer: 0, service_reassembly: 0 },
///     types: &TYPES,
///     arrays: &[ArrayDesc { type_index: 0, max_count: 1, first_block: 0 }],
///     blocks: &[BlockDesc { type_index: 0, array: 0, index: 0, topic_offset: 0, stage_offset: 0,
///                           param_offset: 0, topic_slot: 0 }],
///     topic_bytes: 4, stage_bytes: 0, param_bytes: 0, topic_slots: 1,
///     max_request: 0, max_response: 0,
/// };
///
/// struct App;
/// impl Dispatch for App {
///     fn service(&mut self, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome { ServiceOutcome::Failed }
///     fn params_changed(&mut self, _: u8, _: u32) {}
///     fn event(&mut self, _: Event) {}
/// }
/// struct Bus(Vec<Frame>);
/// impl Transmit for Bus {
///     fn transmit(&mut self, f: &Frame) -> Result<(), TxRefused> { self.0.push(*f); Ok(()) }
/// }
///
/// let config = NodeConfig { node_id: NodeId::new(3).unwrap(), boot_id: 7, counts: &[1], fd_capable: false };
/// let mut node = Node::new(&NODE, Buffers::<4, 0, 0, 1, 1, 2, 2, 0, 0>::new(), config).unwrap();
/// node.publish(0, 0, &[1, 2, 3, 4]).unwrap();
/// let mut bus = Bus(Vec::new());
/// node.poll(0, &mut bus, &mut App);          // the listen window opens
/// assert!(bus.0.is_empty());
/// node.poll(400_000, &mut bus, &mut App);    // ... and closes: ANNOUNCE
/// assert!(!bus.0.is_empty());
/// assert_eq!(node.state(), NodeState::Unprovisioned);
/// ```
pub struct Node<B> {
    core: Core,
    buffers: B,
    rx: RxQueue,
    /// One configuration transfer at a time: a master sends the segments of each message
    /// to a node back to back (protocol §10.8), so a second buffer (422 B) only ever
    /// served transfers that interleave, which nothing conforming sends.
    pool: ReassemblyPool<1, CONFIG_REASSEMBLY_BYTES>,
    pool_dropped: u32,
    outq: OutQueue,
    /// [`Node::configure`] succeeded: until then `receive` and `poll` do nothing.
    configured: bool,
}

impl<B> Node<B> {
    /// A node for `desc` in `buffers`, not yet configured: `const`, so a whole node can
    /// initialise a `static` (and live in `.bss`/`.data`, never built on the stack).
    /// Configure it in place with [`Node::configure`] at boot.
    ///
    /// Until configured the node is inert: [`Node::receive`] and [`Node::poll`] return at
    /// once without touching state or counters (a frame is dropped uncounted, nothing is
    /// sent), its state reads `Unprovisioned`, no block is wired (so `publish` answers
    /// `NotWired` and `topic`/`param` `None`), and [`Node::node_id`] is the broadcast id.
    pub const fn unconfigured(desc: &'static NodeDesc, buffers: B) -> Self {
        Node {
            core: Core::new(desc, NodeId::BROADCAST, 0, false, Wired::EMPTY, 0),
            buffers,
            rx: RxQueue::new(),
            pool: ReassemblyPool::new(),
            pool_dropped: 0,
            outq: OutQueue::new(),
            configured: false,
        }
    }

    /// Whether [`Node::configure`] (or [`Node::new`]) succeeded on this node.
    pub fn is_configured(&self) -> bool {
        self.configured
    }
}

impl<B: Storage> Node<B> {
    /// A node for `desc` in `buffers`, configured by `config`: [`Node::unconfigured`]
    /// then [`Node::configure`]. Returns the node by value; to build a large node without
    /// a copy on the stack, put an unconfigured node in a `static` and configure it there.
    pub fn new(
        desc: &'static NodeDesc,
        buffers: B,
        config: NodeConfig<'_>,
    ) -> Result<Self, ConfigError> {
        let mut node = Self::unconfigured(desc, buffers);
        node.configure(config)?;
        Ok(node)
    }

    /// Configures the node in place, as a fresh boot: checks the buffers are large
    /// enough for the descriptor (whose own consistency is [`NodeDesc::check`]'s job,
    /// done where the descriptor is made), clears every buffer, queue, counter and
    /// timer, writes every parameter's default, wires the instances of `config.counts`,
    /// and starts in `Unprovisioned`; the listen window opens at the next
    /// `receive`/`poll`.
    ///
    /// May be called again (a reboot of the node without the board). On error the node
    /// is left unconfigured (inert, as [`Node::unconfigured`] describes).
    pub fn configure(&mut self, config: NodeConfig<'_>) -> Result<(), ConfigError> {
        let desc = self.core.desc;
        self.configured = false;
        // Back to the unconfigured state first, so an error leaves nothing half set.
        self.core = Core::new(desc, NodeId::BROADCAST, 0, false, Wired::EMPTY, 0);
        self.rx.clear();
        self.pool.clear();
        self.pool_dropped = 0;
        self.outq.clear();

        if config.counts.len() != desc.arrays.len() {
            return Err(ConfigError::CountsLength);
        }
        for (i, (c, a)) in config.counts.iter().zip(desc.arrays.iter()).enumerate() {
            if c > &a.max_count {
                return Err(ConfigError::CountTooLarge { array: i as u8 });
            }
        }
        let mut p = self.buffers.parts();
        check_sizes(desc, &p)?;
        let svc_slots = if desc.has_services() {
            (desc.limits.service_reassembly.max(1) as usize).min(p.svc.len())
        } else {
            0
        };
        wipe(&mut p);
        params::write_defaults(desc, &mut p)?;
        self.core = Core::new(
            desc,
            config.node_id,
            config.boot_id,
            config.fd_capable,
            Wired::from_counts(desc, config.counts),
            svc_slots,
        );
        self.configured = true;
        Ok(())
    }

    /// Takes one received frame. Data frames are applied to the topics at once (that is
    /// only copying); configuration frames are queued for [`Node::poll`]. Frames for
    /// other nodes, unknown IDs and a full queue are counted and dropped. Does nothing
    /// (counts nothing) until the node is configured.
    pub fn receive(&mut self, frame: &Frame, now_us: u32) {
        if !self.configured {
            return;
        }
        let core = &mut self.core;
        core.see_time(now_us);
        if core.state == NodeState::Fault {
            // Silent for good: the bus goes on without us.
            bump(&mut core.counters.rx_ignored);
            return;
        }
        match frame.id() {
            CanId::Standard(id) => {
                // Before RUNNING there is no plan to tell our m2s frames from other
                // nodes' data, which a shared bus always carries: not an error.
                if !is_data_id(id) || core.state != NodeState::Running {
                    bump(&mut core.counters.rx_ignored);
                } else {
                    let mut p = self.buffers.parts();
                    match plan::lookup(&p, core.plan.m2s, id) {
                        Some(fi) => topics::apply_m2s(
                            core.desc,
                            &mut p,
                            &mut core.counters,
                            fi,
                            frame.data(),
                            now_us,
                        ),
                        None => bump(&mut core.counters.rx_ignored),
                    }
                }
            }
            CanId::Extended(raw) => match ConfigId::from_raw(raw) {
                Ok(id) => {
                    let mine = id.node == core.node_id;
                    let wanted = match id.dir {
                        Direction::ToNode => mine || id.node.is_broadcast(),
                        Direction::ToMaster => mine,
                    };
                    if !wanted {
                        bump(&mut core.counters.rx_ignored);
                    } else if self.rx.is_empty() && inner_segment(core, &id) {
                        // Nothing queued before it, so taking it now keeps the order: a
                        // long transfer (a FRAME_DEFINE is up to 50 Classical frames)
                        // takes no queue slot, only its last segment waits for `poll`.
                        let _ = reassemble(core, &mut self.pool, id, frame.data(), now_us);
                    } else if !self.rx.push(raw, frame.data()) {
                        bump(&mut core.rx_overflow);
                        bump(&mut core.counters.rx_ignored);
                    }
                }
                Err(IdError::NotConfigPlane) => bump(&mut core.counters.rx_ignored),
                Err(_) => bump(&mut core.counters.rx_malformed),
            },
        }
    }

    /// Takes every frame waiting in a receive [`crate::Mailbox`], each as
    /// [`Node::receive`] would at the time it arrived: the main loop's half of a receive
    /// path an interrupt handler fills. Call it before [`Node::poll`], and read the clock
    /// for that poll after it: a frame stamped later than the time the node is polled at
    /// would look as if it came from the future (ages are wrapping differences).
    pub fn receive_from<const N: usize>(&mut self, mailbox: &mut crate::MailboxConsumer<'_, N>) {
        // Bounded by the mailbox's size: frames the handler adds meanwhile wait for the
        // next call rather than keep this loop going.
        for _ in 0..N {
            let Some(s) = mailbox.pop() else {
                break;
            };
            self.receive(&s.frame, s.at_us);
        }
    }

    /// Does the node's work: handles queued configuration frames, runs service handlers
    /// and parameter commits, fires timers, sends due data frames and then queued
    /// configuration frames until `tx` refuses one. Call it often (every millisecond or
    /// on every received frame) with the current wrapping microsecond clock. Does
    /// nothing until the node is configured.
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit, app: &mut impl Dispatch) {
        let Node {
            core,
            buffers,
            rx,
            pool,
            pool_dropped,
            outq,
            configured,
        } = self;
        if !*configured {
            return;
        }
        core.see_time(now_us);
        if core.state == NodeState::Fault {
            rx.clear();
            return;
        }
        let mut p = buffers.parts();
        pool.expire(now_us);
        services::expire(&mut p, &mut core.counters, now_us);

        // Requests: one per free place in the outgoing queue, so no reply is ever lost.
        for _ in 0..RX_QUEUE_LEN {
            if outq.free() == 0 || core.state == NodeState::Fault {
                break;
            }
            let Some(f) = rx.pop() else {
                break;
            };
            handle_frame(core, &mut p, pool, outq, app, f.raw_id, f.payload(), now_us);
        }
        let dropped = pool.dropped();
        for _ in 0..dropped.wrapping_sub(*pool_dropped).min(u16::MAX as u32) {
            bump(&mut core.counters.reassembly_dropped);
        }
        *pool_dropped = dropped;
        if core.state == NodeState::Fault {
            rx.clear();
            return;
        }
        if core.commit_pending {
            core.commit_pending = false;
            params::commit(core.desc, &mut p, app);
        }
        run_services(core, &mut p, outq, app);
        core.timers(now_us, outq, app);

        // Data first: standard IDs win arbitration on the bus anyway.
        let data_ok = core.state != NodeState::Running
            || sched::transmit_due(core, &mut p, now_us, tx).is_ok();
        if data_ok {
            let mut src = Sources {
                desc: core.desc,
                wired: &core.wired,
                parts: &mut p,
            };
            let _ = outq.pump(&mut src, &mut core.counters, tx);
        }
    }

    /// When the node next needs [`Node::poll`], on the wrapping microsecond clock: the
    /// earliest of its timers (listen window, ANNOUNCE back-off, heartbeat, master
    /// watchdog, periodic frames, service timeouts), or `now_us` itself when work waits
    /// (a queued frame or message, a published topic, a parameter commit, a service
    /// handler to run). `None` when nothing is scheduled: only a received frame or a call
    /// of the application can give the node work then (and it is unconfigured or in
    /// FAULT). Like smoltcp's `Interface::poll_at`.
    ///
    /// A firmware that sleeps between polls calls this after each `poll`, sets a timer
    /// for the answer, and also wakes on its CAN controller's receive and
    /// transmit-complete interrupts: after [`Node::receive`] or [`Node::publish`] the
    /// deadline may be earlier, and a frame the driver refused is offered again only at
    /// the next poll. A configuration transfer left unfinished is dropped at the next
    /// poll after its timeout rather than at a deadline of its own (it only frees the
    /// reassembly buffer, which a new transfer also reclaims).
    ///
    /// ```
    /// # use fcan_runtime_nostd::*;
    /// # fn sleep_until(_deadline_us: u32) {}
    /// # fn step<B: Storage>(node: &mut Node<B>, now: u32, tx: &mut impl Transmit, app: &mut impl Dispatch) {
    /// node.poll(now, tx, app);
    /// if let Some(deadline) = node.poll_at(now) {
    ///     sleep_until(deadline); // or until a CAN interrupt, whichever comes first
    /// }
    /// # }
    /// ```
    pub fn poll_at(&self, now_us: u32) -> Option<u32> {
        if !self.configured {
            return None;
        }
        let work = !self.rx.is_empty() || self.outq.free() < crate::OUT_QUEUE_LEN;
        crate::wake::poll_at(&self.core, &self.buffers.parts_ref(), work, now_us)
    }

    /// The current value of a topic of a wired block (m2s: as last received, whole;
    /// s2m: as last published).
    pub fn topic(&self, block: u8, topic: u8) -> Option<TopicRead<'_>> {
        if !self.core.wired.get(block) {
            return None;
        }
        let (bd, td) = self.core.desc.block(block)?;
        let t = td.topics.get(topic as usize)?;
        let p = self.buffers.parts_ref();
        let start = bd.topic_offset as usize + t.offset as usize;
        let bytes = p.topic.get(start..start + t.size as usize)?;
        let st = p.topics.get(bd.topic_slot as usize + topic as usize)?;
        Some(TopicRead {
            bytes,
            generation: st.generation,
            received_at_us: st.received_at_us,
        })
    }

    /// Sets an s2m topic's value. Periodic frames carry it at their next period;
    /// on-commit (`period_us: 0`) frames carrying it go out at the next poll while
    /// running, or at the first chance after START.
    pub fn publish(&mut self, block: u8, topic: u8, bytes: &[u8]) -> Result<(), PublishError> {
        let core = &mut self.core;
        let (bd, td) = core.desc.block(block).ok_or(PublishError::BadIndex)?;
        let t = td
            .topics
            .get(topic as usize)
            .ok_or(PublishError::BadIndex)?;
        if !core.wired.get(block) {
            return Err(PublishError::NotWired);
        }
        if t.dir != fcan_core::msg::DataDirection::S2m {
            return Err(PublishError::WrongDirection);
        }
        if bytes.len() != t.size as usize {
            return Err(PublishError::BadLength);
        }
        let mut p = self.buffers.parts();
        let start = bd.topic_offset as usize + t.offset as usize;
        p.topic
            .get_mut(start..start + bytes.len())
            .ok_or(PublishError::BadIndex)?
            .copy_from_slice(bytes);
        let slot = bd.topic_slot.saturating_add(topic as u16);
        if let Some(st) = p.topics.get_mut(slot as usize) {
            st.generation = st.generation.wrapping_add(1).max(1);
            st.received_at_us = core.now;
            if core.state != NodeState::Running {
                st.unsent = true;
            }
        }
        if core.state == NodeState::Running {
            sched::published(core, &mut p, slot);
        }
        Ok(())
    }

    /// A parameter's packed value (`None` for an unknown param or an unwired block).
    pub fn param(&self, block: u8, param: u8) -> Option<&[u8]> {
        params::read(
            self.core.desc,
            &self.core.wired,
            self.buffers.parts_ref().params,
            block,
            param,
        )
    }

    /// Completes a deferred service call (its handler answered `Accepted`). The OK
    /// response goes out from the next `poll`, under the request's transfer id. A call
    /// not completed within `fcan_core::timing::DEFERRED_SERVICE_TIMEOUT_US` (restarted
    /// by each repeat of the request) has been answered EXPIRED and its token is refused.
    pub fn complete(
        &mut self,
        token: crate::api::DeferredToken,
        response: &[u8],
    ) -> Result<(), CompleteError> {
        let mut p = self.buffers.parts();
        if token.slot as usize >= self.core.svc_slots {
            return Err(CompleteError::UnknownToken);
        }
        services::complete(&mut p, token, response)
    }

    /// The node's state.
    pub fn state(&self) -> NodeState {
        self.core.state
    }

    /// Why the node is in FAULT (`FaultCode::None` otherwise).
    pub fn fault(&self) -> FaultCode {
        self.core.fault
    }

    /// The node's counters (what STATS sends). Receive-queue overflows are in
    /// `rx_ignored` (and alone in [`Node::rx_overflows`]).
    pub fn counters(&self) -> Counters {
        self.core.counters
    }

    /// Configuration frames dropped because the receive queue was full.
    pub fn rx_overflows(&self) -> u32 {
        self.core.rx_overflow
    }

    /// Whether block `block` is wired on this board.
    pub fn is_wired(&self, block: u8) -> bool {
        self.core.wired.get(block)
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.core.node_id
    }

    /// This boot's id.
    pub fn boot_id(&self) -> u32 {
        self.core.boot_id
    }

    /// The bus mode the master chose (Classic until acknowledged).
    pub fn bus_mode(&self) -> BusMode {
        self.core.mode
    }

    /// The descriptor the node runs.
    pub fn desc(&self) -> &'static NodeDesc {
        self.core.desc
    }
}

/// Clears every buffer to what `Buffers::new` holds (parameters are written next).
fn wipe(p: &mut Parts<'_>) {
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
fn check_sizes(desc: &NodeDesc, p: &Parts<'_>) -> Result<(), ConfigError> {
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

/// One configuration-plane frame from the receive queue.
#[allow(clippy::too_many_arguments)]
fn handle_frame<const S: usize, const N: usize>(
    core: &mut Core,
    p: &mut Parts<'_>,
    pool: &mut ReassemblyPool<S, N>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    raw: u32,
    data: &[u8],
    now: u32,
) {
    let Ok(id) = ConfigId::from_raw(raw) else {
        bump(&mut core.counters.rx_malformed);
        return;
    };
    if id.dir == Direction::ToMaster {
        collision(core, outq, app, &id, data);
        return;
    }
    if core.listening {
        // Silent while listening. A broadcast (the master's HEARTBEAT, DISCOVER) is
        // normal traffic; a frame for our id means a master still talks to our previous
        // boot, and what it said is lost.
        if id.node.is_broadcast() {
            bump(&mut core.counters.rx_ignored);
        } else {
            bump(&mut core.counters.rx_bad_state);
        }
        return;
    }
    if id.opcode == Opcode::Service {
        if id.node.is_broadcast() {
            bump(&mut core.counters.rx_ignored);
            return;
        }
        let cx = Ctx {
            desc: core.desc,
            wired: &core.wired,
            serving: matches!(core.state, NodeState::Provisioned | NodeState::Running),
            slots: core.svc_slots,
            now,
        };
        let action =
            services::on_frame(&cx, p, &mut core.counters, &mut core.svc_discard, id, data);
        if let SvcAction::Reply {
            block,
            service,
            status,
        } = action
        {
            let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                block,
                service,
                status,
                body: &[],
            });
            let rid = core.reply_id(Opcode::Service, &id);
            core.reply(outq, rid, &msg);
        }
        return;
    }
    // Only DISCOVER and the master HEARTBEAT are meant for everyone, and both are single
    // frames: checked before reassembly, so a broadcast transfer (from nothing that
    // conforms) never holds the node's one reassembly buffer.
    if id.node.is_broadcast() && !matches!(id.opcode, Opcode::Discover | Opcode::Heartbeat) {
        bump(&mut core.counters.rx_ignored);
        return;
    }
    let Some(msg) = reassemble(core, pool, id, data, now) else {
        return;
    };
    match ConfigMessage::decode_to_node(id.opcode, msg) {
        Ok(m) => {
            bump(&mut core.counters.rx_handled);
            on_message(core, p, outq, app, &id, m, now);
        }
        Err(_) => {
            bump(&mut core.counters.rx_malformed);
            if matches!(
                id.opcode,
                Opcode::Start
                    | Opcode::FrameDefine
                    | Opcode::ParamSet
                    | Opcode::ParamGet
                    | Opcode::Schema
                    | Opcode::Stats
            ) {
                core.result(outq, &id, ResultCode::BadLength, 0);
            }
        }
    }
}

/// A node→master frame under our own id. Only the first segment of an ANNOUNCE or a
/// HEARTBEAT with another boot_id proves that another node holds the id; everything
/// else (our own RESULT, SCHEMA_DATA, STATS, ... echoed by the controller, or heard from
/// a second controller on the bus) cannot be told from an echo and is ignored.
fn collision(
    core: &mut Core,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    data: &[u8],
) {
    let boot = fcan_core::msg::peek_boot_id(id, data);
    if boot.is_none_or(|b| b == core.boot_id) {
        // No boot named (a foreign frame, a later segment, our own echo): proof of nothing.
        bump(&mut core.counters.rx_ignored);
        return;
    }
    bump(&mut core.counters.rx_handled);
    if core.state == NodeState::Unprovisioned {
        // We were never acknowledged: the other node has the better claim.
        core.enter_fault(FaultCode::IdCollision, outq, app);
    } else {
        // We hold the id: assert it so the master sees two boot_ids and the newcomer,
        // unacknowledged, hears us and faults.
        core.heartbeat(outq);
    }
}

/// Whether `id` is a segment before the last of a master→node transfer for this node
/// that the node takes now (not listening; services have their own reassembly): one that
/// needs neither a reply nor the application, only [`reassemble`].
fn inner_segment(core: &Core, id: &ConfigId) -> bool {
    id.dir == Direction::ToNode
        && !id.eot
        && id.opcode != Opcode::Service
        && !id.node.is_broadcast()
        && !core.listening
}

/// One frame of a configuration transfer into the reassembly buffer: the whole message
/// once its last segment is in. Every failure is counted.
fn reassemble<'p, const S: usize, const N: usize>(
    core: &mut Core,
    pool: &'p mut ReassemblyPool<S, N>,
    id: ConfigId,
    data: &'p [u8],
    now: u32,
) -> Option<&'p [u8]> {
    match pool.push(id, data, now) {
        Ok(Some(m)) => Some(m),
        Ok(None) => {
            bump(&mut core.counters.rx_handled);
            None
        }
        Err(fcan_core::segment::ReassemblyError::NoSlot) => {
            bump(&mut core.counters.reassembly_dropped);
            None
        }
        Err(_) => {
            // Gaps, overflows and short segments are counted by the pool.
            bump(&mut core.counters.rx_malformed);
            None
        }
    }
}

/// A complete, decoded master→node message.
fn on_message(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    msg: ConfigMessage<'_>,
    now: u32,
) {
    match msg {
        ConfigMessage::MasterHeartbeat(hb) => {
            if !core.acknowledged {
                return;
            }
            if hb.session == core.session {
                core.last_master_us = now;
            } else {
                // Another master took over: it must acknowledge us before it may command.
                core.acknowledged = false;
                core.start_announcing(now);
            }
        }
        ConfigMessage::Discover(_) => {
            core.announce(outq);
        }
        ConfigMessage::AnnounceAck(a) => on_ack(core, p, outq, app, id, a, now),
        ConfigMessage::Start(s) => on_start(core, p, outq, app, id, s, now),
        ConfigMessage::FrameDefine(d) => on_define(core, p, outq, app, id, &d),
        ConfigMessage::ParamSet(m) => {
            if !core.acknowledged {
                core.result(outq, id, ResultCode::BadState, 0);
                return;
            }
            let r = params::set(core.desc, &core.wired, p, &m);
            if m.commit {
                core.commit_pending = true;
            }
            match r {
                Ok(()) => core.result(outq, id, ResultCode::Ok, 0),
                Err((code, detail)) => core.result(outq, id, code, detail),
            }
        }
        ConfigMessage::ParamGet(g) => {
            if !core.acknowledged {
                core.result(outq, id, ResultCode::BadState, 0);
                return;
            }
            match params::get_range(core.desc, &core.wired, g.block, g.param) {
                Ok(r) => {
                    let (mtu, brs) = core.tx_mode();
                    let rid = core.reply_id(Opcode::ParamGet, id);
                    let value = p.params.get(r.clone()).unwrap_or(&[]);
                    let msg = ConfigMessage::ParamValue(ParamValue {
                        block: g.block,
                        param: g.param,
                        value,
                    });
                    // Too big to keep encoded: read it from the arena when sent.
                    let m = OutMsg::inline(rid, mtu, brs, &msg).unwrap_or(OutMsg::new(
                        rid,
                        mtu,
                        brs,
                        Body::Param {
                            block: g.block,
                            param: g.param,
                            start: r.start as u32,
                            len: r.len() as u16,
                        },
                    ));
                    outq.push(m);
                }
                Err((code, detail)) => core.result(outq, id, code, detail),
            }
        }
        ConfigMessage::StatsRead => {
            let rid = core.reply_id(Opcode::Stats, id);
            let counters = core.counters;
            core.reply(outq, rid, &ConfigMessage::Stats(counters));
        }
        ConfigMessage::SchemaRead(r) => on_schema_read(core, outq, id, r),
        // Node→master messages never decode from a master→node frame.
        _ => {}
    }
}

fn on_schema_read(core: &mut Core, outq: &mut OutQueue, id: &ConfigId, r: SchemaRead) {
    let blob_len = core.desc.blob.len();
    let offset = (r.offset as usize).min(blob_len);
    let (mtu, brs) = core.tx_mode();
    let n = (r.len as usize)
        .min(blob_len - offset)
        .min(SchemaData::max_chunk(mtu.payload()));
    let rid = core.reply_id(Opcode::Schema, id);
    // Past the end: an empty chunk at the offset asked for.
    let at = if n == 0 { r.offset } else { offset as u32 };
    outq.push(OutMsg::new(
        rid,
        mtu,
        brs,
        Body::Schema {
            offset: at,
            len: n as u16,
        },
    ));
}

fn on_ack(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    a: AnnounceAck,
    now: u32,
) {
    if a.boot_id != core.boot_id {
        return;
    }
    if a.mode != BusMode::Classic && !core.fd_capable {
        core.result(outq, id, ResultCode::Unsupported, 0);
        return;
    }
    let mode_changed = a.mode != core.mode;
    core.acknowledged = true;
    core.session = a.session;
    core.mode = a.mode;
    core.announcing = false;
    match core.state {
        NodeState::Running if !mode_changed => {}
        NodeState::Running => {
            // The plan's frame lengths were for the other mode.
            reset_plan(core, p);
            core.state = NodeState::Provisioned;
            app.event(Event::PlanReset);
        }
        _ => {
            if mode_changed {
                reset_plan(core, p);
            }
            core.state = NodeState::Provisioned;
        }
    }
    core.last_master_us = now;
    // The first heartbeat tells the master the acknowledgement arrived.
    core.heartbeat_due = now;
    app.event(Event::Acknowledged);
}

fn reset_plan(core: &mut Core, p: &mut Parts<'_>) {
    core.plan = PlanCounts::EMPTY;
    core.resume = None;
    for t in p.topics.iter_mut() {
        t.stop_staging();
    }
}

fn on_start(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    s: Start,
    now: u32,
) {
    if !core.acknowledged {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    match core.state {
        NodeState::Running => {
            // A retried START (our ACK was lost): same plan, same answer.
            if s.frame_count as u16 == core.plan.frames {
                core.watchdog_us = s.master_timeout_ms as u32 * 1000;
                core.last_master_us = now;
                core.result(outq, id, ResultCode::Ok, 0);
            } else {
                core.result(outq, id, ResultCode::BadState, 0);
            }
        }
        NodeState::Provisioned | NodeState::Suspended => {
            if let Err((code, detail)) = plan::check_start(p, &core.plan, s.frame_count) {
                core.result(outq, id, code, detail);
                return;
            }
            core.plan.m2s = plan::build_index(p, &core.plan);
            for t in p.topics.iter_mut() {
                t.stop_staging();
            }
            sched::start(core, p, now);
            core.watchdog_us = s.master_timeout_ms as u32 * 1000;
            core.last_master_us = now;
            core.state = NodeState::Running;
            core.announcing = false;
            core.result(outq, id, ResultCode::Ok, 0);
            app.event(Event::Started);
        }
        NodeState::Unprovisioned | NodeState::Fault => {
            core.result(outq, id, ResultCode::BadState, 0)
        }
    }
}

fn on_define(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    d: &FrameDefine<'_>,
) {
    let index = d.header.index;
    let allowed = core.acknowledged
        && match core.state {
            NodeState::Provisioned => true,
            NodeState::Running | NodeState::Suspended => index == 0,
            NodeState::Unprovisioned | NodeState::Fault => false,
        };
    if !allowed {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    let mtu = core.mode.mtu().payload();
    match plan::define(core.desc, &core.wired, p, &mut core.plan, mtu, d) {
        Ok(()) => {
            if index == 0 && core.state != NodeState::Provisioned {
                core.state = NodeState::Provisioned;
                core.resume = None;
                for t in p.topics.iter_mut() {
                    t.stop_staging();
                }
                app.event(Event::PlanReset);
            }
            core.result(outq, id, ResultCode::Ok, 0);
        }
        Err((code, detail)) => core.result(outq, id, code, detail),
    }
}

/// Runs handlers of complete requests and queues the responses of completed deferred
/// calls, one per free place in the outgoing queue.
fn run_services(core: &mut Core, p: &mut Parts<'_>, outq: &mut OutQueue, app: &mut impl Dispatch) {
    for i in 0..core.svc_slots {
        if outq.free() == 0 {
            return;
        }
        let Some(s) = p.svc.get(i).copied() else {
            return;
        };
        let rid = ConfigId::single(
            Opcode::Service,
            Direction::ToMaster,
            core.node_id,
            s.transfer,
        );
        let (mtu, brs) = core.tx_mode();
        let ok_body = Body::Service {
            slot: i as u8,
            block: s.block,
            service: s.service,
        };
        match s.state {
            SlotState::Ready => {
                let token = services::token(&s, i);
                let Some((req, resp)) = services::regions(p, i) else {
                    if let Some(s) = p.svc.get_mut(i) {
                        s.state = SlotState::Free;
                    }
                    continue;
                };
                let call = ServiceCall {
                    block: s.block,
                    service: s.service,
                    request: req,
                    token,
                };
                let resp_cap = resp.len();
                let outcome = app.service(call, resp);
                let status = match outcome {
                    ServiceOutcome::Done(n) if n <= resp_cap => {
                        if let Some(slot) = p.svc.get_mut(i) {
                            slot.resp_len = n as u16;
                            slot.state = SlotState::Responding;
                        }
                        outq.push(OutMsg::new(rid, mtu, brs, ok_body));
                        continue;
                    }
                    ServiceOutcome::Done(_) | ServiceOutcome::Failed => ServiceStatus::AppError,
                    ServiceOutcome::Accepted => ServiceStatus::Accepted,
                    ServiceOutcome::Busy => {
                        bump(&mut core.counters.services_busy);
                        ServiceStatus::Busy
                    }
                    ServiceOutcome::BadRequest => ServiceStatus::BadRequest,
                };
                if status == ServiceStatus::Accepted {
                    services::defer(p, i, core.now);
                } else if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Free;
                }
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block: s.block,
                    service: s.service,
                    status,
                    body: &[],
                });
                core.reply(outq, rid, &msg);
            }
            SlotState::Completed => {
                if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Responding;
                }
                outq.push(OutMsg::new(rid, mtu, brs, ok_body));
            }
            SlotState::Expired => {
                // The application never completed the call: tell the master, free the
                // slot (a late `complete` finds no call for its token).
                if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Free;
                }
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block: s.block,
                    service: s.service,
                    status: ServiceStatus::Expired,
                    body: &[],
                });
                core.reply(outq, rid, &msg);
            }
            _ => {}
        }
    }
}
