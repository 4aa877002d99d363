//! Drives the master engine (`Engine::handle_frame` + `poll`) with arbitrary bus traffic,
//! time steps and user requests, and checks after every step that it neither panics nor
//! grows without bound, and at the end that every request it accepted ended exactly once.
//!
//! The input is a little program: each op byte picks an action and reads its arguments
//! from the following bytes (zeros once the input runs out). Besides raw frames, a
//! simulated node side answers what the engine actually sent — ANNOUNCE with the real
//! blobs of `schema/examples` (or junk), SCHEMA_DATA with the bytes asked for, RESULT,
//! PARAM_VALUE and SERVICE responses, each sometimes wrong (corrupt chunk, wrong
//! transfer, NAK, bad status, wrong length, a segment dropped) — so the fuzzer reaches
//! downloaded, provisioned and running nodes and the requests to them. Firmware updates
//! too: the harness starts and aborts them (images built from the example blobs, for the
//! right board or not), and the node side answers OFFER, DATA, COMMIT, ABORT and the
//! version QUERY with STATUS and PROGRESS that are right, stale, out of order or absurd
//! (any phase, reason, offset, chunk size, version text).
//!
//! Checked after every step:
//! - no panic (debug assertions are on, so arithmetic overflow counts);
//! - at most 127 nodes, each with a valid node id; data identifiers in use stay inside the
//!   data range; counters never go back;
//! - the frames one step makes stay under `256 * (nodes + 2)` (no amplification), and no
//!   FD frame on a Classical CAN link;
//! - `EngineStats::pending_requests` equals the requests the harness holds open (the
//!   engine forgets none silently and holds none that ended);
//! - every `CallDone` / `ParamDone` / `UpdateDone` names a request id the engine returned
//!   and that has not ended yet; `UpdateProgress` names an update that runs, and its
//!   bytes never exceed the image's.
//!
//! At the end, time jumps past every timeout with no input: every request id returned
//! must have got exactly one `CallDone` / `ParamDone` / `UpdateDone`, and none may stay
//! pending.
#![no_main]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::OnceLock;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::{HashPrefix, SchemaDigest};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_master::cache::{BlobStore, MemoryStore};
use fcan_master::engine::{Engine, EngineConfig, EngineStats, Event, SampleSink};
use fcan_master::update::{UpdateConfig, UpdateImage};
use libfuzzer_sys::fuzz_target;

/// The example schemas' blobs, as `fcan-codegen` writes them.
const BLOBS: [&[u8]; 2] = [
    include_bytes!("../blobs/motor_driver.bin"),
    include_bytes!("../blobs/io_board.bin"),
];

/// Node ids most ops use; others come from the input now and then.
const IDS: [u8; 4] = [1, 2, 3, 126];

const SESSION: u32 = 0x5E55_1011;

/// Per example blob: its digest and the maximum instance count of each array.
fn blob_info() -> &'static [(SchemaDigest, Vec<u8>); 2] {
    static INFO: OnceLock<[(SchemaDigest, Vec<u8>); 2]> = OnceLock::new();
    INFO.get_or_init(|| {
        BLOBS.map(|b| {
            let schema = fcan_core::blob::decode(b).expect("example blob decodes");
            let counts = schema
                .instances
                .iter()
                .map(|a| a.max_count.min(255) as u8)
                .collect();
            (SchemaDigest::of(b), counts)
        })
    })
}

/// Reads the program; zeros once it is exhausted.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    /// `n` bytes of a value: one byte repeated (two input bytes, so a program stays
    /// aligned whatever size the schema asks for), or `n` bytes from the input.
    fn value(&mut self, n: usize) -> Vec<u8> {
        if self.u8() < 128 {
            vec![self.u8(); n]
        } else {
            self.bytes(n)
        }
    }
    fn node(&mut self) -> u8 {
        let b = self.u8();
        if b < 224 {
            IDS[b as usize % IDS.len()]
        } else {
            b % 128 // 127 is the broadcast address: refused as a source
        }
    }
}

/// A request the engine sent to a node, that the simulated node may answer.
#[derive(Clone, Debug)]
enum Req {
    Schema {
        transfer: u8,
        offset: u32,
        len: u16,
    },
    Command {
        transfer: u8,
        opcode: Opcode,
    },
    Get {
        transfer: u8,
        block: u8,
        param: u8,
    },
    Call {
        transfer: u8,
        block: u8,
        service: u8,
    },
    Update {
        transfer: u8,
        ask: UpdateAsk,
    },
}

