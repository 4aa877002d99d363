//! The on-chip self-test: a master on the in-RAM loopback bus ([`crate::mailbox`]) that
//! does what the PC master does, with fixed arrays only (no allocation), through
//! `fcan_core`'s codecs, `Segmenter` and `ReassemblyPool`:
//!
//! 1. waits for the node's ANNOUNCE (after its listen window);
//! 2. downloads the schema blob with SCHEMA_READ in 200-byte chunks and checks its SHA-256
//!    against the announced prefix (and the generated full digest);
//! 3. ANNOUNCE_ACK in Classic mode, waits for the PROVISIONED heartbeat;
//! 4. FRAME_DEFINE: motor0 `target` (m2s, one frame) and motor0 `feedback` (s2m, 13 bytes:
//!    a sequenced 2-frame group on Classical CAN), each ACKed;
//! 5. PARAM_SET velocity gains (and a NaN, which must be NAKed `NotFinite`);
//! 6. START with a 300 ms master-lost timeout, master heartbeats every 100 ms;
//! 7. velocity target 10 rev/s every 20 ms: feedback must arrive, `ready`, velocity rising;
//! 8. heartbeats stop (targets continue): after the timeout the node must report master
//!    loss (SUSPENDED, re-announcing), stop sending data, and the motor must stop;
//! 9. the master acknowledges again and re-STARTs: feedback resumes, `ready` again;
//! 10. (feature `update`) firmware update over the bus: an OFFER while a motor is driven
//!     is refused (the application's rule); with the master gone and the motors stopped,
//!     a 2 KiB image goes in as DATA chunks, COMMIT, the node reads it back and answers
//!     Verified; the spare slot holds it, the boot record names its SHA-256, and the node
//!     asked to reboot.
//!
//! The script is written once, as an `async fn` over [`Firmware`], the node as the bench
//! sees it, and shared by both binaries: the polling one runs it through [`run`], where a
//! turn is one iteration of the main loop and no await ever waits (so it completes in a
//! single poll), and the async one (src/bin/async/) as an embassy task, where a turn is a
//! sleep during which the node task runs on its own.

use core::future::Future;
use core::ops::Deref;
use cortex_m_semihosting::hprintln;
use fcan_example_motor_driver::gen::{self, motor};

use fcan_example_motor_driver::{mode, MotorDriver};
use fcan_runtime_nostd::fcan_core::frame::{CanId, Frame, Mtu};
use fcan_runtime_nostd::fcan_core::hash::{HashPrefix, SchemaDigest};
use fcan_runtime_nostd::fcan_core::id::{ConfigId, Direction, NodeId};
use fcan_runtime_nostd::fcan_core::msg::{
    caps, AnnounceAck, BusMode, CommandResult, ConfigMessage, CopyEntry, DataDirection, Entries,
    FrameDefine, FrameHeader, MasterHeartbeat, NodeHeartbeat, NodeState, ParamSet, ResultCode,
    SchemaRead, Start,
};
use fcan_runtime_nostd::fcan_core::segment::{ReassemblyPool, Segmenter};

#[cfg(feature = "update")]
use fcan_runtime_nostd::fcan_core::msg::{
    UpdateOffer, UpdatePhase, UpdateReason, UpdateReply, UpdateRequest,
};

use crate::mailbox::MAILBOX_SLOTS;
use crate::mailbox::{self, TxMailbox};
use fcan_runtime_nostd::MailboxConsumer;

type Res<T = ()> = Result<T, &'static str>;

/// Largest blob the self-test downloads.
const BLOB_MAX: usize = 1024;
/// Bytes asked per SCHEMA_READ (fits the 256-byte reassembly slots with its header).
const CHUNK: u16 = 200;
/// Standard IDs of the plan.
const TARGET_ID: u16 = 0x100;
const FEEDBACK_ID0: u16 = 0x101;
const FEEDBACK_ID1: u16 = 0x102;
/// Feedback bytes per part of the Classical CAN group (byte 0 is the sequence number).
const PART: usize = 7;
const MASTER_TIMEOUT_MS: u16 = 300;
const SESSION: u32 = 0xF00D_CAFE;

/// What the master saw of the node's ANNOUNCE.
#[derive(Clone, Copy)]
struct Announced {
    at: u32,
    protocol: u8,
    state: NodeState,
    caps: u8,
    boot_id: u32,
    blob_len: u32,
    hash: HashPrefix,
    wired: u8,
    arrays: usize,
}

/// Everything the master learned from the bus.
struct Seen {
    announce: Option<Announced>,
    announces: u32,
    heartbeat: Option<NodeHeartbeat>,
    result: Option<(u8, CommandResult)>,
    chunk: Option<(u32, usize)>,
    blob: [u8; BLOB_MAX],
    part0: Option<(u8, [u8; PART])>,
    feedback: Option<(u32, motor::Feedback)>,
    feedback_count: u32,
    group_drops: u32,
    unexpected: u32,
    /// The node's last UPDATE answer, with its transfer id.
    #[cfg(feature = "update")]
    update: Option<(u8, UpdateSeen)>,
}

