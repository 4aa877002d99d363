//! Test helpers: a scripted fcan node built on fcan-core's codecs (no runtime), and a
//! passive bus observer.
//!
//! The scripted node follows `docs/protocol.md` closely enough for the real master: it
//! listens, announces with back-off, answers DISCOVER, serves its schema blob (built from
//! an IR here and encoded by fcan-core), accepts FRAME_DEFINE / PARAM_SET / PARAM_GET /
//! START / a service, heartbeats every second, sends its s2m frames on their periods and
//! records the m2s frames it receives.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::ir::{BlockType, Field, InstanceArray, Limits, Param, Schema, Service, Topic};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_core::timing;
use fcan_core::types::{Scalar, ScalarType};
use fcan_master::transport::Transport;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Topic indices of the test type.
pub const T_CMD: u8 = 0;
pub const T_FEEDBACK: u8 = 1;
pub const FEEDBACK_PERIOD_US: u32 = 20_000;

fn field(name: &str, ty: ScalarType) -> Field {
    Field {
        name: name.into(),
        ty,
        len: None,
    }
}

/// The test schema: one `Motor` block `motor` with a `gain` param, a `cmd` m2s topic, a
/// `feedback` s2m topic every 20 ms and a `ping` service.
/// Names: `/n<id>/motor/cmd`, `/n<id>/motor/feedback`, `/n<id>/motor/ping`,
/// `n<id>.motor.gain`.
pub fn schema() -> Schema {
    Schema {
        protocol: fcan_core::ir::PROTOCOL_VERSION,
        node: "n{i}".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![BlockType {
            name: "Motor".into(),
            params: vec![Param {
                name: "gain".into(),
                ty: ScalarType::F32,
                len: None,
                default: Scalar::F32(1.0),
                min: Some(Scalar::F32(0.0)),
                max: Some(Scalar::F32(10.0)),
            }],
            topics: vec![
                Topic {
                    name: "cmd".into(),
                    dir: DataDirection::M2s,
                    period_us: 0,
                    fields: vec![
                        field("vel", ScalarType::F32),
                        field("torque", ScalarType::F32),
                    ],
                    ros: None,
                },
                Topic {
                    name: "feedback".into(),
                    dir: DataDirection::S2m,
                    period_us: FEEDBACK_PERIOD_US,
                    fields: vec![
                        field("pos", ScalarType::F32),
                        field("count", ScalarType::U32),
                    ],
                    ros: None,
                },
            ],
            services: vec![Service {
                name: "ping".into(),
                request: vec![field("x", ScalarType::U32)],
                response: vec![field("y", ScalarType::U32)],
                ros: None,
            }],
        }],
        instances: vec![InstanceArray {
            ty: "Motor".into(),
            max_count: 1,
            ns: "motor".into(),
        }],
    }
}

/// The blob of [`schema`].
pub fn blob() -> Arc<Vec<u8>> {
    let s = schema();
    let errors = fcan_core::validate::validate(&s);
    assert!(errors.is_empty(), "test schema invalid: {errors:?}");
    Arc::new(fcan_core::blob::encode(&s))
}

/// Who a scripted node is.
#[derive(Clone, Copy, Debug)]
pub struct NodeSpec {
    pub id: u8,
    pub boot_id: u32,
    /// Announce FD (and BRS) capability.
    pub fd: bool,
}

/// What a scripted node saw and did.
#[derive(Clone, Debug, Default)]
pub struct NodeLog {
    pub state: Option<NodeState>,
    pub mode: Option<BusMode>,
    /// Every frame received.
    pub frames: u64,
    /// m2s data frames of its own plan: (std_id, payload).
    pub m2s: Vec<(u16, Vec<u8>)>,
    /// Standard data frames received that are not in its plan.
    pub foreign_data: u64,
    /// Unicast configuration frames for other node ids.
    pub foreign_unicast: u64,
    /// The `cmd` topic's latest value.
    pub cmd: Vec<u8>,
    /// Service calls answered.
    pub pings: u64,
    /// s2m frames sent.
    pub s2m_sent: u64,
    /// Values written by PARAM_SET.
    pub params: BTreeMap<(u8, u8), Vec<u8>>,
    /// ANNOUNCE_ACKs accepted.
    pub acks: u64,
    /// The frame plan: (std_id, direction), in plan order.
    pub plan: Vec<(u16, DataDirection)>,
}

/// A running scripted node.
pub struct NodeHandle {
    pub spec: NodeSpec,
    pub log: Arc<Mutex<NodeLog>>,
    task: JoinHandle<()>,
}

impl NodeHandle {
    pub fn log(&self) -> NodeLog {
        self.log.lock().unwrap().clone()
    }

