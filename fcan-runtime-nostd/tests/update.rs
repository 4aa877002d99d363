//! Firmware update over the bus, the node's side (`docs/protocol.md` §3.14), driven as a
//! master would drive it: OFFER, DATA, COMMIT, ABORT and QUERY from a scripted master,
//! the image staged in the reference A/B flash ([`SimFlash`]), which is also what
//! survives a power cut.

mod common;

use common::*;
use fcan_core::id::Opcode;
use fcan_core::msg::update::Sha256;
use fcan_core::msg::*;
use fcan_runtime_nostd::update::{SimFlash, MAX_CHUNK, VERIFY_STEP};
use fcan_runtime_nostd::{FlashError, Update};
use sha2::Digest;
use std::cell::RefCell;
use std::rc::Rc;

const SLOT: usize = 8192;
const OLD: &[u8] = b"the firmware that runs now";

type Flash = SimFlash<SLOT>;

/// The flash, shared between the node's application and the test (which cuts power by
/// cloning it).
#[derive(Clone)]
struct Shared(Rc<RefCell<Flash>>, &'static str);

impl Update for Shared {
    fn capacity(&self) -> u32 {
        self.0.borrow().capacity()
    }
    fn version(&self) -> &str {
        self.1
    }
    fn offered(&mut self, o: &UpdateOffer<'_>, s: NodeState) -> Result<(), UpdateReason> {
        self.0.borrow_mut().offered(o, s)
    }
    fn begin(&mut self, size: u32) -> Result<(), FlashError> {
        self.0.borrow_mut().begin(size)
    }
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        self.0.borrow_mut().write(offset, data)
    }
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        self.0.borrow_mut().read(offset, buf)
    }
    fn mark_bootable(&mut self, size: u32, sha256: &[u8; 32]) -> Result<(), FlashError> {
        self.0.borrow_mut().mark_bootable(size, sha256)
    }
    fn reboot(&mut self) {
        self.0.borrow_mut().reboot()
    }
}

fn image(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn sha(b: &[u8]) -> Sha256 {
    sha2::Sha256::digest(b).into()
}

struct Up {
    rig: Rig,
    flash: Rc<RefCell<Flash>>,
}

/// A node acknowledged in `mode` with the reference flash as its update target.
fn up(mode: BusMode) -> Up {
    let mut rig = Rig::new(mode != BusMode::Classic);
    let flash = Rc::new(RefCell::new(Flash::new(OLD, "1.0.0")));
    rig.app.update = Some(Box::new(Shared(flash.clone(), "1.0.0")));
    rig.boot_and_ack(mode);
    Up { rig, flash }
}

const MODES: [BusMode; 2] = [BusMode::Classic, BusMode::FdBrs];

impl Up {
    fn request(&mut self, r: UpdateRequest<'_>) -> (u8, Vec<Msg>) {
        let t = self.rig.send(ConfigMessage::UpdateRequest(r));
        self.rig.poll();
        (t, self.rig.take())
    }

    /// Sends `r` and returns the one STATUS it gets, checking it echoes the transfer.
    fn status(&mut self, r: UpdateRequest<'_>) -> UpdateStatus<'static> {
        let (t, m) = self.request(r);
        assert_eq!(m.len(), 1, "one answer: {m:#?}");
        assert_eq!(m[0].id.opcode, Opcode::Update);
        assert_eq!(
            m[0].id.transfer, t,
            "STATUS echoes the request's transfer id"
        );
        status_of(&m[0])
    }

    fn offer(&mut self, img: &[u8], node: &str) -> UpdateStatus<'static> {
        self.status(UpdateRequest::Offer(UpdateOffer {
            size: img.len() as u32,
            image: sha(img),
            schema: [7; 32],
            node,
            version: "2.0.0",
        }))
    }

    /// Sends one DATA chunk and returns the PROGRESS `next`.
    fn data(&mut self, offset: u32, data: &[u8]) -> u32 {
        let (t, m) = self.request(UpdateRequest::Data { offset, data });
        assert_eq!(m.len(), 1, "one answer: {m:#?}");
        assert_eq!(m[0].id.transfer, t);
        match m[0].decode() {
            ConfigMessage::UpdateReply(UpdateReply::Progress { next }) => next,
            other => panic!("expected PROGRESS, got {other:?}"),
        }
    }

    /// Sends `img[from..]` in chunks of `chunk`, checking each PROGRESS.
    fn send_from(&mut self, img: &[u8], from: usize, chunk: usize) {
        let mut at = from;
        while at < img.len() {
            let end = (at + chunk).min(img.len());
            assert_eq!(self.data(at as u32, &img[at..end]), end as u32);
            at = end;
        }
    }

    fn commit(&mut self, img: &[u8]) -> UpdateStatus<'static> {
        self.status(UpdateRequest::Commit { image: sha(img) })
    }

    /// Polls until the node sends something unasked (the Verified STATUS), at most `n`
    /// polls; returns it with the number of polls it took.
    fn until_told(&mut self, n: usize) -> Option<(Msg, usize)> {
        for i in 1..=n {
            self.rig.advance(1_000);
            let m: Vec<Msg> = self
                .rig
                .take()
                .into_iter()
                .filter(|m| m.id.opcode == Opcode::Update)
                .collect();
            if let Some(m) = m.into_iter().next() {
                return Some((m, i));
            }
        }
        None
    }

    fn booted(&self) -> Option<Vec<u8>> {
        self.flash.borrow().boot().map(<[u8]>::to_vec)
    }
}

