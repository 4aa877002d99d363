//! The node: the application-facing API and the glue between the receive queue, the
//! message handlers, the timers, the scheduler and the outgoing queue.

use crate::api::{Controller, Transmit};
use crate::config_plane::{handle_frame, inner_segment, reassemble, run_services};
use crate::context::Context;
use crate::counters::bump;
use crate::desc::{Descriptor, NodeDesc};
use crate::dispatch::{deliver, Dispatch};
use crate::error::{CompleteError, ConfigError, PublishError};
use crate::outq::{OutQueue, Sources};
use crate::plan::{self};
use crate::rxq::{RxQueue, RX_QUEUE_LEN};
use crate::services::{self};
use crate::state::Core;
use crate::storage::{check_sizes, wipe, Storage};
use crate::topics::{self, TopicRead};
use crate::typed::{Deferred, Message};
use crate::wired::Wired;
use crate::{params, sched, CONFIG_REASSEMBLY_BYTES};
use fcan_core::frame::{CanId, Frame};
use fcan_core::id::{is_data_id, ConfigId, Direction, IdError, NodeId};
use fcan_core::msg::{BusMode, Counters, FaultCode, NodeState};
use fcan_core::segment::ReassemblyPool;
use fcan_core::timing::At;

/// How a board configures its node at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NodeConfig<'a> {
    /// This node's id on the bus (from DIP switches, flash, ...).
    pub node_id: NodeId,
    /// Random per boot (a hardware RNG, or noise from an ADC): tells the master the node
    /// rebooted and breaks ties between two nodes with one id.
    pub boot_id: u32,
    /// Instances wired on this board, one per instance array, each ≤ its `max_count`.
    pub counts: &'a [u8],
    /// What the CAN controller and its driver can send and receive.
    pub controller: Controller,
}

/// An fcan node, driven by [`Node::receive`] and [`Node::poll`].
///
/// `B` holds all the node's RAM ([`crate::codegen::Buffers`], or `&mut` to one in a `static`).
/// The node never allocates, never panics on bus input, and every loop is bounded by a
/// table size.
///
/// ```
/// use fcan_runtime_nostd::*;
/// use fcan_runtime_nostd::codegen::*;
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
///     fn service(&mut self, _: &mut Context<'_>, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome {
///         ServiceOutcome::Failed
///     }
///     fn params_changed(&mut self, _: &mut Context<'_>, _: u8, _: u32) {}
///     fn event(&mut self, _: Event) {}
/// }
/// struct Bus(Vec<Frame>);
/// impl Transmit for Bus {
///     fn transmit(&mut self, f: &Frame) -> Result<(), TxRefused> { self.0.push(*f); Ok(()) }
/// }
///
/// let config = NodeConfig { node_id: NodeId::new(3).unwrap(), boot_id: 7, counts: &[1],
///                           controller: Controller::Classic };
/// let mut node = Node::new(&NODE, Buffers::<4, 0, 0, 1, 1, 2, 2, 0, 0>::new(), config).unwrap();
/// node.publish(0, 0, &[1, 2, 3, 4]).unwrap();
/// let mut bus = Bus(Vec::new());
/// node.poll(0, &mut bus, &mut App);          // the listen window opens
/// assert!(bus.0.is_empty());
/// node.poll(400_000, &mut bus, &mut App);    // ... and closes: ANNOUNCE
/// assert!(!bus.0.is_empty());
/// assert_eq!(node.state(), NodeState::Unprovisioned);
/// ```
pub struct Node<B, D = &'static NodeDesc> {
    /// Where the descriptor comes from: generated code passes a zero-sized type naming
    /// its `static` (so the node holds no pointer and an unconfigured node is all zero),
    /// a node built at run time passes the reference.
    desc: D,
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

