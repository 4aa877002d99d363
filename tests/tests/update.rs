//! Firmware update over the bus, end to end on the simulated bus (issue 26): a real
//! `Master` writes an image into a fake I/O board (`fcan-fake`, the firmware's own node
//! runtime with its `update` feature; a fake's firmware is its schema blob) built from
//! `schema/examples/io_board.yaml`. The "new build" is the same schema with one more
//! parameter. The node verifies the image, reboots into it, and the master downloads
//! the new blob, re-plans, restores the parameters the user set that still exist and
//! reports the ones that do not; the node list shows the new schema and version.
//!
//! Each claim has its own test. The paused clock makes each run the same.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_core::hash::SchemaDigest;
use fcan_core::id::{ConfigId, NodeId, Opcode};
use fcan_e2e::*;
use fcan_fake::run::{run_fake, Running};
use fcan_fake::{FakeConfig, FakeNode, FakeSchema, Mirror};
use fcan_master::engine::{UpdateError, UpdateStep};
use fcan_master::update::{UpdateConfig, UpdateImage};
use fcan_master::value::Value;
use fcan_master::MasterEvent;
use fcan_master::{Master, MasterError};

/// The fake board's node id.
const ID: u8 = 7;
/// Its name (`io_board{i}`).
const NAME: &str = "io_board7";

fn example_yaml() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema/examples/io_board.yaml");
    std::fs::read_to_string(p).expect("the example schema")
}

/// The blob of a schema written as YAML text (through the CLI's loader, as `fcan fake
/// --schema` compiles it).
fn blob_of(yaml: &str, tag: &str) -> Vec<u8> {
    // Tests run in parallel: each compile gets its own folder.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("fcan-update-{}-{tag}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join("io_board.yaml");
    std::fs::write(&file, yaml).unwrap();
    let blob = fcan_cli::fake::load_blob(&[file]).expect("the schema compiles");
    let _ = std::fs::remove_dir_all(&dir);
    blob
}

/// The example schema with `edit` applied to the DigitalIn params.
fn variant(edit: impl Fn(&str) -> String, tag: &str) -> Vec<u8> {
    let line = "      debounce_ms: { type: u8, default: 5, min: 0, max: 200 }\n";
    let yaml = example_yaml();
    assert!(
        yaml.contains(line),
        "the example schema changed: update this test"
    );
    blob_of(&yaml.replace(line, &edit(line)), tag)
}

/// Version 2: one more parameter in every digital input.
fn v2() -> Vec<u8> {
    variant(
        |l| format!("{l}      glitch_filter_us: {{ type: u16, default: 40, max: 1000 }}\n"),
        "v2",
    )
}

/// Version 2 with 30 more parameters, their defaults from `first`: an image of a few
/// kilobytes, long enough on the bus for a cut to land in its transfer.
fn v2_large_from(first: u16, tag: &str) -> Vec<u8> {
    variant(
        |l| {
            (0..30u16).fold(l.to_string(), |t, i| {
                t + &format!(
                    "      calibration_table_entry_{i:02}: {{ type: u16, default: {}, max: 60000 }}\n",
                    first + i
                )
            })
        },
        tag,
    )
}

fn v2_large() -> Vec<u8> {
    v2_large_from(0, "v2-large")
}

/// Another large build (every default one more than [`v2_large`]'s).
fn v2_large_variant() -> Vec<u8> {
    v2_large_from(1, "v2-large-variant")
}

/// Version 3: `debounce_ms` gone.
fn v3_without_debounce() -> Vec<u8> {
    variant(
        |_| "      hold_ms: { type: u16, default: 0 }\n".into(),
        "v3",
    )
}

fn image(blob: &[u8], version: &str) -> UpdateImage {
    let schema = fcan_core::msg::update::schema_node_name(blob)
        .expect("a blob names its node")
        .to_owned();
    UpdateImage::new(blob.to_vec(), SchemaDigest::of(blob).0, &schema, version)
}

