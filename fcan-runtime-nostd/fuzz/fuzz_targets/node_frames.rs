//! Drives one node with arbitrary frame sequences, times and application calls, through
//! a transmitter that refuses at random, and checks invariants after every step:
//! nothing panics; counters never go back; a node in FAULT stays silent; the node never
//! sends FD unless a master chose an FD mode; everything it sends on the configuration
//! plane reassembles without gaps and decodes.
//!
//! The input is a little program: each op byte picks an action and reads its
//! arguments from the following bytes. Some ops build well-formed messages (an
//! ANNOUNCE_ACK with the right boot_id, FRAME_DEFINEs, START) so the fuzzer reaches the
//! running state quickly; others inject raw frames.
#![no_main]

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyError, ReassemblyPool, Segmenter};
use fcan_core::types::{Scalar, ScalarType};
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;
use libfuzzer_sys::fuzz_target;

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
        period_us: 10_000,
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
static PARAMS: [ParamDesc; 3] = [
    ParamDesc::new(ScalarType::F32, 1, 0, Scalar::F32(1.0), Some(Scalar::F32(0.0)), Some(Scalar::F32(10.0))),
    ParamDesc::new(ScalarType::Bool, 1, 4, Scalar::Bool(false), None, None),
    ParamDesc::new(ScalarType::I16, 30, 5, Scalar::I16(-3), Some(Scalar::I16(-100)), None),
];
static SERVICES: [ServiceDesc; 2] = [
    ServiceDesc {
        request_size: 7,
        response_size: 20,
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
    param_bytes: 65,
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
        param_offset: 65 * n,
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
static BLOB: [u8; 1500] = [0x5A; 1500];
static DESC: NodeDesc = NodeDesc {
    blob: &BLOB,
    hash: HashPrefix([1, 2, 3, 4, 5, 6, 7, 8]),
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
    param_bytes: 325,
    topic_slots: 20,
    max_request: 7,
    max_response: 20,
};

const NODE: u8 = 5;
const BOOT: u32 = 0x1234_5678;

/// A transmitter that refuses according to fuzz bits, and checks what the node sends.
struct Tx {
    refuse_bits: u64,
    calls: u32,
    sent: u32,
    fault_seen: bool,
    fd_allowed: bool,
    pool: ReassemblyPool<2, 8192>,
    now: u32,
}

impl Transmit for Tx {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        self.calls = self.calls.wrapping_add(1);
        if self.refuse_bits & (1 << (self.calls % 64)) != 0 {
            return Err(TxRefused);
        }
        assert!(!self.fault_seen, "a node in FAULT transmitted {frame:?}");
        assert!(
            !frame.is_fd() || self.fd_allowed,
            "FD frame without an FD mode: {frame:?}"
        );
        self.sent = self.sent.wrapping_add(1);
        if let CanId::Extended(_) = frame.id() {
            let id = ConfigId::from_can_id(frame.id()).expect("node sent a bad config id");
            assert_eq!(id.dir, Direction::ToMaster);
            assert_eq!(id.node.get(), NODE);
            match self.pool.push(id, frame.data(), self.now) {
                Ok(Some(payload)) => {
                    if let Err(e) = ConfigMessage::decode(id.opcode, Direction::ToMaster, payload) {
                        panic!("node sent an undecodable {:?}: {e:?}", id.opcode);
                    }
                }
                Ok(None) => {}
                Err(
                    e @ (ReassemblyError::Gap
                    | ReassemblyError::ShortSegment
                    | ReassemblyError::Duplicate),
                ) => {
                    panic!("node broke segmentation: {e:?} at {id:?}")
                }
                Err(_) => {}
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct App {
    tokens: [Option<DeferredToken>; 4],
    mode: u8,
}

impl Dispatch for App {
    fn service(
        &mut self,
        _cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome {
        assert!(call.request.len() <= 7);
        self.mode = self.mode.wrapping_add(1);
        match self.mode % 5 {
            0 => ServiceOutcome::Accepted,
            1 => ServiceOutcome::Busy,
            2 => ServiceOutcome::Failed,
            3 => ServiceOutcome::BadRequest,
            _ => ServiceOutcome::Done(response.len()),
        }
        .tap(|o| {
            if *o == ServiceOutcome::Accepted {
                self.tokens[(call.token.slot & 3) as usize] = Some(call.token);
            }
        })
    }
    fn params_changed(&mut self, _cx: &mut Context<'_>, block: u8, changed: u32) {
        assert!(block < 5 && changed != 0 && changed < 8);
    }
    fn event(&mut self, _event: Event) {}
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl Tap for ServiceOutcome {}

/// A cursor over the fuzz input.
struct In<'a>(&'a [u8]);
impl In<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fn send_msg(
    node: &mut Node<Buffers<135, 60, 325, 5, 20, 8, 16, 2, 27>>,
    to: NodeId,
    msg: &ConfigMessage<'_>,
    transfer: u8,
    mtu: Mtu,
    skip: u8,
    now: u32,
) {
    let mut buf = [0u8; 1024];
    let Ok(n) = msg.encode(&mut buf) else { return };
    let id = ConfigId::single(msg.opcode(), Direction::ToNode, to, transfer);
    let Ok(seg) = Segmenter::new(id, mtu, &buf[..n], &[]) else {
        return;
    };
    for (k, f) in seg.enumerate() {
        // `skip` drops one segment now and then, to exercise gaps.
        if skip != 0 && k == skip as usize {
            continue;
        }
        node.receive(&f, now);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = In(data);
    let Some(cfg) = input.u8() else { return };
    let fd_capable = cfg & 1 != 0;
    let counts = [(cfg >> 1) % 4, (cfg >> 3) % 3];
    let config = NodeConfig {
        node_id: NodeId::new(NODE).unwrap(),
        boot_id: BOOT,
        counts: &counts,
        controller: if fd_capable { Controller::Fd } else { Controller::Classic },
    };
    let mut node = Node::new(
        &DESC,
        Buffers::<135, 60, 325, 5, 20, 8, 16, 2, 27>::new(),
        config,
    )
    .unwrap();
    let mut tx = Tx {
        refuse_bits: 0,
        calls: 0,
        sent: 0,
        fault_seen: false,
        fd_allowed: false,
        pool: ReassemblyPool::new(),
        now: 0,
    };
    let mut app = App::default();
    let mut now: u32 = u32::MAX - 400_000; // cross the clock wrap early
    let mut mtu = Mtu::Classic;
    let mut prev = node.counters().to_array();
    let mut transfer = 0u8;

    for _ in 0..4096 {
        let Some(op) = input.u8() else { break };
        match op % 14 {
            0 => now = now.wrapping_add(input.u16().unwrap_or(0) as u32 * 16),
            1 => now = now.wrapping_add(input.u16().unwrap_or(0) as u32 * 1_000),
            2 => {
                // Raw frame, anything.
                let raw = u32::from_le_bytes([
                    input.u8().unwrap_or(0),
                    input.u8().unwrap_or(0),
                    input.u8().unwrap_or(0),
                    input.u8().unwrap_or(0),
                ]);
                let len = input.u8().unwrap_or(0) as usize;
                let d = input.bytes(len % 65);
                let id = if raw & 0x8000_0000 != 0 {
                    CanId::Extended(raw & 0x1FFF_FFFF)
                } else {
                    CanId::Standard((raw & 0x7FF) as u16)
                };
                let f = if d.len() <= 8 && raw & 0x4000_0000 == 0 {
                    Frame::classic(id, d).ok()
                } else {
                    Frame::padded(Mtu::Fd, id, d).ok()
                };
                if let Some(f) = f {
                    node.receive(&f, now);
                }
            }
            3 => {
                // A config-plane frame with a valid id to us (or broadcast/other), payload fuzzed.
                let a = input.u8().unwrap_or(0);
                let b = input.u8().unwrap_or(0);
                let opcode = Opcode::ALL[(a % 11) as usize];
                let node_id = match a >> 6 {
                    0 | 1 => NODE,
                    2 => 0x7F,
                    _ => NODE + 1,
                };
                let id = ConfigId {
                    opcode,
                    dir: if a & 0x10 != 0 {
                        Direction::ToMaster
                    } else {
                        Direction::ToNode
                    },
                    node: NodeId::new(node_id).unwrap_or(NodeId::BROADCAST),
                    transfer: b,
                    segment: input.u8().unwrap_or(0) % 4,
                    eot: a & 0x20 != 0,
                };
                let len = input.u8().unwrap_or(0) as usize;
                let d = input.bytes(len % 65);
                let f = if d.len() <= 8 {
                    Frame::classic(id.can_id(), d).ok()
                } else {
                    Frame::padded(Mtu::Fd, id.can_id(), d).ok()
                };
                if let Some(f) = f {
                    node.receive(&f, now);
                }
            }
            4 => {
                // Data frame in the data range.
                let id = 0x100 + (input.u8().unwrap_or(0) as u16 % 0x40);
                let len = input.u8().unwrap_or(0) as usize;
                let d = input.bytes(len % 65);
                if let Ok(f) = Frame::padded(mtu, CanId::Standard(id), d) {
                    node.receive(&f, now);
                }
            }
            5 => {
                let m = input.u8().unwrap_or(0);
                let mode = BusMode::from_u8(m % 3).unwrap_or(BusMode::Classic);
                let boot = if m & 0x80 != 0 { BOOT ^ 1 } else { BOOT };
                transfer = transfer.wrapping_add(1);
                send_msg(
                    &mut node,
                    NodeId::new(NODE).unwrap(),
                    &ConfigMessage::AnnounceAck(AnnounceAck {
                        boot_id: boot,
                        session: 42,
                        mode,
                    }),
                    transfer,
                    mtu,
                    0,
                    now,
                );
                if boot == BOOT && (mode == BusMode::Classic || fd_capable) {
                    mtu = mode.mtu();
                    if mode != BusMode::Classic {
                        tx.fd_allowed = true;
                    }
                }
            }
            6 => {
                // FRAME_DEFINE from fuzz bytes.
                let index = input.u8().unwrap_or(0) % 10;
                let std_id = 0x100 + (input.u8().unwrap_or(0) as u16 % 0x40);
                let flags = input.u8().unwrap_or(0);
                let len = input.u8().unwrap_or(0) % 70;
                let parts = input.u8().unwrap_or(1);
                let period = input.u8().unwrap_or(0) as u32 * 500;
                let n = (input.u8().unwrap_or(0) % 6) as usize;
                let mut entries = [CopyEntry {
                    block: 0,
                    topic: 0,
                    src_offset: 0,
                    len: 0,
                    dst_offset: 0,
                }; 6];
                for e in entries.iter_mut().take(n) {
                    *e = CopyEntry {
                        block: input.u8().unwrap_or(0) % 6,
                        topic: input.u8().unwrap_or(0) % 5,
                        src_offset: input.u8().unwrap_or(0) as u16 % 14,
                        len: input.u8().unwrap_or(0) % 14,
                        dst_offset: input.u8().unwrap_or(0) % 66,
                    };
                }
                let header = FrameHeader {
                    index,
                    std_id,
                    dir: if flags & 1 != 0 {
                        DataDirection::S2m
                    } else {
                        DataDirection::M2s
                    },
                    sequenced: flags & 2 != 0,
                    // Shared m2s and on-commit frames need the presence mask.
                    masked: flags & 8 != 0,
                    len,
                    group_parts: parts % 4,
                    group_index: (parts >> 4) % 4,
                    period_us: if flags & 4 != 0 { period } else { 0 },
                };
                transfer = transfer.wrapping_add(1);
                let msg = ConfigMessage::FrameDefine(FrameDefine {
                    header,
                    entries: Entries::List(&entries[..n]),
                });
                send_msg(
                    &mut node,
                    NodeId::new(NODE).unwrap(),
                    &msg,
                    transfer,
                    mtu,
                    flags >> 5,
                    now,
                );
            }
            7 => {
                let count = input.u8().unwrap_or(0) % 10;
                let timeout = input.u8().unwrap_or(0) as u16;
                transfer = transfer.wrapping_add(1);
                send_msg(
                    &mut node,
                    NodeId::new(NODE).unwrap(),
                    &ConfigMessage::Start(Start {
                        frame_count: count,
                        master_timeout_ms: timeout,
                    }),
                    transfer,
                    mtu,
                    0,
                    now,
                );
            }
            8 => {
                // A structured message with a fuzzed body: services, params, schema reads.
                let kind = input.u8().unwrap_or(0);
                let b = input.u8().unwrap_or(0) % 6;
                let i = input.u8().unwrap_or(0) % 4;
                let len = input.u8().unwrap_or(0) as usize;
                let body = input.bytes(len % 80);
                let msg = match kind % 5 {
                    0 => ConfigMessage::ServiceRequest(ServiceRequest {
                        block: b,
                        service: i,
                        body,
                    }),
                    1 => ConfigMessage::ParamSet(ParamSet {
                        block: b,
                        param: i,
                        commit: kind & 0x80 != 0,
                        value: body,
                    }),
                    2 => ConfigMessage::ParamGet(ParamGet { block: b, param: i }),
                    3 => ConfigMessage::SchemaRead(SchemaRead {
                        offset: (len as u32) * 20,
                        len: (kind as u16) * 30,
                    }),
                    _ => ConfigMessage::StatsRead,
                };
                let t = if kind & 0x40 != 0 {
                    transfer
                } else {
                    transfer.wrapping_add(1)
                };
                transfer = t;
                let to = if kind & 0x20 != 0 {
                    NodeId::BROADCAST
                } else {
                    NodeId::new(NODE).unwrap()
                };
                send_msg(&mut node, to, &msg, t, mtu, (kind >> 3) & 3, now);
            }
            9 => {
                tx.now = now;
                node.poll(now, &mut tx, &mut app);
                if node.state() == NodeState::Fault {
                    tx.fault_seen = true;
                }
            }
            10 => {
                let b = input.u8().unwrap_or(0) % 6;
                let t = input.u8().unwrap_or(0) % 5;
                let len = input.u8().unwrap_or(0) as usize % 14;
                let bytes = [input.u8().unwrap_or(0); 14];
                let _ = node.publish(b, t, &bytes[..len]);
            }
            11 => {
                let which = input.u8().unwrap_or(0);
                let len = which as usize % 24;
                let tok = app.tokens[(which & 3) as usize];
                let tok = match tok {
                    Some(t) if which & 0x80 == 0 => t,
                    _ => DeferredToken {
                        slot: which % 4,
                        transfer: which,
                        block: which % 6,
                        service: which % 3,
                        // A forged or stale token: any generation, usually a wrong one.
                        generation: u32::from(which % 3),
                    },
                };
                let _ = node.complete(tok, &[7u8; 24][..len]);
            }
            12 => {
                tx.refuse_bits =
                    u64::from_le_bytes(core::array::from_fn(|_| input.u8().unwrap_or(0)))
            }
            _ => {
                // Master heartbeat, right or wrong session.
                let s = input.u8().unwrap_or(0);
                let session = if s & 1 == 0 { 42 } else { s as u32 };
                send_msg(
                    &mut node,
                    NodeId::BROADCAST,
                    &ConfigMessage::MasterHeartbeat(MasterHeartbeat { session }),
                    s,
                    mtu,
                    0,
                    now,
                );
            }
        }
        // Invariants after every step.
        let c = node.counters().to_array();
        for (a, b) in prev.iter().zip(c.iter()) {
            assert!(b >= a, "counter went back: {prev:?} -> {c:?}");
        }
        prev = c;
        assert!(NodeState::ALL.contains(&node.state()));
        for b in 0..6u8 {
            for t in 0..5u8 {
                if let Some(r) = node.topic(b, t) {
                    assert!(node.is_wired(b));
                    assert_eq!(r.bytes.len(), TOPICS[t as usize].size as usize);
                }
            }
            for p in 0..4u8 {
                if let Some(v) = node.param(b, p) {
                    assert_eq!(
                        v.len(),
                        PARAMS[p as usize].ty.size() * PARAMS[p as usize].count as usize
                    );
                }
            }
        }
    }
    if std::env::var_os("FCAN_FUZZ_TRACE").is_some() {
        eprintln!(
            "state {:?} mode {:?} sent {} {:?}",
            node.state(),
            node.bus_mode(),
            tx.sent,
            node.counters()
        );
    }
    // Let everything drain: with a willing driver the queue always empties.
    tx.refuse_bits = 0;
    for _ in 0..64 {
        now = now.wrapping_add(1_000);
        tx.now = now;
        node.poll(now, &mut tx, &mut app);
    }
});
