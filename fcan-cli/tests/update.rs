//! `fcan update` as a user runs it: the real `fcan fake` binary runs the example I/O board
//! (`schema/examples/io_board.yaml`) taking updates on the simulated bus, served over
//! Zenoh; the real `fcan update` attached to it writes the "new build" (the schema with
//! one more parameter: a fake node's firmware is its schema blob) through the remote API
//! (`fcan/<bus>/update/<node>`). The node reboots into it, the daemon re-provisions it
//! and keeps the parameter set before, and `fcan nodes` shows the new schema and version.
//! Also its refusals and its help.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;
use serde_json::Value as Json;

mod common;
use common::{fcan, text, until_ready, Kill};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema/examples/io_board.yaml")
}

/// The example schema with one more parameter in its digital inputs, in a folder of
/// its own.
fn v2_schema(dir: &Path) -> PathBuf {
    let line = "      debounce_ms: { type: u8, default: 5, min: 0, max: 200 }\n";
    let yaml = std::fs::read_to_string(example()).unwrap();
    assert!(
        yaml.contains(line),
        "the example schema changed: update this test"
    );
    let v2 = yaml.replace(
        line,
        &format!("{line}      glitch_filter_us: {{ type: u16, default: 40, max: 1000 }}\n"),
    );
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("io_board_v2.yaml");
    std::fs::write(&p, v2).unwrap();
    p
}

