//! `fcan fake` as a user runs it: the real binary with an ancestor schema
//! (`shared/compat/fibril`, read in place) on the simulated bus, served over Zenoh, and
//! the real `fcan nodes`, `topic echo`, `topic pub`, `param set` and `service call`
//! attached to it from other processes; Ctrl-C stops it cleanly. Also its refusals:
//! a bad mirror rule names the field, before any bus is opened.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::{fibril_dir, fibril_nodes, free_port};

mod common;
use common::{fcan, text, until_ready, Kill};

fn md_files() -> Option<Vec<PathBuf>> {
    let Some(dir) = fibril_dir() else {
        eprintln!("NOTE: shared/compat/fibril is not beside the workspace: SKIPPED");
        return None;
    };
    Some(
        fibril_nodes(&dir)
            .into_iter()
            .find(|(n, _)| *n == "md")
            .unwrap()
            .1,
    )
}

#[test]
fn help_has_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["fake", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("--mirror 'motor*/target.value=motor*/feedback.position'"),
        "{help}"
    );
    assert!(help.contains("--bus socketcan:vcan0"), "{help}");
    // `fcan --help` points to it.
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("fcan fake --help"));
}

#[test]
fn a_bad_mirror_is_refused_naming_the_field() {
    let Some(files) = md_files() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .arg("fake")
        .arg("--schema")
        .args(&files)
        .args(["--node-id", "3", "--listen", "tcp/127.0.0.1:1"])
        .args(["--mirror", "motor*/target.value=motor*/feedback.positon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has no field `positon`") && err.contains("position"),
        "{err}"
    );
    assert!(!err.contains("listening"), "refused before serving: {err}");
}

#[test]
fn md_node_served_and_driven_by_the_cli() {
    let Some(files) = md_files() else { return };
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut child = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .arg("fake")
            .arg("--schema")
            .args(&files)
            .args(["--node-id", "3", "--no-cache", "--listen", &ep])
            .args(["--count", "motor*=2"])
            .args(["--mirror", "motor*/target.value=motor*/feedback.position"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (mut stderr, log) = until_ready(&mut child.0);
    assert!(log.contains("node 3 (`md_controller3`) on sim"), "{log}");

    // The node shows up running, its schema downloaded from it.
    let t0 = Instant::now();
    let nodes = loop {
        let o = fcan(&ep, &["--json", "nodes"]);
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        if o.status.success() && s.contains("\"running\"") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    };
    let node: serde_json::Value = serde_json::from_str(nodes.lines().next().unwrap()).unwrap();
    assert_eq!(node["name"], "md_controller3", "{nodes}");
    assert_eq!(node["schema_source"], "downloaded", "{nodes}");

    // Feedback flows with its defaults.
    let o = fcan(
        &ep,
        &[
            "--json",
            "topic",
            "echo",
            "/md_controller3/motor0/feedback",
            "--count",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["value"]["position"], 0.0, "{l}");
    }
    // Only two motors are wired.
    let o = fcan(
        &ep,
        &[
            "topic",
            "echo",
            "/md_controller3/motor2/feedback",
            "--count",
            "1",
        ],
    );
    assert!(!o.status.success(), "{}", text(&o));

    // A command is mirrored into the feedback.
    let o = fcan(
        &ep,
        &[
            "topic",
            "pub",
            "/md_controller3/motor1/target",
            "{type: 1, value: -4.25}",
            "--count",
            "3",
            "--rate",
            "50",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = fcan(
        &ep,
        &[
            "--json",
            "topic",
            "echo",
            "/md_controller3/motor1/feedback",
            "--count",
            "1",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["value"]["position"], -4.25, "{}", text(&o));

    // Parameters: in range taken (and read back), out of range refused with the bound.
    let o = fcan(
        &ep,
        &[
            "param",
            "set",
            "md_controller3.motor0.velocity.filter_coe",
            "0.25",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = fcan(
        &ep,
        &[
            "--json",
            "param",
            "get",
            "md_controller3.motor0.velocity.filter_coe",
        ],
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("0.25"),
        "{}",
        text(&o)
    );
    let o = fcan(
        &ep,
        &[
            "param",
            "set",
            "md_controller3.motor0.velocity.filter_coe",
            "2",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("max 1"),
        "{}",
        text(&o)
    );

    // A service answers with its default response.
    let o = fcan(
        &ep,
        &[
            "--json",
            "service",
            "call",
            "/md_controller3/motor1/reset_encoder",
            "{offset: true, value: 1}",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["response"]["success"], false, "{}", text(&o));

    // Ctrl-C: a clean stop, with a summary counting the call and the commit.
    let pid = child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.0.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(rest.contains("reset_encoder called"), "{log}{rest}");
    // At least once each (a loaded machine may make the master repeat a request whose
    // answer came late; the node answers the repeat too).
    assert!(rest.contains("stopped; "), "{rest}");
    assert!(
        !rest.contains(" 0 service calls answered") && !rest.contains(" 0 parameter commits"),
        "{rest}"
    );
    assert!(
        rest.contains("params set: md_controller3.motor0.velocity.filter_coe"),
        "{log}{rest}"
    );
}