/// An UPDATE answer, copied out of the reassembly buffer.
#[cfg(feature = "update")]
#[derive(Clone, Copy, Debug, PartialEq)]
enum UpdateSeen {
    Status {
        phase: UpdatePhase,
        reason: UpdateReason,
        offset: u32,
        max_chunk: u16,
    },
    Progress {
        next: u32,
    },
}

/// The self-test master.
struct Master {
    pool: ReassemblyPool<2, 256>,
    seen: Seen,
    node: NodeId,
    next_transfer: u8,
    heartbeats: bool,
    next_heartbeat: u32,
    /// When the last master heartbeat was sent.
    last_heartbeat: u32,
    target: Option<motor::Target>,
    next_target: u32,
}

impl Master {
    fn new(node: NodeId) -> Master {
        Master {
            pool: ReassemblyPool::new(),
            seen: Seen {
                announce: None,
                announces: 0,
                heartbeat: None,
                result: None,
                chunk: None,
                blob: [0; BLOB_MAX],
                part0: None,
                feedback: None,
                feedback_count: 0,
                group_drops: 0,
                unexpected: 0,
                #[cfg(feature = "update")]
                update: None,
            },
            node,
            next_transfer: 0,
            heartbeats: false,
            next_heartbeat: 0,
            last_heartbeat: 0,
            target: None,
            next_target: 0,
        }
    }

    /// Sends one configuration message to `to`, segmented for Classical CAN; returns its
    /// transfer id.
    fn send(&mut self, to: NodeId, msg: &ConfigMessage<'_>) -> Res<u8> {
        // An UPDATE OFFER (two digests and two names) is the largest message sent.
        let mut buf = [0u8; 128];
        let n = msg
            .encode(&mut buf)
            .map_err(|_| "encode a master message")?;
        let t = self.next_transfer;
        self.next_transfer = t.wrapping_add(1);
        let id = ConfigId::single(msg.opcode(), Direction::ToNode, to, t);
        let seg = Segmenter::new(id, Mtu::Classic, &buf[..n], &[]).map_err(|_| "segment")?;
        for f in seg {
            if !mailbox::rx_push(&f) {
                return Err("node receive ring full");
            }
        }
        Ok(t)
    }

    /// Heartbeats and the streamed target, when due.
    fn periodic(&mut self, now: u32) -> Res {
        if self.heartbeats && reached(now, self.next_heartbeat) {
            self.next_heartbeat = now.wrapping_add(100_000);
            self.last_heartbeat = now;
            let hb = ConfigMessage::MasterHeartbeat(MasterHeartbeat { session: SESSION });
            self.send(NodeId::BROADCAST, &hb)?;
        }
        if let Some(t) = self.target {
            if reached(now, self.next_target) {
                self.next_target = now.wrapping_add(20_000);
                let mut buf = [0u8; motor::Target::SIZE];
                let n = t.encode(&mut buf).map_err(|_| "encode target")?;
                let f = Frame::classic(CanId::Standard(TARGET_ID), &buf[..n])
                    .map_err(|_| "target frame")?;
                if !mailbox::rx_push(&f) {
                    return Err("node receive ring full");
                }
            }
        }
        Ok(())
    }

    /// One frame the node sent.
    fn on_frame(&mut self, f: &Frame, now: u32) {
        let s = &mut self.seen;
        match f.id() {
            CanId::Standard(FEEDBACK_ID0) if f.len() == 1 + PART => {
                let mut b = [0u8; PART];
                b.copy_from_slice(&f.data()[1..]);
                s.part0 = Some((f.data()[0], b));
            }
            CanId::Standard(FEEDBACK_ID1) if f.len() >= 1 => {
                let rest = &f.data()[1..];
                match s.part0.take() {
                    Some((seq, p0)) if seq == f.data()[0] && PART + rest.len() >= 13 => {
                        let mut v = [0u8; motor::Feedback::SIZE];
                        v[..PART].copy_from_slice(&p0);
                        v[PART..].copy_from_slice(&rest[..motor::Feedback::SIZE - PART]);
                        match motor::Feedback::decode(&v) {
                            Ok(fb) => {
                                s.feedback = Some((now, fb));
                                s.feedback_count += 1;
                            }
                            Err(_) => s.unexpected += 1,
                        }
                    }
                    _ => s.group_drops += 1,
                }
            }
            CanId::Standard(_) => s.unexpected += 1,
            CanId::Extended(_) => {
                let Ok(id) = ConfigId::from_can_id(f.id()) else {
                    s.unexpected += 1;
                    return;
                };
                if id.dir != Direction::ToMaster || id.node != self.node {
                    s.unexpected += 1;
                    return;
                }
                match self.pool.push(id, f.data(), now) {
                    Ok(Some(payload)) => match ConfigMessage::decode(id.opcode, id.dir, payload) {
                        Ok(msg) => seen_message(s, id.transfer, msg, now),
                        Err(_) => s.unexpected += 1,
                    },
                    Ok(None) => {}
                    Err(_) => s.unexpected += 1,
                }
            }
        }
    }
}

