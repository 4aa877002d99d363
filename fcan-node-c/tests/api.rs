//! The C API through its `extern "C"` functions, called as a C program calls them: node
//! RAM, descriptor checks, boot, re-entry, hostile frames, and the same frames out as a
//! Rust node of the same schema for the same frames in.

mod common;

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

use common::{c_desc, ram, ram_bound};
use fcan_core::frame::{CanId, Frame};
use fcan_core::id::{ConfigId, NodeId, Opcode};
use fcan_example_io_board::gen as io;
use fcan_example_motor_driver::gen as md;
use fcan_node::abi::*;
use fcan_node::*;
use fcan_runtime_nostd::codegen::{Dispatch, ServiceCall, ServiceOutcome};
use fcan_runtime_nostd::{Context, Controller, Event, Node, NodeConfig, Transmit, TxRefused};
use proptest::prelude::*;

/// What the callbacks saw, reached through `user`.
#[derive(Default)]
struct Board {
    sent: Vec<fcan_frame_t>,
    events: Vec<u32>,
    /// Set by a test: the node handle, so callbacks can try to call back in.
    node: *mut fcan_node_t,
    reentry: Vec<i32>,
    refuse_tx: bool,
}

unsafe extern "C" fn transmit(user: *mut c_void, frame: *const fcan_frame_t) -> i32 {
    let b = unsafe { &mut *user.cast::<Board>() };
    if b.refuse_tx {
        return 1;
    }
    b.sent.push(unsafe { *frame });
    if !b.node.is_null() {
        // A transmit callback that calls back in is refused, and changes nothing.
        let f = unsafe { *frame };
        b.reentry.push(unsafe { fcan_node_ingest(b.node, &f, 0) });
        b.reentry.push(unsafe { fcan_node_poll(b.node, 0) });
    }
    0
}

unsafe extern "C" fn event(user: *mut c_void, node: *mut fcan_node_t, e: u32) {
    // The handle leads back to the application's state, inside a callback too.
    assert_eq!(unsafe { fcan_node_user(node) }, user);
    let b = unsafe { &mut *user.cast::<Board>() };
    b.events.push(e);
    b.reentry.push(unsafe { fcan_node_state(node) });
}

fn config(b: &mut Board, node_id: u8, counts: &'static [u8]) -> fcan_node_config_t {
    fcan_node_config_t {
        node_id,
        controller: FCAN_CONTROLLER_FD,
        n_counts: counts.len() as u8,
        reserved: 0,
        boot_id: 0x1234_5678,
        counts: counts.as_ptr(),
        callbacks: fcan_callbacks_t {
            user: (b as *mut Board).cast(),
            transmit: Some(transmit),
            service: None,
            params_changed: None,
            event: Some(event),
        },
    }
}

fn init(
    desc: &fcan_node_desc_t,
    ram_bytes: u32,
    cfg: &fcan_node_config_t,
) -> (*mut fcan_node_t, i32) {
    let mut err = 99;
    let area = ram(ram_bytes as usize);
    let node = unsafe { fcan_node_init(area, ram_bytes, desc, cfg, &mut err) };
    (node, err)
}

