//! Test helpers: a hand-written static NodeDesc, a recording/refusing transmitter, a
//! recording application and a scripted master built on fcan-core's codecs.
#![allow(dead_code)]

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_core::types::{Scalar, ScalarType};
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

// ---------------------------------------------------------------- the schema
//
// type Motor:
//   params:  0 gain: f32 default 1.0 [0, 10]     1 enable: bool default false
//   topics:  0 cmd      m2s  5 bytes
//            1 setpoint m2s 12 bytes (multi-frame on classic: staged)
//            2 feedback s2m  6 bytes period 10 ms
//            3 event    s2m  4 bytes on commit
//   services: 0 move  request 7 response 4
//             1 ping  request 0 response 0
// instances: motors (max 3, wired 2) = blocks 0..3; aux (max 2, wired 1) = blocks 3..5

pub const T_CMD: u8 = 0;
pub const T_SETPOINT: u8 = 1;
pub const T_FEEDBACK: u8 = 2;
pub const T_EVENT: u8 = 3;
pub const P_GAIN: u8 = 0;
pub const P_ENABLE: u8 = 1;
pub const S_MOVE: u8 = 0;
pub const S_PING: u8 = 1;
pub const FEEDBACK_PERIOD: u32 = 10_000;

static TOPICS: [TopicDesc; 4] = [
    TopicDesc {
        dir: DataDirection::M2s,
        period_us: 0,
        size: 5,
        offset: 0,
        stage_offset: u16::MAX,
    },
    TopicDesc {
        dir: DataDirection::M2s,
        period_us: 0,
        size: 12,
        offset: 5,
        stage_offset: 0,
    },
    TopicDesc {
        dir: DataDirection::S2m,
        period_us: FEEDBACK_PERIOD,
        size: 6,
        offset: 17,
        stage_offset: u16::MAX,
    },
    TopicDesc {
        dir: DataDirection::S2m,
        period_us: 0,
        size: 4,
        offset: 23,
        stage_offset: u16::MAX,
    },
];
static PARAMS: [ParamDesc; 2] = [
    ParamDesc::new(
        ScalarType::F32,
        1,
        0,
        Scalar::F32(1.0),
        Some(Scalar::F32(0.0)),
        Some(Scalar::F32(10.0)),
    ),
    ParamDesc::new(ScalarType::Bool, 1, 4, Scalar::Bool(false), None, None),
];
static SERVICES: [ServiceDesc; 2] = [
    ServiceDesc {
        request_size: 7,
        response_size: 4,
    },
    ServiceDesc {
        request_size: 0,
        response_size: 0,
    },
];
static TYPES: [TypeDesc; 1] = [TypeDesc {
    name: "Motor",
    topics: &TOPICS,
    params: &PARAMS,
    services: &SERVICES,
    topic_bytes: 27,
    stage_bytes: 12,
    param_bytes: 5,
}];
static ARRAYS: [ArrayDesc; 2] = [
    ArrayDesc {
        type_index: 0,
        max_count: 3,
        first_block: 0,
    },
    ArrayDesc {
        type_index: 0,
        max_count: 2,
        first_block: 3,
    },
];
const fn block(n: u16, array: u8, index: u8) -> BlockDesc {
    BlockDesc {
        type_index: 0,
        array,
        index,
        topic_offset: 27 * n,
        stage_offset: 12 * n,
        param_offset: 5 * n,
        topic_slot: 4 * n,
    }
}
static BLOCKS: [BlockDesc; 5] = [
    block(0, 0, 0),
    block(1, 0, 1),
    block(2, 0, 2),
    block(3, 1, 0),
    block(4, 1, 1),
];

