//! The master's update session (`fcan_master::update`) against the node runtime's own
//! update state machine and its reference A/B flash, frame by frame on a virtual clock:
//! the image arrives, is verified and boots; losses are repaired; a new master resumes;
//! refusals and silence end the session; DATA keeps to its share of the bus. Scripted
//! nodes that misbehave (store nothing, never take the COMMIT, verify for ever, go quiet
//! while verifying) end the session within its bounds.

use std::collections::HashMap;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{
    BusMode, ConfigMessage, UpdatePhase, UpdateReason, UpdateReply, UpdateStatus,
};
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_master::update::{
    verify_budget_us, Failure, Outgoing, SessionState, UpdateConfig, UpdateImage, UpdateSession,
};
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::update::SimFlash;
use fcan_runtime_nostd::*;
use fcan_transport::sim::BitRates;

static BLOB: [u8; 12] = *b"\x12\x09update_me\x00";
static DESC: NodeDesc = NodeDesc {
    blob: &BLOB,
    hash: HashPrefix([0; 8]),
    limits: LimitsDesc {
        max_frames: 1,
        max_copy_entries: 1,
        service_buffer: 16,
        service_reassembly: 0,
    },
    types: &[],
    arrays: &[],
    blocks: &[],
    topic_bytes: 0,
    stage_bytes: 0,
    param_bytes: 0,
    topic_slots: 0,
    max_request: 0,
    max_response: 0,
};
type B = Buffers<0, 0, 0, 0, 0, 1, 1, 0, 16>;
const SLOT: usize = 64 * 1024;
const NODE: u8 = 3;

struct App(Box<SimFlash<SLOT>>);
impl Dispatch for App {
    fn service(&mut self, _: &mut Context<'_>, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome {
        ServiceOutcome::Failed
    }
    fn params_changed(&mut self, _: &mut Context<'_>, _: u8, _: u32) {}
    fn event(&mut self, _: Event) {}
    fn update(&mut self) -> Option<&mut dyn Update> {
        Some(&mut *self.0)
    }
}

#[derive(Default)]
struct Tx(Vec<Frame>);
impl Transmit for Tx {
    fn transmit(&mut self, f: &Frame) -> Result<(), TxRefused> {
        self.0.push(*f);
        Ok(())
    }
}

/// The node, its flash, and the master's shell around a session: transfer ids, the
/// DATA offsets they carry, reassembly of replies, and a loss pattern on the way to the
/// node.
struct World {
    node: Node<B>,
    app: App,
    mtu: Mtu,
    now_us: u64,
    transfer: u8,
    offsets: HashMap<u8, u32>,
    pool: ReassemblyPool<2, 8192>,
    /// Drop every n-th master→node frame (0: none).
    drop_every: usize,
    /// Drop the frame with this number (counted from 1), once.
    drop_one: usize,
    /// The largest DATA chunk sent, bytes.
    max_chunk: u16,
    /// Deliver nothing to the node at all.
    deaf: bool,
    frames_to_node: usize,
    /// Bus time of the DATA frames the master sent, µs.
    data_wire_us: f64,
    rates: BitRates,
}

impl World {
    fn new(mtu: Mtu) -> World {
        let flash = Box::new(SimFlash::new(b"old", "1.0"));
        let config = NodeConfig {
            node_id: NodeId::new(NODE).unwrap(),
            boot_id: 0xB007,
            counts: &[],
            controller: Controller::Fd,
        };
        let mut w = World {
            node: Node::new(&DESC, B::new(), config).unwrap(),
            app: App(flash),
            mtu,
            now_us: 0,
            transfer: 0,
            offsets: HashMap::new(),
            pool: ReassemblyPool::new(),
            drop_every: 0,
            drop_one: 0,
            max_chunk: 0,
            deaf: false,
            frames_to_node: 0,
            data_wire_us: 0.0,
            rates: BitRates::default(),
        };
        // Past the listen window; acknowledged in the link's mode.
        w.advance(500_000, None);
        let mode = if mtu == Mtu::Fd {
            BusMode::FdBrs
        } else {
            BusMode::Classic
        };
        let ack = ConfigMessage::AnnounceAck(fcan_core::msg::AnnounceAck {
            boot_id: 0xB007,
            session: 1,
            mode,
        });
        w.send(&ack, None);
        w.advance(10_000, None);
        w
    }