fn strerror(code: i32) -> String {
    unsafe { CStr::from_ptr(fcan_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn ram_needed_is_exact_and_within_the_header_bound() {
    for d in [&io::DESC, &md::DESC] {
        let c = c_desc(d);
        let need = unsafe { fcan_node_ram_needed(c) };
        assert!(need > 0, "descriptor refused");
        let bound = ram_bound(d);
        assert!(need <= bound, "needs {need} B, FCAN_RAM_BYTES says {bound}");
        let mut b = Board::default();
        let cfg = config(&mut b, 5, &[1, 1, 1][..d.arrays.len()]);
        let (node, err) = init(c, need - 1, &cfg);
        assert!(node.is_null());
        assert_eq!(err, FCAN_ERR_RAM, "{}", strerror(err));
        let (node, err) = init(c, need, &cfg);
        assert_eq!(err, FCAN_OK, "{}", strerror(err));
        assert!(!node.is_null());
        assert_eq!(unsafe { fcan_node_state(node) }, FCAN_STATE_UNPROVISIONED);
    }
}

#[test]
fn init_refuses_bad_arguments_with_the_reason() {
    let c = c_desc(&io::DESC);
    let need = unsafe { fcan_node_ram_needed(c) };
    let mut b = Board::default();
    let good = config(&mut b, 5, &[2, 2, 1]);

    // Misaligned RAM.
    let area = ram(need as usize + 8);
    let mut err = 0;
    let n = unsafe { fcan_node_init(area.cast::<u8>().add(4).cast(), need, c, &good, &mut err) };
    assert!(n.is_null());
    assert_eq!(err, FCAN_ERR_ARG);
    // NULL descriptor; NULL error pointer is allowed.
    let n = unsafe { fcan_node_init(area, need, null(), &good, null_mut()) };
    assert!(n.is_null());

    let cases: Vec<(&str, fcan_node_config_t, i32)> = vec![
        (
            "node id 127 (broadcast)",
            fcan_node_config_t {
                node_id: 127,
                ..good
            },
            FCAN_ERR_CONFIG,
        ),
        (
            "node id 128",
            fcan_node_config_t {
                node_id: 128,
                ..good
            },
            FCAN_ERR_CONFIG,
        ),
        (
            "two counts for three arrays",
            fcan_node_config_t {
                n_counts: 2,
                ..good
            },
            FCAN_ERR_CONFIG,
        ),
        (
            "9 outputs of 8",
            fcan_node_config_t {
                counts: [9u8, 1, 1].as_ptr(),
                ..good
            },
            FCAN_ERR_CONFIG,
        ),
        (
            "controller 7",
            fcan_node_config_t {
                controller: 7,
                ..good
            },
            FCAN_ERR_ARG,
        ),
        (
            "no transmit",
            fcan_node_config_t {
                callbacks: fcan_callbacks_t {
                    transmit: None,
                    ..good.callbacks
                },
                ..good
            },
            FCAN_ERR_ARG,
        ),
    ];
    for (what, cfg, want) in cases {
        let (n, err) = init(c, need, &cfg);
        assert!(n.is_null(), "{what}: accepted");
        assert_eq!(err, want, "{what}: {}", strerror(err));
    }
}

#[test]
fn init_refuses_inconsistent_tables() {
    let mut b = Board::default();
    let cfg = config(&mut b, 5, &[2, 2, 1]);
    let base = *c_desc(&io::DESC);
    let need = unsafe { fcan_node_ram_needed(&base) };
    let corrupt = |f: &dyn Fn(&mut fcan_node_desc_t)| {
        let mut d = base;
        f(&mut d);
        d
    };
    let types: Vec<fcan_type_desc_t> =
        unsafe { std::slice::from_raw_parts(base.types, base.n_types as usize) }.to_vec();
    let params_of = |t: &fcan_type_desc_t| -> Vec<fcan_param_desc_t> {
        unsafe { std::slice::from_raw_parts(t.params, t.n_params as usize) }.to_vec()
    };
    // The tables with type `ti`'s changed by `f`.
    let with_type = |ti: usize, f: &dyn Fn(&mut fcan_type_desc_t)| -> *const fcan_type_desc_t {
        let mut all = types.clone();
        f(&mut all[ti]);
        Box::leak(all.into_boxed_slice()).as_ptr()
    };
    let with_param = |ti: usize, pi: usize, f: &dyn Fn(&mut fcan_param_desc_t)| {
        let mut ps = params_of(&types[ti]);
        f(&mut ps[pi]);
        let ps: *const fcan_param_desc_t = Box::leak(ps.into_boxed_slice()).as_ptr();
        with_type(ti, &|t| t.params = ps)
    };
    // A bool parameter somewhere (DigitalOut's active_low).
    let (bool_t, bool_p) = (0..types.len())
        .find_map(|ti| {
            params_of(&types[ti])
                .iter()
                .position(|p| p.scalar_type == FCAN_TYPE_BOOL)
                .map(|pi| (ti, pi))
        })
        .expect("io_board has a bool parameter");
    let topic_t = (0..types.len()).find(|&ti| types[ti].n_topics > 0).unwrap();
    let mut topics: Vec<fcan_topic_desc_t> = unsafe {
        std::slice::from_raw_parts(types[topic_t].topics, types[topic_t].n_topics as usize)
    }
    .to_vec();
    topics[0].dir = 9;
    let bad_topics: *const fcan_topic_desc_t = Box::leak(topics.into_boxed_slice()).as_ptr();
    let cases: Vec<(&str, fcan_node_desc_t)> = vec![
        (
            "another ABI version",
            corrupt(&|d| d.abi = FCAN_ABI_VERSION + 1),
        ),
        ("no blob", corrupt(&|d| d.blob_len = 0)),
        ("blocks NULL", corrupt(&|d| d.blocks = null())),
        (
            "a block past its array",
            corrupt(&|d| {
                let mut bs: Vec<fcan_block_desc_t> =
                    unsafe { std::slice::from_raw_parts(d.blocks, d.n_blocks as usize) }.to_vec();
                bs[0].index = 200;
                d.blocks = Box::leak(bs.into_boxed_slice()).as_ptr();
            }),
        ),
        (
            "topic arena too small for the tables",
            corrupt(&|d| d.topic_bytes = 1),
        ),
        (
            "a direction byte 9",
            corrupt(&|d| d.types = with_type(topic_t, &|t| t.topics = bad_topics)),
        ),
        (
            "a scalar type 42",
            corrupt(&|d| d.types = with_param(bool_t, bool_p, &|p| p.scalar_type = 42)),
        ),
        (
            "a bool default of 2",
            corrupt(&|d| d.types = with_param(bool_t, bool_p, &|p| p.default_bits = 2)),
        ),
    ];
    for (what, d) in cases {
        let (n, err) = init(&d, need.max(8192), &cfg);
        assert!(n.is_null(), "{what}: accepted");
        assert_eq!(err, FCAN_ERR_DESC, "{what}: {}", strerror(err));
        if what != "topic arena too small for the tables" && what != "a block past its array" {
            // What init refuses while reading the tables, measuring refuses too.
            assert_eq!(unsafe { fcan_node_ram_needed(&d) }, 0, "{what}: measured");
        }
    }
}

fn frame(id: CanId, data: &[u8], fd: bool) -> fcan_frame_t {
    let mut f = fcan_frame_t {
        id: id.raw(),
        len: data.len() as u8,
        flags: 0,
        reserved: [0; 2],
        data: [0; 64],
    };
    if matches!(id, CanId::Extended(_)) {
        f.flags |= FCAN_FRAME_EXTENDED;
    }
    if fd {
        f.flags |= FCAN_FRAME_FD | FCAN_FRAME_BRS;
    }
    f.data[..data.len()].copy_from_slice(data);
    f
}

fn opcode(f: &fcan_frame_t) -> Option<Opcode> {
    if f.flags & FCAN_FRAME_EXTENDED == 0 {
        return None;
    }
    ConfigId::from_raw(f.id).ok().map(|c| c.opcode)
}

#[test]
fn a_node_boots_announces_and_keeps_frames_the_driver_refuses() {
    let c = c_desc(&io::DESC);
    let need = unsafe { fcan_node_ram_needed(c) };
    let mut b = Box::<Board>::default();
    let cfg = config(&mut b, 9, &[2, 2, 1]);
    let (node, err) = init(c, need, &cfg);
    assert_eq!(err, FCAN_OK);
    // The transmit callback refuses: frames stay with the node and are counted.
    b.refuse_tx = true;
    let mut now = 0u32;
    while now < 1_500_000 {
        unsafe { fcan_node_poll(node, now) };
        now += 1_000;
    }
    assert!(b.sent.is_empty());
    let mut k = fcan_counters_t {
        rx_handled: 0,
        rx_malformed: 0,
        rx_ignored: 0,
        rx_bad_state: 0,
        reassembly_dropped: 0,
        tx_refused: 0,
        tx_frames: 0,
        naks_sent: 0,
        services_busy: 0,
        master_lost: 0,
    };
    assert_eq!(unsafe { fcan_node_counters(node, &mut k) }, FCAN_OK);
    assert!(k.tx_refused > 0, "refusals not counted");
    b.refuse_tx = false;
    unsafe { fcan_node_poll(node, now) };
    let announces: Vec<_> = b
        .sent
        .iter()
        .filter(|f| opcode(f) == Some(Opcode::Discover))
        .collect();
    assert!(
        !announces.is_empty(),
        "no ANNOUNCE after 1.5 s: {:?}",
        b.sent.len()
    );
    assert_eq!(
        ConfigId::from_raw(announces[0].id).unwrap().node,
        NodeId::new(9).unwrap()
    );
    // poll_at names a future deadline while announcing.
    let mut at = 0;
    assert_eq!(unsafe { fcan_node_poll_at(node, now, &mut at) }, 1);
    assert!(
        at.wrapping_sub(now) < 3_000_000 && at != now,
        "deadline {at} at {now}"
    );
}

#[test]
fn callbacks_cannot_reenter_the_node() {
    let c = c_desc(&io::DESC);
    let need = unsafe { fcan_node_ram_needed(c) };
    let mut b = Box::<Board>::default();
    let cfg = config(&mut b, 9, &[2, 2, 1]);
    let (node, _) = init(c, need, &cfg);
    b.node = node;
    let mut now = 0;
    while b.sent.is_empty() && now < 3_000_000 {
        unsafe { fcan_node_poll(node, now) };
        now += 1_000;
    }
    assert!(!b.sent.is_empty());
    assert!(!b.reentry.is_empty());
    assert!(
        b.reentry.iter().all(|&r| r == FCAN_ERR_REENTRANT),
        "{:?}",
        b.reentry
    );
    // And the node works afterwards.
    assert_eq!(unsafe { fcan_node_poll(node, now) }, FCAN_OK);
}

#[test]
fn topic_param_and_publish_errors_name_the_cause() {
    let c = c_desc(&io::DESC);
    let need = unsafe { fcan_node_ram_needed(c) };
    let mut b = Box::<Board>::default();
    // Two outputs (blocks 0, 1) of 8 wired; analog sensor (block 16) wired.
    let cfg = config(&mut b, 9, &[2, 2, 1]);
    let (node, _) = init(c, need, &cfg);
    let mut buf = [0u8; 64];
    // min_on_ms of output 0: its default, 0, as two bytes.
    assert_eq!(
        unsafe { fcan_node_param(node, 0, 0, buf.as_mut_ptr(), 64) },
        2
    );
    // debounce_ms of input 0 (block 8): 5.
    assert_eq!(
        unsafe { fcan_node_param(node, 8, 0, buf.as_mut_ptr(), 64) },
        1
    );
    assert_eq!(buf[0], 5);
    assert_eq!(
        unsafe { fcan_node_param(node, 2, 0, buf.as_mut_ptr(), 64) },
        FCAN_ERR_NOT_WIRED
    );
    assert_eq!(
        unsafe { fcan_node_param(node, 0, 7, buf.as_mut_ptr(), 64) },
        FCAN_ERR_INDEX
    );
    assert_eq!(
        unsafe { fcan_node_param(node, 0, 0, buf.as_mut_ptr(), 1) },
        FCAN_ERR_LENGTH
    );
    // Publishing output 0's state (2 bytes), then reading it back.
    assert_eq!(
        unsafe { fcan_node_publish(node, 0, 0, [1u8, 0].as_ptr(), 2) },
        FCAN_OK
    );
    let mut info = fcan_topic_info_t {
        generation: 0,
        received_at_us: 0,
    };
    assert_eq!(
        unsafe { fcan_node_topic(node, 0, 0, buf.as_mut_ptr(), 64, &mut info) },
        2
    );
    assert_eq!(&buf[..2], &[1, 0]);
    assert_eq!(info.generation, 1);
    assert_eq!(
        unsafe { fcan_node_publish(node, 0, 0, [1u8].as_ptr(), 1) },
        FCAN_ERR_LENGTH
    );
    // thresholds (analog topic 1) is m2s.
    assert_eq!(
        unsafe { fcan_node_publish(node, 16, 1, buf.as_ptr(), 33) },
        FCAN_ERR_DIRECTION
    );
    assert_eq!(
        unsafe { fcan_node_publish(node, 3, 0, [1u8, 0].as_ptr(), 2) },
        FCAN_ERR_NOT_WIRED
    );
    assert_eq!(
        unsafe { fcan_node_publish(null_mut(), 0, 0, [1u8, 0].as_ptr(), 2) },
        FCAN_ERR_ARG
    );
    let token = fcan_deferred_t {
        slot: 0,
        transfer: 0,
        block: 0,
        service: 0,
        generation: 0,
    };
    assert_eq!(
        unsafe { fcan_node_complete(node, &token, buf.as_ptr(), 3) },
        FCAN_ERR_TOKEN
    );
    for code in [
        FCAN_ERR_ARG,
        FCAN_ERR_RAM,
        FCAN_ERR_TOKEN,
        FCAN_ERR_FRAME,
        FCAN_ERR_DECODE,
    ] {
        assert!(strerror(code).len() > 8 && strerror(code) != "unknown error");
    }
}

/// The Rust node of the same schema, for the differential test.
struct NoApp;
impl Dispatch for NoApp {
    fn service(&mut self, _: &mut Context<'_>, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome {
        ServiceOutcome::Failed
    }
    fn params_changed(&mut self, _: &mut Context<'_>, _: u8, _: u32) {}
    fn event(&mut self, _: Event) {}
}
struct Sent(Vec<Frame>);
impl Transmit for Sent {
    fn transmit(&mut self, f: &Frame) -> Result<(), TxRefused> {
        self.0.push(*f);
        Ok(())
    }
}

fn to_frame(f: &fcan_frame_t) -> Frame {
    let id = if f.flags & FCAN_FRAME_EXTENDED != 0 {
        CanId::Extended(f.id)
    } else {
        CanId::Standard(f.id as u16)
    };
    let data = &f.data[..f.len as usize];
    if f.flags & FCAN_FRAME_FD == 0 {
        Frame::classic(id, data).unwrap()
    } else if f.flags & FCAN_FRAME_BRS != 0 {
        Frame::fd(id, data).unwrap()
    } else {
        Frame::fd(id, data).unwrap().without_brs()
    }
}

fn arb_frame() -> impl Strategy<Value = fcan_frame_t> {
    // Mostly frames for node 9 (extended, configuration plane) and data ids, plus
    // anything at all: illegal lengths, ids too large, FD flags on a classic length.
    let node9 = (any::<u32>(), prop::collection::vec(any::<u8>(), 0..=8)).prop_map(|(r, d)| {
        let id = (r & 0x1FFF_FFFF & !(0x7F << 16)) | (9 << 16);
        frame(CanId::Extended(id), &d, false)
    });
    let data = (0x100u16..0x7FF, prop::collection::vec(any::<u8>(), 0..=8))
        .prop_map(|(id, d)| frame(CanId::Standard(id), &d, false));
    let raw = (
        any::<u32>(),
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 64),
    )
        .prop_map(|(id, len, flags, d)| {
            let mut f = fcan_frame_t {
                id,
                len,
                flags,
                reserved: [0; 2],
                data: [0; 64],
            };
            f.data.copy_from_slice(&d);
            f
        });
    prop_oneof![4 => node9, 2 => data, 1 => raw]
}

/// The master's frames of a conformance transcript (`time M frame`), as C frames: boot,
/// acknowledgement, schema download, plan, START and data for node 2.
fn master_script(file: &str) -> Vec<(u32, fcan_frame_t)> {
    let path = format!("{}/../conformance/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("conformance vector");
    let mut out = Vec::new();
    for line in text.lines() {
        // A comment is a line starting with `#`, or `#` after whitespace.
        if line.trim_start().starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(t), Some("M"), Some(f)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (id, rest) = f.split_once('#').unwrap();
        let (fd, brs, hex) = match rest.strip_prefix('#') {
            Some(r) => (
                true,
                u8::from_str_radix(&r[..1], 16).unwrap() & 1 == 1,
                &r[1..],
            ),
            None => (false, false, rest),
        };
        let data: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let raw = u32::from_str_radix(id, 16).unwrap();
        let cid = if id.len() == 8 {
            CanId::Extended(raw)
        } else {
            CanId::Standard(raw as u16)
        };
        let mut cf = frame(cid, &data, fd);
        if fd && !brs {
            cf.flags &= !FCAN_FRAME_BRS;
        }
        out.push((t.parse().unwrap(), cf));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any frames at all: no crash, an illegal frame is refused without effect, and the
    /// node through the C API sends exactly what a Rust node of the same schema sends
    /// for the same frames at the same times (the C tables, the frame conversion and
    /// the carved RAM change nothing).
    #[test]
    fn hostile_frames_the_c_node_behaves_as_the_rust_node(
        frames in prop::collection::vec((arb_frame(), 0u32..20_000), 1..120),
        script in prop::sample::select(vec!["boot-io-board-classic.txt", "boot-io-board-fd.txt"]),
    ) {
        // First a master brings node 2 to RUNNING (a conformance transcript's frames),
        // then anything at all.
        let script = master_script(script);
        let c = c_desc(&io::DESC);
        let need = unsafe { fcan_node_ram_needed(c) };
        let mut b = Box::<Board>::default();
        let cfg = fcan_node_config_t { boot_id: 0x05F6_1139, ..config(&mut b, 2, &[2, 2, 1]) };
        let (node, err) = init(c, need, &cfg);
        prop_assert_eq!(err, FCAN_OK);
        let mut rust = Node::new(
            &io::DESC,
            io::Buffers::new(),
            NodeConfig { node_id: NodeId::new(2).unwrap(), boot_id: 0x05F6_1139, counts: &[2, 2, 1], controller: Controller::Fd },
        ).unwrap();
        let mut rust_sent = Sent(Vec::new());
        let end = script.last().map_or(0, |s| s.0);
        let mut inputs: Vec<(u32, fcan_frame_t)> = script;
        let mut now = end;
        for (f, dt) in &frames {
            now = now.wrapping_add(*dt);
            inputs.push((now, *f));
        }
        let mut reached_running = false;
        let last = inputs.last().map_or(0, |i| i.0);
        let mut next = inputs.iter().peekable();
        let mut now = 0u32;
        // As the transcripts are replayed (tests/tests/conformance.rs): at each tick a
        // poll, then the frames that arrived in it.
        while now <= last {
            prop_assert_eq!(unsafe { fcan_node_poll(node, now) }, FCAN_OK);
            rust.poll(now, &mut rust_sent, &mut NoApp);
            reached_running |= unsafe { fcan_node_state(node) } == FCAN_STATE_RUNNING;
            while let Some((_, f)) = next.next_if(|(t, _)| *t <= now) {
                let r = unsafe { fcan_node_ingest(node, f, now) };
                prop_assert!(r == FCAN_OK || r == FCAN_ERR_FRAME, "ingest returned {}", r);
                if r == FCAN_OK {
                    rust.receive(&to_frame(f), now);
                }
            }
            now += 1_000;
        }
        prop_assert!(reached_running, "the transcript did not start the node");
        let c_sent: Vec<Frame> = b.sent.iter().map(to_frame).collect();
        prop_assert_eq!(&c_sent, &rust_sent.0);
        let mut k = fcan_counters_t { rx_handled: 0, rx_malformed: 0, rx_ignored: 0, rx_bad_state: 0, reassembly_dropped: 0, tx_refused: 0, tx_frames: 0, naks_sent: 0, services_busy: 0, master_lost: 0 };
        unsafe { fcan_node_counters(node, &mut k) };
        let rk = rust.counters();
        prop_assert_eq!((k.rx_handled, k.rx_malformed, k.rx_ignored, k.rx_bad_state, k.tx_frames),
            (rk.rx_handled, rk.rx_malformed, rk.rx_ignored, rk.rx_bad_state, rk.tx_frames));
        prop_assert_eq!(unsafe { fcan_node_state(node) }, rust.state() as u8 as i32);
    }
}