/// An UPDATE request, what the simulated node needs of it to answer.
#[derive(Clone, Copy, Debug)]
enum UpdateAsk {
    Offer { size: u32 },
    Data { offset: u32, len: u32 },
    Commit,
    Abort,
    Query,
}

/// The node side of one node id.
#[derive(Default)]
struct SimNode {
    blob: Vec<u8>,
    boot_id: u32,
    mode: Option<BusMode>,
    recent: VecDeque<Req>,
    /// Image bytes stored from offset 0 on (what STATUS and PROGRESS report when right).
    stored: u32,
}

impl SimNode {
    fn mtu(&self) -> Mtu {
        self.mode.map_or(Mtu::Classic, |m| m.mtu())
    }
}

struct Counting;
impl SampleSink for Counting {
    fn sample(&mut self, _: NodeId, _: u8, _: u8, bytes: &[u8], _: u64) {
        assert!(bytes.len() <= 8192, "sample of {} bytes", bytes.len());
    }
}

/// The harness's side of the reassembly: big (32 × 8 KiB), so one per thread, cleared at
/// the start of every run rather than allocated, zeroed and freed per run (that, with
/// the engine's own pool, freed enough for glibc to give the heap top back to the kernel
/// and fault it in again on every run: a third of the time of a short run).
type Pool = ReassemblyPool<32, 8192>;

struct Harness<'p> {
    engine: Engine,
    link: Mtu,
    now: u64,
    sims: BTreeMap<u8, SimNode>,
    pool: &'p mut Pool,
    /// Request ids returned and not ended yet.
    open: BTreeSet<u64>,
    /// Updates running: request id → image size.
    images: BTreeMap<u64, u64>,
    last_id: u64,
    stats: EngineStats,
    /// `FCAN_FUZZ_TRACE=1`: print every event and the final state.
    trace: bool,
}

