//! The node's life cycle: one flat [`Lifecycle`] enum (where the node is) and one
//! transition function, [`Life::step`], that every change goes through. It returns what
//! the node must do about the change ([`Effects`]: events for the application, an
//! ANNOUNCE or HEARTBEAT to queue, what happens to the data plane); `Core::step` does
//! the queueing and the data plane, and whoever holds the application delivers the
//! events (`dispatch::deliver`), so this module needs neither.
//!
//! The timers, the master's session and the bus mode are plain fields of [`Life`]
//! beside the enum: the enum is fieldless (`repr(u8)`, `Boot` = 0), so a transition is
//! one byte store plus the timers it sets, and an unconfigured node is all zero bytes
//! (`.bss`). The wire's [`NodeState`], the fault code, "acknowledged", "announcing",
//! "running" and "listening" are derived from the enum (bits of its discriminant),
//! never stored beside it. Pure: no queue, no buffers, no application here, so the
//! whole table of transitions is tested on its own (`tests` below).
//!
//! Flash (the example firmware's budget is tight): the configuration plane does not
//! step the life cycle from each message handler; a handler says which [`Input`] its
//! message is and `poll` steps once per frame, so [`Life::step`] is compiled at two
//! places (frames, timers) plus the clock's start, not at eight.

use crate::api::Event;
use fcan_core::msg::{BusMode, FaultCode, NodeState};
use fcan_core::timing::{
    At, Us, ANNOUNCE_BACKOFF_MAX_US, ANNOUNCE_BACKOFF_MIN_US, LISTEN_WINDOW_US,
    NODE_HEARTBEAT_PERIOD_US,
};

/// Discriminant bit: a master acknowledged this boot (and no other master took over
/// since): the node heartbeats and takes commands.
const ACK: u8 = 1;
/// Discriminant bit: announcing (ANNOUNCE with back-off, at [`Life::due`]).
const ANN: u8 = 2;
/// Discriminant bits 3 and up: the wire's `NodeState` (UNPROVISIONED = 0).
const PROV: u8 = (NodeState::Provisioned as u8) << 3;
const RUN: u8 = (NodeState::Running as u8) << 3;
const SUSP: u8 = (NodeState::Suspended as u8) << 3;
const FAULT: u8 = (NodeState::Fault as u8) << 3;

/// Where the node is in its life cycle (`docs/protocol.md` §5).
///
/// Acknowledged states also say where the node stands with the masters: plain (the
/// master that acknowledged it is there), `...Lost` (the master fell silent while the
/// node ran: still acknowledged, announcing again) or `...Replaced` (a heartbeat of
/// another session: another master took over, which must acknowledge the node before
/// it may command; announcing, commands refused). The discriminants carry [`ACK`] and
/// [`ANN`] as bits (and RUNNING as [`RUN`]), so those questions are one bit test each; combinations that
/// cannot happen (a SUSPENDED node not announcing, a RUNNING one announcing while
/// acknowledged) have no variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Lifecycle {
    /// Configured, the clock not seen yet (no `receive` or `poll` since boot). Zero, so
    /// an unconfigured node's core stays all zero bytes.
    #[default]
    Boot = 0,
    /// UNPROVISIONED, silent in the boot listen window, until [`Life::due`].
    Listening = 4,
    /// UNPROVISIONED: never acknowledged, announcing.
    Unprovisioned = ANN,
    /// PROVISIONED: acknowledged, the plan being defined.
    Provisioned = PROV | ACK,
    /// PROVISIONED after SUSPENDED (a new plan): still acknowledged, still announcing.
    ProvisionedLost = PROV | ACK | ANN,
    /// PROVISIONED, another master took over: announcing, commands refused.
    ProvisionedReplaced = PROV | ANN,
    /// RUNNING: data frames flow, watched by the master-lost watchdog.
    Running = RUN | ACK,
    /// RUNNING, another master took over: data still flows; announcing.
    RunningReplaced = RUN | ANN,
    /// SUSPENDED: the watchdog fired; data stops, still acknowledged, announcing.
    Suspended = SUSP | ACK | ANN,
    /// SUSPENDED, and another master took over (before or after).
    SuspendedReplaced = SUSP | ANN,
    /// FAULT for good (an id collision): silent.
    Fault = FAULT,
}