    /// Powers the node off (its transport is dropped).
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Starts a scripted node on `t`.
pub fn spawn_node<T: Transport + 'static>(t: T, spec: NodeSpec, blob: Arc<Vec<u8>>) -> NodeHandle {
    let log = Arc::new(Mutex::new(NodeLog::default()));
    let node = ScriptedNode::new(t, spec, blob, log.clone());
    let task = tokio::spawn(node.run());
    NodeHandle { spec, log, task }
}

struct PlanFrame {
    header: FrameHeader,
    entries: Vec<CopyEntry>,
}

struct ScriptedNode<T> {
    t: T,
    spec: NodeSpec,
    id: NodeId,
    blob: Arc<Vec<u8>>,
    log: Arc<Mutex<NodeLog>>,
    start: Instant,
    state: NodeState,
    mode: BusMode,
    acked: bool,
    session: Option<u32>,
    plan: Vec<PlanFrame>,
    params: BTreeMap<(u8, u8), Vec<u8>>,
    cmd: Vec<u8>,
    counter: u32,
    transfer: u8,
    next_announce: Option<Instant>,
    backoff: Duration,
    next_heartbeat: Option<Instant>,
    next_s2m: Option<Instant>,
    pool: ReassemblyPool<4, 1024>,
}

impl<T: Transport> ScriptedNode<T> {
    fn new(t: T, spec: NodeSpec, blob: Arc<Vec<u8>>, log: Arc<Mutex<NodeLog>>) -> Self {
        let start = Instant::now();
        ScriptedNode {
            t,
            spec,
            id: NodeId::new(spec.id).expect("node id"),
            blob,
            log,
            start,
            state: NodeState::Unprovisioned,
            mode: BusMode::Classic,
            acked: false,
            session: None,
            plan: Vec::new(),
            params: BTreeMap::new(),
            cmd: vec![0; 8],
            counter: 0,
            transfer: 0,
            next_announce: Some(
                start + Duration::from_micros(timing::LISTEN_WINDOW_US as u64 + 10_000),
            ),
            backoff: Duration::from_micros(timing::ANNOUNCE_BACKOFF_MIN_US as u64),
            next_heartbeat: None,
            next_s2m: None,
            pool: ReassemblyPool::new(),
        }
    }

    fn now_us(&self) -> u32 {
        self.start.elapsed().as_micros() as u32
    }

    fn update_log(&self, f: impl FnOnce(&mut NodeLog)) {
        let mut l = self.log.lock().unwrap();
        l.state = Some(self.state);
        l.mode = Some(self.mode);
        f(&mut l);
    }