impl Harness<'_> {
    fn inject(&mut self, f: &Frame) {
        self.engine.handle_frame(f, self.now, &mut Counting);
    }

    /// Sends one message from `node` to the master, segmented for `mtu`, optionally
    /// without its segment `drop`.
    fn reply(&mut self, node: u8, transfer: u8, msg: &ConfigMessage, mtu: Mtu, drop: Option<u8>) {
        let Some(nid) = NodeId::new(node) else { return };
        let mut buf = [0u8; 9000];
        let Ok(len) = msg.encode(&mut buf) else {
            return;
        };
        let id = ConfigId::single(msg.opcode(), Direction::ToMaster, nid, transfer);
        let Ok(seg) = Segmenter::new(id, mtu, &buf[..len], &[]) else {
            return;
        };
        let n = seg.segment_count();
        for (k, f) in seg.enumerate() {
            if n > 1 && drop.is_some_and(|d| d as usize % n == k) {
                continue;
            }
            self.inject(&f);
        }
    }

    /// Takes what the engine produced, feeds the simulated nodes, checks the invariants.
    fn drain(&mut self) {
        let mut sent = 0usize;
        while let Some(f) = self.engine.pop_frame() {
            sent += 1;
            assert!(
                self.link == Mtu::Fd || !f.is_fd(),
                "FD frame on a classic link: {f:?}"
            );
            let CanId::Extended(_) = f.id() else {
                continue; // data frames: nothing to answer
            };
            let cid = ConfigId::from_can_id(f.id()).expect("the master sends valid IDs");
            assert_eq!(cid.dir, Direction::ToNode, "the master sends to nodes");
            let payload = match self.pool.push(cid, f.data(), self.now as u32) {
                Ok(Some(p)) => p.to_vec(),
                Ok(None) => continue,
                Err(e) => panic!("the master's own segments do not reassemble: {e:?}"),
            };
            let msg = ConfigMessage::decode(cid.opcode, cid.dir, &payload)
                .expect("the master sends messages that decode");
            let node = cid.node.get();
            let t = cid.transfer;
            let req = match msg {
                ConfigMessage::AnnounceAck(a) => {
                    if let Some(s) = self.sims.get_mut(&node) {
                        if a.boot_id == s.boot_id {
                            s.mode = Some(a.mode);
                        }
                    }
                    None
                }
                ConfigMessage::SchemaRead(r) => Some(Req::Schema {
                    transfer: t,
                    offset: r.offset,
                    len: r.len,
                }),
                ConfigMessage::FrameDefine(_)
                | ConfigMessage::ParamSet(_)
                | ConfigMessage::Start(_) => Some(Req::Command {
                    transfer: t,
                    opcode: cid.opcode,
                }),
                ConfigMessage::ParamGet(g) => Some(Req::Get {
                    transfer: t,
                    block: g.block,
                    param: g.param,
                }),
                ConfigMessage::ServiceRequest(r) => Some(Req::Call {
                    transfer: t,
                    block: r.block,
                    service: r.service,
                }),
                ConfigMessage::UpdateRequest(r) => Some(Req::Update {
                    transfer: t,
                    ask: match r {
                        UpdateRequest::Offer(o) => UpdateAsk::Offer { size: o.size },
                        UpdateRequest::Data { offset, data } => UpdateAsk::Data {
                            offset,
                            len: data.len() as u32,
                        },
                        UpdateRequest::Commit { .. } => UpdateAsk::Commit,
                        UpdateRequest::Abort => UpdateAsk::Abort,
                        _ => UpdateAsk::Query,
                    },
                }),
                _ => None,
            };
            if let (Some(req), Some(s)) = (req, self.sims.get_mut(&node)) {
                if s.recent.len() >= 16 {
                    s.recent.pop_front();
                }
                s.recent.push_back(req);
            }
        }
        // Counting the nodes walks the engine's map: only worth it when the bound could
        // be broken at all (it is at least 512).
        if sent > 256 * 2 {
            let nodes = self.engine.nodes().count();
            assert!(
                sent <= 256 * (nodes + 2),
                "{sent} frames in one step with {nodes} nodes"
            );
        }
        while let Some(e) = self.engine.pop_event() {
            if self.trace {
                eprintln!("{:>12} {e:?}", self.now);
            }
            match e {
                Event::CallDone { id, .. }
                | Event::ParamDone { id, .. }
                | Event::UpdateDone { id, .. } => {
                    assert!(
                        self.open.remove(&id),
                        "request {id} ended twice or never began"
                    );
                    self.images.remove(&id);
                }
                Event::UpdateProgress { id, progress, .. } => {
                    assert!(
                        self.open.contains(&id),
                        "progress of update {id}, not running"
                    );
                    let size = self.images.get(&id).copied();
                    assert_eq!(Some(progress.size), size, "update {id}'s size");
                    assert!(
                        progress.acked <= progress.size,
                        "update {id}: {} of {} bytes",
                        progress.acked,
                        progress.size
                    );
                }
                Event::Failed { reason, .. } => assert!(reason.len() < 4096),
                _ => {}
            }
        }
        self.check();
    }

    fn check(&mut self) {
        let mut count = 0;
        for n in self.engine.nodes() {
            assert!(!n.id.is_broadcast(), "node id {}", n.id);
            count += 1;
        }
        assert!(count <= 127, "{count} nodes");
        let s = self.engine.stats();
        assert!(s.data_ids_in_use <= fcan_core::id::DATA_ID_RANGE.len() as u64);
        let o = self.stats;
        assert!(s.rx_frames >= o.rx_frames && s.rx_malformed >= o.rx_malformed);
        assert!(s.rx_unrouted >= o.rx_unrouted && s.tx_frames >= o.tx_frames);
        assert!(s.rx_reassembly_dropped >= o.rx_reassembly_dropped);
        assert!(s.retries >= o.retries && s.schema_bytes_read >= o.schema_bytes_read);
        assert_eq!(
            s.pending_requests,
            self.open.len() as u64,
            "the engine holds {} requests, {:?} are open",
            s.pending_requests,
            self.open
        );
        self.stats = s;
    }

    fn accepted(&mut self, r: Result<u64, fcan_master::engine::CallError>) {
        if let Ok(id) = r {
            assert!(id > self.last_id, "request id {id} reused");
            self.last_id = id;
            self.open.insert(id);
        }
    }

    fn announce(&mut self, inp: &mut Input) {
        let node = inp.node();
        let which = inp.u8();
        let flags = inp.u8();
        let boot_id = match inp.u8() % 4 {
            0 => 0x1111,
            1 => 0x2222,
            2 => self.sims.get(&node).map_or(0x1111, |s| s.boot_id),
            _ => inp.u32(),
        };
        let (blob, counts) = match which % 4 {
            k @ (0 | 1) => {
                let max = &blob_info()[k as usize].1;
                let counts = if flags & 1 == 0 {
                    max.clone()
                } else {
                    max.iter()
                        .map(|&m| inp.u8() % (m.saturating_add(2)))
                        .collect()
                };
                (BLOBS[k as usize].to_vec(), counts)
            }
            2 => {
                // Junk, announced with its true hash: downloads fine, fails to decode.
                let n = inp.u8() as usize;
                (inp.bytes(n), vec![1])
            }
            _ => {
                let n = inp.u8() as usize % 8;
                (BLOBS[0].to_vec(), inp.bytes(n))
            }
        };
        let digest = SchemaDigest::of(&blob);
        let hash = if flags & 2 == 0 {
            digest.prefix()
        } else {
            HashPrefix(inp.u32().to_le_bytes().repeat(2).try_into().unwrap())
        };
        let blob_len = if flags & 4 == 0 {
            blob.len() as u32
        } else {
            inp.u32()
        };
        let protocol = if flags & 8 == 0 {
            fcan_core::ir::PROTOCOL_VERSION as u8
        } else {
            inp.u8()
        };
        let state = NodeState::from_u8(inp.u8() % 5).unwrap_or(NodeState::Unprovisioned);
        let caps = (flags >> 4) & caps::KNOWN;
        let msg = ConfigMessage::Announce(Announce {
            protocol,
            state,
            caps,
            boot_id,
            blob_len,
            hash,
            counts: &counts,
        });
        let sim = self.sims.entry(node).or_default();
        sim.blob = blob;
        sim.boot_id = boot_id;
        sim.mode = None;
        sim.recent.clear();
        // Flags bit 7 (no capability): the staged image survived the reboot (a flash
        // staging area), else it is gone (a RAM one).
        if flags & 0x80 == 0 {
            sim.stored = 0;
        }
        let transfer = inp.u8();
        self.reply(node, transfer, &msg, Mtu::Classic, None);
    }

    fn answer(&mut self, inp: &mut Input) {
        let node = inp.node();
        let pick = inp.u8();
        let v = inp.u8();
        let Some(sim) = self.sims.get_mut(&node) else {
            return;
        };
        if sim.recent.is_empty() {
            return;
        }
        // Mostly the newest request; the low bit keeps it for a duplicate answer.
        let k = sim.recent.len() - 1 - (pick as usize >> 1) % sim.recent.len();
        let req = if pick & 1 == 0 {
            sim.recent.remove(k)
        } else {
            sim.recent.get(k).cloned()
        };
        let Some(req) = req else { return };
        let mtu = if v & 8 == 0 { sim.mtu() } else { Mtu::Classic };
        let drop = (v & 16 != 0).then(|| inp.u8());
        let blob = sim.blob.clone();
        let wrong = v & 4 != 0;
        let fix = |t: u8| if wrong { t.wrapping_add(1) } else { t };
        let rec = NodeId::new(node).and_then(|id| self.engine.node(id));
        let layout = |block: u8| {
            rec.and_then(|r| r.schema.as_ref())
                .and_then(|s| s.numbering.layout_of(block).cloned())
        };
        match req {
            Req::Schema {
                transfer,
                offset,
                len,
            } => {
                let start = (offset as usize).min(blob.len());
                let end = (start + len as usize).min(blob.len());
                let mut data = blob[start..end].to_vec();
                let mut offset = offset;
                match v & 3 {
                    0 => {}
                    1 => {
                        if let Some(b) = data.first_mut() {
                            *b ^= inp.u8() | 1;
                        }
                    }
                    2 => data.truncate(inp.u8() as usize % (data.len() + 1)),
                    _ => offset = offset.wrapping_add(1),
                }
                let msg = ConfigMessage::SchemaData(SchemaData {
                    offset,
                    data: &data,
                });
                self.reply(node, fix(transfer), &msg, mtu, drop);
            }
            Req::Command { transfer, opcode } => {
                let code = if v & 0x60 == 0 {
                    ResultCode::from_u8(inp.u8() % 16).unwrap_or(ResultCode::Ok)
                } else {
                    ResultCode::Ok
                };
                let msg = ConfigMessage::Result(CommandResult {
                    opcode,
                    code,
                    detail: 0,
                });
                self.reply(node, fix(transfer), &msg, mtu, drop);
            }
            Req::Get {
                transfer,
                block,
                param,
            } => {
                let size = layout(block)
                    .and_then(|l| l.param_sizes.get(param as usize).copied())
                    .unwrap_or(4);
                let size = if v & 3 == 3 { inp.u8() as usize } else { size };
                let value = inp.value(size);
                let msg = ConfigMessage::ParamValue(ParamValue {
                    block,
                    param,
                    value: &value,
                });
                self.reply(node, fix(transfer), &msg, mtu, drop);
            }
            Req::Call {
                transfer,
                block,
                service,
            } => {
                let size = layout(block)
                    .and_then(|l| l.responses.get(service as usize).map(|m| m.size))
                    .unwrap_or(0);
                let size = if v & 3 == 3 { inp.u8() as usize } else { size };
                let status = match v >> 5 {
                    0..=3 => ServiceStatus::Ok,
                    4 | 5 => ServiceStatus::Accepted,
                    _ => ServiceStatus::from_u8(inp.u8() % 7).unwrap_or(ServiceStatus::Busy),
                };
                let body = if status == ServiceStatus::Ok {
                    inp.value(size)
                } else {
                    Vec::new()
                };
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block,
                    service,
                    status,
                    body: &body,
                });
                self.reply(node, fix(transfer), &msg, mtu, drop);
                if status == ServiceStatus::Accepted {
                    // The final answer is still to come.
                    if let Some(sim) = self.sims.get_mut(&node) {
                        sim.recent.push_back(Req::Call {
                            transfer,
                            block,
                            service,
                        });
                    }
                }
            }
            Req::Update { transfer, ask } => {
                let reply = self.update_reply(inp, node, ask, v);
                let mut text = [0u8; 16];
                let msg = match reply {
                    Answer::Progress(next) => UpdateReply::Progress { next },
                    Answer::Status {
                        phase,
                        reason,
                        offset,
                        max_chunk,
                        version,
                    } => {
                        // Any bytes the input gives, as long as they are text (the
                        // decoder refuses the rest, which raw frames cover).
                        let n = version.len().min(text.len());
                        text[..n].copy_from_slice(&version[..n]);
                        let version = std::str::from_utf8(&text[..n]).unwrap_or("1.0.0");
                        return self.reply(
                            node,
                            fix(transfer),
                            &ConfigMessage::UpdateReply(UpdateReply::Status(UpdateStatus {
                                phase,
                                reason,
                                offset,
                                max_chunk,
                                version,
                            })),
                            mtu,
                            drop,
                        );
                    }
                };
                self.reply(
                    node,
                    fix(transfer),
                    &ConfigMessage::UpdateReply(msg),
                    mtu,
                    drop,
                );
            }
        }
    }

    /// The simulated node's answer to an UPDATE request: mostly what a node would say
    /// (`v & 3 != 3`), else any phase, reason, offset or chunk size.
    fn update_reply(&mut self, inp: &mut Input, node: u8, ask: UpdateAsk, v: u8) -> Answer {
        let sane = v & 3 != 3;
        let Some(sim) = self.sims.get_mut(&node) else {
            return Answer::Progress(0);
        };
        let status = |phase, reason, offset, max_chunk| Answer::Status {
            phase,
            reason,
            offset,
            max_chunk,
            version: b"1.0.0".to_vec(),
        };
        if !sane {
            return match v >> 6 {
                0 => Answer::Progress(inp.u32()),
                _ => Answer::Status {
                    phase: UpdatePhase::from_u8(inp.u8() % 5).unwrap_or(UpdatePhase::Idle),
                    reason: UpdateReason::from_u8(inp.u8() % 16).unwrap_or(UpdateReason::None),
                    offset: inp.u32(),
                    max_chunk: inp.u16(),
                    version: {
                        let n = inp.u8() as usize % 17;
                        inp.bytes(n)
                    },
                },
            };
        }
        match ask {
            UpdateAsk::Offer { size } => match v >> 5 {
                // Accepted, from what it has (a resume), taking chunks of 1 to 256 bytes.
                0..=4 => status(
                    UpdatePhase::Receiving,
                    UpdateReason::None,
                    sim.stored.min(size),
                    inp.u8() as u16 + 1,
                ),
                5 | 6 => status(
                    UpdatePhase::Idle,
                    UpdateReason::from_u8(inp.u8() % 14 + 1).unwrap_or(UpdateReason::TooLarge),
                    0,
                    0,
                ),
                // It had the whole image already verified (a master lost after COMMIT).
                _ => status(UpdatePhase::Verified, UpdateReason::None, size, 0),
            },
            UpdateAsk::Data { offset, len } => {
                if offset <= sim.stored {
                    sim.stored = sim.stored.max(offset.saturating_add(len));
                }
                Answer::Progress(sim.stored)
            }
            UpdateAsk::Commit => match v >> 6 {
                0 | 1 => status(UpdatePhase::Verified, UpdateReason::None, sim.stored, 0),
                2 => status(UpdatePhase::Verifying, UpdateReason::None, sim.stored, 0),
                _ => {
                    sim.stored = 0;
                    status(UpdatePhase::Idle, UpdateReason::HashMismatch, 0, 0)
                }
            },
            UpdateAsk::Abort => {
                sim.stored = 0;
                status(UpdatePhase::Idle, UpdateReason::Aborted, 0, 0)
            }
            UpdateAsk::Query => {
                let phase = UpdatePhase::from_u8((v >> 5) % 4).unwrap_or(UpdatePhase::Idle);
                status(phase, UpdateReason::None, sim.stored, 64)
            }
        }
    }

    /// Starts an update of a node: an image built from an example blob (the firmware of
    /// a simulated node is its blob), for the node's board or not, of any size.
    fn start_update(&mut self, inp: &mut Input) {
        let node = inp.node();
        let flags = inp.u8();
        let Some(id) = NodeId::new(node) else { return };
        let k = (flags & 1) as usize;
        let mut bytes = BLOBS[k].to_vec();
        if flags & 2 != 0 {
            // Another size: cut short, or grown past what one window carries.
            let n = inp.u16() as usize;
            bytes.resize(n, 0xA5);
        }
        let board = match flags >> 2 & 3 {
            0 | 1 => fcan_core::blob::decode(BLOBS[k]).map_or_else(|_| String::new(), |s| s.node),
            2 => "no_such_board".to_owned(),
            _ => {
                let n = inp.u8() as usize % 40;
                String::from_utf8_lossy(&inp.bytes(n)).into_owned()
            }
        };
        let schema = blob_info()[(flags >> 4 & 1) as usize].0 .0;
        let image = UpdateImage::new(bytes, schema, &board, "2.0.0");
        let size = image.len() as u64;
        let cfg = UpdateConfig {
            share: (inp.u8() as f64 + 1.0) / 256.0,
            window: inp.u8() as usize % 8 + 1,
            max_retries: inp.u8() as u32 % 4,
            ..UpdateConfig::default()
        };
        if let Ok(r) = self.engine.start_update(id, image, cfg, self.now) {
            // The same image asked again joins the running update: the same id.
            if !self.open.contains(&r) {
                self.accepted(Ok(r));
                self.images.insert(r, size);
            }
        }
    }

    /// A size the schema wants for a request or value, or (now and then) any size.
    fn size(
        &self,
        inp: &mut Input,
        node: u8,
        f: impl Fn(&fcan_core::numbering::TypeLayout) -> Option<usize>,
        block: u8,
    ) -> usize {
        let flip = inp.u8();
        let want = NodeId::new(node)
            .and_then(|id| self.engine.node(id))
            .and_then(|r| r.schema.as_ref())
            .and_then(|s| s.numbering.layout_of(block))
            .and_then(f);
        match want {
            Some(n) if flip < 240 => n,
            _ => flip as usize % 80,
        }
    }

    /// A request body for `block`'s service `service`, of the size its schema wants (or
    /// now and then any size).
    fn request_body(&self, inp: &mut Input, node: u8, block: u8, service: u8) -> Vec<u8> {
        let n = self.size(
            inp,
            node,
            |l| l.requests.get(service as usize).map(|m| m.size),
            block,
        );
        inp.value(n)
    }

    fn step(&mut self, inp: &mut Input) {
        match inp.u8() % 16 {
            0 => self.now += inp.u8() as u64 * 100,
            1 => self.now += inp.u16() as u64 * 1000,
            2 | 3 => self.engine.poll(self.now),
            4 => {
                let id = inp.u32();
                let flags = inp.u8();
                let len = inp.u8() as usize % 65;
                let data = inp.bytes(len);
                let id = if flags & 1 == 0 {
                    CanId::Standard(id as u16 & 0x7FF)
                } else {
                    CanId::Extended(id & 0x1FFF_FFFF)
                };
                let f = if flags & 2 == 0 {
                    Frame::classic(id, &data[..len.min(8)])
                } else {
                    Frame::padded(Mtu::Fd, id, &data)
                };
                if let Ok(f) = f {
                    self.inject(&f);
                }
            }
            5 => {
                // A configuration-plane frame from a node: valid ID, anything else fuzzed.
                let node = inp.node();
                let op = inp.u8();
                let transfer = inp.u8();
                let seg = inp.u8();
                let len = inp.u8() as usize % 65;
                let data = inp.bytes(len);
                let (Some(opcode), Some(nid)) = (Opcode::from_u8(op % 16), NodeId::new(node))
                else {
                    return;
                };
                let id = ConfigId::single(opcode, Direction::ToMaster, nid, transfer)
                    .with_segment(seg & 0x7F, seg & 0x80 != 0);
                if let Ok(f) = Frame::padded(Mtu::Fd, id.can_id(), &data) {
                    self.inject(&f);
                }
            }
            6 | 7 => self.announce(inp),
            8..=10 => self.answer(inp),
            11 => {
                let node = inp.node();
                let flags = inp.u8();
                let boot_id = match flags & 3 {
                    0 => inp.u32(),
                    _ => self.sims.get(&node).map_or(0x1111, |s| s.boot_id),
                };
                let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
                    state: NodeState::from_u8((flags >> 2) % 5).unwrap_or(NodeState::Running),
                    fault: FaultCode::None,
                    boot_id,
                    errors: inp.u16(),
                });
                self.reply(node, 0, &msg, Mtu::Classic, None);
            }
            12 => {
                let (node, block, service) = (inp.node(), inp.u8() % 24, inp.u8() % 4);
                let body = self.request_body(inp, node, block, service);
                // The API takes only unicast ids: a request to 127 cannot be written.
                if let Some(id) = NodeId::new(node) {
                    let r = self
                        .engine
                        .call_service(id, block, service, &body, self.now);
                    self.accepted(r);
                }
            }
            13 => {
                let (node, block, param) = (inp.node(), inp.u8() % 24, inp.u8() % 8);
                if inp.u8() & 1 == 0 {
                    let n = self.size(
                        inp,
                        node,
                        |l| l.param_sizes.get(param as usize).copied(),
                        block,
                    );
                    let value = inp.value(n);
                    if let Some(id) = NodeId::new(node) {
                        let r = self.engine.set_param(id, block, param, &value, self.now);
                        self.accepted(r);
                    }
                } else if let Some(id) = NodeId::new(node) {
                    let r = self.engine.get_param(id, block, param, self.now);
                    self.accepted(r);
                }
            }
            14 => {
                let (node, block, topic) = (inp.node(), inp.u8() % 24, inp.u8() % 4);
                let n = self.size(
                    inp,
                    node,
                    |l| l.topics.get(topic as usize).map(|m| m.size),
                    block,
                );
                let bytes = inp.value(n);
                if let Some(id) = NodeId::new(node) {
                    let _ = self
                        .engine
                        .publish(id, block, topic, &bytes, self.now, &mut Counting);
                }
            }
            _ => match inp.u8() {
                // Above 248 (values that meant the ops below before updates came).
                249..=253 => self.start_update(inp),
                254 | 255 => {
                    let node = inp.node();
                    if let Some(id) = NodeId::new(node) {
                        let _ = self.engine.abort_update(id);
                    }
                }
                b => match b % 4 {
                    0 => self.engine.discover(),
                    3 => {
                        // A burst of calls to one service, up to 600 at once: more than the
                        // 256 transfer ids one node has.
                        let (node, block, service) = (inp.node(), inp.u8() % 24, inp.u8() % 4);
                        let count = inp.u16() % 600;
                        let body = self.request_body(inp, node, block, service);
                        let Some(id) = NodeId::new(node) else {
                            return;
                        };
                        for _ in 0..count {
                            let r = self
                                .engine
                                .call_service(id, block, service, &body, self.now);
                            self.accepted(r);
                            self.drain();
                        }
                    }
                    1 => {
                        // A data frame on an identifier a node's plan uses.
                        let node = inp.node();
                        let k = inp.u8() as usize;
                        let Some(h) = NodeId::new(node)
                            .and_then(|id| self.engine.node(id))
                            .and_then(|r| r.plan.as_ref())
                            .and_then(|p| p.frames.get(k % p.frames.len().max(1)))
                            .map(|f| f.header)
                        else {
                            return;
                        };
                        let data = inp.value(h.len as usize);
                        let mtu = self.sims.get(&node).map_or(Mtu::Classic, |s| s.mtu());
                        if let Ok(f) = Frame::padded(mtu, CanId::Standard(h.std_id), &data) {
                            self.inject(&f);
                        }
                    }
                    _ => {
                        // Another master's heartbeat.
                        let msg =
                            ConfigMessage::MasterHeartbeat(MasterHeartbeat { session: inp.u32() });
                        let mut buf = [0u8; 8];
                        if let Ok(len) = msg.encode(&mut buf) {
                            let id = ConfigId::single(
                                Opcode::Heartbeat,
                                Direction::ToNode,
                                NodeId::BROADCAST,
                                0,
                            );
                            if let Ok(f) = Frame::classic(id.can_id(), &buf[..len]) {
                                self.inject(&f);
                            }
                        }
                    }
                },
            },
        }
    }
}

