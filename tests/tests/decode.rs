//! `fcan decode`: a capture of a whole session (the master's own traffic logged by the
//! candump recorder, as `candump -L` on the interface would) decoded offline must give
//! exactly the values the master delivered live, on CAN FD and Classical CAN, segmented
//! groups included; a capture without the blobs decodes from the cache or says why not.
//!
//! With `FCAN_DECODE_ARTIFACTS=DIR`, the capture, the decoded JSON lines, an MCAP file and
//! the DBC are left in DIR for the peer checks of `.ci/files-peer.sh` (Python `mcap` and
//! `cantools`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use fcan_cli::Cli;
use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::cache::{BlobStore, DiskStore};
use fcan_master::transport::candump::CandumpWriter;
use fcan_master::transport::recorder::Recorder;
use fcan_master::value::Value;
use fcan_master::Master;

const FEEDBACK: &str = "/motor_driver1/motor0/feedback";
const TARGET: &str = "/motor_driver1/motor1/target";
const TRAJECTORY: &str = "/motor_driver1/motor0/trajectory";
const SAMPLES: &str = "/io_board3/analog/samples";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fcan-decode-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `fcan ARGS…` in-process (offline commands need no bus); stdout, stderr, result.
async fn fcan(args: &[&str]) -> (String, String, Result<(), fcan_cli::CliError>) {
    let cli = Cli::try_parse_from(std::iter::once("fcan").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let r = fcan_cli::run_with(cli, None, None, &mut out, &mut notes).await;
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(notes).unwrap(),
        r,
    )
}

/// The values of `topic` in `fcan decode`'s JSON lines, in order.
fn decoded(lines: &str, topic: &str) -> Vec<serde_json::Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|j| j["topic"] == topic)
        .map(|j| {
            assert!(j["t"].as_f64().is_some(), "{j}");
            j["value"].clone()
        })
        .collect()
}

/// Whether `part` occurs in `whole` as a contiguous run.
fn contains_run(whole: &[serde_json::Value], part: &[serde_json::Value]) -> bool {
    !part.is_empty() && whole.windows(part.len()).any(|w| w == part)
}

/// Records a session: three nodes provisioned from scratch (the blobs downloaded, so the
/// capture holds them), then live traffic both ways. Returns what the master delivered
/// on the watched topics and the master (still running, for the plan).
async fn record(mtu: Mtu, log: &Path) -> (World, Master, Vec<Value>, Vec<Value>, Vec<Value>) {
    let mut w = World::new(mtu);
    let file = std::fs::File::create(log).unwrap();
    let rec = Recorder::new(w.endpoint(), CandumpWriter::new(file)).with_iface("vcan0");
    let m = w.start_master_on(rec).await;
    w.add_motor(MD1, 2);
    w.add_motor(MD2, 1);
    w.add_io(IO3);
    wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(5)).await;
    let mut fb = m.subscribe(FEEDBACK).await.unwrap();
    // An m2s topic's subscribers get what the master published, as `fcan topic echo`.
    let mut targets = m.subscribe(TARGET).await.unwrap();
    let mut samples = m.subscribe(SAMPLES).await.unwrap();
    let mut published = Vec::new();
    for k in 0..20 {
        let target = val(&format!("{{type: 1, value: {}}}", k as f32 * 0.25));
        m.publish(TARGET, target).await.unwrap();
        let traj = val(&format!(
            "{{position: {k}.5, velocity: -1.0, acceleration: 0.125}}"
        ));
        m.publish(TRAJECTORY, traj).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut got_fb = Vec::new();
    while let Ok(s) = fb.try_recv() {
        got_fb.push(s.value);
    }
    while let Ok(s) = targets.try_recv() {
        published.push(s.value);
    }
    assert_eq!(published.len(), 20);
    let mut got_samples = Vec::new();
    while let Ok(s) = samples.try_recv() {
        got_samples.push(s.value);
    }
    assert!(got_fb.len() >= 20, "feedback: {}", got_fb.len());
    assert!(got_samples.len() >= 10, "samples: {}", got_samples.len());
    (w, m, got_fb, got_samples, published)
}