impl<B, D> Node<B, D> {
    /// A node for `desc` in `buffers`, not yet configured: `const`, so a whole node can
    /// initialise a `static` (never built on the stack). Configure it in place with
    /// [`Node::configure`] at boot. With a zero-sized [`Descriptor`] (what generated code
    /// uses) and zeroed buffers, the unconfigured node is all zero bytes: a `static`
    /// of it is in `.bss` and costs no flash.
    ///
    /// Until configured the node is inert: [`Node::receive`] and [`Node::poll`] return at
    /// once without touching state or counters (a frame is dropped uncounted, nothing is
    /// sent), its state reads `Unprovisioned`, no block is wired (so `publish` answers
    /// `NotWired` and `topic`/`param` `None`), and [`Node::node_id`] is the broadcast id.
    pub const fn unconfigured(desc: D, buffers: B) -> Self {
        Node {
            desc,
            core: Core::IDLE,
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

impl<B: Storage, D: Descriptor> Node<B, D> {
    /// A node for `desc` in `buffers`, configured by `config`: [`Node::unconfigured`]
    /// then [`Node::configure`]. Returns the node by value; to build a large node without
    /// a copy on the stack, put an unconfigured node in a `static` and configure it there.
    pub fn new(desc: D, buffers: B, config: NodeConfig<'_>) -> Result<Self, ConfigError> {
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
        let desc = self.desc.desc();
        self.configured = false;
        // Back to the unconfigured state first, so an error leaves nothing half set.
        self.core = Core::IDLE;
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
            config.node_id,
            config.boot_id,
            config.controller == Controller::Fd,
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
        let now = At(now_us);
        core.see_time(now);
        if core.life.is_fault() {
            // Silent for good: the bus goes on without us.
            bump(&mut core.counters.rx_ignored);
            return;
        }
        match frame.id() {
            CanId::Standard(id) => {
                // Before RUNNING there is no plan to tell our m2s frames from other
                // nodes' data, which a shared bus always carries: not an error.
                if !is_data_id(id) || !core.life.is_running() {
                    bump(&mut core.counters.rx_ignored);
                } else {
                    let mut p = self.buffers.parts();
                    match plan::lookup(&p, core.plan.m2s, id) {
                        Some(fi) => topics::apply_m2s(
                            self.desc.desc(),
                            &mut p,
                            &mut core.counters,
                            fi,
                            frame.data(),
                            now,
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
                        let _ = reassemble(core, &mut self.pool, id, frame.data(), now);
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
            desc,
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
        let desc = desc.desc();
        let now = At(now_us);
        core.see_time(now);
        if core.life.is_fault() {
            rx.clear();
            return;
        }
        #[cfg(feature = "update")]
        {
            core.takes_updates = app.update().is_some();
        }
        let mut p = buffers.parts();
        pool.expire(now_us);
        services::expire(&mut p, &mut core.counters, now);

        // Requests: one per free place in the outgoing queue, so no reply is ever lost.
        for _ in 0..RX_QUEUE_LEN {
            if outq.free() == 0 || core.life.is_fault() {
                break;
            }
            let Some(f) = rx.pop() else {
                break;
            };
            let mut then = None;
            handle_frame(
                desc,
                core,
                &mut p,
                pool,
                outq,
                &mut then,
                f.raw_id,
                f.payload(),
                now,
                app,
            );
            // What the message did to the life cycle, stepped here (one place for every
            // message; no reply the handler queued depends on it), its events delivered
            // before the next frame as when the handler raised them.
            if let Some(input) = then {
                let fx = core.step(input, now, outq, p.topics);
                deliver(fx, app);
            }
        }
        let dropped = pool.dropped();
        for _ in 0..dropped.wrapping_sub(*pool_dropped).min(u16::MAX as u32) {
            bump(&mut core.counters.reassembly_dropped);
        }
        *pool_dropped = dropped;
        if core.life.is_fault() {
            rx.clear();
            return;
        }
        if core.commit_pending {
            core.commit_pending = false;
            crate::dispatch::commit_params(desc, core, &mut p, app);
        }
        run_services(desc, core, &mut p, outq, app);
        #[cfg(feature = "update")]
        crate::update::poll(core, outq, app.update());
        let fx = core.timers(now, outq, p.topics);
        deliver(fx, app);

        // Data first: standard IDs win arbitration on the bus anyway.
        let data_ok =
            !core.life.is_running() || sched::transmit_due(desc, core, &mut p, now, tx).is_ok();
        if data_ok {
            let mut src = Sources {
                desc,
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
    /// # use fcan_runtime_nostd::codegen::*;
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
        // A verification step, the Verified answer or the reboot waits for `poll`.
        #[cfg(feature = "update")]
        let work = work || crate::update::busy(&self.core);
        crate::wake::poll_at(&self.core, &self.buffers.parts_ref(), work, At(now_us)).map(|t| t.0)
    }

    /// Whether a data frame with standard ID `id` is one of this node's m2s frames, as
    /// its plan stands now (never before RUNNING). A gateway that hosts nodes on the PC
    /// side (`fcan-drivers`) asks this to keep their commands off the real bus.
    pub fn takes_data_id(&mut self, id: u16) -> bool {
        if !self.configured || !self.core.life.is_running() || !is_data_id(id) {
            return false;
        }
        let m2s = self.core.plan.m2s;
        plan::lookup(&self.buffers.parts(), m2s, id).is_some()
    }

    /// The current value of a topic of a wired block (m2s: as last received, whole;
    /// s2m: as last published).
    pub fn topic(&self, block: u8, topic: u8) -> Option<TopicRead<'_>> {
        let p = self.buffers.parts_ref();
        topics::read(
            self.desc.desc(),
            &self.core.wired,
            p.topic,
            p.topics,
            block,
            topic,
        )
    }

    /// Sets an s2m topic's value. Periodic frames carry it at their next period;
    /// on-commit (`period_us: 0`) frames carrying it go out at the next poll while
    /// running, or at the first chance after START.
    pub fn publish(&mut self, block: u8, topic: u8, bytes: &[u8]) -> Result<(), PublishError> {
        self.context().publish(block, topic, bytes)
    }

    /// A parameter's packed value (`None` for an unknown param or an unwired block).
    pub fn param(&self, block: u8, param: u8) -> Option<&[u8]> {
        params::read(
            self.desc.desc(),
            &self.core.wired,
            self.buffers.parts_ref().params,
            block,
            param,
        )
    }

    /// The node's topics and parameters for the application (what service handlers get
    /// from `poll`): read, publish, typed or packed.
    pub fn context(&mut self) -> Context<'_> {
        let desc = self.desc.desc();
        let (cx, _) = Context::split(desc, &mut self.core, self.buffers.parts());
        cx
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
        self.complete_with(token, |out| {
            out.get_mut(..response.len())
                .ok_or(CompleteError::TooLong)?
                .copy_from_slice(response);
            Ok(response.len())
        })
    }

    /// [`Node::complete`] with a typed response, packed straight into the call's slot.
    pub fn complete_msg<T: Message>(
        &mut self,
        token: Deferred<T>,
        response: &T,
    ) -> Result<(), CompleteError> {
        self.complete_with(token.token(), |out| {
            response.encode(out).map_err(|_| CompleteError::TooLong)
        })
    }

    fn complete_with(
        &mut self,
        token: crate::api::DeferredToken,
        fill: impl FnOnce(&mut [u8]) -> Result<usize, CompleteError>,
    ) -> Result<(), CompleteError> {
        if token.slot as usize >= self.core.svc_slots {
            return Err(CompleteError::UnknownToken);
        }
        services::complete(&mut self.buffers.parts(), token, fill)
    }

    /// The node's state.
    pub fn state(&self) -> NodeState {
        self.core.life.state()
    }

    /// Why the node is in FAULT (`FaultCode::None` otherwise).
    pub fn fault(&self) -> FaultCode {
        self.core.life.fault()
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

    /// This node's id (the broadcast id until configured).
    pub fn node_id(&self) -> NodeId {
        if self.configured {
            self.core.node_id
        } else {
            NodeId::BROADCAST
        }
    }

    /// This boot's id.
    pub fn boot_id(&self) -> u32 {
        self.core.boot_id
    }

    /// The bus mode the master chose (Classic until acknowledged).
    pub fn bus_mode(&self) -> BusMode {
        self.core.life.mode()
    }

    /// The descriptor the node runs.
    pub fn desc(&self) -> &'static NodeDesc {
        self.desc.desc()
    }
}