pub const BLOB_LEN: usize = 3000;
/// The node schema name the blob declares (its protobuf field 2, which a firmware update
/// offer must name): the blob starts `0x12, 9, "test_node"`, the rest is noise.
pub const NODE_NAME: &str = "test_node";
const fn make_blob() -> [u8; BLOB_LEN] {
    let mut b = [0u8; BLOB_LEN];
    let mut x: u32 = 0x1234_5678;
    let mut i = 0;
    while i < BLOB_LEN {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        b[i] = (x >> 24) as u8;
        i += 1;
    }
    let name = NODE_NAME.as_bytes();
    b[0] = 0x12;
    b[1] = name.len() as u8;
    let mut i = 0;
    while i < name.len() {
        b[2 + i] = name[i];
        i += 1;
    }
    b
}
pub static BLOB: [u8; BLOB_LEN] = make_blob();
pub const BLOB_HASH: [u8; 8] = [0xaf, 0x07, 0xf3, 0xca, 0x90, 0x2a, 0xdb, 0xb3];

pub static DESC: NodeDesc = NodeDesc {
    blob: &BLOB,
    hash: HashPrefix(BLOB_HASH),
    limits: LimitsDesc {
        max_frames: 8,
        max_copy_entries: 16,
        service_buffer: 16,
        service_reassembly: 2,
    },
    types: &TYPES,
    arrays: &ARRAYS,
    blocks: &BLOCKS,
    topic_bytes: 135,
    stage_bytes: 60,
    param_bytes: 25,
    topic_slots: 20,
    max_request: 7,
    max_response: 4,
};

pub type TestBuffers = Buffers<135, 60, 25, 5, 20, 8, 16, 2, 16>;
pub type TestNode = Node<TestBuffers>;

pub const NODE: u8 = 5;
pub const BOOT_ID: u32 = 0xB007_0001;
pub const SESSION: u32 = 0x5E55_1011;
pub const COUNTS: [u8; 2] = [2, 1];

pub fn node_id() -> NodeId {
    NodeId::new(NODE).unwrap()
}

pub fn new_node(fd: bool) -> TestNode {
    Node::new(
        &DESC,
        Buffers::new(),
        NodeConfig {
            node_id: node_id(),
            boot_id: BOOT_ID,
            counts: &COUNTS,
            controller: if fd {
                Controller::Fd
            } else {
                Controller::Classic
            },
        },
    )
    .unwrap()
}

/// When the listen window of [`BOOT_ID`] ends, relative to the first poll.
pub fn listen_end() -> u32 {
    fcan_core::timing::LISTEN_WINDOW_US + BOOT_ID % fcan_core::timing::LISTEN_JITTER_US
}

// ---------------------------------------------------------------- transmitter

/// Records every frame; can refuse according to a pattern.
#[derive(Default)]
pub struct Bus {
    pub sent: Vec<Frame>,
    pub calls: u64,
    /// Refuse every other call.
    pub refuse_alternate: bool,
    /// Refuse everything.
    pub refuse_all: bool,
    pub refused: u64,
}

impl Transmit for Bus {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        self.calls += 1;
        if self.refuse_all || (self.refuse_alternate && self.calls % 2 == 0) {
            self.refused += 1;
            return Err(TxRefused);
        }
        self.sent.push(*frame);
        Ok(())
    }
}

// ---------------------------------------------------------------- application

/// How the test application answers a service call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    /// Respond with the request's first bytes + 1.
    Echo,
    Defer,
    Busy,
    Fail,
    /// Through the handler's `Context`: read the block's `gain` param (typed) and its
    /// last `cmd`, publish the gain as the block's `event`, answer with the command's
    /// generation.
    Context,
}

pub struct App {
    /// Where firmware updates go (`None`: the node refuses them as unsupported). Only
    /// with the `update` feature, as the runtime's `Update` is: the crate's tests compile
    /// alone with default features (`cargo test -p fcan-runtime-nostd`).
    #[cfg(feature = "update")]
    pub update: Option<Box<dyn Update>>,
    pub events: Vec<Event>,
    pub changed: Vec<(u8, u32)>,
    pub calls: Vec<(u8, u8, Vec<u8>, DeferredToken)>,
    pub handler: Handler,
}

impl Default for App {
    fn default() -> Self {
        App {
            #[cfg(feature = "update")]
            update: None,
            events: vec![],
            changed: vec![],
            calls: vec![],
            handler: Handler::Echo,
        }
    }
}