/// A master and the fake board running v1, taking updates as firmware `1.0.0`.
async fn board(w: &World, takes_updates: bool) -> (Master, Running, Vec<u8>) {
    let (fake, v1) = fake_board(w, takes_updates);
    let m = w.start_master().await;
    wait_running(&m, &[ID], Duration::from_secs(3)).await;
    (m, fake, v1)
}

/// The fake board running v1 (no master yet), taking updates as firmware `1.0.0` if
/// `takes_updates`.
fn fake_board(w: &World, takes_updates: bool) -> (Running, Vec<u8>) {
    let v1 = blob_of(&example_yaml(), "v1");
    let mut node = FakeNode::new(
        FakeSchema::from_blob(&v1).unwrap(),
        FakeConfig {
            node_id: NodeId::new(ID).unwrap(),
            boot_id: fcan_examples::boot_id(),
            counts: None,
            fd_capable: w.fd(),
            mirror: Mirror::new(),
        },
    )
    .unwrap();
    if takes_updates {
        node.take_updates("1.0.0");
    }
    (run_fake(w.endpoint(), node), v1)
}

fn node_id() -> NodeId {
    NodeId::new(ID).unwrap()
}

/// The new build runs, provisioned, with the parameter set before kept, and the node
/// list shows the new schema and version.
async fn updated_to_a_build_with_one_more_parameter(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, fake, v1) = board(&w, true).await;
    // The version the board reports, asked once it runs.
    let before = wait_for(&m, |n| n.firmware.is_some()).await;
    assert_eq!(before.firmware.as_deref(), Some("1.0.0"));
    assert_eq!(before.digest, Some(SchemaDigest::of(&v1)));
    let debounce = format!("{NAME}.in2.debounce_ms");
    m.param_set(&debounce, Value::UInt(17)).await.unwrap();

    let v2 = v2();
    let mut events = m.events();
    let report = m
        .update(node_id(), image(&v2, "2.0.0"), UpdateConfig::default())
        .await
        .expect("the update succeeds");
    assert_eq!(report.version, "2.0.0");
    assert_eq!(report.schema, SchemaDigest::of(&v2));
    assert!(report.schema_changed);
    // Every digital input's debounce the user set (one) is restored, none dropped.
    assert_eq!(report.restored, vec![debounce.clone()]);
    assert!(report.dropped.is_empty(), "{:?}", report.dropped);

    // The board runs the new image, with a new boot id.
    let info = node_info(&m, ID).await.unwrap();
    assert_eq!(info.digest, Some(SchemaDigest::of(&v2)));
    assert_eq!(info.firmware.as_deref(), Some("2.0.0"));
    assert_ne!(info.boot_id, before.boot_id);
    assert_eq!(
        fake.with(|n| n.firmware_version().map(str::to_owned)),
        Some("2.0.0".into())
    );
    // The node holds the restored value (asked from the node, not the master's copy),
    // and the new parameter with its default.
    assert_eq!(m.param_get(&debounce).await.unwrap(), Value::UInt(17));
    let glitch = format!("{NAME}.in2.glitch_filter_us");
    assert_eq!(m.param_get(&glitch).await.unwrap(), Value::UInt(40));
    assert!(fake.with(|n| n
        .schema()
        .schema
        .types
        .iter()
        .any(|t| t.params.iter().any(|p| p.name == "glitch_filter_us"))));

    // Progress came on the way: sending with bytes acknowledged, then the reboot, and
    // the end; the acknowledged count never goes back except after a loss (none here).
    let mut acked = Vec::new();
    let mut steps = Vec::new();
    let mut done = false;
    while let Ok(e) = events.try_recv() {
        match e {
            MasterEvent::UpdateProgress { step, progress, .. } => {
                steps.push(step);
                acked.push(progress.acked);
                assert_eq!(progress.size, v2.len() as u64);
            }
            MasterEvent::UpdateDone { result, .. } => done = result.is_ok(),
            _ => {}
        }
    }
    assert!(done);
    assert_eq!(steps.first(), Some(&UpdateStep::Offering));
    assert!(steps.contains(&UpdateStep::Sending));
    assert_eq!(steps.last(), Some(&UpdateStep::Rebooting));
    assert!(acked.windows(2).all(|p| p[0] <= p[1]), "{acked:?}");
    assert_eq!(acked.last(), Some(&(v2.len() as u64)));
}

