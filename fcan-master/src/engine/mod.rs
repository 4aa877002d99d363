//! The master's engine, sans I/O: frames and time go in, frames and events come out.
//!
//! It discovers nodes, downloads (or finds in the cache) and verifies their schema blobs,
//! plans their frames, provisions and starts them, restores the parameters the user set
//! after a reboot, watches heartbeats, and carries the user's service calls, parameter
//! reads and writes, and topic traffic. Nothing here waits or sleeps: the async
//! [`crate::Master`] drives it from one task, and tests drive it frame by frame.
//!
//! Time is a `u64` of microseconds on any monotonic clock the caller chooses.

mod admission;
mod collision;
pub use collision::COLLISION_HOLD_US;
mod data;
pub(crate) use data::{unpack_data_frame, Unpacked};
mod discovery;
mod node;
mod provision;
mod requests;
mod update;
pub use update::{
    reason_text, UpdateError, UpdateReport, UpdateStep, PROGRESS_PERIOD_US, REBOOT_TIMEOUT_US,
};

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::SchemaDigest;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{
    caps, Announce, AnnounceAck, BusMode, CommandResult, ConfigMessage, DataDirection, Discover,
    Entries, FrameDefine, MasterHeartbeat, NodeState, ParamGet, ParamSet, ResultCode, SchemaData,
    SchemaRead, ServiceRequest, ServiceStatus, Start,
};
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_core::timing;
use fcan_core::types::{check_range, Scalar};

use crate::transport::sim::BitRates;

pub use node::{Announcement, NodeRecord, NodeSchema, Phase, MAX_OUTSTANDING_REQUESTS};
use node::{Download, InFlight, PendingCall, Step};
use provision::*;
pub use requests::check_param_value;
use requests::*;

use crate::cache::BlobStore;
use crate::planner::{plan_node, IdAllocator, Plan};

/// Engine settings. [`EngineConfig::new`] gives the protocol defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EngineConfig {
    /// This master's random session id.
    pub session: u32,
    /// The link's frame kind.
    pub mtu: Mtu,
    /// Use bit-rate switching with FD nodes.
    pub brs: bool,
    /// Master-lost timeout sent in START (ms, 0 = off).
    pub master_timeout_ms: u16,
    /// Master heartbeat period (µs).
    pub heartbeat_period_us: u64,
    /// Wait for a RESULT before retrying (µs).
    pub command_timeout_us: u64,
    /// Retries before a command fails.
    pub command_retries: u8,
    /// Service response timeout (µs), restarted by ACCEPTED.
    pub service_timeout_us: u64,
    /// Silence after which a node is offline (µs).
    pub offline_timeout_us: u64,
    /// The bus's bit rates: the bus time of each frame, by which data is paced.
    pub rates: BitRates,
    /// At most this much bus time (µs) of data frames is handed to the link ahead of
    /// the bus, so a configuration frame (the heartbeat first) never waits behind more
    /// (`admission.rs`).
    pub data_lead_us: u64,
    /// While more than this much bus time (µs) of data frames waits to be handed over, a
    /// publish is refused with [`CallError::Busy`] (`admission.rs`).
    pub data_backlog_us: u64,
    /// Data frames are handed over only while the bus load — every frame counted, the
    /// master's and the nodes' — stays within this (percent, 1..=100): the rest of the
    /// bus lets the nodes' queued frames drain (`admission.rs`).
    pub bus_load_limit_percent: u8,
}

/// Default of [`EngineConfig::data_lead_us`]: 5 ms of data ahead of the bus, several
/// times tokio's 1 ms timer tick (so the link never runs dry between two wake-ups) and
/// small beside the 100 ms heartbeat period and the nodes' 300 ms watchdog.
pub const DEFAULT_DATA_LEAD_US: u64 = 5_000;
/// Default of [`EngineConfig::data_backlog_us`]: 20 ms of bus time. A command waits at
/// most that long for the bus when the commands have it all, longer when the nodes use
/// most of it (on the example Classical bus, which the boards load to 63 %, about
/// 75 ms); a control loop publishing faster than the bus carries learns it within a
/// slow loop's period.
pub const DEFAULT_DATA_BACKLOG_US: u64 = 20_000;
/// Default of [`EngineConfig::bus_load_limit_percent`]: commands fill the bus up to
/// 90 % load; a tenth stays idle, so a node's frames that lost arbitration go out.
pub const DEFAULT_BUS_LOAD_LIMIT_PERCENT: u8 = 90;

impl EngineConfig {
    /// How long the answer to one SCHEMA_READ may take before it is asked again
    /// (four command timeouts: a chunk is many
    /// frames, a RESULT one).
    pub fn schema_chunk_timeout_us(&self) -> u64 {
        self.command_timeout_us * discovery::SCHEMA_CHUNK_TIMEOUT_FACTOR
    }

