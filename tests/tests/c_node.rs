//! The I/O board written in C (examples/c-io-board: the C application, the code
//! `fcan-codegen c` generates, `fcan-node-c` over the node runtime) on the simulated bus
//! beside a Rust motor driver, under the master: discovered, its schema downloaded and
//! verified (the blob the C tables carry is the one the Rust code generator emits), topics
//! both ways (a 33-byte command staged whole, the 34-byte samples), a parameter refused
//! with its reason and one taken, services answered at once and deferred, and a power
//! cycle after which the master provisions it again and restores its parameters. CAN FD
//! and Classical CAN. The same board over real SocketCAN: `c_node_vm.rs`.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::c_board::CIoBoard;
use fcan_e2e::*;
use fcan_examples::run_node_shared;
use fcan_master::update::{UpdateConfig, UpdateImage};
use fcan_master::value::Value;
use fcan_master::SchemaSource;
use tokio::time::Instant;

const C_IO: u8 = 4;
/// The analog sensor's block and its `thresholds` topic (schema order).
const ANALOG: u8 = 16;
const THRESHOLDS: u8 = 1;

fn le_i16s(v: &[i16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

async fn c_board_under_the_master(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 2);
    let board = run_node_shared(
        w.endpoint(),
        CIoBoard::new(C_IO, 0x0C0F_FEE1, [2, 2, 1], w.fd()).expect("C board boots"),
    );
    let m = w.start_master().await;
    wait_running(&m, &[MD1, C_IO], Duration::from_secs(3)).await;

    let nodes = m.nodes().await.unwrap();
    let info = nodes.iter().find(|n| n.id.get() == C_IO).unwrap();
    assert_eq!(info.name, "io_board4");
    assert_eq!(info.schema_source, Some(SchemaSource::Downloaded));
    assert_eq!(info.boot_id, 0x0C0F_FEE1);
    // The master checked the downloaded blob against the announced hash; the blob is the
    // one the Rust code generator emits for the same schema.
    assert_eq!(
        info.digest.unwrap().0,
        fcan_example_io_board::gen::SCHEMA_SHA256
    );
    assert_eq!(info.mode.mtu(), mtu, "{:?}", info.mode);

    // m2s, 33 bytes (5 frames on Classical CAN): the C node holds it whole.
    m.publish(
        "/io_board4/analog/thresholds",
        val(
            "{low: [-1, -2, -3, -4, -5, -6, -7, -8], high: [1, 2, 3, 4, 5, 6, 7, 8], enable: true}",
        ),
    )
    .await
    .unwrap();
    let mut want = le_i16s(&[-1, -2, -3, -4, -5, -6, -7, -8]);
    want.extend(le_i16s(&[1, 2, 3, 4, 5, 6, 7, 8]));
    want.push(1);
    eventually("thresholds arrive whole", Duration::from_millis(10), || {
        let got = board.with(|b| b.topic(ANALOG, THRESHOLDS));
        let want = want.clone();
        async move {
            got.filter(|(bytes, g)| *g > 0 && *bytes == want)
                .map(|_| ())
        }
    })
    .await;

    // s2m, 34 bytes every 10 ms, whole, in sequence.
    let mut samples = m.subscribe("/io_board4/analog/samples").await.unwrap();
    let mut seqs = Vec::new();
    while seqs.len() < 5 {
        let s = tokio::time::timeout(Duration::from_millis(50), samples.recv())
            .await
            .expect("samples flow")
            .unwrap();
        seqs.push(num(field(&s.value, "sequence")) as u64);
    }
    assert!(seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");

    // On publish: input 0 toggles every 250 ms.
    let mut edges = m.subscribe("/io_board4/in0/edge").await.unwrap();
    let a = tokio::time::timeout(Duration::from_millis(300), edges.recv())
        .await
        .unwrap()
        .unwrap();
    let b = tokio::time::timeout(Duration::from_millis(300), edges.recv())
        .await
        .unwrap()
        .unwrap();
    assert_ne!(field(&a.value, "level"), field(&b.value, "level"));

    // Parameters: refused with the reason, taken, and seen by the C code.
    let e = m
        .param_set("io_board4.in0.debounce_ms", Value::UInt(250))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("max 200"), "{e}");
    m.param_set("io_board4.in0.debounce_ms", Value::UInt(17))
        .await
        .unwrap();
    let debounce = |b: &mut CIoBoard| {
        let mut v = [0u8; 1];
        let n = unsafe { fcan_node::fcan_node_param(b.node(), 2 + 6, 0, v.as_mut_ptr(), 1) };
        // Input 0 is block 8 (the outputs are blocks 0..8).
        assert_eq!(n, 1);
        v[0]
    };
    assert_eq!(board.with(debounce), 17);
    assert_eq!(
        m.param_get("io_board4.in0.debounce_ms").await.unwrap(),
        Value::UInt(17)
    );

    // Services: at once (an empty request), and deferred by the C handler until the
    // relay settled.
    let r = m
        .call("/io_board4/analog/calibrate", val("{}"))
        .await
        .unwrap();
    assert_eq!(r, Value::Struct(vec![]));
    assert_eq!(board.with(|b| b.calibrations()), 1);
    let t0 = Instant::now();
    let r = m
        .call("/io_board4/out0/set", val("{on: true}"))
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(r, val("{success: true, settle_ms: 20}"));
    assert!(took >= Duration::from_millis(20), "{took:?}");
    assert_eq!(board.with(|b| b.output(0)), Some(true));

    // Power cycle: a new board with a new boot id; the master provisions it again and
    // restores the parameter it had set.
    board.stop();
    let again = run_node_shared(
        w.endpoint(),
        CIoBoard::new(C_IO, 0x0C0F_FEE2, [2, 2, 1], w.fd()).expect("C board boots"),
    );
    eventually("rebooted board running", Duration::from_secs(5), || {
        let m = &m;
        async move {
            let nodes = m.nodes().await.ok()?;
            let n = nodes.iter().find(|n| n.id.get() == C_IO)?;
            (n.boot_id == 0x0C0F_FEE2 && n.phase.to_string() == "running").then_some(())
        }
    })
    .await;
    eventually("debounce restored", Duration::from_secs(1), || {
        let v = again.with(debounce);
        async move { (v == 17).then_some(()) }
    })
    .await;
    // Its data flows again.
    let mut edges = m.subscribe("/io_board4/in1/edge").await.unwrap();
    tokio::time::timeout(Duration::from_millis(600), edges.recv())
        .await
        .expect("edges after the reboot")
        .unwrap();
}

/// A firmware update through the master into the C board's update callbacks (the
/// `update` build of the library): offered, written, read back and hashed by the node,
/// marked bootable with the image's SHA-256, rebooted; the master sees it come back with
/// the new version.
async fn c_board_takes_a_firmware_update(mtu: Mtu) {
    let w = World::new(mtu);
    let image: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(7) ^ (i >> 3)) as u8)
        .collect();
    let blob = &fcan_example_io_board::gen::BLOB[..];
    let name = fcan_core::msg::update::schema_node_name(blob).unwrap();
    let offer = || {
        UpdateImage::new(
            image.clone(),
            fcan_example_io_board::gen::SCHEMA_SHA256,
            name,
            "1.0.1",
        )
    };
    let id = fcan_core::id::NodeId::new(C_IO).unwrap();

    // Without an `offered` callback the runtime's default refuses while RUNNING.
    {
        let mut b = CIoBoard::new(C_IO, 0x0C0F_FEE0, [2, 2, 1], w.fd()).expect("C board boots");
        b.take_updates("1.0.0", "1.0.1", false);
        let board = run_node_shared(w.endpoint(), b);
        let m = w.start_master().await;
        wait_running(&m, &[C_IO], Duration::from_secs(3)).await;
        let e = m
            .update(id, offer(), UpdateConfig::default())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("not safe") || format!("{e:?}").contains("NotSafe"),
            "{e:?}"
        );
        assert_eq!(board.with(|b| b.reboots), 0);
        board.stop();
    }

    let mut b = CIoBoard::new(C_IO, 0x0C0F_FEE1, [2, 2, 1], w.fd()).expect("C board boots");
    b.take_updates("1.0.0", "1.0.1", true);
    let board = run_node_shared(w.endpoint(), b);
    let m = w.start_master().await;
    wait_running(&m, &[C_IO], Duration::from_secs(3)).await;
    eventually("the version read", Duration::from_secs(3), || {
        let m = &m;
        async move {
            let nodes = m.nodes().await.ok()?;
            let n = nodes.iter().find(|n| n.id.get() == C_IO)?;
            (n.firmware.as_deref() == Some("1.0.0")).then_some(())
        }
    })
    .await;

    let report = m
        .update(id, offer(), UpdateConfig::default())
        .await
        .expect("the update completes");
    assert_eq!(report.version, "1.0.1");
    assert!(!report.schema_changed);
    let staged = board
        .with(|b| b.last_update.clone())
        .expect("an image was marked bootable");
    assert_eq!(staged.image, image);
    assert_eq!(staged.sha256, fcan_core::hash::SchemaDigest::of(&image).0);
    assert_eq!(board.with(|b| b.reboots), 1);
    let nodes = m.nodes().await.unwrap();
    let n = nodes.iter().find(|n| n.id.get() == C_IO).unwrap();
    assert_eq!(n.firmware.as_deref(), Some("1.0.1"));
    assert_ne!(n.boot_id, 0x0C0F_FEE1, "rebooted");
}