impl Lifecycle {
    /// The node's state, as ANNOUNCE and HEARTBEAT carry it.
    pub(crate) const fn state(self) -> NodeState {
        // Bits 3 and up are the wire's NodeState.
        match self as u8 >> 3 {
            0 => NodeState::Unprovisioned,
            1 => NodeState::Provisioned,
            2 => NodeState::Running,
            3 => NodeState::Suspended,
            _ => NodeState::Fault,
        }
    }

    /// Whether a master acknowledged this boot (and no other master took over since).
    pub(crate) const fn acknowledged(self) -> bool {
        self as u8 & ACK != 0
    }

    /// Whether the node announces (at [`Life::due`], with back-off).
    pub(crate) const fn announcing(self) -> bool {
        self as u8 & ANN != 0
    }

    /// RUNNING: data frames flow.
    pub(crate) const fn is_running(self) -> bool {
        self as u8 >> 3 == RUN >> 3
    }
}

/// The life cycle and what drives it: the [`Lifecycle`] and, as plain fields, the
/// deadlines and the master's session and bus mode. Only [`Life::step`] changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Life {
    /// Where the node is.
    pub stage: Lifecycle,
    /// The bus mode the master chose: the last acknowledgement's, Classic before one
    /// (kept when another master takes over, until it acknowledges).
    pub mode: BusMode,
    /// Listening: the end of the window; announcing: when the next ANNOUNCE is due.
    pub due: At,
    /// Announcing: the interval after the next ANNOUNCE (doubles up to its cap).
    pub backoff: Us,
    /// The session of the master that acknowledged the node.
    pub session: u32,
    /// Acknowledged: when the node's next HEARTBEAT is due.
    pub heartbeat_due: At,
    /// The master-lost timeout START armed; zero = off.
    pub watchdog: Us,
    /// The last sign of the master: its ANNOUNCE_ACK, START or a HEARTBEAT of its session.
    pub last_master: At,
}

/// What happens to the node: one input to [`Life::step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// The application gave the node a time for the first time: the listen window opens,
    /// `jitter` (drawn from the boot id) longer than `LISTEN_WINDOW_US`.
    ClockStarted { jitter: Us },
    /// The timers at `poll`, with room for `room` messages in the outgoing queue: the
    /// listen window's end, the master-lost watchdog, ANNOUNCE and HEARTBEAT when due
    /// (each sent only if it fits, else at a later tick).
    Tick { room: usize },
    /// An ANNOUNCE_ACK for this boot, in a mode the controller can do.
    Acked { session: u32, mode: BusMode },
    /// A master HEARTBEAT.
    MasterHeartbeat { session: u32 },
    /// A START the plan passed (from an acknowledged PROVISIONED or SUSPENDED node), or
    /// a retried START while running: (re)arms the watchdog.
    Start { timeout: Us },
    /// FRAME_DEFINE index 0 went in: a new plan, PROVISIONED again.
    PlanRedefined,
    /// An ANNOUNCE or HEARTBEAT of another boot under this node's id.
    IdCollision,
}

/// What the node must do after a transition: a set of flags (one `u16`, built and
/// tested with single instructions; a struct of fields cost flash at every transition).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Effects(u16);

impl Effects {
    /// Nothing to do.
    pub const NONE: Effects = Effects(0);
    /// Queue an ANNOUNCE.
    pub const ANNOUNCE: Effects = Effects(1 << 0);
    /// Queue a HEARTBEAT (after any ANNOUNCE).
    pub const HEARTBEAT: Effects = Effects(1 << 1);
    /// Data stops: forget a group half sent.
    pub const STOP: Effects = Effects(1 << 2);
    /// Drop the m2s groups being staged.
    pub const UNSTAGE: Effects = Effects(1 << 3);
    /// Clear the plan (its frame lengths were for the other bus mode).
    pub const CLEAR_PLAN: Effects = Effects(1 << 4);
    /// Empty the outgoing queue: silent for good.
    pub const SILENCE: Effects = Effects(1 << 5);
    /// A new plan: as `STOP`, and groups being staged are dropped.
    pub const RESTAGE: Effects = Effects(Self::STOP.0 | Self::UNSTAGE.0);