    fn send(&mut self, msg: &ConfigMessage<'_>, data_offset: Option<u32>) {
        self.transfer = self.transfer.wrapping_add(1);
        if let Some(o) = data_offset {
            self.offsets.insert(self.transfer, o);
        }
        let mut buf = vec![0u8; 9000];
        let n = msg.encode(&mut buf).unwrap();
        let id = ConfigId::single(
            msg.opcode(),
            Direction::ToNode,
            NodeId::new(NODE).unwrap(),
            self.transfer,
        );
        for f in Segmenter::new(id, self.mtu, &buf[..n], &[]).unwrap() {
            if data_offset.is_some() {
                self.data_wire_us += self.rates.frame_time(&f).as_secs_f64() * 1e6;
            }
            self.frames_to_node += 1;
            if self.deaf
                || self.frames_to_node == self.drop_one
                || (self.drop_every > 0 && self.frames_to_node % self.drop_every == 0)
            {
                continue;
            }
            self.node.receive(&f, self.now_us as u32);
        }
    }

    /// Runs the node (and the session, if any) for `us` in 1 ms steps.
    fn advance(&mut self, us: u64, mut s: Option<&mut UpdateSession>) {
        let end = self.now_us + us;
        while self.now_us < end {
            self.now_us += 1_000;
            self.step(s.as_deref_mut());
        }
    }

    fn step(&mut self, s: Option<&mut UpdateSession>) {
        let now = self.now_us;
        if let Some(s) = s {
            for out in s.poll(now) {
                let data = match out {
                    Outgoing::Data { offset, len } => {
                        self.max_chunk = self.max_chunk.max(len);
                        Some(offset)
                    }
                    _ => None,
                };
                let msg = ConfigMessage::UpdateRequest(out.request(s));
                self.send(&msg, data);
            }
            let mut tx = Tx::default();
            self.node.poll(now as u32, &mut tx, &mut self.app);
            for f in tx.0 {
                let id = ConfigId::from_can_id(f.id()).unwrap();
                let Ok(Some(p)) = self.pool.push(id, f.data(), now as u32) else {
                    continue;
                };
                if id.opcode != Opcode::Update {
                    continue;
                }
                let p = p.to_vec();
                let Ok(ConfigMessage::UpdateReply(r)) =
                    ConfigMessage::decode(Opcode::Update, Direction::ToMaster, &p)
                else {
                    panic!("the node sent a bad UPDATE reply");
                };
                let answered = match r {
                    UpdateReply::Progress { .. } => self.offsets.get(&id.transfer).copied(),
                    _ => None,
                };
                s.on_reply(&r, answered, now);
            }
        } else {
            let mut tx = Tx::default();
            self.node.poll(now as u32, &mut tx, &mut self.app);
        }
    }

    /// Runs until the session ends or `limit_us` passes.
    fn run(&mut self, s: &mut UpdateSession, limit_us: u64) -> SessionState {
        let end = self.now_us + limit_us;
        while self.now_us < end {
            self.advance(1_000, Some(s));
            if matches!(s.state(), SessionState::Done | SessionState::Failed(_)) {
                break;
            }
        }
        s.state()
    }
}

fn image(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 + i / 256) as u8).collect()
}

fn session(img: &[u8], node: &str, mtu: Mtu) -> UpdateSession {
    UpdateSession::new(
        UpdateImage::new(img.to_vec(), [9; 32], node, "2.0"),
        UpdateConfig::default(),
        mtu,
    )
}