/// An update to a build of the same schema (a bug fix) reports the parameters set so far
/// as restored: the master sets them again, as after any reboot (issue 38 item 12: the
/// report said "restored: none" when one was kept).
async fn an_update_to_the_same_schema_reports_the_parameters_set_again(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, v1) = board(&w, true).await;
    wait_for(&m, |n| n.firmware.is_some()).await;
    let debounce = format!("{NAME}.in2.debounce_ms");
    m.param_set(&debounce, Value::UInt(17)).await.unwrap();
    let report = m
        .update(node_id(), image(&v1, "1.0.1"), UpdateConfig::default())
        .await
        .expect("the update succeeds");
    assert!(!report.schema_changed);
    assert_eq!(report.version, "1.0.1");
    assert_eq!(report.restored, vec![debounce.clone()]);
    assert!(report.dropped.is_empty(), "{:?}", report.dropped);
    assert_eq!(m.param_get(&debounce).await.unwrap(), Value::UInt(17));
}

/// A parameter the new schema does not have is reported, not restored; the others are.
async fn a_parameter_the_new_build_lacks_is_reported(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, _) = board(&w, true).await;
    let debounce = format!("{NAME}.in0.debounce_ms");
    let min_on = format!("{NAME}.out1.min_on_ms");
    m.param_set(&debounce, Value::UInt(9)).await.unwrap();
    m.param_set(&min_on, Value::UInt(250)).await.unwrap();
    let mut events = m.events();
    let report = m
        .update(
            node_id(),
            image(&v3_without_debounce(), "3.0.0"),
            UpdateConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(report.restored, vec![min_on.clone()]);
    assert_eq!(report.dropped, vec![debounce.clone()]);
    assert_eq!(m.param_get(&min_on).await.unwrap(), Value::UInt(250));
    assert!(m.param_get(&debounce).await.is_err());
    // The engine said so as an event too (what `fcan monitor` shows).
    let mut carried = None;
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::ParamsCarried {
            restored, dropped, ..
        } = e
        {
            carried = Some((restored, dropped));
        }
    }
    assert_eq!(carried, Some((vec![min_on], vec![debounce])));
}

/// An image for another board is refused by the master before a single UPDATE frame.
async fn an_image_for_another_board_sends_nothing(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, v1) = board(&w, true).await;
    // The version QUERY a running board is asked once is over before we listen.
    wait_for(&m, |n| n.firmware.is_some()).await;
    let mut frames = m.frames();
    let mut other = image(&v1, "9.9.9");
    other = UpdateImage::new(
        other.bytes().to_vec(),
        other.schema(),
        "motor_driver{i}",
        "9.9.9",
    );
    let err = m
        .update(node_id(), other, UpdateConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MasterError::Update(UpdateError::WrongBoard { image, .. }) if image == "motor_driver{i}"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Ok(f) = frames.try_recv() {
        if let CanId::Extended(_) = f.frame.id() {
            let cid = ConfigId::from_can_id(f.frame.id()).unwrap();
            assert_ne!(cid.opcode, Opcode::Update, "an UPDATE frame went out");
        }
    }
}

/// A node that does not announce the capability is not offered anything.
async fn a_node_without_updates_is_refused(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, v1) = board(&w, false).await;
    let err = m
        .update(node_id(), image(&v1, "1.0.1"), UpdateConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, MasterError::Update(UpdateError::NotSupported(n)) if n == node_id()),
        "{err}"
    );
    let err = m.abort_update(node_id()).await.unwrap_err();
    assert!(
        matches!(err, MasterError::Update(UpdateError::NotSupported(_))),
        "{err}"
    );
    // And it reports no firmware version.
    assert_eq!(node_info(&m, ID).await.unwrap().firmware, None);
}