    /// The events, each with its flag, in the order they are delivered.
    pub const EVENTS: [(Effects, Event); 5] = [
        (Effects(1 << 8), Event::PlanReset),
        (Effects(1 << 9), Event::Acknowledged),
        (Effects(1 << 10), Event::Started),
        (Effects(1 << 11), Event::MasterLost),
        (Effects(1 << 12), Event::IdCollision),
    ];

    /// The flag of event `e`.
    pub const fn event(e: Event) -> Effects {
        Effects(match e {
            Event::PlanReset => 1 << 8,
            Event::Acknowledged => 1 << 9,
            Event::Started => 1 << 10,
            Event::MasterLost => 1 << 11,
            Event::IdCollision => 1 << 12,
        })
    }

    /// These effects and `other`'s.
    pub const fn and(self, other: Effects) -> Effects {
        Effects(self.0 | other.0)
    }

    /// Whether every effect of `other` is in these.
    pub const fn has(self, other: Effects) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Effects {
    type Output = Effects;
    fn bitor(self, other: Effects) -> Effects {
        self.and(other)
    }
}

impl core::ops::BitOrAssign for Effects {
    fn bitor_assign(&mut self, other: Effects) {
        *self = self.and(other);
    }
}

impl core::fmt::Debug for Effects {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 6] = [
            "ANNOUNCE",
            "HEARTBEAT",
            "STOP",
            "UNSTAGE",
            "CLEAR_PLAN",
            "SILENCE",
        ];
        let mut set = f.debug_set();
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                set.entry(n);
            }
        }
        for (flag, e) in Effects::EVENTS {
            if self.has(flag) {
                set.entry(&e);
            }
        }
        set.finish()
    }
}

impl Life {
    /// At boot: [`Lifecycle::Boot`], every timer zero (all zero bytes).
    pub(crate) const BOOT: Life = Life {
        stage: Lifecycle::Boot,
        mode: BusMode::Classic,
        due: At(0),
        backoff: Us(0),
        session: 0,
        heartbeat_due: At(0),
        watchdog: Us(0),
        last_master: At(0),
    };

    /// The node's state, as ANNOUNCE and HEARTBEAT carry it.
    pub(crate) const fn state(&self) -> NodeState {
        self.stage.state()
    }

    /// Why the node is in FAULT (`FaultCode::None` otherwise).
    pub(crate) const fn fault(&self) -> FaultCode {
        match self.stage {
            Lifecycle::Fault => FaultCode::IdCollision,
            _ => FaultCode::None,
        }
    }

    /// Whether a master acknowledged this boot (and no other master took over since):
    /// the node takes commands then.
    pub(crate) const fn acknowledged(&self) -> bool {
        self.stage.acknowledged()
    }

    /// RUNNING: data frames flow.
    pub(crate) const fn is_running(&self) -> bool {
        self.stage.is_running()
    }

    /// FAULT: silent for good.
    pub(crate) const fn is_fault(&self) -> bool {
        matches!(self.stage, Lifecycle::Fault)
    }

    /// In the boot listen window: silent, every frame for the node dropped.
    pub(crate) const fn is_listening(&self) -> bool {
        matches!(self.stage, Lifecycle::Listening)
    }

    /// Past announcing for a first acknowledgement: the id is this node's to assert
    /// (FAULT, silent, asserts nothing).
    pub(crate) const fn holds_id(&self) -> bool {
        // Wire states PROVISIONED, RUNNING and SUSPENDED (1..=3; bits 3 and up).
        (self.stage as u8 >> 3).wrapping_sub(1) < 3
    }

    /// The bus mode: the last acknowledgement's, Classic before one.
    pub(crate) const fn mode(&self) -> BusMode {
        self.mode
    }

    /// When the master-lost watchdog fires, while running with one armed: once more
    /// than the timeout has passed.
    pub(crate) fn watchdog_expiry(&self) -> Option<At> {
        (self.is_running() && self.watchdog != Us(0))
            .then_some(self.last_master + self.watchdog + Us(1))
    }

    /// (Re)starts announcing: the first ANNOUNCE now, then the shortest back-off.
    fn announce_now(&mut self, now: At) {
        self.due = now;
        self.backoff = Us(ANNOUNCE_BACKOFF_MIN_US);
    }