async fn decode_equals_live(mtu: Mtu) {
    let tag = match mtu {
        Mtu::Fd => "fd",
        Mtu::Classic => "classic",
    };
    let dir = scratch(tag);
    let log = dir.join("capture.log");
    let (_w, m, fb, samples, published) = record(mtu, &log).await;
    let capture = std::fs::read_to_string(&log).unwrap();
    assert!(capture.lines().count() > 100, "{capture}");

    // Every blob is in the capture: no cache needed.
    let (out, notes, r) = fcan(&["--no-cache", "decode", log.to_str().unwrap()]).await;
    r.unwrap_or_else(|e| panic!("{e}\n{notes}"));
    assert!(notes.contains(", 0 from the cache"), "{notes}");
    assert!(!notes.contains("not decoded"), "{notes}");
    let json = |v: &Value| serde_json::to_value(v).unwrap();
    let live_fb: Vec<_> = fb.iter().map(json).collect();
    let dec_fb = decoded(&out, FEEDBACK);
    assert!(
        contains_run(&dec_fb, &live_fb),
        "the live feedback is not a run of the decoded one ({} live, {} decoded)",
        live_fb.len(),
        dec_fb.len()
    );
    // A group of five frames on Classical CAN: whole values, equal to the live ones.
    let live_samples: Vec<_> = samples.iter().map(json).collect();
    assert!(contains_run(&decoded(&out, SAMPLES), &live_samples));
    // What the master published (m2s), in order.
    let pub_json: Vec<_> = published.iter().map(json).collect();
    assert_eq!(decoded(&out, TARGET), pub_json);
    let traj = decoded(&out, TRAJECTORY);
    assert_eq!(traj.len(), 20);
    assert_eq!(traj[19]["position"], 19.5);

    // --topic filters.
    let (only, _, r) = fcan(&[
        "--no-cache",
        "decode",
        log.to_str().unwrap(),
        "--topic",
        FEEDBACK,
    ])
    .await;
    r.unwrap();
    assert_eq!(decoded(&only, FEEDBACK), dec_fb);
    assert_eq!(only.lines().count(), dec_fb.len());

    if let Some(out_dir) = std::env::var_os("FCAN_DECODE_ARTIFACTS") {
        let out_dir = PathBuf::from(out_dir).join(tag);
        std::fs::create_dir_all(&out_dir).unwrap();
        std::fs::copy(&log, out_dir.join("capture.log")).unwrap();
        std::fs::write(out_dir.join("decoded.jsonl"), &out).unwrap();
        let mcap = out_dir.join("capture.mcap");
        let (_, notes, r) = fcan(&[
            "--no-cache",
            "decode",
            log.to_str().unwrap(),
            "--mcap",
            mcap.to_str().unwrap(),
        ])
        .await;
        r.unwrap_or_else(|e| panic!("{e}\n{notes}"));
        let dbc = out_dir.join("plan.dbc");
        on_master(&m, &["plan", "--dbc", dbc.to_str().unwrap()]).await;
    }
    plan_and_dbc(&m, mtu, &dir).await;
}