fn seen_message(s: &mut Seen, transfer: u8, msg: ConfigMessage<'_>, now: u32) {
    match msg {
        ConfigMessage::Announce(a) => {
            s.announces += 1;
            s.announce = Some(Announced {
                at: now,
                protocol: a.protocol,
                state: a.state,
                caps: a.caps,
                boot_id: a.boot_id,
                blob_len: a.blob_len,
                hash: a.hash,
                wired: a.counts.first().copied().unwrap_or(0),
                arrays: a.counts.len(),
            });
        }
        ConfigMessage::NodeHeartbeat(h) => s.heartbeat = Some(h),
        ConfigMessage::Result(r) => s.result = Some((transfer, r)),
        ConfigMessage::SchemaData(d) => {
            let at = d.offset as usize;
            match s.blob.get_mut(at..at + d.data.len()) {
                Some(dst) => {
                    dst.copy_from_slice(d.data);
                    s.chunk = Some((d.offset, d.data.len()));
                }
                None => s.unexpected += 1,
            }
        }
        #[cfg(feature = "update")]
        ConfigMessage::UpdateReply(r) => {
            let seen = match r {
                UpdateReply::Status(st) => UpdateSeen::Status {
                    phase: st.phase,
                    reason: st.reason,
                    offset: st.offset,
                    max_chunk: st.max_chunk,
                },
                UpdateReply::Progress { next } => UpdateSeen::Progress { next },
                _ => {
                    s.unexpected += 1;
                    return;
                }
            };
            s.update = Some((transfer, seen));
        }
        _ => s.unexpected += 1,
    }
}

fn reached(now: u32, deadline: u32) -> bool {
    fcan_runtime_nostd::fcan_core::timing::reached(now, deadline)
}

/// The firmware under test, as the bench drives it.
pub trait Firmware {
    /// Gives the node its turn after the master's and returns the time (µs, from
    /// `clock::now_us`) at which the master then reads the bus.
    async fn turn(&mut self) -> u32;
    /// The node and its application, for the master's checks (never held across a turn).
    fn driver(&self) -> impl Deref<Target = MotorDriver> + '_;
}

/// The polling firmware: a turn is one iteration of its main loop, in place.
struct Polling<'a> {
    fw: &'a mut MotorDriver,
    inbox: MailboxConsumer<'static, MAILBOX_SLOTS>,
    tx: TxMailbox,
}

impl Firmware for Polling<'_> {
    async fn turn(&mut self) -> u32 {
        // The firmware loop as in `main`: the frames, then the clock, then the poll.
        self.fw.receive_from(&mut self.inbox);
        let now = crate::clock::now_us();
        self.fw.poll(now, &mut self.tx);
        now
    }

    fn driver(&self) -> impl Deref<Target = MotorDriver> + '_ {
        &*self.fw
    }
}

/// The node, the master and the loopback bus between them.
struct Bench<F> {
    f: F,
    m: Master,
    now: u32,
    steps: u32,
}

impl<F: Firmware> Bench<F> {
    /// The master's turn, then the node's.
    async fn step(&mut self) -> Res {
        // The bus side first (its frames reach the mailbox through the interrupt), then
        // the node, then what it sent.
        self.m.periodic(crate::clock::now_us())?;
        self.now = self.f.turn().await;
        while let Some(f) = mailbox::tx_pop() {
            self.m.on_frame(&f, self.now);
        }
        self.steps += 1;
        Ok(())
    }

    /// Runs until `done` or `timeout_us`.
    async fn until(
        &mut self,
        what: &'static str,
        timeout_us: u32,
        mut done: impl FnMut(&Master, &MotorDriver) -> bool,
    ) -> Res {
        let start = self.now;
        loop {
            self.step().await?;
            if done(&self.m, &self.f.driver()) {
                return Ok(());
            }
            if self.now.wrapping_sub(start) > timeout_us {
                hprintln!("  timed out after {} ms: {}", timeout_us / 1000, what);
                return Err(what);
            }
        }
    }

    /// Runs for `us` microseconds.
    async fn run_for(&mut self, us: u32) -> Res {
        let start = self.now;
        while self.now.wrapping_sub(start) < us {
            self.step().await?;
        }
        Ok(())
    }

    /// Sends a command answered by RESULT and returns the result.
    async fn command(&mut self, what: &'static str, msg: &ConfigMessage<'_>) -> Res<CommandResult> {
        self.m.seen.result = None;
        let node = self.m.node;
        let t = self.m.send(node, msg)?;
        self.until(
            what,
            500_000,
            |m, _| matches!(m.seen.result, Some((tt, _)) if tt == t),
        )
        .await?;
        self.m.seen.result.map(|(_, r)| r).ok_or(what)
    }