    /// The one transition function: `input` at `now` moves the node on (or leaves it
    /// where it is), sets the timers, and says what the node must do about it.
    ///
    /// Inlined into its three callers (`Core::step` at a frame and at the timers, the
    /// clock's start): with a constant input only that arm remains (flash, measured).
    #[inline(always)]
    pub(crate) fn step(&mut self, input: Input, now: At) -> Effects {
        use Lifecycle as L;
        let from = self.stage;
        match (from, input) {
            (L::Boot, Input::ClockStarted { jitter }) => {
                self.stage = L::Listening;
                self.due = now + Us(LISTEN_WINDOW_US) + jitter;
                Effects::NONE
            }
            (_, Input::ClockStarted { .. }) | (L::Boot | L::Fault, Input::Tick { .. }) => {
                Effects::NONE
            }
            (_, Input::Tick { room }) => {
                let mut fx = Effects::NONE;
                if matches!(from, L::Listening) {
                    if !now.reached(self.due) {
                        return fx;
                    }
                    // Never acknowledged (frames are dropped while listening): announce,
                    // the first one now.
                    self.stage = L::Unprovisioned;
                    self.announce_now(now);
                } else if from.is_running()
                    && self.watchdog != Us(0)
                    && now.since(self.last_master) > self.watchdog
                {
                    // Master lost: SUSPENDED, announcing again, acknowledged as it was.
                    self.stage = if from.acknowledged() {
                        L::Suspended
                    } else {
                        L::SuspendedReplaced
                    };
                    self.announce_now(now);
                    fx = Effects::STOP | Effects::event(Event::MasterLost);
                }
                fx | self.send_due(room, now)
            }
            // Frames are not handled before the window ends, nor in FAULT.
            (L::Boot | L::Listening | L::Fault, Input::Acked { .. }) => Effects::NONE,
            (_, Input::Acked { session, mode }) => {
                let mut fx = Effects::event(Event::Acknowledged);
                let same_mode = mode == self.mode;
                self.stage = match from {
                    L::Running | L::RunningReplaced if same_mode => L::Running,
                    L::Running | L::RunningReplaced => {
                        // The plan's frame lengths were for the other mode.
                        fx |= Effects::event(Event::PlanReset);
                        L::Provisioned
                    }
                    _ => L::Provisioned,
                };
                if !same_mode {
                    fx |= Effects::RESTAGE | Effects::CLEAR_PLAN;
                }
                self.session = session;
                self.mode = mode;
                self.last_master = now;
                // The first heartbeat tells the master the acknowledgement arrived.
                self.heartbeat_due = now;
                fx
            }
            (_, Input::MasterHeartbeat { session }) => {
                if session == self.session {
                    // Our master, also after another one was heard (a *Replaced stage):
                    // until the new one acknowledges us, data keeps flowing under the
                    // old one's watchdog (§5.1). Sessions are never 0, the value before
                    // any acknowledgement.
                    self.last_master = now;
                } else if from.acknowledged() {
                    // Another master took over: it must acknowledge the node before it
                    // may command.
                    self.stage = match from {
                        L::Running => L::RunningReplaced,
                        L::Suspended => L::SuspendedReplaced,
                        _ => L::ProvisionedReplaced,
                    };
                    self.announce_now(now);
                }
                // Never acknowledged: only the master that acknowledges counts.
                Effects::NONE
            }
            // START is refused before it gets here unless acknowledged and the plan is
            // whole; a retried START while running (its ACK was lost) re-arms the
            // watchdog.
            (
                L::Running | L::Provisioned | L::ProvisionedLost | L::Suspended,
                Input::Start { timeout },
            ) => {
                self.stage = L::Running;
                self.watchdog = timeout;
                self.last_master = now;
                if matches!(from, L::Running) {
                    Effects::NONE
                } else {
                    Effects::event(Event::Started)
                }
            }
            (_, Input::Start { .. }) => Effects::NONE,
            // FRAME_DEFINE index 0 went in (only acknowledged): PROVISIONED again,
            // still announcing if it was.
            (L::Running | L::Suspended, Input::PlanRedefined) => {
                self.stage = if matches!(from, L::Running) {
                    L::Provisioned
                } else {
                    L::ProvisionedLost
                };
                Effects::RESTAGE | Effects::event(Event::PlanReset)
            }
            (_, Input::PlanRedefined) => Effects::NONE,
            (L::Boot | L::Listening | L::Unprovisioned, Input::IdCollision) => {
                // Never acknowledged: the other node has the better claim.
                self.stage = L::Fault;
                Effects::STOP | Effects::SILENCE | Effects::event(Event::IdCollision)
            }
            // Silent already.
            (L::Fault, Input::IdCollision) => Effects::NONE,
            // The node holds the id: it asserts it, so the master sees two boot ids and
            // the newcomer, unacknowledged, hears it and faults.
            (_, Input::IdCollision) => Effects::HEARTBEAT,
        }
    }