/// What the simulated node answers to an UPDATE request.
enum Answer {
    Progress(u32),
    Status {
        phase: UpdatePhase,
        reason: UpdateReason,
        offset: u32,
        max_chunk: u16,
        version: Vec<u8>,
    },
}

thread_local! {
    static POOL: std::cell::RefCell<Box<Pool>> = std::cell::RefCell::new(Box::new(Pool::new()));
}

fuzz_target!(|data: &[u8]| POOL.with_borrow_mut(|pool| {
    pool.clear();
    run(data, pool)
}));

fn run(data: &[u8], pool: &mut Pool) {
    let mut inp = Input { data, pos: 0 };
    let setup = inp.u8();
    let link = if setup & 1 == 0 {
        Mtu::Fd
    } else {
        Mtu::Classic
    };
    let mut cfg = EngineConfig::new(SESSION, link);
    cfg.brs = setup & 2 == 0;
    let store = MemoryStore::new();
    for (k, blob) in BLOBS.iter().enumerate() {
        if setup & (4 << k) != 0 {
            let _ = store.store(blob_info()[k].0, blob);
        }
    }
    let mut h = Harness {
        engine: Engine::new(cfg, Box::new(store)),
        link,
        now: 1_000_000,
        sims: BTreeMap::new(),
        pool,
        open: BTreeSet::new(),
        images: BTreeMap::new(),
        last_id: 0,
        stats: EngineStats::default(),
        trace: std::env::var_os("FCAN_FUZZ_TRACE").is_some(),
    };
    h.engine.discover();
    h.drain();
    while !inp.done() {
        h.step(&mut inp);
        h.drain();
    }
    if h.trace {
        for n in h.engine.nodes() {
            eprintln!(
                "node {}: {:?}, schema {:?}, plan {:?} frames, user params {}",
                n.id,
                n.phase,
                n.schema_cached,
                n.plan.as_ref().map(|p| p.frames.len()),
                n.user_params.len()
            );
        }
        eprintln!(
            "{:?}; {} requests accepted, {} open",
            h.engine.stats(),
            h.last_id,
            h.open.len()
        );
    }
    // Silence: past every retry, service, offline, verify and reboot timeout. Each jump
    // is one silence for whatever counts them (an update's retries, at most 3 here).
    for _ in 0..8 {
        h.now += 3_600_000_000;
        h.engine.poll(h.now);
        h.drain();
    }
    assert!(
        h.open.is_empty(),
        "requests {:?} never ended (engine holds {})",
        h.open,
        h.engine.stats().pending_requests
    );
}