/// Frames lost and repeated on the way to the board: the transfer goes back to what the
/// node has (go-back-N) and the update completes with the right image.
async fn losses_and_repeats_are_recovered(mtu: Mtu) {
    use fcan_transport::fault::{FaultConfig, FaultInjector};
    let w = World::new(mtu);
    let v1 = blob_of(&example_yaml(), "loss-v1");
    let mut node = FakeNode::new(
        FakeSchema::from_blob(&v1).unwrap(),
        FakeConfig {
            node_id: node_id(),
            boot_id: fcan_examples::boot_id(),
            counts: None,
            fd_capable: w.fd(),
            mirror: Mirror::new(),
        },
    )
    .unwrap();
    node.take_updates("1.0.0");
    let faults = FaultConfig {
        drop: 0.03,
        duplicate: 0.03,
        ..Default::default()
    };
    let _fake = run_fake(FaultInjector::new(w.endpoint(), faults, 26), node);
    let m = w.start_master().await;
    wait_running(&m, &[ID], Duration::from_secs(5)).await;
    let v2 = v2();
    let mut events = m.events();
    let report = m
        .update(node_id(), image(&v2, "2.0.0"), UpdateConfig::default())
        .await
        .expect("the update completes despite the losses");
    assert_eq!(report.schema, SchemaDigest::of(&v2));
    let mut resent = 0;
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::UpdateProgress { progress, .. } = e {
            resent = resent.max(progress.resent);
        }
    }
    assert!(
        resent > 0,
        "no chunk was sent again: the faults did not hit the transfer"
    );
    assert_eq!(
        node_info(&m, ID).await.unwrap().digest,
        Some(SchemaDigest::of(&v2))
    );
}

/// The master goes away in the middle of the transfer; the next master offers the same
/// image and the node resumes from the bytes it stored, not from zero.
async fn a_new_master_resumes_where_the_lost_one_stopped(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, _) = board(&w, true).await;
    let v2 = v2_large();
    let mut events = m.events();
    let first = {
        let m = m.clone();
        let img = image(&v2, "2.0.0");
        // A small bus share: the transfer takes seconds, so the cut lands in it.
        let slow = UpdateConfig {
            share: 0.01,
            ..UpdateConfig::default()
        };
        tokio::spawn(async move { m.update(node_id(), img, slow).await })
    };
    // Wait for some bytes to be stored, then pull the master's plug.
    let stored = loop {
        match events.recv().await.unwrap() {
            MasterEvent::UpdateProgress { progress, .. } if progress.acked > 0 => {
                break progress.acked
            }
            _ => {}
        }
    };
    assert!(
        stored < v2.len() as u64,
        "the image went through before the cut: {stored} of {}",
        v2.len()
    );
    first.abort();
    drop(events);
    drop(m);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let m2 = w.start_master().await;
    wait_running(&m2, &[ID], Duration::from_secs(5)).await;
    let mut events = m2.events();
    let report = m2
        .update(node_id(), image(&v2, "2.0.0"), UpdateConfig::default())
        .await
        .expect("the second master finishes it");
    assert_eq!(report.schema, SchemaDigest::of(&v2));
    // The first progress with a rate (after the node's Receiving answer) starts from
    // what the node had, not from zero.
    let mut first_acked = None;
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::UpdateProgress {
            step: UpdateStep::Sending,
            progress,
            ..
        } = e
        {
            first_acked.get_or_insert(progress.acked);
        }
    }
    let resumed_at = first_acked.expect("a Sending progress");
    assert!(
        resumed_at >= stored,
        "resumed at {resumed_at}, the node had {stored}"
    );
}