    /// ANNOUNCE and HEARTBEAT when due, ANNOUNCE first, each only if there is `room`
    /// for it in the outgoing queue (else at a later tick).
    fn send_due(&mut self, room: usize, now: At) -> Effects {
        let mut fx = Effects::NONE;
        let mut room = room;
        if self.stage.announcing() && room > 0 && now.reached(self.due) {
            room -= 1;
            self.due = now + self.backoff;
            self.backoff = Us(self.backoff.0.saturating_mul(2)).min(Us(ANNOUNCE_BACKOFF_MAX_US));
            fx |= Effects::ANNOUNCE;
        }
        if self.stage.acknowledged() && room > 0 && now.reached(self.heartbeat_due) {
            let next = self.heartbeat_due + Us(NODE_HEARTBEAT_PERIOD_US);
            // Keep the grid, unless polling fell a whole period behind.
            self.heartbeat_due = if now.reached(next) {
                now + Us(NODE_HEARTBEAT_PERIOD_US)
            } else {
                next
            };
            fx |= Effects::HEARTBEAT;
        }
        fx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Lifecycle as L;

    const T: At = At(1_000);
    const S: u32 = 0xA5;
    const FD: BusMode = BusMode::FdBrs;
    const CL: BusMode = BusMode::Classic;
    const MIN: u32 = ANNOUNCE_BACKOFF_MIN_US;
    const HB: u32 = NODE_HEARTBEAT_PERIOD_US;
    /// Nothing due for a long time.
    const FAR: At = At(T.0 + 1_000_000);

    fn us(v: u32) -> Us {
        Us(v)
    }
    fn ago(v: u32) -> At {
        At(T.0.wrapping_sub(v))
    }
    /// A node in `stage`, in Classic mode, session `S`, nothing due, no watchdog.
    fn at(stage: Lifecycle) -> Life {
        Life {
            stage,
            mode: CL,
            due: FAR,
            backoff: us(MIN),
            session: S,
            heartbeat_due: FAR,
            watchdog: us(0),
            last_master: At(0),
        }
    }
    /// The same node in `mode`.
    fn fd(l: Life) -> Life {
        Life { mode: FD, ..l }
    }
    /// Announcing from `due` with `backoff`.
    fn ann(l: Life, due: At, backoff: u32) -> Life {
        Life {
            due,
            backoff: us(backoff),
            ..l
        }
    }
    fn hb(l: Life, due: At) -> Life {
        Life {
            heartbeat_due: due,
            ..l
        }
    }
    fn wd(l: Life, timeout: u32, last: At) -> Life {
        Life {
            watchdog: us(timeout),
            last_master: last,
            ..l
        }
    }
    fn acked(l: Life, session: u32, mode: BusMode) -> Life {
        Life {
            session,
            mode,
            last_master: T,
            heartbeat_due: T,
            ..l
        }
    }
    /// What `Core::step` does with the data plane.
    #[derive(Clone, Copy)]
    enum Data {
        Keep,
        Stop,
        Restage,
        Void,
        Silence,
    }
    fn fx(events: &[Event], announce: bool, heartbeat: bool, data: Data) -> Effects {
        let mut fx = match data {
            Data::Keep => Effects::NONE,
            Data::Stop => Effects::STOP,
            Data::Restage => Effects::RESTAGE,
            Data::Void => Effects::RESTAGE | Effects::CLEAR_PLAN,
            Data::Silence => Effects::STOP | Effects::SILENCE,
        };
        for e in events {
            fx |= Effects::event(*e);
        }
        if announce {
            fx |= Effects::ANNOUNCE;
        }
        if heartbeat {
            fx |= Effects::HEARTBEAT;
        }
        fx
    }
    const NONE: Effects = Effects::NONE;
    const ANN_ONLY: Effects = Effects::ANNOUNCE;
    const HB_ONLY: Effects = Effects::HEARTBEAT;

    #[test]
    fn transitions() {
        let tick = |room| Input::Tick { room };
        // The watchdog: 300 ms, the master last heard just more than that ago.
        let fired = |l| wd(l, 300_000, ago(300_001));
        let lost = fx(&[Event::MasterLost], false, false, Data::Stop);
        let collided = fx(&[Event::IdCollision], false, false, Data::Silence);
        let ack = |session, mode| Input::Acked { session, mode };
        let acknowledged = fx(&[Event::Acknowledged], false, false, Data::Keep);
        let ack_void = fx(&[Event::Acknowledged], false, false, Data::Void);
        let started = fx(&[Event::Started], false, false, Data::Keep);
        let redefined = fx(&[Event::PlanReset], false, false, Data::Restage);

        #[rustfmt::skip]
        let table: &[(Life, Input, Life, Effects)] = &[
            // The clock starts: listen, LISTEN_WINDOW_US + jitter.
            (Life::BOOT, Input::ClockStarted { jitter: us(7) },
             Life { stage: L::Listening, due: T + us(LISTEN_WINDOW_US + 7), ..Life::BOOT }, NONE),
            (ann(at(L::Listening), T, MIN), Input::ClockStarted { jitter: us(7) },
             ann(at(L::Listening), T, MIN), NONE),
            (Life::BOOT, tick(4), Life::BOOT, NONE),
            // The window: silent until it ends, then ANNOUNCE at once (if it fits).
            (ann(at(L::Listening), T + us(1), 0), tick(4),
             ann(at(L::Listening), T + us(1), 0), NONE),
            (ann(at(L::Listening), T, 0), tick(4),
             ann(at(L::Unprovisioned), T + us(MIN), 2 * MIN), ANN_ONLY),
            (ann(at(L::Listening), T, 0), tick(0),
             ann(at(L::Unprovisioned), T, MIN), NONE),
            // Back-off doubles up to its cap.
            (ann(at(L::Unprovisioned), T, 1_500_000), tick(1),
             ann(at(L::Unprovisioned), T + us(1_500_000), ANNOUNCE_BACKOFF_MAX_US), ANN_ONLY),
            (ann(at(L::Unprovisioned), T + us(1), MIN), tick(1),
             ann(at(L::Unprovisioned), T + us(1), MIN), NONE),
            // Heartbeats on their grid (or a period from now if a whole one was missed),
            // ANNOUNCE first when both are due, each only if it fits.
            (hb(at(L::Provisioned), T), tick(4), hb(at(L::Provisioned), T + us(HB)), HB_ONLY),
            (hb(at(L::Provisioned), ago(HB)), tick(4),
             hb(at(L::Provisioned), T + us(HB)), HB_ONLY),
            (hb(ann(at(L::ProvisionedLost), T, MIN), T), tick(1),
             hb(ann(at(L::ProvisionedLost), T + us(MIN), 2 * MIN), T), ANN_ONLY),
            (hb(ann(at(L::ProvisionedLost), T, MIN), T), tick(2),
             hb(ann(at(L::ProvisionedLost), T + us(MIN), 2 * MIN), T + us(HB)),
             fx(&[], true, true, Data::Keep)),
            // Not acknowledged: no heartbeat.
            (hb(ann(at(L::ProvisionedReplaced), FAR, MIN), T), tick(4),
             hb(ann(at(L::ProvisionedReplaced), FAR, MIN), T), NONE),
            // The watchdog fires once more than the timeout passed, only while running.
            (wd(at(L::Running), 300_000, ago(300_000)), tick(4),
             wd(at(L::Running), 300_000, ago(300_000)), NONE),
            (fired(at(L::Running)), tick(0),
             ann(fired(at(L::Suspended)), T, MIN), lost),
            (hb(fired(at(L::Running)), T), tick(4),
             hb(ann(fired(at(L::Suspended)), T + us(MIN), 2 * MIN), T + us(HB)),
             fx(&[Event::MasterLost], true, true, Data::Stop)),
            (hb(fired(at(L::RunningReplaced)), T), tick(4),
             hb(ann(fired(at(L::SuspendedReplaced)), T + us(MIN), 2 * MIN), T),
             fx(&[Event::MasterLost], true, false, Data::Stop)),
            (fired(at(L::Suspended)), tick(0), fired(at(L::Suspended)), NONE),
            (wd(at(L::Running), 0, ago(u32::MAX / 2)), tick(4),
             wd(at(L::Running), 0, ago(u32::MAX / 2)), NONE),
            (hb(at(L::Fault), T), tick(4), hb(at(L::Fault), T), NONE),
            // ANNOUNCE_ACK: PROVISIONED (RUNNING stays so in the same mode); a plan for
            // the other mode is void.
            (at(L::Unprovisioned), ack(S + 1, CL),
             acked(at(L::Provisioned), S + 1, CL), acknowledged),
            (at(L::Unprovisioned), ack(S, FD), acked(at(L::Provisioned), S, FD), ack_void),
            (fd(at(L::ProvisionedReplaced)), ack(S + 1, FD),
             acked(at(L::Provisioned), S + 1, FD), acknowledged),
            (fd(at(L::Suspended)), ack(S, CL), acked(at(L::Provisioned), S, CL), ack_void),
            (fd(wd(at(L::RunningReplaced), 5, At(0))), ack(S + 1, FD),
             acked(wd(at(L::Running), 5, T), S + 1, FD), acknowledged),
            (fd(wd(at(L::Running), 5, At(0))), ack(S, CL),
             acked(wd(at(L::Provisioned), 5, T), S, CL),
             fx(&[Event::PlanReset, Event::Acknowledged], false, false, Data::Void)),
            (at(L::Listening), ack(S, CL), at(L::Listening), NONE),
            (at(L::Fault), ack(S, CL), at(L::Fault), NONE),
            // Master heartbeats: ours feeds the watchdog, another session takes over
            // (announcing again, commands refused until it acknowledges).
            (wd(at(L::Running), 5, At(0)), Input::MasterHeartbeat { session: S },
             wd(at(L::Running), 5, T), NONE),
            // … also after another master was heard, until that one acknowledges: data
            // keeps flowing while our master lives (§5.1).
            (wd(at(L::RunningReplaced), 5, At(0)), Input::MasterHeartbeat { session: S },
             wd(at(L::RunningReplaced), 5, T), NONE),
            (at(L::Running), Input::MasterHeartbeat { session: S + 1 },
             ann(at(L::RunningReplaced), T, MIN), NONE),
            (ann(at(L::Suspended), FAR, 4 * MIN), Input::MasterHeartbeat { session: S + 1 },
             ann(at(L::SuspendedReplaced), T, MIN), NONE),
            (at(L::ProvisionedLost), Input::MasterHeartbeat { session: S + 1 },
             ann(at(L::ProvisionedReplaced), T, MIN), NONE),
            (at(L::Provisioned), Input::MasterHeartbeat { session: S + 1 },
             ann(at(L::ProvisionedReplaced), T, MIN), NONE),
            (at(L::ProvisionedReplaced), Input::MasterHeartbeat { session: S + 1 },
             at(L::ProvisionedReplaced), NONE),
            // Never acknowledged (session 0, which no master uses): ignored.
            (Life { session: 0, ..at(L::Unprovisioned) }, Input::MasterHeartbeat { session: S },
             Life { session: 0, ..at(L::Unprovisioned) }, NONE),
            // START (checked by the caller): RUNNING, the watchdog armed; a retry re-arms.
            (at(L::Provisioned), Input::Start { timeout: us(300_000) },
             wd(at(L::Running), 300_000, T), started),
            (at(L::ProvisionedLost), Input::Start { timeout: us(0) },
             wd(at(L::Running), 0, T), started),
            (at(L::Suspended), Input::Start { timeout: us(0) }, wd(at(L::Running), 0, T), started),
            (wd(at(L::Running), 1, At(0)), Input::Start { timeout: us(2) },
             wd(at(L::Running), 2, T), NONE),
            (at(L::ProvisionedReplaced), Input::Start { timeout: us(2) },
             at(L::ProvisionedReplaced), NONE),
            // FRAME_DEFINE index 0: PROVISIONED again, still announcing if it was.
            (at(L::Running), Input::PlanRedefined, at(L::Provisioned), redefined),
            (at(L::Suspended), Input::PlanRedefined, at(L::ProvisionedLost), redefined),
            (at(L::Provisioned), Input::PlanRedefined, at(L::Provisioned), NONE),
            // Id collisions: FAULT before any acknowledgement, assert the id after.
            (at(L::Listening), Input::IdCollision, at(L::Fault), collided),
            (at(L::Unprovisioned), Input::IdCollision, at(L::Fault), collided),
            (at(L::ProvisionedReplaced), Input::IdCollision, at(L::ProvisionedReplaced), HB_ONLY),
            (at(L::Running), Input::IdCollision, at(L::Running), HB_ONLY),
            (at(L::Fault), Input::IdCollision, at(L::Fault), NONE),
        ];
        for (i, (from, input, to, effects)) in table.iter().enumerate() {
            let mut life = *from;
            let got = life.step(*input, T);
            assert_eq!(
                (life, got),
                (*to, *effects),
                "row {i}: {from:?} + {input:?}"
            );
        }
    }

    #[test]
    fn derived_state() {
        use NodeState as N;
        // (stage, state, acknowledged, announcing, running)
        #[rustfmt::skip]
        let table = [
            (L::Boot, N::Unprovisioned, false, false, false),
            (L::Listening, N::Unprovisioned, false, false, false),
            (L::Unprovisioned, N::Unprovisioned, false, true, false),
            (L::Provisioned, N::Provisioned, true, false, false),
            (L::ProvisionedLost, N::Provisioned, true, true, false),
            (L::ProvisionedReplaced, N::Provisioned, false, true, false),
            (L::Running, N::Running, true, false, true),
            (L::RunningReplaced, N::Running, false, true, true),
            (L::Suspended, N::Suspended, true, true, false),
            (L::SuspendedReplaced, N::Suspended, false, true, false),
            (L::Fault, N::Fault, false, false, false),
        ];
        for (stage, state, acknowledged, announcing, running) in table {
            assert_eq!(
                (
                    stage.state(),
                    stage.acknowledged(),
                    stage.announcing(),
                    stage.is_running()
                ),
                (state, acknowledged, announcing, running),
                "{stage:?}"
            );
            let fault = if stage == L::Fault {
                FaultCode::IdCollision
            } else {
                FaultCode::None
            };
            assert_eq!(at(stage).fault(), fault);
        }
        // An unconfigured node is all zero bytes: Boot is discriminant 0.
        assert_eq!(Lifecycle::default() as u8, 0);
        assert_eq!(Life::BOOT.stage as u8, 0);
        assert_eq!(BusMode::Classic as u8, 0);
        let w = wd(at(L::Running), 10, T);
        assert_eq!(w.watchdog_expiry(), Some(T + us(11)));
        assert_eq!(wd(at(L::Suspended), 10, T).watchdog_expiry(), None);
        assert_eq!(wd(at(L::Running), 0, T).watchdog_expiry(), None);
    }
}

#[cfg(test)]
mod effects_tests {
    use super::*;

    #[test]
    fn events_in_order_and_flags_distinct() {
        let mut all = Effects::NONE;
        for (i, (flag, e)) in Effects::EVENTS.iter().enumerate() {
            assert_eq!(Effects::event(*e), *flag);
            assert!(!all.has(*flag), "event {i} shares a flag");
            all |= *flag;
        }
        for f in [
            Effects::ANNOUNCE,
            Effects::HEARTBEAT,
            Effects::STOP,
            Effects::UNSTAGE,
            Effects::CLEAR_PLAN,
            Effects::SILENCE,
        ] {
            assert!(!all.has(f));
            all |= f;
        }
        assert_eq!(
            Effects::EVENTS[0].1,
            Event::PlanReset,
            "PlanReset goes before Acknowledged"
        );
    }
}