    /// Protocol defaults for a link of the given kind.
    pub fn new(session: u32, mtu: Mtu) -> Self {
        EngineConfig {
            session,
            mtu,
            brs: true,
            master_timeout_ms: timing::DEFAULT_MASTER_TIMEOUT_MS,
            heartbeat_period_us: timing::MASTER_HEARTBEAT_PERIOD_US as u64,
            command_timeout_us: timing::COMMAND_TIMEOUT_MS as u64 * 1000,
            command_retries: 5,
            service_timeout_us: timing::SERVICE_TIMEOUT_MS as u64 * 1000,
            offline_timeout_us: timing::NODE_OFFLINE_TIMEOUT_US as u64,
            rates: BitRates::default(),
            data_lead_us: DEFAULT_DATA_LEAD_US,
            data_backlog_us: DEFAULT_DATA_BACKLOG_US,
            bus_load_limit_percent: DEFAULT_BUS_LOAD_LIMIT_PERCENT,
        }
    }
}

/// Something the user of the engine should know.
///
/// Non-exhaustive: new kinds of events come with new features, so a match outside this
/// crate keeps a catch-all arm. One that lists every variant does not compile:
///
/// ```compile_fail,E0004
/// use fcan_master::engine::Event;
/// fn kind(e: &Event) -> &'static str {
///     match e {
///         Event::Announced { .. } => "announced",
///         Event::SchemaReady { .. } => "schema",
///         Event::Online { .. } => "online",
///         Event::Rebooted { .. } => "rebooted",
///         Event::Offline { .. } => "offline",
///         Event::Failed { .. } => "failed",
///         Event::Collision { .. } => "collision",
///         Event::OtherMaster { .. } => "other master",
///         Event::ClassicNodeOnFdLink { .. } => "classic",
///         Event::CallDone { .. } => "call",
///         Event::ParamDone { .. } => "param",
///     }
/// }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A node announced itself (first time, or again).
    Announced {
        /// Node id.
        node: NodeId,
        /// Its boot id.
        boot_id: u32,
    },
    /// A node's schema is known: from the cache or downloaded and verified.
    SchemaReady {
        /// Node id.
        node: NodeId,
        /// Full digest.
        digest: SchemaDigest,
        /// Whether it came from the cache (no transfer).
        cached: bool,
    },
    /// A node was started: its topics flow.
    Online {
        /// Node id.
        node: NodeId,
    },
    /// A node came back with a new boot id; it is being re-provisioned.
    Rebooted {
        /// Node id.
        node: NodeId,
        /// Boot id before.
        old: u32,
        /// Boot id now.
        new: u32,
    },
    /// A node fell silent.
    Offline {
        /// Node id.
        node: NodeId,
    },
    /// A node could not be provisioned; it is retried when it announces again.
    Failed {
        /// Node id.
        node: NodeId,
        /// Why, for people.
        reason: String,
    },
    /// Two nodes answer to one node id.
    Collision {
        /// Node id.
        node: NodeId,
        /// The two boot ids seen.
        boot_ids: (u32, u32),
    },
    /// Another master's heartbeat was heard: two owners would fight over the bus.
    OtherMaster {
        /// Its session id.
        session: u32,
    },
    /// A node on an FD link cannot do FD: it is run on Classical CAN frames.
    ClassicNodeOnFdLink {
        /// Node id.
        node: NodeId,
    },
    /// A service call finished.
    CallDone {
        /// The id [`Engine::call_service`] returned.
        id: u64,
        /// The packed response, or why not.
        result: Result<Vec<u8>, CallError>,
    },
    /// A parameter read or write finished.
    ParamDone {
        /// The id [`Engine::set_param`] / [`Engine::get_param`] returned.
        id: u64,
        /// For a read the packed value, for a write `None`; or why not.
        result: Result<Option<Vec<u8>>, CallError>,
    },
    /// How far a firmware update is ([`PROGRESS_PERIOD_US`] apart, and at each step).
    UpdateProgress {
        /// The id [`Engine::start_update`] returned.
        id: u64,
        /// Node id.
        node: NodeId,
        /// Where it stands.
        step: UpdateStep,
        /// Bytes, rate, ETA.
        progress: crate::update::Progress,
    },
    /// A firmware update ended: the new firmware runs and is provisioned, or why not.
    UpdateDone {
        /// The id [`Engine::start_update`] returned.
        id: u64,
        /// Node id.
        node: NodeId,
        /// What it did, or why it failed.
        result: Result<UpdateReport, UpdateError>,
    },
    /// A node came back with another schema (after a firmware update, or a board swapped
    /// on the same id): the parameters the user had set were carried to it by block,
    /// name and type. Those it no longer has are dropped, not restored.
    ParamsCarried {
        /// Node id.
        node: NodeId,
        /// `node.block.param` paths restored.
        restored: Vec<String>,
        /// `node.block.param` paths the new schema does not have (or with another type).
        dropped: Vec<String>,
    },
    /// A user's parameter write was acknowledged by the node, whoever asked (a face, the
    /// CLI, a cycle): faces that announce parameter changes (ROS 2's
    /// `/parameter_events`, Foxglove's parameter subscriptions) hear writes made through
    /// the others. Restores after a reboot re-apply a value already announced: no event.
    ParamChanged {
        /// Node id.
        node: NodeId,
        /// `node.block.param`.
        name: String,
        /// The value the node took.
        value: crate::value::Value,
    },
}

