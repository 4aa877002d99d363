//! The master's engine, sans I/O: frames and time go in, frames and events come out.
//!
//! It discovers nodes, downloads (or finds in the cache) and verifies their schema blobs,
//! plans their frames, provisions and starts them, restores the parameters the user set
//! after a reboot, watches heartbeats, and carries the user's service calls, parameter
//! reads and writes, and topic traffic. Nothing here waits or sleeps: the async
//! [`crate::Master`] drives it from one task, and tests drive it frame by frame.
//!
//! Time is a `u64` of microseconds on any monotonic clock the caller chooses.

mod node;

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
use fcan_core::numbering::Numbering;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_core::timing;
use fcan_core::types::{check_range, Scalar};

pub use node::{Announcement, NodeRecord, NodeSchema, Phase};
use node::{Download, InFlight, PendingCall, Step};

use crate::cache::BlobStore;
use crate::planner::{plan_node, IdAllocator, Plan};

/// Engine settings. [`EngineConfig::new`] gives the protocol defaults.
#[derive(Clone, Debug)]
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
}

impl EngineConfig {
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
        }
    }
}

/// Something the user of the engine should know.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A node announced itself (first time, or again).
    Announced {
        /// Node id.
        node: u8,
        /// Its boot id.
        boot_id: u32,
    },
    /// A node's schema is known: from the cache or downloaded and verified.
    SchemaReady {
        /// Node id.
        node: u8,
        /// Full digest.
        digest: SchemaDigest,
        /// Whether it came from the cache (no transfer).
        cached: bool,
    },
    /// A node was started: its topics flow.
    Online {
        /// Node id.
        node: u8,
    },
    /// A node came back with a new boot id; it is being re-provisioned.
    Rebooted {
        /// Node id.
        node: u8,
        /// Boot id before.
        old: u32,
        /// Boot id now.
        new: u32,
    },
    /// A node fell silent.
    Offline {
        /// Node id.
        node: u8,
    },
    /// A node could not be provisioned; it is retried when it announces again.
    Failed {
        /// Node id.
        node: u8,
        /// Why, for people.
        reason: String,
    },
    /// Two nodes answer to one node id.
    Collision {
        /// Node id.
        node: u8,
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
        node: u8,
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
}

/// Why a user request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No such node, or it is not running.
    #[error("node {0} is not online")]
    NodeNotOnline(u8),
    /// No such block / service / param / topic, or wrong direction.
    #[error("{0}")]
    BadTarget(String),
    /// The value does not fit the parameter (type, NaN/inf, range); checked on the
    /// master before anything is sent.
    #[error("{0}")]
    BadValue(String),
    /// The node refused (NAK) with a reason.
    #[error("node refused: {0:?}")]
    Refused(ResultCode),
    /// The service answered with a non-OK status.
    #[error("service answered {0:?}")]
    Status(ServiceStatus),
    /// No answer in time.
    #[error("no answer from node {0} in time")]
    Timeout(u8),
    /// The node rebooted or went offline while the request was pending.
    #[error("node {0} went away while the request was pending")]
    NodeLost(u8),
}

/// Receives topic samples as they are decoded. Called from [`Engine::handle_frame`] for
/// s2m data, and for m2s data the master itself publishes (so a monitor sees both).
pub trait SampleSink {
    /// One complete topic value of `block`'s `topic` on `node`, at time `at`.
    fn sample(&mut self, node: u8, block: u8, topic: u8, bytes: &[u8], at: u64);
}

/// A sink that drops everything.
pub struct NoSink;
impl SampleSink for NoSink {
    fn sample(&mut self, _: u8, _: u8, _: u8, _: &[u8], _: u64) {}
}

/// Where a data identifier is routed.
#[derive(Clone, Copy, Debug)]
struct Route {
    node: u8,
    frame: u16,
}

/// A multi-frame publication being assembled: (sequence, next part, bytes so far).
#[derive(Clone, Debug)]
struct Staging {
    seq: u8,
    next: u8,
    bytes: Vec<u8>,
}

/// Counters of the engine itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Frames taken in.
    pub rx_frames: u64,
    /// Frames dropped as malformed.
    pub rx_malformed: u64,
    /// Data frames with an identifier no plan uses.
    pub rx_unrouted: u64,
    /// Multi-frame transfers or groups dropped.
    pub rx_reassembly_dropped: u64,
    /// Frames queued for transmission.
    pub tx_frames: u64,
    /// Commands retried.
    pub retries: u64,
    /// Schema bytes downloaded.
    pub schema_bytes_read: u64,
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
    out: VecDeque<Frame>,
    events: VecDeque<Event>,
    next_heartbeat: u64,
    next_request: u64,
    pending_user: BTreeMap<u64, u8>,
    /// m2s frames (node, plan index) with a staged publication not sent yet.
    dirty_m2s: std::collections::BTreeSet<(u8, usize)>,
    stats: EngineStats,
    scratch: Vec<u8>,
}