    /// A command that must be ACKed.
    async fn ack(&mut self, what: &'static str, msg: &ConfigMessage<'_>) -> Res {
        let r = self.command(what, msg).await?;
        if !r.is_ack() {
            hprintln!("  NAK {:?} (detail {}) for {}", r.code, r.detail, what);
            return Err(what);
        }
        Ok(())
    }

    fn ms(&self) -> u32 {
        self.now / 1000
    }
}

/// Runs the self-test against the booted node of the polling firmware, the main loop
/// driven from here. (Unused by the async binary, which includes this module too.)
///
/// Not inlined: the script's state (the pinned future) lives in this frame, not in
/// `main`'s, so the boot stack figure `main` prints before calling it is boot's.
#[allow(dead_code)]
#[inline(never)]
pub fn run(
    fw: &mut MotorDriver,
    inbox: MailboxConsumer<'static, MAILBOX_SLOTS>,
    virtual_clock: bool,
) -> Res {
    let clock = if virtual_clock {
        "virtual (SysTick does not run): 50 us per loop"
    } else {
        "SysTick, 25 MHz core clock (QEMU: host time)"
    };
    let polling = Polling {
        fw,
        inbox,
        tx: TxMailbox,
    };
    let script = core::pin::pin!(script(polling, "self-test", clock));
    // Nothing in the polling bench ever waits: the script completes in this first poll,
    // and the loop is only there because `poll` says nothing of the sort.
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    let mut script = script;
    loop {
        if let core::task::Poll::Ready(r) = Future::poll(script.as_mut(), &mut cx) {
            return r;
        }
    }
}