fn status_of(m: &Msg) -> UpdateStatus<'static> {
    match m.decode() {
        ConfigMessage::UpdateReply(UpdateReply::Status(s)) => UpdateStatus {
            version: if s.version == "1.0.0" { "1.0.0" } else { "?" },
            ..s
        },
        other => panic!("expected STATUS, got {other:?}"),
    }
}

fn announced_caps(with_flash: bool) -> u8 {
    let mut rig = Rig::new(true);
    if with_flash {
        let flash = Rc::new(RefCell::new(Flash::new(OLD, "1.0.0")));
        rig.app.update = Some(Box::new(Shared(flash, "1.0.0")));
    }
    rig.poll();
    rig.advance(listen_end() + 10_000);
    rig.take()
        .into_iter()
        .find_map(|m| match m.decode() {
            ConfigMessage::Announce(a) => Some(a.caps),
            _ => None,
        })
        .expect("an ANNOUNCE")
}

#[test]
fn a_node_with_a_staging_area_announces_that_it_takes_updates() {
    assert_eq!(announced_caps(true) & caps::UPDATE, caps::UPDATE);
    // Built with the feature but given no staging area: no such claim.
    assert_eq!(announced_caps(false) & caps::UPDATE, 0);
}

#[test]
fn an_image_goes_in_chunk_by_chunk_is_verified_then_booted() {
    for mode in MODES {
        let mut u = up(mode);
        let img = image(3000, 1);
        let s = u.offer(&img, NODE_NAME);
        assert_eq!(
            (s.phase, s.reason, s.offset),
            (UpdatePhase::Receiving, UpdateReason::None, 0),
            "{mode:?}"
        );
        assert_eq!(s.max_chunk, 256, "the flash's chunk");
        assert_eq!(s.version, "1.0.0", "the running firmware's version");
        u.send_from(&img, 0, 256);
        let s = u.commit(&img);
        assert_eq!(s.phase, UpdatePhase::Verifying);
        assert_eq!(
            u.booted().as_deref(),
            Some(OLD),
            "nothing boots the new image yet"
        );
        // A master's late retries while the node verifies change nothing.
        let s = u.status(UpdateRequest::Data {
            offset: 0,
            data: &img[..256],
        });
        assert_eq!(
            (s.phase, s.reason),
            (UpdatePhase::Verifying, UpdateReason::None)
        );
        let s = u.commit(&img);
        assert_eq!(
            (s.phase, s.reason),
            (UpdatePhase::Verifying, UpdateReason::None)
        );

        let (told, _) = u.until_told(100).expect("the node says it verified");
        let s = status_of(&told);
        assert_eq!(
            (s.phase, s.reason),
            (UpdatePhase::Verified, UpdateReason::None)
        );
        assert_eq!(u.booted().as_deref(), Some(&img[..]), "{mode:?}");
        // The reboot waits for the answer to be on the bus, then happens once.
        u.rig.advance(5_000);
        assert_eq!(u.flash.borrow().reboots, 1);
    }
}