const ROUTES: usize = 0x800;

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
            out: VecDeque::new(),
            events: VecDeque::new(),
            next_heartbeat: 0,
            next_request: 1,
            pending_user: BTreeMap::new(),
            dirty_m2s: Default::default(),
            stats: EngineStats::default(),
            scratch: vec![0; 8192],
        }
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Engine counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Every node known, by id.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// One node.
    pub fn node(&self, id: u8) -> Option<&NodeRecord> {
        self.nodes.get(&id)
    }

    /// Data identifiers in use on the bus.
    pub fn ids_in_use(&self) -> usize {
        self.ids.in_use()
    }

    /// Asks every node to announce itself.
    pub fn discover(&mut self) {
        let msg = ConfigMessage::Discover(Discover {
            session: self.cfg.session,
        });
        self.send(NodeId::BROADCAST, 0, &msg, Mtu::Classic);
    }

    /// The next frame to transmit.
    pub fn pop_frame(&mut self) -> Option<Frame> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time [`Engine::poll`] has something to do.
    pub fn next_deadline(&self) -> u64 {
        let mut t = self.next_heartbeat;
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
        }
        t
    }

    /// Runs timers: heartbeat, retries, timeouts, offline detection.
    pub fn poll(&mut self, now: u64) {
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
            self.poll_node(id, now);
        }
        self.rx.expire(now as u32);
    }

    fn poll_node(&mut self, id: u8, now: u64) {
        let retries = self.cfg.command_retries;
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        if n.phase != Phase::Offline && now >= n.last_seen + self.cfg.offline_timeout_us {
            n.phase = Phase::Offline;
            n.in_flight = None;
            n.download = None;
            n.steps
                .retain(|s| matches!(s, Step::ParamSet { req: None, .. }));
            self.events.push_back(Event::Offline { node: id });
            self.fail_user_requests(id, CallError::NodeLost(id));
            return;
        }
        // Service timeouts.
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
                    result: Err(CallError::Timeout(id)),
                });
            }
        }
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        // Download retry.
        if let Some(d) = &mut n.download {
            if now >= d.deadline {
                if d.tries >= retries {
                    n.download = None;
                    self.fail_node(id, "schema download timed out".into());
                    return;
                }
                d.tries += 1;
                d.deadline = now + self.cfg.command_timeout_us * 4;
                self.stats.retries += 1;
                self.request_chunk(id, now, false);
            }
        }
        // Command retry.
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        if let Some(f) = &mut n.in_flight {
            if now >= f.deadline {
                if f.tries >= retries {
                    let step = f.step.clone();
                    n.in_flight = None;
                    if let Some(req) = user_request(&step) {
                        self.pending_user.remove(&req);
                        self.events.push_back(Event::ParamDone {
                            id: req,
                            result: Err(CallError::Timeout(id)),
                        });
                        self.next_step(id, now);
                    } else {
                        self.fail_node(id, format!("no answer to {step:?}"));
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
        self.stats.rx_frames += 1;
        match frame.id() {
            CanId::Standard(id) => self.handle_data(id, frame.data(), at, sink),
            CanId::Extended(_) => {
                let Ok(cid) = ConfigId::from_can_id(frame.id()) else {
                    self.stats.rx_malformed += 1;
                    return;
                };
                let mut pool = std::mem::replace(&mut self.rx, Box::new(ReassemblyPool::new()));
                match pool.push(cid, frame.data(), at as u32) {
                    Ok(Some(payload)) => {
                        let payload = payload.to_vec();
                        self.handle_message(cid, &payload, at);
                    }
                    Ok(None) => {}
                    Err(_) => self.stats.rx_reassembly_dropped += 1,
                }
                self.rx = pool;
            }
        }
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
                    self.send_discover_to(node);
                    return;
                };
                if hb.boot_id != n.announce.boot_id {
                    let known = n.announce.boot_id;
                    self.events.push_back(Event::Collision {
                        node,
                        boot_ids: (known, hb.boot_id),
                    });
                    if n.prev_boot == Some(hb.boot_id) {
                        // What looked like a reboot was a second node announcing this id:
                        // the node we knew is alive and asserting it (§5.3), and the
                        // newcomer, hearing it, goes to FAULT. Keep the live one; it
                        // answered the provisioning we sent.
                        n.announce.boot_id = hb.boot_id;
                        n.prev_boot = None;
                        n.last_seen = at;
                        n.state = hb.state;
                    }
                    return;
                }
                n.last_seen = at;
                n.state = hb.state;
                n.errors = hb.errors;
                if n.phase == Phase::Offline || matches!(n.phase, Phase::Failed(_)) {
                    // Back without rebooting: its plan may be intact, but START again to
                    // be sure it runs (the node answers BAD_PLAN if not, and we re-plan).
                    // A failed node that is acknowledged never announces again on its
                    // own: ask it (once per heartbeat), so provisioning is retried.
                    self.send_discover_to(node);
                }
            }
            ConfigMessage::SchemaData(d) => self.on_schema_data(node, cid.transfer, &d, at),
            ConfigMessage::Result(r) => self.on_result(node, cid.transfer, &r, at),
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
                let Some(call) = n.calls.get_mut(&cid.transfer) else {
                    return;
                };
                match r.status {
                    ServiceStatus::Accepted => {
                        call.accepted = true;
                        call.deadline = at + self.cfg.service_timeout_us;
                    }
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

    fn on_announce(&mut self, node: u8, a: &Announce, at: u64) {
        self.events.push_back(Event::Announced {
            node,
            boot_id: a.boot_id,
        });
        let ann = Announcement {
            protocol: a.protocol,
            caps: a.caps,
            boot_id: a.boot_id,
            blob_len: a.blob_len,
            hash: a.hash,
            counts: a.counts.to_vec(),
        };
        if a.protocol as u32 != fcan_core::ir::PROTOCOL_VERSION {
            let rec = self
                .nodes
                .entry(node)
                .or_insert_with(|| NodeRecord::new(node, ann.clone(), at));
            rec.last_seen = at;
            let reason = format!(
                "speaks protocol {}, this master {}",
                a.protocol,
                fcan_core::ir::PROTOCOL_VERSION
            );
            self.fail_node(node, reason);
            return;
        }
        let mode = if self.cfg.mtu == Mtu::Fd && a.caps & caps::FD != 0 {
            if self.cfg.brs && a.caps & caps::BRS != 0 {
                BusMode::FdBrs
            } else {
                BusMode::Fd
            }
        } else {
            if self.cfg.mtu == Mtu::Fd {
                self.events.push_back(Event::ClassicNodeOnFdLink { node });
            }
            BusMode::Classic
        };
        if let Some(rec) = self.nodes.get_mut(&node) {
            let busy = rec.in_flight.is_some() || rec.download.is_some();
            if rec.announce == ann
                && busy
                && matches!(rec.phase, Phase::Reading | Phase::Provisioning)
            {
                // The boot we are reading or provisioning announced again: an answer to
                // DISCOVER or a back-off repeat sent before our ack arrived (possibly
                // queued before the provisioning we already did). Ack again and carry
                // on: starting over would abandon the steps in flight, and the state in
                // a stale announcement could even make us send START to a half-defined
                // plan.
                rec.last_seen = at;
                let ack = ConfigMessage::AnnounceAck(AnnounceAck {
                    boot_id: a.boot_id,
                    session: self.cfg.session,
                    mode: rec.mode,
                });
                let t = rec.transfer();
                self.send(
                    NodeId::new(node).unwrap_or(NodeId::BROADCAST),
                    t,
                    &ack,
                    Mtu::Classic,
                );
                return;
            }
        }
        let resume = match self.nodes.get_mut(&node) {
            Some(rec) => {
                rec.last_seen = at;
                if rec.announce.boot_id != a.boot_id {
                    rec.prev_boot = Some(rec.announce.boot_id);
                    self.events.push_back(Event::Rebooted {
                        node,
                        old: rec.announce.boot_id,
                        new: a.boot_id,
                    });
                    false
                } else {
                    // Same boot: a lost ack, a master restart on its side, or master-lost
                    // recovery. A suspended node with its plan only needs START.
                    a.state == NodeState::Suspended && rec.plan.is_some() && rec.announce == ann
                }
            }
            None => {
                self.nodes
                    .insert(node, NodeRecord::new(node, ann.clone(), at));
                false
            }
        };
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let schema_changed = rec.announce.hash != ann.hash || rec.announce.counts != ann.counts;
        rec.announce = ann;
        rec.mode = mode;
        rec.state = a.state;
        rec.in_flight = None;
        rec.steps.retain(|s| {
            matches!(
                s,
                Step::ParamSet { req: Some(_), .. } | Step::ParamGet { .. }
            )
        });
        if schema_changed {
            rec.schema = None;
            rec.schema_cached = None;
            if let Some(plan) = rec.plan.take() {
                self.release_plan(node, &plan);
            }
        }
        let boot_id = a.boot_id;
        self.fail_calls(node, CallError::NodeLost(node));
        let ack = ConfigMessage::AnnounceAck(AnnounceAck {
            boot_id,
            session: self.cfg.session,
            mode,
        });
        let t = self.transfer(node);
        self.send(
            NodeId::new(node).unwrap_or(NodeId::BROADCAST),
            t,
            &ack,
            Mtu::Classic,
        );
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.phase = Phase::Provisioning;
        if resume {
            rec.steps.push_front(Step::Start);
            self.next_step(node, at);
            return;
        }
        if rec.schema.is_some() {
            self.begin_provisioning(node, at);
            return;
        }
        let (prefix, len) = (rec.announce.hash, rec.announce.blob_len);
        let found = self
            .schemas
            .values()
            .find(|s| s.digest.matches(prefix) && s.blob.len() as u64 == len as u64)
            .cloned()
            .or_else(|| {
                let (digest, blob) = self.store.find(prefix, len)?;
                self.load_schema(digest, blob).ok()
            });
        match found {
            Some(s) => {
                self.events.push_back(Event::SchemaReady {
                    node,
                    digest: s.digest,
                    cached: true,
                });
                if let Some(rec) = self.nodes.get_mut(&node) {
                    rec.schema = Some(s);
                    rec.schema_cached = Some(true);
                }
                self.begin_provisioning(node, at);
            }
            None => {
                let Some(rec) = self.nodes.get_mut(&node) else {
                    return;
                };
                rec.phase = Phase::Reading;
                rec.download = Some(Download {
                    buf: Vec::new(),
                    transfer: 0,
                    deadline: 0,
                    tries: 0,
                });
                self.request_chunk(node, at, true);
            }
        }
    }

    /// Decodes, validates and numbers a verified blob; remembers it.
    fn load_schema(
        &mut self,
        digest: SchemaDigest,
        blob: Vec<u8>,
    ) -> Result<Arc<NodeSchema>, String> {
        if let Some(s) = self.schemas.get(&digest) {
            return Ok(s.clone());
        }
        let schema = fcan_core::blob::decode(&blob).map_err(|e| e.to_string())?;
        let errors = fcan_core::validate::validate(&schema);
        if let Some(e) = errors.first() {
            return Err(format!("schema is invalid: {e}"));
        }
        let numbering = Numbering::of(&schema).map_err(|e| format!("{e:?}"))?;
        let s = Arc::new(NodeSchema {
            schema,
            numbering,
            digest,
            blob,
        });
        self.schemas.insert(digest, s.clone());
        Ok(s)
    }

    fn request_chunk(&mut self, node: u8, now: u64, fresh: bool) {
        let t = if fresh { self.transfer(node) } else { 0 };
        let timeout = self.cfg.command_timeout_us * 4;
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let mtu = rec.mode.mtu();
        let Some(d) = &mut rec.download else { return };
        if fresh {
            d.transfer = t;
            d.tries = 0;
        }
        d.deadline = now + timeout;
        let offset = d.buf.len() as u32;
        let remaining = rec.announce.blob_len.saturating_sub(offset);
        let len = remaining.min(schema_chunk(mtu) as u32) as u16;
        let transfer = d.transfer;
        let msg = ConfigMessage::SchemaRead(SchemaRead { offset, len });
        self.send(
            NodeId::new(node).unwrap_or(NodeId::BROADCAST),
            transfer,
            &msg,
            mtu,
        );
    }

    fn on_schema_data(&mut self, node: u8, transfer: u8, d: &SchemaData, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.last_seen = at;
        let Some(dl) = &mut rec.download else { return };
        if dl.transfer != transfer || d.offset as usize != dl.buf.len() {
            return;
        }
        self.stats.schema_bytes_read += d.data.len() as u64;
        dl.buf.extend_from_slice(d.data);
        let total = rec.announce.blob_len as usize;
        if dl.buf.len() < total && !d.data.is_empty() {
            self.request_chunk(node, at, true);
            return;
        }
        let Some(dl) = rec.download.take() else {
            return;
        };
        let digest = SchemaDigest::of(&dl.buf);
        if dl.buf.len() != total || !digest.matches(rec.announce.hash) {
            // Never trust a blob that does not match the announcement: read it again.
            rec.download = Some(Download {
                buf: Vec::new(),
                transfer: 0,
                deadline: 0,
                tries: dl.tries + 1,
            });
            if dl.tries + 1 > self.cfg.command_retries {
                rec.download = None;
                self.fail_node(
                    node,
                    format!(
                        "downloaded schema does not match the announced hash {}",
                        rec_hash(self, node)
                    ),
                );
                return;
            }
            self.request_chunk(node, at, true);
            return;
        }
        match self.load_schema(digest, dl.buf) {
            Ok(s) => {
                let _ = self.store.store(digest, &s.blob);
                self.events.push_back(Event::SchemaReady {
                    node,
                    digest,
                    cached: false,
                });
                if let Some(rec) = self.nodes.get_mut(&node) {
                    rec.schema = Some(s);
                    rec.schema_cached = Some(false);
                }
                self.begin_provisioning(node, at);
            }
            Err(reason) => self.fail_node(node, reason),
        }
    }

    fn begin_provisioning(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(schema) = rec.schema.clone() else {
            return;
        };
        if rec.plan.is_none() {
            match plan_node(
                &schema.schema,
                &rec.announce.counts,
                rec.mode.mtu(),
                &mut self.ids,
            ) {
                Ok(plan) => {
                    let Some(rec) = self.nodes.get_mut(&node) else {
                        return;
                    };
                    rec.plan = Some(plan);
                }
                Err(e) => {
                    self.fail_node(node, e.to_string());
                    return;
                }
            }
        }
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(plan) = rec.plan.clone() else { return };
        // Topic buffers, zeroed, for every planned topic.
        for f in &plan.frames {
            for e in &f.entries {
                let size = schema
                    .numbering
                    .layout_of(e.block)
                    .and_then(|l| l.topics.get(e.topic as usize))
                    .map_or(0, |l| l.size);
                rec.topics
                    .entry((e.block, e.topic))
                    .or_insert_with(|| vec![0; size]);
            }
        }
        rec.phase = Phase::Provisioning;
        let user: Vec<Step> = rec.steps.drain(..).collect();
        for k in 0..plan.frames.len() {
            rec.steps.push_back(Step::FrameDefine(k));
        }
        let restore: Vec<_> = rec
            .user_params
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let last = restore.len();
        for (i, ((block, param), value)) in restore.into_iter().enumerate() {
            rec.steps.push_back(Step::ParamSet {
                block,
                param,
                value,
                commit: i + 1 == last,
                req: None,
            });
        }
        rec.steps.push_back(Step::Start);
        rec.steps.extend(user);
        for (fi, f) in plan.frames.iter().enumerate() {
            if let Some(slot) = self.routes.get_mut(f.header.std_id as usize) {
                *slot = Some(Route {
                    node,
                    frame: fi as u16,
                });
            }
        }
        self.next_step(node, now);
    }

    fn release_plan(&mut self, node: u8, plan: &Plan) {
        for f in &plan.frames {
            self.ids.release(f.header.std_id);
            if let Some(slot) = self.routes.get_mut(f.header.std_id as usize) {
                if matches!(slot, Some(r) if r.node == node) {
                    *slot = None;
                }
            }
        }
    }

    fn next_step(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        if rec.in_flight.is_some() {
            return;
        }
        let Some(step) = rec.steps.pop_front() else {
            return;
        };
        let transfer = rec.transfer();
        rec.in_flight = Some(InFlight {
            step: step.clone(),
            transfer,
            deadline: now + self.cfg.command_timeout_us,
            tries: 0,
        });
        self.send_step(node, &step, transfer);
    }

    fn send_step(&mut self, node: u8, step: &Step, transfer: u8) {
        let Some(rec) = self.nodes.get(&node) else {
            return;
        };
        let mtu = rec.mode.mtu();
        let dest = NodeId::new(node).unwrap_or(NodeId::BROADCAST);
        match step {
            Step::FrameDefine(k) => {
                let Some(f) = rec.plan.as_ref().and_then(|p| p.frames.get(*k)).cloned() else {
                    return;
                };
                let msg = ConfigMessage::FrameDefine(FrameDefine {
                    header: f.header,
                    entries: Entries::List(&f.entries),
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::ParamSet {
                block,
                param,
                value,
                commit,
                ..
            } => {
                let msg = ConfigMessage::ParamSet(ParamSet {
                    block: *block,
                    param: *param,
                    commit: *commit,
                    value,
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::ParamGet { block, param, .. } => {
                let msg = ConfigMessage::ParamGet(ParamGet {
                    block: *block,
                    param: *param,
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::Start => {
                let frame_count = rec.plan.as_ref().map_or(0, |p| p.frames.len()) as u8;
                let msg = ConfigMessage::Start(Start {
                    frame_count,
                    master_timeout_ms: self.cfg.master_timeout_ms,
                });
                self.send(dest, transfer, &msg, mtu);
            }
        }
    }

    fn on_result(&mut self, node: u8, transfer: u8, r: &CommandResult, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.last_seen = at;
        let Some(f) = &rec.in_flight else { return };
        if f.transfer != transfer || step_opcode(&f.step) != r.opcode {
            return;
        }
        let Some(InFlight { step, .. }) = rec.in_flight.take() else {
            return;
        };
        match (step, r.code) {
            (Step::Start, ResultCode::Ok) => {
                rec.reacks = 0;
                rec.phase = Phase::Running;
                rec.state = NodeState::Running;
                self.events.push_back(Event::Online { node });
            }
            (
                Step::ParamSet {
                    block,
                    param,
                    value,
                    req,
                    ..
                },
                ResultCode::Ok,
            ) => {
                rec.user_params.insert((block, param), value);
                if let Some(req) = req {
                    self.pending_user.remove(&req);
                    self.events.push_back(Event::ParamDone {
                        id: req,
                        result: Ok(None),
                    });
                }
            }
            (Step::ParamSet { req: Some(req), .. } | Step::ParamGet { req, .. }, code) => {
                self.pending_user.remove(&req);
                self.events.push_back(Event::ParamDone {
                    id: req,
                    result: Err(CallError::Refused(code)),
                });
            }
            (Step::FrameDefine(_), ResultCode::Ok) => {}
            (
                step @ (Step::FrameDefine(_) | Step::Start | Step::ParamSet { req: None, .. }),
                ResultCode::BadState,
            ) if rec.reacks < 3 => {
                // The node is not acknowledged: our ANNOUNCE_ACK was lost. Ack again
                // and start provisioning over.
                let _ = step;
                rec.reacks += 1;
                let ack = AnnounceAck {
                    boot_id: rec.announce.boot_id,
                    session: self.cfg.session,
                    mode: rec.mode,
                };
                let t = rec.transfer();
                self.send(
                    NodeId::new(node).unwrap_or(NodeId::BROADCAST),
                    t,
                    &ConfigMessage::AnnounceAck(ack),
                    Mtu::Classic,
                );
                self.begin_provisioning(node, at);
                return;
            }
            (step, code) => {
                self.fail_node(node, format!("node refused {step:?}: {code:?}"));
                return;
            }
        }
        self.next_step(node, at);
    }

    fn fail_node(&mut self, node: u8, reason: String) {
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.phase = Phase::Failed(reason.clone());
            rec.in_flight = None;
        }
        self.fail_user_requests(node, CallError::NodeNotOnline(node));
        self.events.push_back(Event::Failed { node, reason });
    }

    fn fail_calls(&mut self, node: u8, err: CallError) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let calls = std::mem::take(&mut rec.calls);
        for (_, c) in calls {
            self.pending_user.remove(&c.id);
            self.events.push_back(Event::CallDone {
                id: c.id,
                result: Err(err.clone()),
            });
        }
    }

    fn fail_user_requests(&mut self, node: u8, err: CallError) {
        self.fail_calls(node, err.clone());
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let mut failed = Vec::new();
        rec.steps.retain(|s| match user_request(s) {
            Some(req) => {
                failed.push(req);
                false
            }
            None => true,
        });
        for req in failed {
            self.pending_user.remove(&req);
            self.events.push_back(Event::ParamDone {
                id: req,
                result: Err(err.clone()),
            });
        }
    }

    fn send_discover_to(&mut self, node: u8) {
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
        for f in seg {
            let f = if mtu == Mtu::Fd && !self.cfg.brs {
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

    fn running(&self, node: u8) -> Result<&NodeRecord, CallError> {
        match self.nodes.get(&node) {
            Some(n) if n.phase == Phase::Running || n.phase == Phase::Provisioning => Ok(n),
            _ => Err(CallError::NodeNotOnline(node)),
        }
    }

    /// Calls a service. The answer comes as [`Event::CallDone`] with the returned id.
    pub fn call_service(
        &mut self,
        node: u8,
        block: u8,
        service: u8,
        request: &[u8],
        now: u64,
    ) -> Result<u64, CallError> {
        let rec = self.running(node)?;
        let schema = rec.schema.clone().ok_or(CallError::NodeNotOnline(node))?;
        let layout = schema
            .numbering
            .layout_of(block)
            .ok_or_else(|| CallError::BadTarget(format!("node {node} has no block {block}")))?;
        let req = layout.requests.get(service as usize).ok_or_else(|| {
            CallError::BadTarget(format!("block {block} has no service {service}"))
        })?;
        if request.len() != req.size {
            return Err(CallError::BadValue(format!(
                "request is {} bytes, the service takes {}",
                request.len(),
                req.size
            )));
        }
        let mtu = rec.mode.mtu();
        let id = self.new_request(node);
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(node));
        };
        let transfer = rec.transfer();
        rec.calls.insert(
            transfer,
            PendingCall {
                id,
                deadline: now + self.cfg.service_timeout_us,
                accepted: false,
            },
        );
        let msg = ConfigMessage::ServiceRequest(ServiceRequest {
            block,
            service,
            body: request,
        });
        self.send(
            NodeId::new(node).unwrap_or(NodeId::BROADCAST),
            transfer,
            &msg,
            mtu,
        );
        Ok(id)
    }

    /// Writes a parameter (checked against its type and range here first). The answer
    /// comes as [`Event::ParamDone`]. The value is restored after every reboot.
    pub fn set_param(
        &mut self,
        node: u8,
        block: u8,
        param: u8,
        value: &[u8],
        now: u64,
    ) -> Result<u64, CallError> {
        let rec = self.running(node)?;
        check_param_bytes(rec, block, param, value)?;
        let id = self.new_request(node);
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.steps.push_back(Step::ParamSet {
                block,
                param,
                value: value.to_vec(),
                commit: true,
                req: Some(id),
            });
        }
        self.next_step(node, now);
        Ok(id)
    }

    /// Reads a parameter. The answer comes as [`Event::ParamDone`].
    pub fn get_param(
        &mut self,
        node: u8,
        block: u8,
        param: u8,
        now: u64,
    ) -> Result<u64, CallError> {
        let rec = self.running(node)?;
        param_size(rec, block, param)
            .ok_or_else(|| CallError::BadTarget(format!("block {block} has no param {param}")))?;
        let id = self.new_request(node);
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.steps.push_back(Step::ParamGet {
                block,
                param,
                req: id,
            });
        }
        self.next_step(node, now);
        Ok(id)
    }

    /// Publishes an m2s topic: stores its value and sends every frame that carries it.
    pub fn publish(
        &mut self,
        node: u8,
        block: u8,
        topic: u8,
        bytes: &[u8],
        now: u64,
        sink: &mut impl SampleSink,
    ) -> Result<(), CallError> {
        self.stage_publish(node, block, topic, bytes, now, sink)?;
        self.flush_published();
        Ok(())
    }

    /// Stores a new value of an m2s topic and marks the frames that carry it, without
    /// sending them yet: publishing the targets of eight motors that share one frame,
    /// then [`Engine::flush_published`], sends that frame once, not eight times.
    /// [`Engine::poll`] flushes too.
    pub fn stage_publish(
        &mut self,
        node: u8,
        block: u8,
        topic: u8,
        bytes: &[u8],
        now: u64,
        sink: &mut impl SampleSink,
    ) -> Result<(), CallError> {
        let rec = self
            .nodes
            .get(&node)
            .ok_or(CallError::NodeNotOnline(node))?;
        if rec.phase != Phase::Running {
            return Err(CallError::NodeNotOnline(node));
        }
        let schema = rec.schema.clone().ok_or(CallError::NodeNotOnline(node))?;
        let ty = schema
            .numbering
            .block(block)
            .and_then(|b| schema.schema.types.get(b.type_index))
            .ok_or_else(|| CallError::BadTarget(format!("node {node} has no block {block}")))?;
        let t = ty
            .topics
            .get(topic as usize)
            .ok_or_else(|| CallError::BadTarget(format!("block {block} has no topic {topic}")))?;
        if t.dir != DataDirection::M2s {
            return Err(CallError::BadTarget(format!(
                "topic {} is s2m: the node publishes it",
                t.name
            )));
        }
        let Some(plan) = rec.plan.clone() else {
            return Err(CallError::NodeNotOnline(node));
        };
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(node));
        };
        let Some(buf) = rec.topics.get_mut(&(block, topic)) else {
            return Err(CallError::BadTarget(format!(
                "topic {} of block {block} is not planned (instance not wired?)",
                t.name
            )));
        };
        if bytes.len() != buf.len() {
            return Err(CallError::BadValue(format!(
                "topic {} is {} bytes, got {}",
                t.name,
                buf.len(),
                bytes.len()
            )));
        }
        buf.copy_from_slice(bytes);
        sink.sample(node, block, topic, bytes, now);
        let seq = self.group_seq.entry((node, block, topic)).or_insert(0);
        *seq = seq.wrapping_add(1);
        for (i, f) in plan.frames.iter().enumerate() {
            if f.entries
                .iter()
                .any(|e| e.block == block && e.topic == topic)
            {
                self.dirty_m2s.insert((node, i));
            }
        }
        Ok(())
    }

    /// Sends every frame [`Engine::stage_publish`] marked, once each, in plan order.
    pub fn flush_published(&mut self) {
        let dirty = std::mem::take(&mut self.dirty_m2s);
        for (node, i) in dirty {
            let Some(rec) = self.nodes.get(&node) else {
                continue;
            };
            let mtu = rec.mode.mtu();
            let Some(f) = rec.plan.as_ref().and_then(|p| p.frames.get(i)) else {
                continue;
            };
            let mut payload = vec![0u8; f.header.len as usize];
            if f.header.sequenced {
                // A group carries one topic; all its parts carry that publication's number.
                let seq = f
                    .entries
                    .first()
                    .and_then(|e| self.group_seq.get(&(node, e.block, e.topic)));
                payload[0] = seq.copied().unwrap_or(0);
            }
            for e in &f.entries {
                let Some(src) = rec.topics.get(&(e.block, e.topic)) else {
                    continue;
                };
                let (s, d, l) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                if let (Some(dst), Some(src)) = (payload.get_mut(d..d + l), src.get(s..s + l)) {
                    dst.copy_from_slice(src);
                }
            }
            if let Ok(frame) = Frame::padded(mtu, CanId::Standard(f.header.std_id), &payload) {
                let frame = if mtu == Mtu::Fd && !self.cfg.brs {
                    frame.without_brs()
                } else {
                    frame
                };
                self.out.push_back(frame);
                self.stats.tx_frames += 1;
            }
        }
    }

    fn handle_data(&mut self, id: u16, data: &[u8], at: u64, sink: &mut impl SampleSink) {
        let Some(Some(route)) = self.routes.get(id as usize).copied() else {
            self.stats.rx_unrouted += 1;
            return;
        };
        let Some(rec) = self.nodes.get_mut(&route.node) else {
            return;
        };
        rec.last_seen = at;
        let Some(frame) = rec
            .plan
            .as_ref()
            .and_then(|p| p.frames.get(route.frame as usize))
        else {
            return;
        };
        let h = frame.header;
        if h.dir != DataDirection::S2m || data.len() < h.len as usize {
            self.stats.rx_malformed += 1;
            return;
        }
        if h.group_parts <= 1 {
            for e in &frame.entries {
                let Some(buf) = rec.topics.get_mut(&(e.block, e.topic)) else {
                    continue;
                };
                let (s, d, l) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                if let (Some(dst), Some(src)) = (buf.get_mut(s..s + l), data.get(d..d + l)) {
                    dst.copy_from_slice(src);
                    sink.sample(route.node, e.block, e.topic, buf, at);
                }
            }
            return;
        }
        // A sequenced group: whole or nothing.
        let Some(e) = frame.entries.first().copied() else {
            return;
        };
        let key = (route.node, e.block, e.topic);
        let seq = data[0];
        let (d, l) = (e.dst_offset as usize, e.len as usize);
        let Some(piece) = data.get(d..d + l) else {
            return;
        };
        if h.group_index == 0 {
            self.staging.insert(
                key,
                Staging {
                    seq,
                    next: 1,
                    bytes: piece.to_vec(),
                },
            );
        } else {
            match self.staging.get_mut(&key) {
                Some(st) if st.seq == seq && st.next == h.group_index => {
                    st.bytes.extend_from_slice(piece);
                    st.next += 1;
                }
                _ => {
                    self.staging.remove(&key);
                    self.stats.rx_reassembly_dropped += 1;
                    return;
                }
            }
        }
        if h.group_index + 1 == h.group_parts {
            let Some(st) = self.staging.remove(&key) else {
                return;
            };
            if let Some(buf) = rec.topics.get_mut(&(e.block, e.topic)) {
                if buf.len() == st.bytes.len() {
                    buf.copy_from_slice(&st.bytes);
                    sink.sample(route.node, e.block, e.topic, buf, at);
                }
            }
        }
    }
}

/// Segments per SCHEMA_DATA chunk the master asks for. A lost segment costs its whole
/// transfer, so a chunk of the protocol's maximum (128 segments) on a lossy Classical CAN
/// bus rarely arrives whole (0.99^128 ≈ 28 % at 1 % loss) and the download fails after
/// its retries; 16 segments arrive whole 85 % of the time for one extra round trip per
/// 122 bytes.
const SCHEMA_CHUNK_SEGMENTS: usize = 16;

/// Blob bytes asked for per SCHEMA_READ on a link of this kind.
fn schema_chunk(mtu: Mtu) -> usize {
    SchemaData::max_chunk(mtu.payload()).min(SCHEMA_CHUNK_SEGMENTS * mtu.payload() - 6)
}

fn rec_hash(engine: &Engine, node: u8) -> String {
    engine
        .nodes
        .get(&node)
        .map(|n| n.announce.hash.to_string())
        .unwrap_or_default()
}

fn step_opcode(step: &Step) -> Opcode {
    match step {
        Step::FrameDefine(_) => Opcode::FrameDefine,
        Step::ParamSet { .. } => Opcode::ParamSet,
        Step::ParamGet { .. } => Opcode::ParamGet,
        Step::Start => Opcode::Start,
    }
}

fn user_request(step: &Step) -> Option<u64> {
    match step {
        Step::ParamSet { req: Some(r), .. } | Step::ParamGet { req: r, .. } => Some(*r),
        _ => None,
    }
}

fn param_size(rec: &NodeRecord, block: u8, param: u8) -> Option<usize> {
    let s = rec.schema.as_ref()?;
    s.numbering
        .layout_of(block)?
        .param_sizes
        .get(param as usize)
        .copied()
}

fn response_size(rec: &NodeRecord, block: u8, service: u8) -> Option<usize> {
    let s = rec.schema.as_ref()?;
    Some(
        s.numbering
            .layout_of(block)?
            .responses
            .get(service as usize)?
            .size,
    )
}

/// The master's own check of a parameter write: the same rule the node applies.
fn check_param_bytes(
    rec: &NodeRecord,
    block: u8,
    param: u8,
    value: &[u8],
) -> Result<(), CallError> {
    let s = rec
        .schema
        .as_ref()
        .ok_or(CallError::NodeNotOnline(rec.id))?;
    let b = s
        .numbering
        .block(block)
        .ok_or_else(|| CallError::BadTarget(format!("no block {block}")))?;
    let p = s.schema.types[b.type_index]
        .params
        .get(param as usize)
        .ok_or_else(|| CallError::BadTarget(format!("block {block} has no param {param}")))?;
    if value.len() != p.size() {
        return Err(CallError::BadValue(format!(
            "{} takes {} bytes, got {}",
            p.name,
            p.size(),
            value.len()
        )));
    }
    for chunk in value.chunks(p.ty.size()) {
        let v = Scalar::read(p.ty, chunk)
            .map_err(|e| CallError::BadValue(format!("{}: {e}", p.name)))?;
        check_range(p.ty, &v, p.min, p.max).map_err(|e| {
            CallError::BadValue(match e {
                fcan_core::types::RangeError::NotFinite => format!("{} must be finite", p.name),
                fcan_core::types::RangeError::BelowMin => {
                    format!(
                        "{} = {} is below its min {}",
                        p.name,
                        v.as_f64(),
                        p.min.map_or(0.0, |m| m.as_f64())
                    )
                }
                fcan_core::types::RangeError::AboveMax => {
                    format!(
                        "{} = {} is above its max {}",
                        p.name,
                        v.as_f64(),
                        p.max.map_or(0.0, |m| m.as_f64())
                    )
                }
                fcan_core::types::RangeError::WrongType => format!("{} is not a {}", p.name, p.ty),
            })
        })?;
    }
    Ok(())
}