/// An image the node verifies but does not boot (for a fake node: bytes that are not a
/// schema blob; on a board, a bootloader that keeps the old firmware): the update ends
/// with the reason, the node runs its old firmware and is provisioned again.
async fn an_image_that_does_not_boot_is_reported(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, v1) = board(&w, true).await;
    let junk = UpdateImage::new(vec![0xA5; 3000], [0x11; 32], "io_board{i}", "6.6.6");
    let err = m
        .update(node_id(), junk, UpdateConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, MasterError::Update(UpdateError::NotBooted(n)) if n == node_id()),
        "{err}"
    );
    let info = wait_for(&m, |n| {
        n.phase == fcan_master::Phase::Running && n.firmware.is_some()
    })
    .await;
    assert_eq!(info.digest, Some(SchemaDigest::of(&v1)));
    assert_eq!(info.firmware.as_deref(), Some("1.0.0"));
}

/// Asked again while it runs (a client cut off runs its command again), the same image
/// joins the running update and both callers get its end; another image is refused.
async fn the_same_image_again_joins_the_running_update(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, _) = board(&w, true).await;
    let v2 = v2_large();
    let slow = UpdateConfig {
        share: 0.02,
        ..UpdateConfig::default()
    };
    let first = {
        let (m, img) = (m.clone(), image(&v2, "2.0.0"));
        tokio::spawn(async move { m.update(node_id(), img, slow).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let other = m
        .update(node_id(), image(&v2_large_variant(), "2.0.1"), slow)
        .await
        .unwrap_err();
    assert!(
        matches!(other, MasterError::Update(UpdateError::Busy(n)) if n == node_id()),
        "{other}"
    );
    let again = m
        .update(node_id(), image(&v2, "2.0.0"), slow)
        .await
        .unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(again, first);
    assert_eq!(first.schema, SchemaDigest::of(&v2));
}

/// An abort ends the running update (its caller learns why) and the node drops what it
/// stored: the same image offered again starts from byte 0, and still goes through.
async fn an_abort_ends_the_update_and_the_node_starts_over(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, _fake, v1) = board(&w, true).await;
    // Nothing runs: the ABORT goes out all the same (a lost master's transfer).
    m.abort_update(node_id()).await.unwrap();
    let v2 = v2_large();
    let mut events = m.events();
    let first = {
        let (m, img) = (m.clone(), image(&v2, "2.0.0"));
        let slow = UpdateConfig {
            share: 0.01,
            ..UpdateConfig::default()
        };
        tokio::spawn(async move { m.update(node_id(), img, slow).await })
    };
    let stored = loop {
        match events.recv().await.unwrap() {
            MasterEvent::UpdateProgress { progress, .. } if progress.acked > 0 => {
                break progress.acked
            }
            _ => {}
        }
    };
    assert!(stored < v2.len() as u64);
    m.abort_update(node_id()).await.unwrap();
    let err = first.await.unwrap().unwrap_err();
    assert!(
        matches!(err, MasterError::Update(UpdateError::Aborted(n)) if n == node_id()),
        "{err}"
    );
    // The node still runs what it had.
    assert_eq!(
        node_info(&m, ID).await.unwrap().digest,
        Some(SchemaDigest::of(&v1))
    );
    let mut events = m.events();
    let report = m
        .update(node_id(), image(&v2, "2.0.0"), UpdateConfig::default())
        .await
        .unwrap();
    assert_eq!(report.schema, SchemaDigest::of(&v2));
    let mut first_sending = None;
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::UpdateProgress {
            step: UpdateStep::Sending,
            progress,
            ..
        } = e
        {
            first_sending.get_or_insert(progress.acked);
        }
    }
    assert_eq!(
        first_sending,
        Some(0),
        "the node kept bytes of the aborted transfer"
    );
}