#[test]
fn verification_is_spread_over_polls() {
    let mut u = up(BusMode::FdBrs);
    let img = image(SLOT, 2);
    u.offer(&img, NODE_NAME);
    u.send_from(&img, 0, 256);
    u.commit(&img);
    // One read-back step of VERIFY_STEP bytes per poll, never the whole image at once:
    // the COMMIT's two polls made two steps when the QUERY is answered (the QUERY's own
    // polls make two more).
    let s = u.status(UpdateRequest::Query);
    assert_eq!(
        (s.phase, s.offset),
        (UpdatePhase::Verifying, 2 * VERIFY_STEP as u32)
    );
    let (_, polls) = u.until_told(1000).expect("verified");
    assert_eq!(polls, SLOT / VERIFY_STEP - 4);
    let s = u.status(UpdateRequest::Query);
    assert_eq!((s.phase, s.offset), (UpdatePhase::Verified, SLOT as u32));
}

#[test]
fn a_repeated_chunk_is_acknowledged_and_not_written_again() {
    let mut u = up(BusMode::Classic);
    let img = image(1000, 3);
    u.offer(&img, NODE_NAME);
    assert_eq!(u.data(0, &img[..256]), 256);
    let written = u.flash.borrow().written;
    assert_eq!(u.data(0, &img[..256]), 256, "a repeat: same progress");
    assert_eq!(u.flash.borrow().written, written, "not written twice");
}

#[test]
fn after_a_lost_chunk_the_node_asks_from_where_it_stopped() {
    let mut u = up(BusMode::Classic);
    let img = image(1000, 4);
    u.offer(&img, NODE_NAME);
    assert_eq!(u.data(0, &img[..256]), 256);
    // The chunk at 256 was lost: the one at 512 is not stored.
    assert_eq!(u.data(512, &img[512..768]), 256);
    u.send_from(&img, 256, 256);
    assert_eq!(u.commit(&img).phase, UpdatePhase::Verifying);
    let (m, _) = u.until_told(100).unwrap();
    assert_eq!(status_of(&m).phase, UpdatePhase::Verified);
    assert_eq!(u.booted().as_deref(), Some(&img[..]));
}

#[test]
fn an_offer_of_the_same_image_resumes_where_the_transfer_stopped() {
    let mut u = up(BusMode::FdBrs);
    let img = image(2000, 5);
    u.offer(&img, NODE_NAME);
    u.send_from(&img[..1024], 0, 256);
    // The master vanished; a new one offers the same image.
    u.rig.advance(2_000_000);
    u.rig.take();
    let s = u.offer(&img, NODE_NAME);
    assert_eq!((s.phase, s.offset), (UpdatePhase::Receiving, 1024));
    u.send_from(&img, 1024, 256);
    assert_eq!(u.commit(&img).phase, UpdatePhase::Verifying);
    assert_eq!(
        status_of(&u.until_told(100).unwrap().0).phase,
        UpdatePhase::Verified
    );
    assert_eq!(u.booted().as_deref(), Some(&img[..]));
}

#[test]
fn another_image_starts_over() {
    let mut u = up(BusMode::FdBrs);
    let a = image(2000, 6);
    let b = image(2000, 7);
    u.offer(&a, NODE_NAME);
    u.send_from(&a[..1024], 0, 256);
    let s = u.offer(&b, NODE_NAME);
    assert_eq!((s.phase, s.offset), (UpdatePhase::Receiving, 0));
    // COMMIT of the first image is refused now.
    assert_eq!(u.commit(&a).reason, UpdateReason::NoOffer);
}

#[test]
fn a_wrong_hash_is_refused_and_the_old_firmware_still_boots() {
    let mut u = up(BusMode::FdBrs);
    let img = image(1500, 8);
    let mut bad = img.clone();
    bad[700] ^= 0x40;
    // Offered as `img`, sent as `bad` (corruption nobody saw on the way).
    u.offer(&img, NODE_NAME);
    u.send_from(&bad, 0, 256);
    assert_eq!(u.commit(&img).phase, UpdatePhase::Verifying);
    let s = status_of(&u.until_told(100).unwrap().0);
    assert_eq!(
        (s.phase, s.reason),
        (UpdatePhase::Idle, UpdateReason::HashMismatch)
    );
    assert_eq!(u.booted().as_deref(), Some(OLD));
    u.rig.advance(5_000);
    assert_eq!(u.flash.borrow().reboots, 0);
}