impl Event {
    /// The node the event is about, if it is about one.
    pub fn node(&self) -> Option<NodeId> {
        match self {
            Event::Announced { node, .. }
            | Event::SchemaReady { node, .. }
            | Event::Online { node }
            | Event::Rebooted { node, .. }
            | Event::Offline { node }
            | Event::Failed { node, .. }
            | Event::Collision { node, .. }
            | Event::ClassicNodeOnFdLink { node }
            | Event::UpdateProgress { node, .. }
            | Event::UpdateDone { node, .. }
            | Event::ParamsCarried { node, .. }
            | Event::ParamChanged { node, .. } => Some(*node),
            Event::OtherMaster { .. } | Event::CallDone { .. } | Event::ParamDone { .. } => None,
        }
    }
}

/// Why a user request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No such node, or it is not running.
    #[error("node {0} is not online")]
    NodeNotOnline(NodeId),
    /// No such block / service / param / topic, or wrong direction.
    #[error("{}", crate::text::Untrusted(.0))]
    BadTarget(String),
    /// The node exists but its phase does not allow this now (a re-provision of a node
    /// that is neither running nor failed); the message names the phase. Not
    /// [`CallError::BadTarget`]: asked again later it may succeed, and the remote API
    /// says `not_running`, not `unknown_name`.
    #[error("{}", crate::text::Untrusted(.0))]
    WrongPhase(String),
    /// The value does not fit the parameter (type, NaN/inf, range); checked on the
    /// master before anything is sent.
    #[error("{}", crate::text::Untrusted(.0))]
    BadValue(String),
    /// The node refused (NAK) with a reason.
    #[error("node refused ({code:?}): {}", refusal(*.0), code = .0)]
    Refused(ResultCode),
    /// The service answered with a non-OK status.
    #[error("service answered {status:?}: {}", service_status(*.0), status = .0)]
    Status(ServiceStatus),
    /// No answer in time.
    #[error("no answer from node {0} in time")]
    Timeout(NodeId),
    /// Commands wait for the bus already: more than the backlog limit
    /// ([`EngineConfig::data_backlog_us`]) of bus time; nothing was staged or sent.
    /// Asked again later it may succeed.
    #[error(
        "the bus is busy: {waiting_us} µs of commands wait to be sent (the limit is \
         {limit_us} µs); node {node}'s command was not sent: publish less often or batch it"
    )]
    Busy {
        /// The node the refused command was for.
        node: NodeId,
        /// Bus time of the data waiting (µs).
        waiting_us: u64,
        /// The limit (µs).
        limit_us: u64,
    },
    /// The node rebooted or went offline while the request was pending.
    #[error("node {0} went away while the request was pending")]
    NodeLost(NodeId),
    /// The node already has as many requests outstanding as the master allows
    /// ([`MAX_OUTSTANDING_REQUESTS`]); nothing was sent.
    #[error(
        "node {node} already has {limit} requests outstanding (the limit); wait for one to finish"
    )]
    TooManyRequests {
        /// Node id.
        node: NodeId,
        /// The limit.
        limit: usize,
    },
}

/// What a NAK's code means, for [`CallError`]'s message.
fn refusal(code: ResultCode) -> &'static str {
    match code {
        ResultCode::Ok => "accepted",
        ResultCode::BadLength => "the payload has the wrong length",
        ResultCode::BadIndex => "it has no such block, topic, parameter, service or frame",
        ResultCode::BadState => "not allowed in the node's current state",
        ResultCode::BelowMin => "the value is below the parameter's minimum",
        ResultCode::AboveMax => "the value is above the parameter's maximum",
        ResultCode::NotFinite => "NaN or infinity where a number is required",
        ResultCode::BadValue => "the value is not valid for its type",
        ResultCode::LimitFrames => "more frames than the node's limits.max_frames",
        ResultCode::LimitEntries => "more copy entries than the node's limits.max_copy_entries",
        ResultCode::BadStdId => "a data identifier outside the data range or already in use",
        ResultCode::BadEntry => "a copy entry outside its topic or frame, or overlapping another",
        ResultCode::BadPlan => "the frame plan is inconsistent",
        ResultCode::NotWired => "that block instance is not wired on this board",
        ResultCode::Busy => "the node is busy; try again",
        ResultCode::Unsupported => "a protocol feature this node does not implement",
    }
}

/// What a service status means, for [`CallError`]'s message.
fn service_status(status: ServiceStatus) -> &'static str {
    match status {
        ServiceStatus::Ok => "done",
        ServiceStatus::Accepted => "taken, the answer follows later",
        ServiceStatus::Busy => "no free slot or the handler is busy; try again",
        ServiceStatus::AppError => "the handler ran and reported a failure",
        ServiceStatus::BadIndex => "no such service, or its block is not wired",
        ServiceStatus::BadRequest => "the request did not decode",
        ServiceStatus::BadState => "the node serves no calls in its current state",
        ServiceStatus::Expired => "the node gave the deferred call up before it completed",
    }
}

/// Receives topic samples as they are decoded. Called from [`Engine::handle_frame`] for
/// s2m data, and for m2s data the master itself publishes (so a monitor sees both).
pub trait SampleSink {
    /// One complete topic value of `block`'s `topic` on `node`, at time `at`.
    fn sample(&mut self, node: NodeId, block: u8, topic: u8, bytes: &[u8], at: u64);
}

/// A sink that drops everything.
pub struct NoSink;
impl SampleSink for NoSink {
    fn sample(&mut self, _: NodeId, _: u8, _: u8, _: &[u8], _: u64) {}
}