/// The self-test script against a booted node: `name` is what the first line calls the
/// test, `clock` what drives the node's time.
pub async fn script<F: Firmware>(f: F, name: &str, clock: &str) -> Res {
    hprintln!(
        "fcan firmware {}: eight-motor node on MPS2-AN386 (Cortex-M4F)",
        name
    );
    hprintln!("  clock: {}", clock);
    hprintln!(
        "  RAM: MotorDriver {} B = gen::Node {} B (runtime Buffers {} B) + application {} B",
        core::mem::size_of::<MotorDriver>(),
        core::mem::size_of::<gen::Node>(),
        core::mem::size_of::<gen::Buffers>(),
        core::mem::size_of::<MotorDriver>() - core::mem::size_of::<gen::Node>()
    );
    let (node, boot_id) = {
        let fw = f.driver();
        (fw.node.node_id(), fw.node.boot_id())
    };
    let mut b = Bench {
        f,
        m: Master::new(node),
        now: 0,
        steps: 0,
    };
    b.step().await?;

    // 1. ANNOUNCE after the listen window.
    b.until("ANNOUNCE", 2_000_000, |m, _| m.seen.announce.is_some())
        .await?;
    let a = b.m.seen.announce.ok_or("ANNOUNCE")?;
    hprintln!(
        "[{:5} ms] ANNOUNCE from node {}: protocol {}, {:?}, boot_id {:#010x}, blob {} B, hash {}, {} motors wired",
        a.at / 1000, node.get(), a.protocol, a.state, a.boot_id, a.blob_len, a.hash, a.wired
    );
    if a.protocol != fcan_runtime_nostd::PROTOCOL_VERSION
        || a.state != NodeState::Unprovisioned
        || a.boot_id != boot_id
        || a.arrays != 1
        || a.wired != 8
        || a.caps & caps::FD == 0
        || a.at < 300_000
    {
        return Err("ANNOUNCE contents (or it came inside the 300 ms listen window)");
    }

    // 2. Schema download, checked against the announced hash.
    let len = a.blob_len as usize;
    if len > BLOB_MAX {
        return Err("blob larger than the self-test buffer");
    }
    let mut offset = 0usize;
    let mut reads = 0;
    while offset < len {
        b.m.seen.chunk = None;
        let rd = ConfigMessage::SchemaRead(SchemaRead {
            offset: offset as u32,
            len: CHUNK,
        });
        b.m.send(node, &rd)?;
        let want = offset as u32;
        b.until(
            "SCHEMA_DATA",
            500_000,
            |m, _| matches!(m.seen.chunk, Some((o, _)) if o == want),
        )
        .await?;
        let (_, n) = b.m.seen.chunk.ok_or("SCHEMA_DATA")?;
        if n == 0 {
            return Err("empty SCHEMA_DATA before the end of the blob");
        }
        offset += n;
        reads += 1;
    }
    let digest = SchemaDigest::of(&b.m.seen.blob[..len]);
    hprintln!(
        "[{:5} ms] schema: {} B in {} SCHEMA_READs, sha256 {}",
        b.ms(),
        len,
        reads,
        digest
    );
    if !digest.matches(a.hash) || digest.0 != gen::SCHEMA_SHA256 {
        return Err("downloaded blob does not match the announced hash");
    }
    hprintln!("           hash prefix matches ANNOUNCE");

    // 3. Acknowledge (Classical CAN).
    let ack = ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id,
        session: SESSION,
        mode: BusMode::Classic,
    });
    b.m.seen.heartbeat = None;
    b.m.send(node, &ack)?;
    b.until(
        "PROVISIONED heartbeat",
        500_000,
        |m, _| matches!(m.seen.heartbeat, Some(h) if h.state == NodeState::Provisioned),
    )
    .await?;
    hprintln!(
        "[{:5} ms] ANNOUNCE_ACK (Classic) -> heartbeat: Provisioned",
        b.ms()
    );

    // 4. The frame plan: motor0 target in, motor0 feedback out (2-part group).
    let target_entry = [CopyEntry {
        block: 0,
        topic: motor::TOPIC_TARGET,
        src_offset: 0,
        len: motor::Target::SIZE as u8,
        dst_offset: 0,
    }];
    let fb0 = [CopyEntry {
        block: 0,
        topic: motor::TOPIC_FEEDBACK,
        src_offset: 0,
        len: PART as u8,
        dst_offset: 1,
    }];
    let fb1 = [CopyEntry {
        block: 0,
        topic: motor::TOPIC_FEEDBACK,
        src_offset: PART as u16,
        len: (motor::Feedback::SIZE - PART) as u8,
        dst_offset: 1,
    }];
    let frames: [(FrameHeader, &[CopyEntry]); 3] = [
        (
            FrameHeader {
                index: 0,
                std_id: TARGET_ID,
                dir: DataDirection::M2s,
                sequenced: false,
                masked: false,
                len: motor::Target::SIZE as u8,
                group_parts: 1,
                group_index: 0,
                period_us: 0,
            },
            &target_entry,
        ),
        (
            FrameHeader {
                index: 1,
                std_id: FEEDBACK_ID0,
                dir: DataDirection::S2m,
                sequenced: true,
                masked: false,
                len: 1 + PART as u8,
                group_parts: 2,
                group_index: 0,
                period_us: 5_000,
            },
            &fb0,
        ),
        (
            FrameHeader {
                index: 2,
                std_id: FEEDBACK_ID1,
                dir: DataDirection::S2m,
                sequenced: true,
                masked: false,
                len: 1 + (motor::Feedback::SIZE - PART) as u8,
                group_parts: 2,
                group_index: 1,
                period_us: 5_000,
            },
            &fb1,
        ),
    ];
    for (header, entries) in frames {
        let fd = ConfigMessage::FrameDefine(FrameDefine {
            header,
            entries: Entries::List(entries),
        });
        b.ack("FRAME_DEFINE", &fd).await?;
    }
    hprintln!(
        "[{:5} ms] FRAME_DEFINE x3 ACKed: 0x100 motor0/target (m2s), 0x101+0x102 motor0/feedback (s2m group, 5 ms)",
        b.ms()
    );

    // 5. Velocity loop gains; a NaN must be refused by the node.
    let nan = f32::NAN.to_le_bytes();
    let r = b
        .command(
            "PARAM_SET NaN",
            &ConfigMessage::ParamSet(ParamSet {
                block: 0,
                param: motor::PARAM_VELOCITY_KP.index(),
                commit: false,
                value: &nan,
            }),
        )
        .await?;
    if r.code != ResultCode::NotFinite {
        hprintln!("  PARAM_SET NaN answered {:?}", r.code);
        return Err("NaN parameter not refused");
    }
    let kp = 0.05f32.to_le_bytes();
    let ki = 1.0f32.to_le_bytes();
    b.ack(
        "PARAM_SET velocity/kp",
        &ConfigMessage::ParamSet(ParamSet {
            block: 0,
            param: motor::PARAM_VELOCITY_KP.index(),
            commit: false,
            value: &kp,
        }),
    )
    .await?;
    b.ack(
        "PARAM_SET velocity/ki",
        &ConfigMessage::ParamSet(ParamSet {
            block: 0,
            param: motor::PARAM_VELOCITY_KI.index(),
            commit: true,
            value: &ki,
        }),
    )
    .await?;
    hprintln!(
        "[{:5} ms] PARAM_SET motor0 velocity/kp = NaN -> NAK NotFinite; kp = 0.05, ki = 1.0 -> ACK",
        b.ms()
    );

    // 6. START, heartbeats on.
    start(&mut b).await?;

    // 7. Velocity target; feedback must show the motor spinning up.
    b.m.target = Some(motor::Target {
        r#type: mode::VELOCITY,
        value: 10.0,
    });
    let count0 = b.m.seen.feedback_count;
    let mut first: Option<f32> = None;
    let mut last = 0.0f32;
    for _ in 0..10 {
        b.run_for(100_000).await?;
        let Some((_, fb)) = b.m.seen.feedback else {
            return Err("no feedback");
        };
        if !fb.ready {
            return Err("feedback not ready while running");
        }
        first.get_or_insert(fb.velocity);
        last = fb.velocity;
        hprintln!(
            "[{:5} ms]   feedback: ready {}, velocity {:6.2} rev/s, position {:7.3} rev, current {:6.3} A",
            b.ms(),
            fb.ready,
            fb.velocity,
            fb.position,
            fb.current
        );
    }
    let frames = b.m.seen.feedback_count - count0;
    let first = first.unwrap_or(0.0);
    hprintln!(
        "[{:5} ms] velocity target 10 rev/s: {} feedback groups in 1 s, velocity {:.2} -> {:.2}",
        b.ms(),
        frames,
        first,
        last
    );
    if frames < 50 || last < 8.0 || last <= first {
        return Err("feedback did not show the velocity rising to the target");
    }

    // 8. Master lost: heartbeats stop, targets keep coming.
    b.m.heartbeats = false;
    // The node's watchdog runs from the last heartbeat it heard, up to a heartbeat period
    // before this point.
    let stopped_at = b.m.last_heartbeat;
    b.m.seen.announce = None;
    b.until("master-lost: SUSPENDED announce", 2_000_000, |m, fw| {
        fw.app.events.master_lost == 1
            && matches!(m.seen.announce, Some(a) if a.state == NodeState::Suspended)
    })
    .await?;
    let lost_after = b.now.wrapping_sub(stopped_at) / 1000;
    let v_lost = b.f.driver().axis(0).map(|a| a.velocity).unwrap_or(f32::NAN);
    hprintln!(
        "[{:5} ms] heartbeats stopped: Event::MasterLost {} ms after the last one (timeout {} ms), node announces Suspended",
        b.ms(),
        lost_after,
        MASTER_TIMEOUT_MS
    );
    if lost_after < MASTER_TIMEOUT_MS as u32 - 10 {
        return Err("master lost reported before its timeout");
    }
    let count_lost = b.m.seen.feedback_count;
    b.run_for(300_000).await?;
    let axis = b.f.driver().axis(0).ok_or("axis 0")?;
    hprintln!(
        "[{:5} ms]   motor0 (application): duty {:.2}, velocity {:.2} -> {:.2} rev/s; feedback frames since: {}",
        b.ms(),
        axis.duty,
        v_lost,
        axis.velocity,
        b.m.seen.feedback_count - count_lost
    );
    if axis.duty != 0.0 || axis.velocity.abs() > 1.0 || axis.velocity.abs() >= v_lost.abs() {
        return Err("motor not stopped after master loss");
    }
    if b.m.seen.feedback_count != count_lost {
        return Err("suspended node kept sending data");
    }

    // 9. The master comes back: acknowledge again, START (plan kept), feedback resumes.
    b.m.seen.heartbeat = None;
    b.m.send(node, &ack)?;
    b.until(
        "PROVISIONED heartbeat after re-ack",
        500_000,
        |m, _| matches!(m.seen.heartbeat, Some(h) if h.state == NodeState::Provisioned),
    )
    .await?;
    start(&mut b).await?;
    let count_back = b.m.seen.feedback_count;
    b.run_for(500_000).await?;
    let Some((_, fb)) = b.m.seen.feedback else {
        return Err("no feedback after restart");
    };
    hprintln!(
        "[{:5} ms] re-acknowledged and restarted: {} feedback groups in 0.5 s, ready {}, velocity {:.2}",
        b.ms(),
        b.m.seen.feedback_count - count_back,
        fb.ready,
        fb.velocity
    );
    if !fb.ready || fb.velocity < 5.0 || b.m.seen.feedback_count == count_back {
        return Err("node did not resume after the master came back");
    }

    // 10. Firmware update over the bus.
    #[cfg(feature = "update")]
    update(&mut b, node).await?;

    let c = b.f.driver().node.counters();
    hprintln!(
        "  node counters: rx_handled {}, rx_malformed {}, rx_ignored {}, rx_bad_state {}, reassembly_dropped {}, tx_frames {}, tx_refused {}, naks {}, master_lost {}",
        c.rx_handled, c.rx_malformed, c.rx_ignored, c.rx_bad_state, c.reassembly_dropped,
        c.tx_frames, c.tx_refused, c.naks_sent, c.master_lost
    );
    hprintln!(
        "  master: {} announces, {} feedback groups, {} group drops, {} unexpected frames; driver: {} invalid slots; receive interrupt: {} frames refused by a full mailbox; {} loop iterations",
        b.m.seen.announces,
        b.m.seen.feedback_count,
        b.m.seen.group_drops,
        b.m.seen.unexpected,
        mailbox::rx_invalid(),
        mailbox::mailbox_dropped(),
        b.steps
    );
    if c.rx_malformed != 0
        || c.reassembly_dropped != 0
        || b.m.seen.group_drops != 0
        || b.m.seen.unexpected != 0
        || mailbox::rx_invalid() != 0
        || mailbox::mailbox_dropped() != 0
    {
        return Err("unexpected drops");
    }
    let (used, complete) = stack_used();
    hprintln!(
        "  stack high-water mark: {}{} B (measured by painting)",
        if complete { "" } else { ">= " },
        used
    );
    Ok(())
}