#[test]
fn an_image_is_written_verified_and_booted_on_fd_and_classic() {
    for mtu in [Mtu::Fd, Mtu::Classic] {
        let img = image(20_000);
        let mut w = World::new(mtu);
        let mut s = session(&img, "update_me", mtu);
        assert_eq!(w.run(&mut s, 60_000_000), SessionState::Done, "{mtu:?}");
        assert_eq!(w.app.0.boot(), Some(&img[..]), "{mtu:?}");
        let p = s.progress();
        assert_eq!((p.acked, p.size, p.resent), (20_000, 20_000, 0), "{mtu:?}");
        assert!(p.rate > 0.0);
        w.advance(10_000, None);
        assert_eq!(w.app.0.reboots, 1);
    }
}

#[test]
fn lost_frames_are_sent_again_and_the_image_still_arrives() {
    let img = image(10_000);
    let mut w = World::new(Mtu::Fd);
    w.drop_every = 23;
    let mut s = session(&img, "update_me", Mtu::Fd);
    assert_eq!(w.run(&mut s, 120_000_000), SessionState::Done);
    assert_eq!(w.app.0.boot(), Some(&img[..]));
    assert!(s.progress().resent > 0, "losses cost resending");
}

/// One chunk lost with a window of chunks after it in flight: the node's answers to each
/// of those say the same gap, and the window is sent again once, not once per answer.
#[test]
fn one_lost_chunk_costs_one_window_at_most() {
    for mtu in [Mtu::Fd, Mtu::Classic] {
        let img = image(20_000);
        let mut w = World::new(mtu);
        let mut s = session(&img, "update_me", mtu);
        // Into the transfer, then the next frame to the node is lost.
        while s.progress().acked < 5_000 {
            w.advance(1_000, Some(&mut s));
        }
        w.drop_one = w.frames_to_node + 1;
        assert_eq!(w.run(&mut s, 60_000_000), SessionState::Done, "{mtu:?}");
        assert_eq!(w.app.0.boot(), Some(&img[..]), "{mtu:?}");
        let window = UpdateConfig::default().window as u64;
        let resent = s.progress().resent;
        assert!(resent > 0, "{mtu:?}: the loss cost nothing?");
        assert!(
            resent <= window * u64::from(w.max_chunk),
            "{mtu:?}: {resent} bytes sent again for one lost chunk (window {window} of {} B)",
            w.max_chunk
        );
    }
}

/// A scripted node: answers each request at once with what `answer` says (or nothing).
/// Runs the session until it ends or 20 minutes pass, polling every millisecond; returns
/// the requests it sent by kind (offers, data bytes, commits, queries) and when it ended.
fn scripted(
    s: &mut UpdateSession,
    mut answer: impl FnMut(&Outgoing) -> Option<UpdateReply<'static>>,
) -> ([u64; 4], u64) {
    let mut sent = [0u64; 4];
    let mut now = 0u64;
    while now < 1_200_000_000 && !matches!(s.state(), SessionState::Failed(_) | SessionState::Done)
    {
        now += 1_000;
        for out in s.poll(now) {
            let (k, n, answered) = match out {
                Outgoing::Offer => (0, 1, None),
                Outgoing::Data { offset, len } => (1, u64::from(len), Some(offset)),
                Outgoing::Commit => (2, 1, None),
                _ => (3, 1, None),
            };
            sent[k] += n;
            if let Some(r) = answer(&out) {
                s.on_reply(&r, answered, now);
            }
        }
    }
    (sent, now)
}

/// A scripted node that accepts the offer and stores every chunk in order; COMMIT and
/// QUERY it answers with `then(request, bytes stored)`.
fn storing(
    then: impl Fn(&Outgoing, u32) -> Option<UpdateReply<'static>>,
) -> impl FnMut(&Outgoing) -> Option<UpdateReply<'static>> {
    let mut stored = 0;
    move |out| match *out {
        Outgoing::Offer => Some(status(UpdatePhase::Receiving, 0)),
        Outgoing::Data { offset, len } => {
            if offset == stored {
                stored += u32::from(len);
            }
            Some(UpdateReply::Progress { next: stored })
        }
        _ => then(out, stored),
    }
}