both_links!(c_board_under_the_master, c_board_takes_a_firmware_update);

/// Hostile frames through the C API from a C program (`tests/c/hostile.c`): any id, any
/// length byte, any flags. No crash; illegal frames refused; every legal one counted by
/// the node; the node still answers afterwards.
#[test]
fn hostile_frames_from_c() {
    for seed in [1u32, 0xDEAD_BEEF, 0x0C0F_FEE1] {
        let r = fcan_e2e::c_board::hostile_run(seed, 20_000);
        assert_eq!(r.bad_returns, 0, "{r:?}");
        assert_eq!(r.legal + r.illegal, 20_000, "{r:?}");
        assert!(
            r.illegal > 1_000 && r.legal > 5_000,
            "both kinds fed: {r:?}"
        );
        let k = &r.counters;
        let counted = k.rx_handled + k.rx_malformed + k.rx_ignored + k.rx_bad_state;
        // The node counts each frame it took once; a frame it never saw as a frame (the
        // listen window of an unconfigured id) cannot exceed what was taken.
        assert!(counted > 0 && counted <= r.legal, "{r:?}");
        assert!(k.rx_malformed > 0 && k.rx_ignored > 0, "{r:?}");
        assert!((0..=4).contains(&r.state), "{r:?}");
    }
}