#[test]
fn commit_before_the_last_byte_is_incomplete_and_the_rest_may_follow() {
    let mut u = up(BusMode::Classic);
    let img = image(600, 9);
    u.offer(&img, NODE_NAME);
    u.send_from(&img[..512], 0, 256);
    let s = u.commit(&img);
    assert_eq!(
        (s.phase, s.reason, s.offset),
        (UpdatePhase::Receiving, UpdateReason::Incomplete, 512)
    );
    u.send_from(&img, 512, 256);
    assert_eq!(u.commit(&img).phase, UpdatePhase::Verifying);
}

type Answer = Result<(), UpdateReason>;

#[test]
fn refused_offers_write_nothing() {
    let too_big = image(SLOT + 1, 1);
    let img = image(100, 1);
    // (what, image, node name offered, the application's answer, the reason expected)
    type Case<'a> = (&'a str, &'a [u8], &'a str, Option<Answer>, UpdateReason);
    let cases: [Case; 5] = [
        (
            "too large",
            &too_big,
            NODE_NAME,
            None,
            UpdateReason::TooLarge,
        ),
        (
            "another board",
            &img,
            "other_node",
            None,
            UpdateReason::WrongBoard,
        ),
        ("empty", &[], NODE_NAME, None, UpdateReason::BadOffer),
        (
            "application: battery",
            &img,
            NODE_NAME,
            Some(Err(UpdateReason::LowBattery)),
            UpdateReason::LowBattery,
        ),
        (
            "application: own reason",
            &img,
            NODE_NAME,
            Some(Err(UpdateReason::Refused)),
            UpdateReason::Refused,
        ),
    ];
    for (what, img, node, answer, reason) in cases {
        let mut u = up(BusMode::FdBrs);
        u.flash.borrow_mut().answer = answer;
        let s = u.offer(img, node);
        assert_eq!((s.phase, s.reason), (UpdatePhase::Idle, reason), "{what}");
        assert_eq!(u.flash.borrow().written, 0, "{what}");
        // And DATA after the refusal is not written either.
        let s = u.status(UpdateRequest::Data {
            offset: 0,
            data: &[1, 2, 3],
        });
        assert_eq!(s.reason, UpdateReason::NoOffer, "{what}");
        assert_eq!(u.flash.borrow().written, 0, "{what}");
    }
}

#[test]
fn a_running_node_refuses_unless_the_application_agrees() {
    let img = image(100, 2);
    for (answer, want) in [
        (None, UpdateReason::NotSafe),
        (Some(Ok(())), UpdateReason::None),
    ] {
        let mut u = up(BusMode::FdBrs);
        let h = header(0, 0x120, DataDirection::S2m, 8);
        let entries = [CopyEntry {
            block: 0,
            topic: T_FEEDBACK,
            src_offset: 0,
            len: 6,
            dst_offset: 0,
        }];
        assert_eq!(u.rig.define(h, &entries).code, ResultCode::Ok);
        assert_eq!(u.rig.start(1, 0).code, ResultCode::Ok);
        assert_eq!(u.rig.node.state(), NodeState::Running);
        u.flash.borrow_mut().answer = answer;
        assert_eq!(u.offer(&img, NODE_NAME).reason, want);
    }
}

#[test]
fn a_node_without_a_staging_area_says_unsupported() {
    let mut rig = Rig::new(true);
    rig.boot_and_ack(BusMode::FdBrs);
    rig.send(ConfigMessage::UpdateRequest(UpdateRequest::Query));
    rig.poll();
    let s = status_of(&rig.one());
    assert_eq!((s.reason, s.max_chunk), (UpdateReason::Unsupported, 0));
}

