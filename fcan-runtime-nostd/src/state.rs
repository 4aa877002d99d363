//! The node's core: identity, the life cycle ([`Lifecycle`]) and the timers that drive
//! it, counters and the plan's bookkeeping; queuing ANNOUNCE, HEARTBEAT and replies, and
//! doing what a life-cycle transition asks ([`Core::step`]). Nothing transmits
//! directly, it queues.

use crate::api::Event;
use crate::counters::bump;
use crate::lifecycle::{Effects, Input, Life, Lifecycle};
use crate::outq::{Body, OutMsg, OutQueue};
use crate::plan::PlanCounts;
use crate::tables::TopicState;
use crate::wired::Wired;
use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{
    caps, BusMode, CommandResult, ConfigMessage, Counters, NodeHeartbeat, ResultCode,
};
use fcan_core::timing::{At, Us, LISTEN_JITTER_US};

/// A group partly sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resume {
    /// Plan index of the group's first frame.
    pub head: u16,
    /// Next part to send.
    pub part: u8,
    /// The group's sequence byte.
    pub seq: u8,
    /// False once a topic of the group was published since part 0 went out.
    pub valid: bool,
}

/// At most one [`Resume`]: an `Option<Resume>` whose "none" is all zero bytes (the
/// compiler would put `None` in the `bool`'s niche as a 2, and a `static` node in
/// `.data` with an initialiser image in flash).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResumeSlot {
    held: bool,
    resume: Resume,
}

impl ResumeSlot {
    /// Nothing to resume.
    pub(crate) const NONE: ResumeSlot = ResumeSlot {
        held: false,
        resume: Resume {
            head: 0,
            part: 0,
            seq: 0,
            valid: false,
        },
    };

    /// Remembers a group cut short.
    pub(crate) fn set(&mut self, r: Resume) {
        *self = ResumeSlot {
            held: true,
            resume: r,
        };
    }

    /// The group to resume, forgetting it.
    pub(crate) fn take(&mut self) -> Option<Resume> {
        let r = self.get();
        *self = ResumeSlot::NONE;
        r
    }

    /// The group to resume.
    pub(crate) fn get(&self) -> Option<Resume> {
        self.held.then_some(self.resume)
    }

    /// The group to resume, to change in place.
    pub(crate) fn get_mut(&mut self) -> Option<&mut Resume> {
        self.held.then_some(&mut self.resume)
    }

    /// Forgets any group.
    pub(crate) fn clear(&mut self) {
        *self = ResumeSlot::NONE;
    }
}

/// Everything of the node that is not a buffer: identity, state machine, timers,
/// counters and the plan's bookkeeping.
///
/// Holds no reference to the descriptor (the node's [`crate::codegen::Descriptor`] gives it), so
/// an unconfigured core ([`Core::IDLE`]) is all zero bytes and a `static` node is in
/// `.bss`, not a `.data` image copied from flash.
pub(crate) struct Core {
    pub node_id: NodeId,
    pub boot_id: u32,
    pub fd_capable: bool,
    pub wired: Wired,
    /// Service slots in use.
    pub svc_slots: usize,

    /// The life cycle and its timers; changed only through [`Life::step`].
    pub life: Life,
    /// Latest time the application gave us.
    pub now: At,
    /// Transfer id of the next node-initiated message.
    pub next_transfer: u8,

    pub counters: Counters,
    /// Receive-queue overflows (also counted in `rx_ignored`).
    pub rx_overflow: u32,
    pub plan: PlanCounts,
    /// Sequence byte of the next s2m group.
    pub tx_seq: u8,
    /// A group whose parts were partly sent.
    pub resume: ResumeSlot,
    /// A PARAM_SET with the commit bit arrived.
    pub commit_pending: bool,
    /// Transfer id of a service request already answered whose later segments are
    /// consumed silently.
    pub svc_discard: Option<u8>,
    /// The firmware update in progress, if any.
    #[cfg(feature = "update")]
    pub update: crate::update_transfer::UpdateState,
    /// The application gives an update target (`Dispatch::update`), seen at each poll:
    /// what the UPDATE capability bit announces.
    #[cfg(feature = "update")]
    pub takes_updates: bool,
}

impl Core {
    /// The core of an unconfigured node: every byte zero. Its node id (0) is never used:
    /// an unconfigured node is inert and reports the broadcast id.
    pub(crate) const IDLE: Core = Core::new(
        match NodeId::new(0) {
            Some(id) => id,
            None => NodeId::BROADCAST,
        },
        0,
        false,
        Wired::EMPTY,
        0,
    );

    /// A core at boot: [`Lifecycle::Boot`] (`Unprovisioned`), not yet listening (the window
    /// opens at the first
    /// `receive`/`poll`), every timer, counter and plan count at zero.
    pub(crate) const fn new(
        node_id: NodeId,
        boot_id: u32,
        fd_capable: bool,
        wired: Wired,
        svc_slots: usize,
    ) -> Core {
        Core {
            node_id,
            boot_id,
            fd_capable,
            wired,
            svc_slots,
            life: Life::BOOT,
            now: At(0),
            next_transfer: 0,
            counters: crate::counters::ZERO,
            rx_overflow: 0,
            plan: PlanCounts::EMPTY,
            tx_seq: 0,
            resume: ResumeSlot::NONE,
            commit_pending: false,
            svc_discard: None,
            #[cfg(feature = "update")]
            update: crate::update_transfer::UpdateState::IDLE,
            #[cfg(feature = "update")]
            takes_updates: false,
        }
    }

    /// The frame kind and bit-rate switching for configuration messages: classic until a
    /// master chose a mode.
    pub(crate) fn tx_mode(&self) -> (Mtu, bool) {
        if self.life.acknowledged() {
            let mode = self.life.mode;
            (mode.mtu(), mode == BusMode::FdBrs)
        } else {
            (Mtu::Classic, false)
        }
    }