fn status(phase: UpdatePhase, offset: u32) -> UpdateReply<'static> {
    UpdateReply::Status(UpdateStatus {
        phase,
        reason: UpdateReason::None,
        offset,
        max_chunk: 48,
        version: "1.0",
    })
}

/// A node that answers every chunk but never stores one (PROGRESS `next` stays 0) ends
/// the session after its retries: answers that acknowledge nothing are no progress.
#[test]
fn a_node_that_never_stores_a_byte_ends_the_session() {
    let img = image(2_000);
    let cfg = UpdateConfig::default();
    let mut s = session(&img, "update_me", Mtu::Fd);
    let (sent, _) = scripted(&mut s, |out| match out {
        Outgoing::Offer => Some(status(UpdatePhase::Receiving, 0)),
        Outgoing::Data { .. } => Some(UpdateReply::Progress { next: 0 }),
        other => panic!("{other:?} with nothing stored"),
    });
    assert_eq!(s.state(), SessionState::Failed(Failure::Silent));
    let most = u64::from(cfg.max_retries + 2) * img.len() as u64;
    assert!(
        sent[1] <= most,
        "{} bytes sent to a node that stores none",
        sent[1]
    );
}

/// Every byte stored, but each COMMIT is answered with a phase that says nothing of it
/// (Receiving, no reason): COMMIT is sent again only after a silence, and the session
/// gives up after its retries instead of drawing one answer after another.
#[test]
fn a_node_that_never_takes_the_commit_ends_the_session() {
    let img = image(2_000);
    let cfg = UpdateConfig::default();
    let mut s = session(&img, "update_me", Mtu::Fd);
    let (sent, took) = scripted(
        &mut s,
        storing(|_, stored| Some(status(UpdatePhase::Receiving, stored))),
    );
    assert_eq!(s.state(), SessionState::Failed(Failure::Silent));
    assert!(
        sent[2] <= u64::from(cfg.max_retries + 1),
        "{} COMMITs",
        sent[2]
    );
    assert!(took <= cfg.retry_us * u64::from(cfg.max_retries + 2) + 1_000_000);
}

/// A node that says "verifying" to every QUERY for ever: the session ends when the
/// budget for the image's size is spent, having queried at the configured period.
#[test]
fn a_node_that_verifies_for_ever_ends_the_session() {
    let img = image(2_000);
    let cfg = UpdateConfig::default();
    let mut s = session(&img, "update_me", Mtu::Fd);
    let (sent, took) = scripted(
        &mut s,
        storing(|_, stored| Some(status(UpdatePhase::Verifying, stored))),
    );
    assert_eq!(s.state(), SessionState::Failed(Failure::NotVerified));
    let budget = verify_budget_us(img.len());
    assert!(took >= budget && took <= budget + 2_000_000, "{took} µs");
    assert!(sent[3] <= budget / cfg.query_us + 2, "{} QUERYs", sent[3]);
}

/// A node that goes quiet while it verifies: unanswered QUERYs are silences, and the
/// session gives up after its retries, long before the verify budget.
#[test]
fn a_node_silent_while_verifying_ends_the_session() {
    let img = image(2_000);
    let cfg = UpdateConfig::default();
    let mut s = session(&img, "update_me", Mtu::Fd);
    let (sent, took) = scripted(
        &mut s,
        storing(|out, stored| match out {
            Outgoing::Commit => Some(status(UpdatePhase::Verifying, stored)),
            _ => None,
        }),
    );
    assert_eq!(s.state(), SessionState::Failed(Failure::Silent));
    assert!(
        sent[3] <= u64::from(cfg.max_retries + 1),
        "{} QUERYs",
        sent[3]
    );
    assert!(took < verify_budget_us(img.len()), "{took} µs");
}