    async fn run(mut self) {
        self.update_log(|_| {});
        loop {
            let deadline = [self.next_announce, self.next_heartbeat, self.next_s2m]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = self.t.recv() => {
                    if let Ok(rx) = r {
                        self.on_frame(&rx.frame).await;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => self.on_timer().await,
            }
        }
    }

    async fn on_timer(&mut self) {
        let now = Instant::now();
        if self.next_announce.is_some_and(|t| t <= now) {
            self.announce().await;
            self.next_announce = Some(now + self.backoff);
            self.backoff = (self.backoff * 2).min(Duration::from_micros(
                timing::ANNOUNCE_BACKOFF_MAX_US as u64,
            ));
        }
        if self.next_heartbeat.is_some_and(|t| t <= now) {
            let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
                state: self.state,
                fault: FaultCode::None,
                boot_id: self.spec.boot_id,
                errors: 0,
            });
            let t = self.next_transfer();
            self.send_msg(&msg, t).await;
            self.next_heartbeat =
                Some(now + Duration::from_micros(timing::NODE_HEARTBEAT_PERIOD_US as u64));
        }
        if self.next_s2m.is_some_and(|t| t <= now) {
            self.send_s2m().await;
            self.next_s2m = Some(now + Duration::from_micros(FEEDBACK_PERIOD_US as u64));
        }
    }

    fn next_transfer(&mut self) -> u8 {
        self.transfer = self.transfer.wrapping_add(1);
        self.transfer
    }

    fn mtu(&self) -> Mtu {
        self.mode.mtu()
    }

    async fn send_msg(&mut self, msg: &ConfigMessage<'_>, transfer: u8) {
        let mut buf = vec![0u8; 2048];
        let len = msg.encode(&mut buf).expect("encode");
        let id = ConfigId::single(msg.opcode(), Direction::ToMaster, self.id, transfer);
        let frames: Vec<Frame> = Segmenter::new(id, self.mtu(), &buf[..len], &[])
            .expect("segment")
            .collect();
        for f in frames {
            self.send_frame(f).await;
        }
    }

    async fn send_frame(&mut self, f: Frame) {
        for _ in 0..100 {
            match self.t.send(&f).await {
                Ok(()) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }

    async fn announce(&mut self) {
        let msg = ConfigMessage::Announce(Announce {
            protocol: fcan_core::ir::PROTOCOL_VERSION as u8,
            state: self.state,
            caps: if self.spec.fd {
                caps::FD | caps::BRS
            } else {
                0
            },
            boot_id: self.spec.boot_id,
            blob_len: self.blob.len() as u32,
            hash: fcan_core::hash::SchemaDigest::of(&self.blob).prefix(),
            counts: &[1],
        });
        let t = self.next_transfer();
        self.send_msg(&msg, t).await;
    }

    async fn result(&mut self, opcode: Opcode, code: ResultCode, transfer: u8) {
        let msg = ConfigMessage::Result(CommandResult {
            opcode,
            code,
            detail: 0,
        });
        self.send_msg(&msg, transfer).await;
    }

    async fn send_s2m(&mut self) {
        if self.state != NodeState::Running {
            return;
        }
        self.counter = self.counter.wrapping_add(1);
        let mut topic = Vec::new();
        topic.extend_from_slice(&(self.counter as f32 * 0.5).to_le_bytes());
        topic.extend_from_slice(&self.counter.to_le_bytes());
        let mut out = Vec::new();
        for pf in self
            .plan
            .iter()
            .filter(|p| p.header.dir == DataDirection::S2m)
        {
            let mut payload = vec![0u8; pf.header.len as usize];
            for e in &pf.entries {
                if e.topic != T_FEEDBACK {
                    continue;
                }
                let (s, d, n) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                payload[d..d + n].copy_from_slice(&topic[s..s + n]);
            }
            out.push(
                Frame::padded(self.mtu(), CanId::Standard(pf.header.std_id), &payload)
                    .expect("s2m frame"),
            );
        }
        let n = out.len() as u64;
        for f in out {
            self.send_frame(f).await;
        }
        self.update_log(|l| l.s2m_sent += n);
    }

    async fn on_frame(&mut self, f: &Frame) {
        self.update_log(|l| l.frames += 1);
        match f.id() {
            CanId::Standard(std_id) => {
                let Some(pf) = self
                    .plan
                    .iter()
                    .find(|p| p.header.std_id == std_id && p.header.dir == DataDirection::M2s)
                else {
                    self.update_log(|l| l.foreign_data += 1);
                    return;
                };
                if self.state != NodeState::Running {
                    return;
                }
                for e in &pf.entries {
                    let (s, d, n) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                    if e.topic == T_CMD && d + n <= f.len() && s + n <= self.cmd.len() {
                        self.cmd[s..s + n].copy_from_slice(&f.data()[d..d + n]);
                    }
                }
                let cmd = self.cmd.clone();
                let data = f.data().to_vec();
                self.update_log(|l| {
                    l.m2s.push((std_id, data));
                    l.cmd = cmd;
                });
            }
            CanId::Extended(_) => {
                let Ok(cid) = ConfigId::from_can_id(f.id()) else {
                    return;
                };
                if cid.dir != Direction::ToNode {
                    return;
                }
                if cid.node != self.id && !cid.node.is_broadcast() {
                    self.update_log(|l| l.foreign_unicast += 1);
                    return;
                }
                let now = self.now_us();
                let payload = match self.pool.push(cid, f.data(), now) {
                    Ok(Some(p)) => p.to_vec(),
                    _ => return,
                };
                let Ok(msg) = ConfigMessage::decode(cid.opcode, cid.dir, &payload) else {
                    return;
                };
                self.on_message(cid, msg).await;
            }
        }
    }

    async fn on_message(&mut self, cid: ConfigId, msg: ConfigMessage<'_>) {
        let tr = cid.transfer;
        match msg {
            ConfigMessage::Discover(_) => self.announce().await,
            ConfigMessage::MasterHeartbeat(hb)
                if self.acked && self.session.is_some_and(|s| s != hb.session) =>
            {
                // A new master: announce again.
                self.acked = false;
                self.state = NodeState::Unprovisioned;
                self.mode = BusMode::Classic;
                self.backoff = Duration::from_micros(timing::ANNOUNCE_BACKOFF_MIN_US as u64);
                self.next_announce = Some(Instant::now());
                self.next_heartbeat = None;
                self.update_log(|_| {});
            }
            ConfigMessage::AnnounceAck(ack) => {
                if ack.boot_id != self.spec.boot_id {
                    return;
                }
                if ack.mode != BusMode::Classic && !self.spec.fd {
                    self.result(Opcode::AnnounceAck, ResultCode::Unsupported, tr)
                        .await;
                    return;
                }
                self.acked = true;
                self.session = Some(ack.session);
                self.mode = ack.mode;
                if self.state != NodeState::Running {
                    self.state = NodeState::Provisioned;
                }
                self.next_announce = None;
                self.next_heartbeat = Some(Instant::now());
                self.update_log(|l| l.acks += 1);
            }
            ConfigMessage::SchemaRead(r) => {
                let off = (r.offset as usize).min(self.blob.len());
                let max = SchemaData::max_chunk(self.mtu().payload());
                let k = (r.len as usize).min(self.blob.len() - off).min(max);
                let blob = self.blob.clone();
                let msg = ConfigMessage::SchemaData(SchemaData {
                    offset: r.offset,
                    data: &blob[off..off + k],
                });
                self.send_msg(&msg, tr).await;
            }
            ConfigMessage::FrameDefine(fd) => {
                if !self.acked {
                    return self
                        .result(Opcode::FrameDefine, ResultCode::BadState, tr)
                        .await;
                }
                let k = fd.header.index as usize;
                if k > self.plan.len() {
                    return self
                        .result(Opcode::FrameDefine, ResultCode::BadPlan, tr)
                        .await;
                }
                self.plan.truncate(k);
                self.plan.push(PlanFrame {
                    header: fd.header,
                    entries: fd.entries.iter().collect(),
                });
                if self.state == NodeState::Running {
                    self.state = NodeState::Provisioned;
                }
                let plan: Vec<_> = self
                    .plan
                    .iter()
                    .map(|p| (p.header.std_id, p.header.dir))
                    .collect();
                self.update_log(|l| l.plan = plan);
                self.result(Opcode::FrameDefine, ResultCode::Ok, tr).await;
            }
            ConfigMessage::ParamSet(p) => {
                if !self.acked {
                    return self
                        .result(Opcode::ParamSet, ResultCode::BadState, tr)
                        .await;
                }
                self.params.insert((p.block, p.param), p.value.to_vec());
                let v = p.value.to_vec();
                self.update_log(|l| {
                    l.params.insert((p.block, p.param), v);
                });
                self.result(Opcode::ParamSet, ResultCode::Ok, tr).await;
            }
            ConfigMessage::ParamGet(g) => {
                let value = self
                    .params
                    .get(&(g.block, g.param))
                    .cloned()
                    .unwrap_or_else(|| 1.0f32.to_le_bytes().to_vec());
                let msg = ConfigMessage::ParamValue(ParamValue {
                    block: g.block,
                    param: g.param,
                    value: &value,
                });
                self.send_msg(&msg, tr).await;
            }
            ConfigMessage::Start(s) => {
                if !self.acked {
                    return self.result(Opcode::Start, ResultCode::BadState, tr).await;
                }
                if s.frame_count as usize != self.plan.len() {
                    return self.result(Opcode::Start, ResultCode::BadPlan, tr).await;
                }
                self.state = NodeState::Running;
                self.next_s2m = Some(Instant::now());
                self.update_log(|_| {});
                self.result(Opcode::Start, ResultCode::Ok, tr).await;
            }
            ConfigMessage::ServiceRequest(req) => {
                let (status, body) = if req.block == 0 && req.service == 0 && req.body.len() >= 4 {
                    let x = u32::from_le_bytes(req.body[..4].try_into().unwrap());
                    (ServiceStatus::Ok, x.wrapping_add(1).to_le_bytes().to_vec())
                } else {
                    (ServiceStatus::BadIndex, Vec::new())
                };
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block: req.block,
                    service: req.service,
                    status,
                    body: &body,
                });
                self.send_msg(&msg, tr).await;
                self.update_log(|l| l.pings += 1);
            }
            _ => {}
        }
    }
}