/// Bytes of the image the self-test writes.
#[cfg(feature = "update")]
const IMAGE: usize = 2048;
/// DATA bytes per chunk: fits the self-test master's send buffer with the 7-byte header.
#[cfg(feature = "update")]
const UPDATE_CHUNK: usize = 48;

/// Sends one UPDATE request and runs until the node answers it (same transfer id).
#[cfg(feature = "update")]
async fn ask_update<F: Firmware>(
    b: &mut Bench<F>,
    node: NodeId,
    what: &'static str,
    req: UpdateRequest<'_>,
) -> Res<UpdateSeen> {
    b.m.seen.update = None;
    let t = b.m.send(node, &ConfigMessage::UpdateRequest(req))?;
    b.until(
        what,
        200_000,
        |m, _| matches!(m.seen.update, Some((x, _)) if x == t),
    )
    .await?;
    b.m.seen.update.map(|(_, s)| s).ok_or(what)
}

/// Step 10: the update, as the PC master's `UpdateSession` does it (one chunk at a time).
#[cfg(feature = "update")]
async fn update<F: Firmware>(b: &mut Bench<F>, node: NodeId) -> Res {
    use crate::staging;
    let mut image = [0u8; IMAGE];
    for (i, x) in image.iter_mut().enumerate() {
        *x = (i as u32).wrapping_mul(31).wrapping_add(7) as u8;
    }
    let sha = SchemaDigest::of(&image).0;
    let offer = UpdateOffer {
        size: IMAGE as u32,
        image: sha,
        schema: gen::SCHEMA_SHA256,
        node: gen::NODE_NAME,
        version: "1.1.0",
    };
    // Motors driven by fresh targets: the application refuses.
    let r = ask_update(
        b,
        node,
        "UPDATE STATUS to an offer while driving",
        UpdateRequest::Offer(offer),
    )
    .await?;
    if !matches!(
        r,
        UpdateSeen::Status {
            reason: UpdateReason::NotSafe,
            ..
        }
    ) {
        hprintln!("  answer: {:?}", r);
        return Err("an offer while a motor is driven was not refused as not safe");
    }
    hprintln!(
        "[{:5} ms] update offered while motor0 is driven: refused (not safe)",
        b.ms()
    );

    // The master goes away (targets and heartbeats stop): the node suspends and its
    // motors stop; then the offer is taken.
    b.m.target = None;
    b.m.heartbeats = false;
    let lost = b.f.driver().app.events.master_lost;
    b.until("master lost before the update", 2_000_000, |_, fw| {
        fw.app.events.master_lost == lost + 1
    })
    .await?;
    b.run_for(20_000).await?;
    let r = ask_update(
        b,
        node,
        "UPDATE STATUS to the offer",
        UpdateRequest::Offer(offer),
    )
    .await?;
    let UpdateSeen::Status {
        phase: UpdatePhase::Receiving,
        reason: UpdateReason::None,
        offset: 0,
        max_chunk,
    } = r
    else {
        hprintln!("  answer: {:?}", r);
        return Err("the offer was not accepted with the motors stopped");
    };
    if (max_chunk as usize) < UPDATE_CHUNK {
        return Err("the node takes smaller chunks than the self-test sends");
    }
    let t0 = b.now;
    let mut at = 0;
    while at < IMAGE {
        let end = (at + UPDATE_CHUNK).min(IMAGE);
        let req = UpdateRequest::Data {
            offset: at as u32,
            data: &image[at..end],
        };
        match ask_update(b, node, "UPDATE PROGRESS", req).await? {
            UpdateSeen::Progress { next } if next as usize == end => at = end,
            other => {
                hprintln!("  at {}: {:?}", at, other);
                return Err("a chunk was not stored");
            }
        }
    }
    let r = ask_update(
        b,
        node,
        "UPDATE STATUS to COMMIT",
        UpdateRequest::Commit { image: sha },
    )
    .await?;
    if !matches!(
        r,
        UpdateSeen::Status {
            phase: UpdatePhase::Verifying | UpdatePhase::Verified,
            ..
        }
    ) {
        hprintln!("  answer: {:?}", r);
        return Err("COMMIT was not taken");
    }
    // The node reads the image back in steps across its polls, then answers Verified
    // (unsolicited, under the COMMIT's transfer id) and asks to reboot.
    b.until("UPDATE Verified", 2_000_000, |m, _| {
        matches!(
            m.seen.update,
            Some((
                _,
                UpdateSeen::Status {
                    phase: UpdatePhase::Verified,
                    ..
                }
            ))
        )
    })
    .await?;
    b.run_for(10_000).await?;
    let record = staging::record().ok_or("no boot record after Verified")?;
    let mut slot = [0u8; IMAGE];
    if !staging::read_slot(0, &mut slot) {
        return Err("the spare slot cannot be read");
    }
    hprintln!(
        "[{:5} ms] update: {} B in {} chunks of {} B in {} ms, verified by the node; boot record {} B, SHA-256 {:02x}{:02x}{:02x}{:02x}...; reboot asked {} time(s)",
        b.ms(),
        IMAGE,
        IMAGE.div_ceil(UPDATE_CHUNK),
        UPDATE_CHUNK,
        b.now.wrapping_sub(t0) / 1000,
        record.size,
        record.sha256[0],
        record.sha256[1],
        record.sha256[2],
        record.sha256[3],
        staging::reboots()
    );
    if record.size as usize != IMAGE
        || record.sha256 != sha
        || SchemaDigest::of(&slot).0 != sha
        || slot != image
        || staging::reboots() != 1
    {
        return Err("the staged image, its boot record or the reboot request is wrong");
    }
    Ok(())
}