/// Runs `fcan ARGS…` against the running master; its stdout.
async fn on_master(m: &Master, args: &[&str]) -> String {
    let cli = Cli::try_parse_from(std::iter::once("fcan").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut out = Vec::new();
    fcan_cli::execute(
        m,
        &cli.command,
        fcan_cli::Output { json: cli.json },
        &mut out,
    )
    .await
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    String::from_utf8(out).unwrap()
}

/// `fcan plan` lists every frame of the master's plans; `--dbc` describes each ordinary
/// frame as a message and lists the split groups it cannot describe.
async fn plan_and_dbc(m: &Master, mtu: Mtu, dir: &Path) {
    let lines: Vec<serde_json::Value> = on_master(m, &["plan", "--json"])
        .await
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut total = 0;
    for id in [MD1, MD2, IO3] {
        let plan = m
            .plan(fcan_core::id::NodeId::new(id).unwrap())
            .await
            .unwrap()
            .unwrap();
        total += plan.frames.len();
    }
    assert_eq!(lines.len(), total);
    let groups = lines
        .iter()
        .filter(|l| l["group_parts"].as_u64() > Some(1))
        .count();
    // The 34-byte analog samples: a group of five on Classical CAN, one frame on FD.
    assert_eq!(groups > 0, mtu == Mtu::Classic, "{lines:?}");
    let carrying = |topic: &str| {
        lines
            .iter()
            .filter(|l| l["topics"].as_array().unwrap().iter().any(|t| t == topic))
            .cloned()
            .collect::<Vec<_>>()
    };
    let fb = carrying(FEEDBACK);
    assert!(fb.iter().all(|f| f["dir"] == "s2m"));
    // 13 bytes: one frame on FD, a group of two on Classical CAN.
    assert_eq!(fb.len(), if mtu == Mtu::Fd { 1 } else { 2 }, "{fb:?}");
    let target = carrying(TARGET);
    assert_eq!(target.len(), 1);
    assert_eq!(target[0]["dir"], "m2s");
    let path = dir.join("plan.dbc");
    let text = on_master(m, &["plan", "--dbc", path.to_str().unwrap()]).await;
    assert!(text.contains("wrote"), "{text}");
    let dbc = std::fs::read_to_string(&path).unwrap();
    let messages = dbc.lines().filter(|l| l.starts_with("BO_ ")).count();
    assert_eq!(messages, total - groups, "{dbc}");
    let id = target[0]["std_id"].as_u64().unwrap();
    // Its own message on Classical CAN; on FD it shares motor_driver1's command frame.
    assert!(dbc.contains(&format!("BO_ {id} ")), "{dbc}");
    assert!(
        dbc.contains(&format!(
            "SIG_VALTYPE_ {id} motor_driver1_motor1_target_value : 1;"
        )),
        "{dbc}"
    );
    assert!(
        dbc.contains(" SG_ motor_driver1_motor1_target_type : ")
            && dbc.contains("|8@1+ (1,0) [0|255] \"\" motor_driver1\n"),
        "{dbc}"
    );
    let fd_marks = dbc
        .lines()
        .filter(|l| l.starts_with("BA_ \"VFrameFormat\"") && l.ends_with(" 14;"))
        .count();
    assert_eq!(fd_marks, if mtu == Mtu::Fd { messages } else { 0 });
    if groups > 0 {
        assert!(dbc.contains("(a split group)"), "{dbc}");
    }
}

both_links!(decode_equals_live);

#[tokio::test(start_paused = true)]
async fn blobs_from_the_cache_when_the_capture_lacks_them() {
    let dir = scratch("cache");
    let log = dir.join("warm.log");
    let mut w = World::new(Mtu::Classic);
    w.add_motor(MD1, 1);
    // A first master reads the blob (into the world's shared cache) ...
    let first = w.start_master().await;
    wait_running(&first, &[MD1], Duration::from_secs(5)).await;
    drop(first);
    // ... and the node reboots, to be provisioned by a master that has it cached: this
    // capture holds no SCHEMA_DATA.
    w.reboot_motor(MD1);
    let rec = Recorder::new(
        w.endpoint(),
        CandumpWriter::new(std::fs::File::create(&log).unwrap()),
    );
    let m = w.start_master_on(rec).await;
    wait_running(&m, &[MD1], Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(m);

    let (out, notes, r) = fcan(&["--no-cache", "decode", log.to_str().unwrap()]).await;
    assert!(r.is_err(), "nothing decodable without the blob: {out}");
    assert!(out.is_empty());
    assert!(
        notes.contains("neither in the capture nor in the cache"),
        "{notes}"
    );

    // The blob in a cache directory, as the master's disk cache keeps it.
    let cache = dir.join("blobs");
    let disk = DiskStore::new(&cache);
    let (digest, blob) = {
        let s = w.store.clone();
        let node = m_schema_of(&s);
        node.expect("the world's cache holds the motor driver's blob")
    };
    disk.store(digest, &blob).unwrap();
    let (out, notes, r) = fcan(&[
        "--cache-dir",
        cache.to_str().unwrap(),
        "decode",
        log.to_str().unwrap(),
    ])
    .await;
    r.unwrap_or_else(|e| panic!("{e}\n{notes}"));
    assert!(notes.contains("1 from the cache"), "{notes}");
    assert!(!decoded(&out, FEEDBACK).is_empty(), "{notes}");
}

/// The one blob a world's shared memory cache holds.
fn m_schema_of(
    store: &std::sync::Arc<fcan_master::cache::MemoryStore>,
) -> Option<(fcan_core::hash::SchemaDigest, Vec<u8>)> {
    let blob = &fcan_example_motor_driver::gen::BLOB[..];
    let digest = fcan_core::hash::SchemaDigest::of(blob);
    store.contains(digest).then(|| (digest, blob.to_vec()))
}

#[tokio::test]
async fn a_capture_that_began_after_provisioning_is_reported_not_guessed() {
    let dir = scratch("late");
    let log = dir.join("late.log");
    // Data frames only, as a capture started mid-run holds.
    std::fs::write(
        &log,
        "(1.000000) can0 100#0011223344556677\n(1.000100) can0 101#00\nnot a line\n",
    )
    .unwrap();
    let (out, notes, r) = fcan(&["--no-cache", "decode", log.to_str().unwrap()]).await;
    assert!(r.is_err());
    assert!(out.is_empty());
    assert!(notes.contains("2 data frames not decoded"), "{notes}");
    assert!(notes.contains("1 unreadable lines"), "{notes}");
    let (_, notes, r) = fcan(&["decode", dir.join("missing.log").to_str().unwrap()]).await;
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("cannot open") && e.contains("missing.log"),
        "{e}{notes}"
    );
}