impl Dispatch for App {
    fn service(
        &mut self,
        cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome {
        self.calls
            .push((call.block, call.service, call.request.to_vec(), call.token));
        match self.handler {
            Handler::Context => {
                let gain: f32 = cx
                    .param_value(call.block, Param::<f32>::new(P_GAIN))
                    .unwrap_or(f32::NAN);
                let seen = cx.topic(call.block, T_CMD).map_or(0, |t| t.generation);
                if cx
                    .publish(call.block, T_EVENT, &gain.to_le_bytes())
                    .is_err()
                {
                    return ServiceOutcome::Failed;
                }
                let n = response.len().min(4);
                response[..n].copy_from_slice(&seen.to_le_bytes()[..n]);
                ServiceOutcome::Done(n)
            }
            Handler::Echo => {
                for (i, r) in response.iter_mut().enumerate() {
                    *r = call.request.get(i).copied().unwrap_or(0).wrapping_add(1);
                }
                ServiceOutcome::Done(response.len())
            }
            Handler::Defer => ServiceOutcome::Accepted,
            Handler::Busy => ServiceOutcome::Busy,
            Handler::Fail => ServiceOutcome::Failed,
        }
    }
    fn params_changed(&mut self, _cx: &mut Context<'_>, block: u8, changed: u32) {
        self.changed.push((block, changed));
    }
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }
    #[cfg(feature = "update")]
    fn update(&mut self) -> Option<&mut dyn Update> {
        self.update.as_deref_mut().map(|u| u as &mut dyn Update)
    }
}

// ---------------------------------------------------------------- master

/// One complete message the node sent.
#[derive(Clone, Debug)]
pub struct Msg {
    pub id: ConfigId,
    pub payload: Vec<u8>,
    /// When the last segment was seen.
    pub at: u32,
    /// Whether its frames were FD.
    pub fd: bool,
}

impl Msg {
    pub fn decode(&self) -> ConfigMessage<'_> {
        ConfigMessage::decode(self.id.opcode, Direction::ToMaster, &self.payload)
            .expect("node sent a malformed message")
    }
    pub fn result(&self) -> CommandResult {
        match self.decode() {
            ConfigMessage::Result(r) => r,
            other => panic!("expected RESULT, got {other:?}"),
        }
    }
    pub fn service(&self) -> (ServiceStatus, Vec<u8>) {
        match self.decode() {
            ConfigMessage::ServiceResponse(r) => (r.status, r.body.to_vec()),
            other => panic!("expected a service response, got {other:?}"),
        }
    }
}

/// A test rig: the node, its bus, its application and a scripted master.
pub struct Rig {
    pub node: TestNode,
    pub bus: Bus,
    pub app: App,
    pub now: u32,
    pub mtu: Mtu,
    pub fd_brs: bool,
    pool: ReassemblyPool<4, 8192>,
    /// Every decoded config message from the node, in order.
    pub msgs: Vec<Msg>,
    /// Data frames from the node, with their time.
    pub data: Vec<(u32, Frame)>,
    seen: usize,
    transfer: u8,
}

impl Rig {
    pub fn new(fd: bool) -> Rig {
        Rig::with_node(new_node(fd))
    }

    pub fn with_node(node: TestNode) -> Rig {
        Rig {
            node,
            bus: Bus::default(),
            app: App::default(),
            now: 1_000,
            mtu: Mtu::Classic,
            fd_brs: false,
            pool: ReassemblyPool::new(),
            msgs: vec![],
            data: vec![],
            seen: 0,
            transfer: 0,
        }
    }

    /// Polls once and collects what the node sent.
    pub fn poll(&mut self) {
        self.node.poll(self.now, &mut self.bus, &mut self.app);
        self.collect();
    }

    /// Advances time in 1 ms steps (polling at each) by `us`.
    pub fn advance(&mut self, us: u32) {
        let end = self.now.wrapping_add(us);
        while self.now != end {
            let step = end.wrapping_sub(self.now).min(1_000);
            self.now = self.now.wrapping_add(step);
            self.poll();
        }
    }