/// Heartbeats on, START with the plan's 3 frames, ACK, and `Event::Started` seen.
async fn start<F: Firmware>(b: &mut Bench<F>) -> Res {
    b.m.heartbeats = true;
    b.m.next_heartbeat = b.now;
    let started = b.f.driver().app.events.started;
    b.ack(
        "START",
        &ConfigMessage::Start(Start {
            frame_count: 3,
            master_timeout_ms: MASTER_TIMEOUT_MS,
        }),
    )
    .await?;
    b.until("Event::Started", 100_000, |_, fw| {
        fw.app.events.started == started + 1
    })
    .await?;
    hprintln!(
        "[{:5} ms] START (master timeout {} ms) ACKed: node {:?}, master heartbeats every 100 ms",
        b.ms(),
        MASTER_TIMEOUT_MS,
        b.f.driver().node.state()
    );
    Ok(())
}

// ---- stack high-water mark ---------------------------------------------------------

const PAINT: u32 = 0xDEAD_BEEF;
/// How far below the stack pointer at entry the stack is painted.
const PAINT_DEPTH: u32 = 64 * 1024;
/// Left alone just below the stack pointer (this function's own frame).
const PAINT_GAP: u32 = 256;

extern "C" {
    /// Top of the stack (cortex-m-rt).
    static _stack_start: u32;
    /// End of static RAM (cortex-m-rt): nothing lives between it and the stack.
    static __sheap: u32;
}