#[test]
fn a_new_master_resumes_where_the_last_one_stopped() {
    let img = image(30_000);
    let mut w = World::new(Mtu::Fd);
    let mut first = session(&img, "update_me", Mtu::Fd);
    while first.progress().acked < 12_000 {
        w.advance(1_000, Some(&mut first));
        assert_eq!(first.state(), SessionState::Sending);
    }
    // The first master vanishes; its chunks in flight are lost with it.
    drop(first);
    w.advance(3_000_000, None);
    let mut second = session(&img, "update_me", Mtu::Fd);
    assert_eq!(w.run(&mut second, 60_000_000), SessionState::Done);
    assert_eq!(w.app.0.boot(), Some(&img[..]));
    // Resumed, not restarted: every byte written once.
    assert_eq!(w.app.0.written, img.len() as u64);
}

#[test]
fn a_refusal_ends_the_session_with_the_nodes_reason_and_writes_nothing() {
    let img = image(1000);
    let mut w = World::new(Mtu::Fd);
    let mut s = session(&img, "another_board", Mtu::Fd);
    assert_eq!(
        w.run(&mut s, 5_000_000),
        SessionState::Failed(Failure::Node(UpdateReason::WrongBoard))
    );
    assert_eq!(w.app.0.written, 0);
    assert_eq!(w.app.0.boot(), Some(&b"old"[..]));
}

#[test]
fn a_silent_node_fails_the_session_after_its_retries() {
    let img = image(1000);
    let mut w = World::new(Mtu::Fd);
    w.deaf = true;
    let cfg = UpdateConfig::default();
    let mut s = session(&img, "update_me", Mtu::Fd);
    let t0 = w.now_us;
    assert_eq!(
        w.run(&mut s, 60_000_000),
        SessionState::Failed(Failure::Silent)
    );
    let took = w.now_us - t0;
    let expect = cfg.retry_us * u64::from(cfg.max_retries + 1);
    assert!(took >= expect && took <= expect + cfg.retry_us, "{took} µs");
}

#[test]
fn data_keeps_to_its_share_of_the_bus() {
    for share in [0.1, 0.25, 0.5] {
        let img = image(40_000);
        let mut w = World::new(Mtu::Fd);
        let cfg = UpdateConfig {
            share,
            ..UpdateConfig::default()
        };
        let mut s = UpdateSession::new(
            UpdateImage::new(img.clone(), [9; 32], "update_me", "2"),
            cfg,
            Mtu::Fd,
        );
        // Time from the first DATA to the last acknowledgement.
        while s.state() != SessionState::Sending {
            w.advance(1_000, Some(&mut s));
            assert!(!matches!(s.state(), SessionState::Failed(_)));
        }
        let t0 = w.now_us;
        while s.progress().acked < img.len() as u64 {
            w.advance(1_000, Some(&mut s));
            assert_eq!(s.state(), SessionState::Sending);
        }
        let used = w.data_wire_us / (w.now_us - t0) as f64;
        assert!(used <= share * 1.05, "share {share}: used {used:.3}");
        assert!(used >= share * 0.6, "share {share}: used only {used:.3}");
    }
}

/// Image throughput on the model bus (exact frame bit times, 1 Mbit/s nominal, 5 Mbit/s
/// data, the node answering at once) for docs/performance.md.
#[test]
#[ignore = "figures for docs/performance.md: cargo test -p fcan-master --test update_session -- --ignored --nocapture"]
fn update_figures() {
    let img = image(60_000);
    for mtu in [Mtu::Fd, Mtu::Classic] {
        for share in [0.1, 0.25, 0.5, 1.0] {
            let mut w = World::new(mtu);
            let cfg = UpdateConfig {
                share,
                ..UpdateConfig::default()
            };
            let mut s = UpdateSession::new(
                UpdateImage::new(img.clone(), [9; 32], "update_me", "2"),
                cfg,
                mtu,
            );
            let t0 = w.now_us;
            assert_eq!(w.run(&mut s, 600_000_000), SessionState::Done);
            let secs = (w.now_us - t0) as f64 / 1e6;
            println!(
                "{mtu:?} share {share:>4}: 60000 B in {secs:6.2} s = {:7.1} KiB/s, DATA on the wire {:4.1} %",
                img.len() as f64 / secs / 1024.0,
                w.data_wire_us / (w.now_us - t0) as f64 * 100.0
            );
        }
    }
}