/// The node as `fcan nodes --json` lists it, once `ok` holds (within 30 s).
fn node_when(ep: &str, ok: impl Fn(&Json) -> bool) -> Json {
    let t0 = Instant::now();
    loop {
        let o = fcan(ep, &["--json", "nodes"]);
        if o.status.success() {
            for l in String::from_utf8_lossy(&o.stdout).lines() {
                let v: Json = serde_json::from_str(l).unwrap();
                if v["name"] == "io_board7" && ok(&v) {
                    return v;
                }
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `fcan fake` running the example I/O board as these node ids, taking updates as
/// firmware 1.0.0, served on a free loopback port: the endpoint, and the process (killed
/// when dropped) once it says it is ready.
fn fake_boards(ids: &[&str]) -> (String, Kill) {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fcan"));
    cmd.arg("fake").arg("--schema").arg(example());
    for id in ids {
        cmd.args(["--node-id", id]);
    }
    let mut child = Kill(
        cmd.args(["--firmware", "1.0.0", "--no-cache", "--listen", &ep])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (stderr, _) = until_ready(&mut child.0);
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    (ep, child)
}

#[test]
fn help_has_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["update", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "--all-of",
        "--bus-share",
        "fcan update io_board3 firmware.bin --schema",
        "resumes",
    ] {
        assert!(help.contains(want), "{want}: {help}");
    }
}

#[test]
fn the_example_board_updated_through_the_daemon() {
    let (ep, _fake) = fake_boards(&["7"]);

    let before = node_when(&ep, |n| n["phase"] == "running" && n["firmware"] == "1.0.0");
    let o = fcan(&ep, &["param", "set", "io_board7.in2.debounce_ms", "17"]);
    assert!(o.status.success(), "{}", text(&o));

    // Refusals first: nothing to send, and an image for another board.
    let o = fcan(&ep, &["update", "io_board7"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--schema"),
        "{}",
        text(&o)
    );

    let dir = std::env::temp_dir().join(format!("fcan-cli-update-{}", std::process::id()));
    let v2 = v2_schema(&dir);
    let o = fcan(
        &ep,
        &[
            "--json",
            "update",
            "io_board7",
            "--schema",
            v2.to_str().unwrap(),
            "--version",
            "2.0.0",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<Json> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let done = lines.last().expect("a result line");
    assert_eq!(done["event"], "done", "{}", text(&o));
    assert_eq!(done["version"], "2.0.0");
    assert_eq!(done["schema_changed"], true);
    assert_eq!(
        done["restored"],
        serde_json::json!(["io_board7.in2.debounce_ms"])
    );
    assert_eq!(done["dropped"], serde_json::json!([]));
    // Progress came through the daemon's events, up to the whole image.
    let progress: Vec<&Json> = lines.iter().filter(|l| l["event"] == "progress").collect();
    assert!(!progress.is_empty(), "{}", text(&o));
    assert!(
        progress.iter().any(|p| p["step"] == "sending"),
        "{}",
        text(&o)
    );

    // The node list shows the new schema and version; the old parameter is kept, the
    // new one has its default.
    let after = node_when(&ep, |n| n["firmware"] == "2.0.0" && n["phase"] == "running");
    assert_eq!(after["schema"], done["schema"]);
    assert_ne!(after["schema"], before["schema"]);
    assert_ne!(after["boot_id"], before["boot_id"]);
    let o = fcan(
        &ep,
        &["--json", "param", "get", "io_board7.in2.debounce_ms"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["value"], 17, "{}", text(&o));
    let o = fcan(
        &ep,
        &["--json", "param", "get", "io_board7.in2.glitch_filter_us"],
    );
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["value"], 40, "{}", text(&o));

    // The same image again, as an image file written offline, with --all-of: the node
    // runs that schema, so it is skipped.
    let v2 = v2_schema(&dir);
    let file = dir.join("io_board-2.0.0.fcimg");
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args([
            "--json",
            "update",
            "--schema",
            v2.to_str().unwrap(),
            "--version",
            "2.0.0",
        ])
        .arg("--write-image")
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let written: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        written["schema"], done["schema"],
        "the image declares the schema the node announced"
    );
    assert_eq!(written["node"], "io_board{i}");
    assert!(std::fs::read(&file).unwrap().starts_with(b"FCANIMG1"));
    let o = fcan(
        &ep,
        &[
            "--json",
            "update",
            "--all-of",
            "io_board{i}",
            file.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o));
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["event"], "skipped", "{}", text(&o));

    // --abort through the daemon: nothing runs, the node is told to drop any transfer.
    let o = fcan(&ep, &["--json", "update", "io_board7", "--abort"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["event"], "aborted", "{}", text(&o));
    assert_eq!(v["version"], "2.0.0", "it runs the firmware it had");
    let o = fcan(&ep, &["update", "io_board7", "--abort", "--version", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// `--all-of`: every node of the schema, one after the other, each with its result; a
/// node already on the image's schema is skipped.
#[test]
fn all_of_a_schema_updates_each_node_in_turn() {
    let (ep, _fake) = fake_boards(&["7", "8"]);
    node_when(&ep, |n| n["phase"] == "running" && n["firmware"] == "1.0.0");
    let t0 = Instant::now();
    while !String::from_utf8_lossy(&fcan(&ep, &["--json", "nodes"]).stdout).contains("io_board8") {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "io_board8 never showed up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let dir = std::env::temp_dir().join(format!("fcan-cli-update-all-{}", std::process::id()));
    let v2 = v2_schema(&dir);
    let o = fcan(
        &ep,
        &[
            "--json",
            "update",
            "--all-of",
            "io_board{i}",
            "--schema",
            v2.to_str().unwrap(),
            "--version",
            "2.0.0",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o));
    let results: Vec<Json> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|l| l["event"] != "progress")
        .collect();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["io_board7", "io_board8"], "{}", text(&o));
    assert!(
        results
            .iter()
            .all(|r| r["event"] == "done" && r["version"] == "2.0.0"),
        "{}",
        text(&o)
    );
    // One after the other: every progress line of node 7 comes before node 8's first.
    let order: Vec<u64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Json>(l).unwrap()["node"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    for id in ["io_board7", "io_board8"] {
        let t0 = Instant::now();
        loop {
            let o = fcan(&ep, &["--json", "nodes"]);
            let ok = String::from_utf8_lossy(&o.stdout).lines().any(|l| {
                let v: Json = serde_json::from_str(l).unwrap();
                v["name"] == id && v["firmware"] == "2.0.0" && v["phase"] == "running"
            });
            if ok {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "{id}: {}", text(&o));
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