/// Everything one passive endpoint hears on a bus.
pub struct Observer {
    pub frames: Arc<Mutex<Vec<Frame>>>,
    task: JoinHandle<()>,
}

impl Observer {
    pub fn spawn<T: Transport + 'static>(mut t: T) -> Observer {
        let frames = Arc::new(Mutex::new(Vec::new()));
        let f2 = frames.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(rx) = t.recv().await {
                    f2.lock().unwrap().push(rx.frame);
                }
            }
        });
        Observer { frames, task }
    }

    pub fn frames(&self) -> Vec<Frame> {
        self.frames.lock().unwrap().clone()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The node a configuration frame is addressed to (master → node), if any.
pub fn config_dest(f: &Frame) -> Option<NodeId> {
    let cid = ConfigId::from_can_id(f.id()).ok()?;
    (cid.dir == Direction::ToNode).then_some(cid.node)
}

/// The node a configuration frame comes from (node → master), if any.
pub fn config_source(f: &Frame) -> Option<NodeId> {
    let cid = ConfigId::from_can_id(f.id()).ok()?;
    (cid.dir == Direction::ToMaster).then_some(cid.node)
}

/// The standard identifier of a data frame, if it is one.
pub fn std_id(f: &Frame) -> Option<u16> {
    match f.id() {
        CanId::Standard(id) => Some(id),
        CanId::Extended(_) => None,
    }
}