    /// Decodes frames the node sent since the last call.
    pub fn collect(&mut self) {
        let frames: Vec<Frame> = self.bus.sent.drain(..).collect();
        for f in frames {
            match f.id() {
                CanId::Standard(_) => self.data.push((self.now, f)),
                CanId::Extended(_) => {
                    let id = ConfigId::from_can_id(f.id()).unwrap();
                    assert_eq!(id.dir, Direction::ToMaster);
                    assert_eq!(id.node, node_id());
                    let done = self
                        .pool
                        .push(id, f.data(), self.now)
                        .expect("node broke segmentation");
                    if let Some(p) = done {
                        self.msgs.push(Msg {
                            id,
                            payload: p.to_vec(),
                            at: self.now,
                            fd: f.is_fd(),
                        });
                    }
                }
            }
        }
    }

    /// Messages received since the last call.
    pub fn take(&mut self) -> Vec<Msg> {
        let out = self.msgs[self.seen..].to_vec();
        self.seen = self.msgs.len();
        out
    }

    /// The only message received since the last call, which must exist.
    pub fn one(&mut self) -> Msg {
        let m = self.take();
        assert_eq!(m.len(), 1, "expected one message, got {m:#?}");
        m.into_iter().next().unwrap()
    }

    pub fn next_transfer(&mut self) -> u8 {
        self.transfer = self.transfer.wrapping_add(1);
        self.transfer
    }

    /// Frames of a master→node message.
    pub fn frames_for(&self, to: NodeId, msg: &ConfigMessage<'_>, transfer: u8) -> Vec<Frame> {
        let mut buf = vec![0u8; 9000];
        let n = msg.encode(&mut buf).unwrap();
        let id = ConfigId::single(msg.opcode(), Direction::ToNode, to, transfer);
        Segmenter::new(id, self.mtu, &buf[..n], &[])
            .unwrap()
            .map(|f| {
                if self.fd_brs || !f.is_fd() {
                    f
                } else {
                    f.without_brs()
                }
            })
            .collect()
    }

    /// Sends a message to the node (all segments), then polls; returns the transfer id.
    pub fn send(&mut self, msg: ConfigMessage<'_>) -> u8 {
        let t = self.next_transfer();
        self.send_as(msg, t);
        t
    }

    pub fn send_as(&mut self, msg: ConfigMessage<'_>, transfer: u8) {
        for f in self.frames_for(node_id(), &msg, transfer) {
            self.node.receive(&f, self.now);
        }
        self.poll();
    }

    pub fn send_broadcast(&mut self, msg: ConfigMessage<'_>) {
        let t = self.next_transfer();
        for f in self.frames_for(NodeId::BROADCAST, &msg, t) {
            self.node.receive(&f, self.now);
        }
        self.poll();
    }

    /// Delivers a raw frame and polls.
    pub fn inject(&mut self, f: Frame) {
        self.node.receive(&f, self.now);
        self.poll();
    }

    /// Sends a command and returns its RESULT.
    pub fn command(&mut self, msg: ConfigMessage<'_>) -> CommandResult {
        let t = self.send(msg);
        let m = self.one();
        assert_eq!(m.id.opcode, Opcode::Result);
        assert_eq!(m.id.transfer, t, "RESULT must echo the transfer id");
        m.result()
    }

    /// Boot: first poll, wait out the listen window, see the ANNOUNCE, acknowledge.
    pub fn boot_and_ack(&mut self, mode: BusMode) {
        self.poll();
        self.advance(listen_end() + 10_000);
        let m = self.take();
        assert!(
            m.iter().any(|m| m.id.opcode == Opcode::Discover),
            "no ANNOUNCE: {m:#?}"
        );
        self.ack(mode);
    }