#[test]
fn a_chunk_larger_than_announced_or_past_the_end_is_not_stored() {
    let mut u = up(BusMode::FdBrs);
    let img = image(300, 3);
    u.offer(&img, NODE_NAME);
    let before = u.rig.node.counters().rx_malformed;
    assert_eq!(u.data(0, &image(257, 0)), 0, "longer than max_chunk");
    assert_eq!(u.data(0, &image(256, 0)), 256);
    assert_eq!(u.data(256, &image(60, 0)), 256, "past the end");
    assert_eq!(u.rig.node.counters().rx_malformed, before + 2);
    assert!(MAX_CHUNK as usize >= 256);
}

#[test]
fn a_flash_that_fails_ends_the_transfer() {
    let mut u = up(BusMode::FdBrs);
    let img = image(1000, 4);
    u.flash.borrow_mut().fail_writes_from = Some(600);
    u.offer(&img, NODE_NAME);
    assert_eq!(u.data(0, &img[..256]), 256);
    assert_eq!(u.data(256, &img[256..512]), 512);
    let s = u.status(UpdateRequest::Data {
        offset: 512,
        data: &img[512..768],
    });
    assert_eq!(
        (s.phase, s.reason),
        (UpdatePhase::Idle, UpdateReason::FlashError)
    );
    assert_eq!(u.booted().as_deref(), Some(OLD));
}

#[test]
fn abort_forgets_the_transfer() {
    let mut u = up(BusMode::FdBrs);
    let img = image(1000, 5);
    u.offer(&img, NODE_NAME);
    u.send_from(&img[..512], 0, 256);
    let s = u.status(UpdateRequest::Abort);
    assert_eq!(
        (s.phase, s.reason),
        (UpdatePhase::Idle, UpdateReason::Aborted)
    );
    // The same image starts again from 0.
    assert_eq!(u.offer(&img, NODE_NAME).offset, 0);
}

#[test]
fn a_broadcast_update_is_ignored() {
    let mut u = up(BusMode::FdBrs);
    let ignored = u.rig.node.counters().rx_ignored;
    u.rig
        .send_broadcast(ConfigMessage::UpdateRequest(UpdateRequest::Query));
    u.rig.poll();
    assert!(u.rig.take().is_empty());
    assert_eq!(u.rig.node.counters().rx_ignored, ignored + 1);
}

#[test]
fn an_unacknowledged_node_takes_an_update_in_classical_frames() {
    let mut rig = Rig::new(true);
    let flash = Rc::new(RefCell::new(Flash::new(OLD, "1.0.0")));
    rig.app.update = Some(Box::new(Shared(flash.clone(), "1.0.0")));
    rig.poll();
    rig.advance(listen_end() + 10_000);
    rig.take();
    let mut u = Up { rig, flash };
    let img = image(700, 6);
    assert_eq!(u.offer(&img, NODE_NAME).phase, UpdatePhase::Receiving);
    u.send_from(&img, 0, 256);
    u.commit(&img);
    assert_eq!(
        status_of(&u.until_told(100).unwrap().0).phase,
        UpdatePhase::Verified
    );
    assert_eq!(u.booted().as_deref(), Some(&img[..]));
}

/// Power cut at every step of an update (after every request and every poll): what
/// the flash holds then always boots, the old image until the mark and the new one
/// after it, never anything else.
#[test]
fn a_power_cut_at_any_phase_leaves_a_bootable_firmware() {
    let img = image(2000, 11);
    let mut u = up(BusMode::Classic);
    let mut seen_new = false;
    let mut cut = |u: &Up, phase: &str| {
        let snapshot = u.flash.borrow().clone();
        let boots = snapshot.boot().map(<[u8]>::to_vec);
        if boots.as_deref() == Some(&img[..]) {
            seen_new = true;
        } else {
            assert_eq!(boots.as_deref(), Some(OLD), "cut during {phase}: a brick");
            assert!(!seen_new, "cut during {phase}: back to the old image");
        }
    };
    cut(&u, "idle");
    u.offer(&img, NODE_NAME);
    cut(&u, "offer");
    for at in (0..img.len()).step_by(256) {
        let end = (at + 256).min(img.len());
        u.data(at as u32, &img[at..end]);
        cut(&u, "data");
    }
    u.commit(&img);
    cut(&u, "commit");
    for _ in 0..100 {
        u.rig.advance(1_000);
        cut(&u, "verify");
    }
    assert!(seen_new, "the update completed");
    assert_eq!(u.flash.borrow().reboots, 1);
}