/// Where a data identifier is routed.
#[derive(Clone, Copy, Debug)]
struct Route {
    node: u8,
    frame: u16,
}

/// A multi-frame publication being assembled: where the group stands
/// (`fcan_core::group`, the node's assembler too) and the staged copy of the topic.
#[derive(Clone, Debug, Default)]
pub(crate) struct Staging {
    progress: fcan_core::group::GroupProgress,
    bytes: Vec<u8>,
}

/// Counters of the engine itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineStats {
    /// Frames taken in.
    pub rx_frames: u64,
    /// Frames dropped as malformed.
    pub rx_malformed: u64,
    /// Data frames with an identifier no plan uses.
    pub rx_unrouted: u64,
    /// Configuration frames not for the master: master → node frames other than another
    /// master's heartbeat, and multi-frame transfers nobody asked for.
    pub rx_ignored: u64,
    /// Multi-frame transfers or groups dropped.
    pub rx_reassembly_dropped: u64,
    /// Frames handed to the link (configuration frames when queued, data frames when
    /// their turn on the bus comes).
    pub tx_frames: u64,
    /// Publishes refused because the data waiting exceeded the backlog limit.
    pub publish_busy: u64,
    /// Data frames withdrawn before they were sent: their node left RUNNING while they
    /// waited (a reboot, a new plan), so their identifier may mean something else now.
    pub tx_withdrawn: u64,
    /// Bus time of the data frames waiting to be handed to the link (µs). A gauge, not a
    /// counter.
    pub data_waiting_us: u64,
    /// Commands retried.
    pub retries: u64,
    /// Schema bytes downloaded.
    pub schema_bytes_read: u64,
    /// User requests (service calls, parameter reads and writes) not finished yet: each
    /// ends with exactly one [`Event::CallDone`] or [`Event::ParamDone`]. A gauge, not a
    /// counter.
    pub pending_requests: u64,
    /// DISCOVERs to one node not sent because of the rate limits.
    pub discovers_limited: u64,
    /// Data identifiers the plans of this bus use now, of the 768 of
    /// [`fcan_core::id::DATA_ID_RANGE`]. A gauge, not a counter.
    pub data_ids_in_use: u64,
}

/// The master engine.
pub struct Engine {
    cfg: EngineConfig,
    store: Box<dyn BlobStore>,
    nodes: BTreeMap<u8, NodeRecord>,
    schemas: BTreeMap<SchemaDigest, Arc<NodeSchema>>,
    ids: IdAllocator,
    routes: Vec<Option<Route>>,
    staging: BTreeMap<(u8, u8, u8), Staging>,
    group_seq: BTreeMap<(u8, u8, u8), u8>,
    rx: Box<ReassemblyPool<32, 8192>>,
    /// The message being handled, copied out of `rx` (capacity kept between frames).
    rx_payload: Vec<u8>,
    /// Configuration-plane frames, handed over first.
    out: VecDeque<Frame>,
    /// Data frames, handed over at the pace of the bus.
    pacer: admission::Pacer,
    /// The latest time the caller gave (µs): what "now" is for [`Engine::pop_frame`].
    clock: u64,
    /// Numbers each time a node starts running (`NodeRecord::run`).
    run_seq: u64,
    /// Wire time of every frame taken in or handed to the link (ns), at the config's
    /// rates: the bus load the master reports (the pacer needs each cost anyway).
    bus_busy_ns: u64,
    events: VecDeque<Event>,
    next_heartbeat: u64,
    next_request: u64,
    pending_user: BTreeMap<u64, u8>,
    /// m2s topics (node, block, topic) staged and not sent yet.
    published_m2s: std::collections::BTreeSet<(u8, u8, u8)>,
    stats: EngineStats,
    scratch: Vec<u8>,
    /// Cache lookups, queued downloads and refused blobs (bounded; `discovery.rs`).
    blobs: discovery::BlobWork,
    /// When each node id was last sent a DISCOVER of its own.
    discover_last: [Option<u64>; 128],
    /// Start of the current one-second window and the DISCOVERs sent in it.
    discover_window: (u64, u32),
    /// [`Engine::leave`] was called: no node is acknowledged or provisioned any more.
    leaving: bool,
}

const ROUTES: usize = 0x800;

/// The public id of a node the engine keys by its raw `u8`. Every key came from a
/// [`NodeId`] the bus carried, so the fallback (broadcast) is never taken; it only keeps
/// this from panicking.
pub(crate) fn nid(raw: u8) -> NodeId {
    NodeId::new(raw).unwrap_or(NodeId::BROADCAST)
}

/// A node is sent at most one DISCOVER of its own per this long (µs): shorter than the
/// 1 s node heartbeat period, so a node heard once per heartbeat is asked every time.
pub const DISCOVER_PER_NODE_US: u64 = 500_000;
/// DISCOVERs to single nodes, in all, per second.
pub const DISCOVER_PER_SECOND: u32 = 16;

/// Whether `frame` is a master HEARTBEAT as a master sends it: master→node, a whole
/// broadcast frame of exactly [`MasterHeartbeat::LEN`] bytes (ours or another master's;
/// the session in it tells which).
pub(crate) fn is_master_heartbeat(frame: &Frame) -> bool {
    ConfigId::from_can_id(frame.id()).is_ok_and(|cid| {
        cid.dir == Direction::ToNode && is_heartbeat_of_a_master(cid, frame.data())
    })
}