    pub fn ack(&mut self, mode: BusMode) {
        self.send(ConfigMessage::AnnounceAck(AnnounceAck {
            boot_id: BOOT_ID,
            session: SESSION,
            mode,
        }));
        self.mtu = mode.mtu();
        self.fd_brs = mode == BusMode::FdBrs;
        for _ in 0..4 {
            self.poll();
        }
        let m = self.take();
        assert!(
            m.iter()
                .any(|m| matches!(m.decode(), ConfigMessage::NodeHeartbeat(_))),
            "a heartbeat confirms the ack: {m:#?}"
        );
    }

    pub fn master_heartbeat(&mut self) {
        self.send_broadcast(ConfigMessage::MasterHeartbeat(MasterHeartbeat {
            session: SESSION,
        }));
    }

    pub fn define(&mut self, header: FrameHeader, entries: &[CopyEntry]) -> CommandResult {
        self.command(ConfigMessage::FrameDefine(FrameDefine {
            header,
            entries: Entries::List(entries),
        }))
    }

    pub fn start(&mut self, frame_count: u8, timeout_ms: u16) -> CommandResult {
        self.command(ConfigMessage::Start(Start {
            frame_count,
            master_timeout_ms: timeout_ms,
        }))
    }

    /// A data frame from the master.
    pub fn data_frame(&self, std_id: u16, data: &[u8]) -> Frame {
        Frame::padded(self.mtu, CanId::Standard(std_id), data).unwrap()
    }

    /// Data frames the node sent since time `since`, with a given std id.
    pub fn data_with_id(&self, std_id: u16) -> Vec<(u32, Frame)> {
        self.data
            .iter()
            .filter(|(_, f)| f.id() == CanId::Standard(std_id))
            .copied()
            .collect()
    }
}

pub fn header(index: u8, std_id: u16, dir: DataDirection, len: u8) -> FrameHeader {
    FrameHeader {
        index,
        std_id,
        dir,
        sequenced: false,
        masked: false,
        len,
        group_parts: 1,
        group_index: 0,
        period_us: 0,
    }
}

pub fn entry(block: u8, topic: u8, src_offset: u16, len: u8, dst_offset: u8) -> CopyEntry {
    CopyEntry {
        block,
        topic,
        src_offset,
        len,
        dst_offset,
    }
}

/// The standard plan the tests use on Classical CAN:
/// 0: 0x120 m2s cmd of blocks 0 and 1? no: cmd of block 0 (5 bytes)
/// 1,2: 0x130/0x131 m2s setpoint of block 0 as a 2-part group (7 + 5 bytes)
/// 3: 0x200 s2m feedback of block 0, every 10 ms
/// 4: 0x210 s2m event of block 0, on commit
pub fn standard_plan(rig: &mut Rig) {
    let m2s = DataDirection::M2s;
    let s2m = DataDirection::S2m;
    assert!(rig
        .define(header(0, 0x120, m2s, 5), &[entry(0, T_CMD, 0, 5, 0)])
        .is_ack());
    let g = |index, id, gi, len| FrameHeader {
        index,
        std_id: id,
        dir: m2s,
        sequenced: true,
        masked: false,
        len,
        group_parts: 2,
        group_index: gi,
        period_us: 0,
    };
    assert!(rig
        .define(g(1, 0x130, 0, 8), &[entry(0, T_SETPOINT, 0, 7, 1)])
        .is_ack());
    assert!(rig
        .define(g(2, 0x131, 1, 6), &[entry(0, T_SETPOINT, 7, 5, 1)])
        .is_ack());
    let mut fb = header(3, 0x200, s2m, 6);
    fb.period_us = FEEDBACK_PERIOD;
    assert!(rig.define(fb, &[entry(0, T_FEEDBACK, 0, 6, 0)]).is_ack());
    assert!(rig
        .define(header(4, 0x210, s2m, 4), &[entry(0, T_EVENT, 0, 4, 0)])
        .is_ack());
}

/// Boot, ack (classic), standard plan, START with a 300 ms watchdog.
pub fn running_rig() -> Rig {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    assert!(rig.start(5, 300).is_ack());
    rig.take();
    rig
}