    /// An identifier for a reply to `req` (same opcode unless `opcode` says otherwise,
    /// same transfer id).
    pub(crate) fn reply_id(&self, opcode: Opcode, req: &ConfigId) -> ConfigId {
        ConfigId::single(opcode, Direction::ToMaster, self.node_id, req.transfer)
    }

    /// Queues a RESULT (ACK or NAK) answering `req`.
    pub(crate) fn result(
        &mut self,
        q: &mut OutQueue,
        req: &ConfigId,
        code: ResultCode,
        detail: u16,
    ) {
        let (mtu, brs) = self.tx_mode();
        let msg = ConfigMessage::Result(CommandResult {
            opcode: req.opcode,
            code,
            detail,
        });
        if let Some(m) = OutMsg::inline(self.reply_id(Opcode::Result, req), mtu, brs, &msg) {
            if q.push(m) && code != ResultCode::Ok {
                bump(&mut self.counters.naks_sent);
            }
        }
    }

    /// Queues a message stored inline.
    pub(crate) fn reply(&mut self, q: &mut OutQueue, id: ConfigId, msg: &ConfigMessage<'_>) {
        let (mtu, brs) = self.tx_mode();
        if let Some(m) = OutMsg::inline(id, mtu, brs, msg) {
            q.push(m);
        }
    }

    fn take_transfer(&mut self) -> u8 {
        let t = self.next_transfer;
        self.next_transfer = t.wrapping_add(1);
        t
    }

    /// Queues an ANNOUNCE (always Classical CAN: the master has not chosen a mode for
    /// this announcement yet).
    pub(crate) fn announce(&mut self, q: &mut OutQueue) -> bool {
        if q.free() == 0 {
            return false;
        }
        let id = ConfigId::single(
            Opcode::Discover,
            Direction::ToMaster,
            self.node_id,
            self.take_transfer(),
        );
        let body = Body::Announce {
            state: self.life.state(),
            caps: if self.fd_capable {
                caps::FD | caps::BRS
            } else {
                0
            } | self.update_caps(),
            boot_id: self.boot_id,
        };
        q.push(OutMsg::new(id, Mtu::Classic, false, body))
    }

    /// The UPDATE capability bit, when the node takes updates.
    fn update_caps(&self) -> u8 {
        #[cfg(feature = "update")]
        if self.takes_updates {
            return caps::UPDATE;
        }
        0
    }

    /// Queues a HEARTBEAT.
    pub(crate) fn heartbeat(&mut self, q: &mut OutQueue) -> bool {
        if q.free() == 0 {
            return false;
        }
        let id = ConfigId::single(
            Opcode::Heartbeat,
            Direction::ToMaster,
            self.node_id,
            self.take_transfer(),
        );
        let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
            state: self.life.state(),
            fault: self.life.fault(),
            boot_id: self.boot_id,
            errors: self.counters.error_summary(),
        });
        let (mtu, brs) = self.tx_mode();
        match OutMsg::inline(id, mtu, brs, &msg) {
            Some(m) => q.push(m),
            None => false,
        }
    }

    /// Takes the time the application gave: the first opens the listen window.
    pub(crate) fn see_time(&mut self, now: At) {
        self.now = now;
        if matches!(self.life.stage, Lifecycle::Boot) {
            let jitter = Us(self.boot_id % LISTEN_JITTER_US);
            self.life.step(Input::ClockStarted { jitter }, now);
        }
    }

    /// Moves the life cycle on by `input` at `now` and does what the transition asks of
    /// the node ([`Core::apply`]). Returns the effects, whose events the caller, which
    /// holds the application, delivers (`dispatch::deliver`).
    ///
    /// Inlined (two call sites in `poll`: a frame's input, the timers' tick, where only
    /// the tick's arm of [`Life::step`] is compiled); the effects are applied out of
    /// line, once (flash, measured).
    #[inline(always)]
    pub(crate) fn step(
        &mut self,
        input: Input,
        now: At,
        q: &mut OutQueue,
        topics: &mut [TopicState],
    ) -> Effects {
        let fx = self.life.step(input, now);
        self.apply(fx, q, topics)
    }

    /// Does what a life-cycle transition asks: the data plane first, then the messages
    /// to queue (ANNOUNCE before HEARTBEAT); counts a lost master. Returns `fx`.
    #[inline(never)]
    pub(crate) fn apply(
        &mut self,
        fx: Effects,
        q: &mut OutQueue,
        topics: &mut [TopicState],
    ) -> Effects {
        if fx.has(Effects::CLEAR_PLAN) {
            self.plan = PlanCounts::EMPTY;
        }
        if fx.has(Effects::STOP) {
            self.resume.clear();
        }
        if fx.has(Effects::UNSTAGE) {
            for t in topics.iter_mut() {
                t.stop_staging();
            }
        }
        if fx.has(Effects::SILENCE) {
            q.clear();
        }
        if fx.has(Effects::ANNOUNCE) {
            self.announce(q);
        }
        if fx.has(Effects::HEARTBEAT) {
            self.heartbeat(q);
        }
        if fx.has(Effects::event(Event::MasterLost)) {
            bump(&mut self.counters.master_lost);
        }
        fx
    }

    /// Timers: end of the listen window, master-lost watchdog, ANNOUNCE retries and the
    /// node heartbeat, each message queued only when it fits.
    pub(crate) fn timers(
        &mut self,
        now: At,
        q: &mut OutQueue,
        topics: &mut [TopicState],
    ) -> Effects {
        let room = q.free();
        self.step(Input::Tick { room }, now, q, topics)
    }
}