/// The board dies in the middle of the transfer: the update ends as soon as the master
/// marks the node offline (silent), not after the session's retries run out.
async fn a_board_gone_offline_ends_its_update(mtu: Mtu) {
    let w = World::new(mtu);
    let (m, fake, _) = board(&w, true).await;
    let v2 = v2_large();
    let mut events = m.events();
    let slow = UpdateConfig {
        share: 0.01,
        ..UpdateConfig::default()
    };
    let run = {
        let m = m.clone();
        let img = image(&v2, "2.0.0");
        tokio::spawn(async move { m.update(node_id(), img, slow).await })
    };
    loop {
        match events.recv().await.unwrap() {
            MasterEvent::UpdateProgress { progress, .. } if progress.acked > 0 => break,
            _ => {}
        }
    }
    fake.stop();
    let t0 = tokio::time::Instant::now();
    let e = run.await.unwrap().expect_err("the board is gone");
    let took = t0.elapsed();
    assert!(
        matches!(e, MasterError::Update(UpdateError::Silent(n)) if n == node_id()),
        "{e}"
    );
    let offline = Duration::from_micros(fcan_core::timing::NODE_OFFLINE_TIMEOUT_US.into());
    let retries = Duration::from_micros(slow.retry_us * u64::from(slow.max_retries));
    assert!(
        took <= offline + Duration::from_millis(200) && took < retries,
        "ended {took:?} after the board stopped (offline after {offline:?}, retries would take {retries:?})"
    );
}