static mut PAINT_LOW: u32 = 0;
static mut PAINT_HIGH: u32 = 0;

fn paint_range() -> (u32, u32) {
    let sp = cortex_m::register::msp::read();
    // Only the address of the linker symbol is taken, never its contents.
    let heap = core::ptr::addr_of!(__sheap) as u32;
    let low = sp.saturating_sub(PAINT_DEPTH).max(heap);
    (low.next_multiple_of(4), sp - PAINT_GAP)
}

/// Fills the unused stack below the current stack pointer with a pattern, so that
/// [`stack_used`] can find the deepest point the stack reached. Called first in `main`.
#[inline(never)]
pub fn paint_stack() {
    let (low, high) = paint_range();
    let mut a = low;
    while a < high {
        // SAFETY: `low..high` lies between the end of static RAM (`__sheap`; there is no
        // heap) and `PAINT_GAP` bytes below the current stack pointer: memory that no
        // Rust object occupies, which only later stack frames will use; word aligned.
        unsafe { core::ptr::write_volatile(a as *mut u32, PAINT) };
        a += 4;
    }
    // SAFETY: single-threaded; plain integers.
    unsafe {
        *core::ptr::addr_of_mut!(PAINT_LOW) = low;
        *core::ptr::addr_of_mut!(PAINT_HIGH) = high;
    }
}

/// Bytes of stack used so far (top of stack down to the deepest overwritten word), and
/// whether that lies inside the painted range (else the figure is a lower bound).
pub fn stack_used() -> (u32, bool) {
    // SAFETY: single-threaded; plain integers written once by `paint_stack`.
    let (low, high) = unsafe {
        (
            *core::ptr::addr_of!(PAINT_LOW),
            *core::ptr::addr_of!(PAINT_HIGH),
        )
    };
    // Only the address of the linker symbol is taken.
    let top = core::ptr::addr_of!(_stack_start) as u32;
    let mut a = low;
    // SAFETY: reads words of the range painted above, which is RAM below the live stack
    // frames or stack that was used and released; any value is a valid u32.
    while a < high && unsafe { core::ptr::read_volatile(a as *const u32) } == PAINT {
        a += 4;
    }
    (top - a, a > low)
}