fn is_heartbeat_of_a_master(cid: ConfigId, data: &[u8]) -> bool {
    cid.opcode == Opcode::Heartbeat
        && cid.node.is_broadcast()
        && cid.segment == 0
        && cid.eot
        && data.len() == MasterHeartbeat::LEN
}

impl Engine {
    /// An engine using `store` as its blob cache.
    pub fn new(cfg: EngineConfig, store: Box<dyn BlobStore>) -> Self {
        Engine {
            cfg,
            store,
            nodes: BTreeMap::new(),
            schemas: BTreeMap::new(),
            ids: IdAllocator::new(),
            routes: vec![None; ROUTES],
            staging: BTreeMap::new(),
            group_seq: BTreeMap::new(),
            rx: Box::new(ReassemblyPool::new()),
            rx_payload: Vec::with_capacity(8192),
            out: VecDeque::new(),
            pacer: Default::default(),
            clock: 0,
            run_seq: 0,
            bus_busy_ns: 0,
            events: VecDeque::new(),
            next_heartbeat: 0,
            next_request: 1,
            pending_user: BTreeMap::new(),
            published_m2s: Default::default(),
            stats: EngineStats::default(),
            scratch: vec![0; 8192],
            blobs: Default::default(),
            discover_last: [None; 128],
            discover_window: (0, 0),
            leaving: false,
        }
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Engine counters.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            pending_requests: self.pending_user.len() as u64,
            data_ids_in_use: self.ids.in_use() as u64,
            data_waiting_us: self.pacer.waiting_us(),
            ..self.stats
        }
    }

    /// Every node known, by id.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> Option<&NodeRecord> {
        self.nodes.get(&id.get())
    }

    /// Asks every node to announce itself.
    pub fn discover(&mut self) {
        let msg = ConfigMessage::Discover(Discover {
            session: self.cfg.session,
        });
        self.send(NodeId::BROADCAST, 0, &msg, Mtu::Classic);
    }

    /// The next frame to hand to the link now: configuration frames first, then data
    /// frames while the link holds at most [`EngineConfig::data_lead_us`] of bus time
    /// ("now" is the latest time given to [`Engine::poll`], [`Engine::handle_frame`] or
    /// a publish). `None` while data waits for the bus: call again after
    /// [`Engine::next_deadline`].
    pub fn pop_frame(&mut self) -> Option<Frame> {
        let now_ns = self.clock.saturating_mul(1000);
        if let Some(f) = self.out.pop_front() {
            let cost = self.frame_cost_ns(&f);
            self.bus_busy_ns += cost;
            self.pacer
                .sent(now_ns, cost, self.cfg.bus_load_limit_percent, true);
            return Some(f);
        }
        let lead_ns = self.cfg.data_lead_us.saturating_mul(1000);
        while let Some(q) = self.pacer.pop_ready(now_ns, lead_ns) {
            let same_run = self
                .nodes
                .get(&q.node)
                .is_some_and(|r| r.phase == Phase::Running && r.run == q.run);
            if same_run {
                self.pacer
                    .sent(now_ns, q.cost_ns, self.cfg.bus_load_limit_percent, false);
                self.bus_busy_ns += q.cost_ns;
                self.stats.tx_frames += 1;
                return Some(q.frame);
            }
            self.stats.tx_withdrawn += 1;
        }
        None
    }

    /// A frame's time on the wire at this bus's rates (ns).
    fn frame_cost_ns(&self, f: &Frame) -> u64 {
        self.cfg.rates.frame_time(f).as_nanos() as u64
    }

    /// Wire time of every frame taken in ([`Engine::handle_frame`]) or handed to the
    /// link ([`Engine::pop_frame`]) so far, at [`EngineConfig::rates`].
    pub fn bus_busy(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.bus_busy_ns)
    }

    /// The master leaves the bus on purpose (a one-shot command ending, a daemon shut
    /// down): every running node is sent FRAME_DEFINE index 0, which takes it back to
    /// PROVISIONED — data stopped at once, its master-lost watchdog off — so its error
    /// summary does not count a lost master (docs/protocol.md §5.4). Pending requests
    /// fail, nothing is acknowledged or provisioned from here on. Returns how many nodes
    /// were asked; [`Engine::leaving`] tells when all have answered or their retries ran
    /// out (a node that never hears it stops by its watchdog, as before).
    pub fn leave(&mut self, now: u64) -> usize {
        self.tick(now);
        self.leaving = true;
        let running: Vec<u8> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.phase == Phase::Running && n.plan.is_some())
            .map(|(&id, _)| id)
            .collect();
        for &id in &running {
            self.fail_user_requests(id, CallError::NodeLost(nid(id)));
            if let Some(n) = self.nodes.get_mut(&id) {
                requeue_in_flight(n);
                n.steps.clear();
                n.in_flight = None;
                n.steps.push_back(Step::Leave);
            }
            self.next_step(id, now);
        }
        running.len()
    }

    /// Whether a node asked to leave ([`Engine::leave`]) has not answered yet and may
    /// still be asked again.
    pub fn leaving(&self) -> bool {
        self.nodes.values().any(|n| {
            n.steps.contains(&Step::Leave)
                || n.in_flight.as_ref().is_some_and(|f| f.step == Step::Leave)
        })
    }

    /// Moves the engine's "now" forward (never back).
    fn tick(&mut self, now: u64) {
        self.clock = self.clock.max(now);
    }

    /// The next event.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time [`Engine::poll`] has something to do.
    pub fn next_deadline(&self) -> u64 {
        let mut t = self.next_heartbeat;
        if let Some(r) = self
            .pacer
            .next_release_us(self.cfg.data_lead_us.saturating_mul(1000))
        {
            t = t.min(r);
        }
        for n in self.nodes.values() {
            if let Some(f) = &n.in_flight {
                t = t.min(f.deadline);
            }
            if let Some(d) = &n.download {
                t = t.min(d.deadline);
            }
            for c in n.calls.values() {
                t = t.min(c.deadline);
            }
            if n.phase != Phase::Offline {
                t = t.min(n.last_seen + self.cfg.offline_timeout_us);
            }
            if let Some(h) = &n.held {
                t = t.min(h.until);
            }
            if let Some((_, seen)) = n.collision {
                t = t.min(seen + self.cfg.offline_timeout_us);
            }
            if let Some(u) = Self::update_deadline(n) {
                t = t.min(u);
            }
        }
        t
    }

    /// Runs timers: heartbeat, retries, timeouts, offline detection.
    pub fn poll(&mut self, now: u64) {
        self.tick(now);
        self.flush_published();
        if now >= self.next_heartbeat {
            let msg = ConfigMessage::MasterHeartbeat(MasterHeartbeat {
                session: self.cfg.session,
            });
            self.send(NodeId::BROADCAST, 0, &msg, Mtu::Classic);
            self.next_heartbeat = now + self.cfg.heartbeat_period_us;
        }
        let ids: Vec<u8> = self.nodes.keys().copied().collect();
        for id in ids {
            // Before offline detection: an update's own timers run while its node
            // reboots (and is silent).
            self.poll_update(id, now);
            self.poll_node(id, now);
        }
        self.resume_blob_work(now);
        self.rx.expire(now as u32);
    }

    /// One node's timers, in order: offline detection, service timeouts, download retry,
    /// command retry. A node that goes offline or fails on the way has nothing left to
    /// retry, so the later steps are skipped.
    fn poll_node(&mut self, id: u8, now: u64) {
        self.release_held(id, now);
        // Forgets a second board silent for the offline timeout.
        self.in_collision(id, now);
        if self.detect_offline(id, now) {
            return;
        }
        self.expire_calls(id, now);
        if self.retry_download(id, now) {
            return;
        }
        self.retry_command(id, now);
    }

    /// Marks the node offline once it has been silent for the offline timeout; true when
    /// it has just gone offline (or is unknown).
    fn detect_offline(&mut self, id: u8, now: u64) -> bool {
        let Some(n) = self.nodes.get_mut(&id) else {
            return true;
        };
        if n.phase != Phase::Offline && now >= n.last_seen + self.cfg.offline_timeout_us {
            n.phase = Phase::Offline;
            requeue_in_flight(n);
            n.download = None;
            self.events.push_back(Event::Offline { node: nid(id) });
            // The user's requests (queued or in flight) end here, each with its answer;
            // of the rest only the parameter restores are kept.
            self.fail_user_requests(id, CallError::NodeLost(nid(id)));
            self.update_on_offline(id);
            if let Some(n) = self.nodes.get_mut(&id) {
                n.steps
                    .retain(|s| matches!(s, Step::ParamSet { req: None, .. }));
            }
            return true;
        }
        false
    }

    /// Ends each service call past its deadline with a timeout.
    fn expire_calls(&mut self, id: u8, now: u64) {
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        let expired: Vec<u8> = n
            .calls
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(c) = n.calls.remove(&t) {
                self.pending_user.remove(&c.id);
                self.events.push_back(Event::CallDone {
                    id: c.id,
                    result: Err(CallError::Timeout(nid(id))),
                });
            }
        }
    }

    /// Asks again for a schema chunk past its deadline, or fails the node once the
    /// retries are spent; true when it has failed (or is unknown).
    fn retry_download(&mut self, id: u8, now: u64) -> bool {
        let retries = self.cfg.command_retries;
        let Some(n) = self.nodes.get_mut(&id) else {
            return true;
        };
        if let Some(d) = &mut n.download {
            if now >= d.deadline {
                if d.tries >= retries {
                    n.download = None;
                    self.fail_node(id, "schema download timed out".into());
                    return true;
                }
                d.tries += 1;
                d.deadline = now + self.cfg.schema_chunk_timeout_us();
                self.stats.retries += 1;
                self.request_chunk(id, now, false);
            }
        }
        false
    }

    /// Sends the step in flight again past its deadline. Once the retries are spent a
    /// user's request ends with a timeout and provisioning goes on; any other step fails
    /// the node.
    fn retry_command(&mut self, id: u8, now: u64) {
        let retries = self.cfg.command_retries;
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        if let Some(f) = &mut n.in_flight {
            if now >= f.deadline {
                if f.tries >= retries {
                    let step = f.step.clone();
                    n.in_flight = None;
                    if step == Step::Leave {
                        // Not answered: the node stops by its own watchdog instead.
                        return;
                    }
                    if let Some(req) = user_request(&step) {
                        self.pending_user.remove(&req);
                        self.events.push_back(Event::ParamDone {
                            id: req,
                            result: Err(CallError::Timeout(nid(id))),
                        });
                        self.next_step(id, now);
                    } else {
                        self.fail_node(id, format!("no answer to {step}"));
                    }
                    return;
                }
                f.tries += 1;
                f.deadline = now + self.cfg.command_timeout_us;
                let (step, transfer) = (f.step.clone(), f.transfer);
                self.stats.retries += 1;
                self.send_step(id, &step, transfer);
            }
        }
    }

    /// Takes one frame from the bus.
    pub fn handle_frame(&mut self, frame: &Frame, at: u64, sink: &mut impl SampleSink) {
        self.tick(at);
        // The bus time the nodes use is not the master's to fill (`admission.rs`).
        let cost = self.frame_cost_ns(frame);
        self.bus_busy_ns += cost;
        self.pacer.heard(
            at.saturating_mul(1000),
            cost,
            self.cfg.bus_load_limit_percent,
        );
        self.stats.rx_frames += 1;
        match frame.id() {
            CanId::Standard(id) => self.handle_data(id, frame.data(), at, sink),
            CanId::Extended(_) => {
                let Ok(cid) = ConfigId::from_can_id(frame.id()) else {
                    self.stats.rx_malformed += 1;
                    return;
                };
                if cid.dir == Direction::ToNode {
                    // Master→node traffic is not for us. Only another master's heartbeat
                    // matters, and only as that master sends it: one whole broadcast
                    // frame of exactly its size. A foreign device on the bus may use any
                    // 29-bit identifier; one that merely parses as ours must not pass
                    // for a second master, nor take a reassembly slot.
                    if is_heartbeat_of_a_master(cid, frame.data()) {
                        self.handle_message(cid, frame.data(), at);
                    } else {
                        self.stats.rx_ignored += 1;
                    }
                    return;
                }
                if cid.segment == 0 && !cid.eot && !self.expects_transfer(cid) {
                    // A multi-frame transfer nobody asked for would hold a reassembly
                    // slot for 100 ms: a foreign device could starve the downloads.
                    self.stats.rx_ignored += 1;
                    return;
                }
                // The payload is copied out of the pool into a buffer kept between calls
                // (so handling it may use `self`): no allocation per frame.
                let mut payload = std::mem::take(&mut self.rx_payload);
                payload.clear();
                match self.rx.push(cid, frame.data(), at as u32) {
                    Ok(Some(p)) => {
                        payload.extend_from_slice(p);
                        self.handle_message(cid, &payload, at);
                    }
                    Ok(None) => {}
                    Err(_) => self.stats.rx_reassembly_dropped += 1,
                }
                self.rx_payload = payload;
            }
        }
    }

    /// Whether a node → master transfer of several frames may start: an ANNOUNCE (nodes
    /// announce unasked), or the answer to a request this master has pending with that
    /// node under that transfer id (a schema chunk, a parameter value, a service
    /// response).
    fn expects_transfer(&self, cid: ConfigId) -> bool {
        if cid.opcode == Opcode::Discover {
            return true;
        }
        let t = cid.transfer;
        self.nodes.get(&cid.node.get()).is_some_and(|n| {
            n.download.as_ref().is_some_and(|d| d.transfer == t)
                || n.in_flight.as_ref().is_some_and(|f| f.transfer == t)
                || n.calls.contains_key(&t)
                || (cid.opcode == Opcode::Update
                    && (n.update.as_ref().is_some_and(|u| u.uses(t))
                        || n.version_query.is_some_and(|q| q.transfer() == t)))
        })
    }

    fn handle_message(&mut self, cid: ConfigId, payload: &[u8], at: u64) {
        let msg = match ConfigMessage::decode(cid.opcode, cid.dir, payload) {
            Ok(m) => m,
            Err(_) => {
                self.stats.rx_malformed += 1;
                return;
            }
        };
        let node = cid.node.get();
        match msg {
            ConfigMessage::MasterHeartbeat(hb) if hb.session != self.cfg.session => {
                self.events.push_back(Event::OtherMaster {
                    session: hb.session,
                });
            }
            ConfigMessage::Announce(a) => self.on_announce(node, &a, at),
            ConfigMessage::NodeHeartbeat(hb) => {
                let Some(n) = self.nodes.get_mut(&node) else {
                    // A node we never heard announce (we started after it): ask it.
                    self.send_discover_to(node, at);
                    return;
                };
                if hb.boot_id != n.announce.boot_id {
                    self.foreign_heartbeat(node, hb.boot_id, at);
                    return;
                }
                self.known_boot_alive(node, at);
                let Some(n) = self.nodes.get_mut(&node) else {
                    return;
                };
                n.last_seen = at;
                n.state = hb.state;
                n.errors = hb.errors;
                let back = n.phase == Phase::Offline || matches!(n.phase, Phase::Failed(_));
                // A node failed for a collision stays failed while the other board is
                // heard (never serve both, §5.3).
                if back && !self.in_collision(node, at) {
                    // Back without rebooting: its plan may be intact, but START again to
                    // be sure it runs (the node answers BAD_PLAN if not, and we re-plan).
                    // A failed node that is acknowledged never announces again on its
                    // own: ask it (once per heartbeat), so provisioning is retried.
                    self.send_discover_to(node, at);
                }
            }
            ConfigMessage::SchemaData(d) => self.on_schema_data(node, cid.transfer, &d, at),
            ConfigMessage::Result(r) => self.on_result(node, cid.transfer, &r, at),
            ConfigMessage::UpdateReply(r) => self.on_update_reply(node, cid.transfer, &r, at),
            ConfigMessage::ParamValue(v) => {
                let Some(n) = self.nodes.get_mut(&node) else {
                    return;
                };
                n.last_seen = at;
                let matches = matches!(&n.in_flight, Some(f) if f.transfer == cid.transfer
                    && matches!(f.step, Step::ParamGet { block, param, .. } if block == v.block && param == v.param));
                if !matches {
                    return;
                }
                let Some(InFlight {
                    step: Step::ParamGet { req, .. },
                    ..
                }) = n.in_flight.take()
                else {
                    return;
                };
                let size = param_size(n, v.block, v.param).unwrap_or(v.value.len());
                let value = v.value.get(..size).map(|b| b.to_vec());
                self.pending_user.remove(&req);
                self.events.push_back(Event::ParamDone {
                    id: req,
                    result: value
                        .map(Some)
                        .ok_or(CallError::Refused(ResultCode::BadLength)),
                });
                self.next_step(node, at);
            }
            ConfigMessage::ServiceResponse(r) => {
                let Some(n) = self.nodes.get_mut(&node) else {
                    return;
                };
                n.last_seen = at;
                // The answer must name what was called, not only echo the transfer id.
                let Some(call) = n
                    .calls
                    .get_mut(&cid.transfer)
                    .filter(|c| c.block == r.block && c.service == r.service)
                else {
                    return;
                };
                match r.status {
                    // ACCEPTED restarts the timeout once: a node repeating it cannot keep
                    // a call waiting for ever.
                    ServiceStatus::Accepted if !call.accepted => {
                        call.accepted = true;
                        call.deadline = at + self.cfg.service_timeout_us;
                    }
                    ServiceStatus::Accepted => {}
                    ServiceStatus::Ok => {
                        let size = response_size(n, r.block, r.service).unwrap_or(r.body.len());
                        let Some(call) = n.calls.remove(&cid.transfer) else {
                            return;
                        };
                        self.pending_user.remove(&call.id);
                        let result = r
                            .body
                            .get(..size)
                            .map(|b| b.to_vec())
                            .ok_or(CallError::Status(ServiceStatus::BadRequest));
                        self.events.push_back(Event::CallDone {
                            id: call.id,
                            result,
                        });
                    }
                    status => {
                        let Some(call) = n.calls.remove(&cid.transfer) else {
                            return;
                        };
                        self.pending_user.remove(&call.id);
                        self.events.push_back(Event::CallDone {
                            id: call.id,
                            result: Err(CallError::Status(status)),
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// A DISCOVER to one node, unless the rate limits say no (protocol §5.4): the node's
    /// heartbeats, or frames that look like them, must not turn into a flood.
    fn send_discover_to(&mut self, node: u8, at: u64) {
        let last = self.discover_last.get(node as usize).copied().flatten();
        if last.is_some_and(|t| at < t + DISCOVER_PER_NODE_US) {
            self.stats.discovers_limited += 1;
            return;
        }
        let (start, count) = self.discover_window;
        if at >= start + 1_000_000 {
            self.discover_window = (at, 0);
        } else if count >= DISCOVER_PER_SECOND {
            self.stats.discovers_limited += 1;
            return;
        }
        self.discover_window.1 += 1;
        if let Some(slot) = self.discover_last.get_mut(node as usize) {
            *slot = Some(at);
        }
        if let Some(id) = NodeId::new(node) {
            let msg = ConfigMessage::Discover(Discover {
                session: self.cfg.session,
            });
            self.send(id, 0, &msg, Mtu::Classic);
        }
    }

    fn transfer(&mut self, node: u8) -> u8 {
        self.nodes.get_mut(&node).map_or(0, |n| n.transfer())
    }

    /// Encodes and segments one configuration message into the output queue.
    fn send(&mut self, to: NodeId, transfer: u8, msg: &ConfigMessage, mtu: Mtu) {
        let Ok(len) = msg.encode(&mut self.scratch) else {
            return;
        };
        let id = ConfigId::single(msg.opcode(), Direction::ToNode, to, transfer);
        let Ok(seg) = Segmenter::new(id, mtu, &self.scratch[..len], &[]) else {
            return;
        };
        // Bit-rate switching only for a node acknowledged with it (mode FdBrs): a node in
        // plain FD mode has no BRS capability and cannot receive a switched frame.
        let brs = self
            .nodes
            .get(&to.get())
            .is_some_and(|r| r.mode == BusMode::FdBrs);
        for f in seg {
            let f = if mtu == Mtu::Fd && !brs {
                f.without_brs()
            } else {
                f
            };
            self.out.push_back(f);
            self.stats.tx_frames += 1;
        }
    }

    fn new_request(&mut self, node: u8) -> u64 {
        let id = self.next_request;
        self.next_request += 1;
        self.pending_user.insert(id, node);
        id
    }
}