/// `fcan update` with no daemon (the one-shot master, as on a bus nobody serves): the
/// command line discovers the board, writes an image file into it and reports each step
/// as JSON lines; a second one-shot command, `fcan nodes`, sees the new schema and
/// version.
async fn one_shot_fcan_update_writes_an_image_file(mtu: Mtu) {
    let w = World::new(mtu);
    let (fake, v1) = fake_board(&w, true);
    let v2 = v2();
    let dir = std::env::temp_dir().join(format!(
        "fcan-update-one-shot-{}-{mtu:?}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("io_board-2.0.0.fcanimg");
    std::fs::write(&file, image(&v2, "2.0.0").to_file()).unwrap();
    let lines = one_shot(&w, &["update", NAME, file.to_str().unwrap()]).await;
    let _ = std::fs::remove_dir_all(&dir);

    let done = lines.last().expect("a result line");
    assert_eq!(done["event"], "done", "{lines:?}");
    assert_eq!(done["node"], ID);
    assert_eq!(done["name"], NAME);
    assert_eq!(done["version"], "2.0.0");
    assert_eq!(done["schema"], SchemaDigest::of(&v2).to_string());
    assert_eq!(done["schema_changed"], true);
    let progress: Vec<_> = lines.iter().filter(|l| l["event"] == "progress").collect();
    assert!(progress.iter().any(|p| p["step"] == "sending"), "{lines:?}");
    assert_eq!(
        fake.with(|n| n.firmware_version().map(str::to_owned)),
        Some("2.0.0".into())
    );

    let nodes = one_shot(&w, &["nodes"]).await;
    let node = nodes
        .iter()
        .find(|n| n["name"] == NAME)
        .unwrap_or_else(|| panic!("{NAME} not listed: {nodes:?}"));
    assert_eq!(node["firmware"], "2.0.0");
    assert_eq!(node["schema"], done["schema"]);
    assert_ne!(node["schema"], SchemaDigest::of(&v1).to_string());
}

/// Runs `fcan --bus sim --no-cache --json ARGS` as a one-shot master on the world's bus
/// (no daemon looked for) and returns its JSON lines.
async fn one_shot(w: &World, args: &[&str]) -> Vec<serde_json::Value> {
    use clap::Parser;
    let argv = ["fcan", "--bus", "sim", "--no-cache", "--json"]
        .iter()
        .chain(args)
        .copied();
    let cli = fcan_cli::Cli::try_parse_from(argv).expect("the command line parses");
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let r = fcan_cli::run_with(cli, Some(&w.bus), None, &mut out, &mut notes).await;
    let out = String::from_utf8(out).unwrap();
    if let Err(e) = r {
        panic!(
            "fcan {args:?}: {e}\n{out}{}",
            String::from_utf8_lossy(&notes)
        );
    }
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

both_links!(
    a_board_gone_offline_ends_its_update,
    one_shot_fcan_update_writes_an_image_file,
    an_abort_ends_the_update_and_the_node_starts_over,
    the_same_image_again_joins_the_running_update,
    an_image_that_does_not_boot_is_reported,
    losses_and_repeats_are_recovered,
    a_new_master_resumes_where_the_lost_one_stopped,
    updated_to_a_build_with_one_more_parameter,
    a_parameter_the_new_build_lacks_is_reported,
    an_image_for_another_board_sends_nothing,
    a_node_without_updates_is_refused,
    an_update_to_the_same_schema_reports_the_parameters_set_again,
);

/// The node as the master lists it once `ok` holds (within 3 s).
async fn wait_for(
    m: &Master,
    ok: impl Fn(&fcan_master::NodeInfo) -> bool,
) -> fcan_master::NodeInfo {
    for _ in 0..300 {
        if let Some(n) = node_info(m, ID).await.filter(|n| ok(n)) {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("node {ID} never got there: {:?}", node_info(m, ID).await);
}

/// Figures for docs/performance.md: how long the other nodes' data frames wait for the
/// bus (queueing and lost arbitrations, from the simulated bus's exact record) while an
/// update runs at a given bus share, against the same bus without one. Two motor drivers
/// (12 motors, their feedback every 5 ms) and the fake I/O board being written a
/// 400 kB image, for 2 s of bus time after the transfer started.
#[tokio::test(start_paused = true)]
#[ignore = "figures for docs/performance.md: cargo test --workspace --test update -- --ignored --nocapture"]
async fn latency_figures() {
    use fcan_transport::sim::{SimBus, SimConfig};
    for mtu in [Mtu::Fd, Mtu::Classic] {
        for share in [None, Some(0.1), Some(0.25), Some(0.5), Some(1.0)] {
            let mut w = World::new(mtu);
            w.bus = SimBus::new(SimConfig {
                history: 1 << 20,
                ..SimConfig::default()
            });
            w.add_motor(MD1, 8);
            w.add_motor(MD2, 4);
            let (m, _fake, _) = board(&w, true).await;
            wait_running(&m, &[MD1, MD2, ID], Duration::from_secs(5)).await;
            wait_for(&m, |n| n.firmware.is_some()).await;
            let mut task = None;
            if let Some(share) = share {
                let m = m.clone();
                let img = UpdateImage::new(vec![0x5A; 400_000], [0x22; 32], "io_board{i}", "big");
                let cfg = UpdateConfig {
                    share,
                    ..UpdateConfig::default()
                };
                task = Some(tokio::spawn(
                    async move { m.update(node_id(), img, cfg).await },
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let t0 = w.bus.now();
            tokio::time::sleep(Duration::from_secs(2)).await;
            let t1 = w.bus.now();
            let hist: Vec<_> = w
                .bus
                .history()
                .into_iter()
                .filter(|r| r.start >= t0 && r.start < t1)
                .collect();
            let mut waits: Vec<f64> = hist
                .iter()
                .filter(|r| matches!(r.frame.id(), CanId::Standard(_)))
                .map(|r| r.queueing_latency().as_secs_f64() * 1e6)
                .collect();
            waits.sort_by(f64::total_cmp);
            let update_bytes: usize = hist
                .iter()
                .filter(|r| {
                    ConfigId::from_can_id(r.frame.id()).is_ok_and(|c| c.opcode == Opcode::Update)
                })
                .map(|r| r.frame.data().len())
                .sum();
            let busy: f64 = hist.iter().map(|r| (r.end - r.start).as_secs_f64()).sum();
            let pct = |p: f64| waits[((waits.len() - 1) as f64 * p) as usize];
            println!(
                "{mtu:?} update share {:>5}: {} data frames, wait p50 {:6.1} us p99 {:6.1} us max {:6.1} us; UPDATE payload {:6.1} KiB/s, bus busy {:4.1} %",
                share.map_or("none".to_string(), |s| format!("{:.0} %", s * 100.0)),
                waits.len(),
                pct(0.5),
                pct(0.99),
                waits.last().copied().unwrap_or(0.0),
                update_bytes as f64 / 1024.0 / (t1 - t0).as_secs_f64(),
                busy / (t1 - t0).as_secs_f64() * 100.0
            );
            if let Some(t) = task {
                t.abort();
            }
        }
    }
}
