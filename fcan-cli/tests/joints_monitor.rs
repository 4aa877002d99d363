//! The joints' status in `fcan monitor` (issue 34): a daemon running joints
//! (`fcan serve --ros2 --joints`, in this process over the example motor drivers on a
//! simulated bus) puts their status on `fcan/<bus>/joints/status` at each change and
//! answers queries for it; the `fcan` binary attached to it shows a `joints:` line,
//! `active`, then, a node pulled, `faulted` with the fault's cause first (and with
//! `--json`, `joints` with its `cause`); Ctrl-C puts `stopped`. A daemon without joints:
//! no line, no `joints` in the JSON.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_e2e::{free_port, World, MD1, MD2};
use fcan_remote::session::SessionConfig;
use serde_json::Value as Json;

mod common;
use common::{fcan_on, json_lines, text, until_ready, Kill};

/// Two joints, motor 0 of each example motor driver; a feedback timeout generous for a
/// busy machine (the master calls a silent node offline only after 3 s: a pulled node's
/// stale feedback is seen first).
const JOINTS: &str = r#"
rate_hz: 100
feedback_timeout_ms: 200
joints:
  - name: joint1
    states:
      - { interface: position, from: /motor_driver1/motor0/feedback.position }
      - { interface: velocity, from: /motor_driver1/motor0/feedback.velocity }
    commands:
      - { interface: velocity, to: "/motor_driver1/motor0/target{type: 1}.value", safe: 0.0 }
  - name: joint2
    states:
      - { interface: position, from: /motor_driver2/motor0/feedback.position }
      - { interface: velocity, from: /motor_driver2/motor0/feedback.velocity }
    commands:
      - { interface: velocity, to: "/motor_driver2/motor0/target{type: 1}.value", safe: 0.0 }
enable:
  - { call: /motor_driver1/motor0/clear_fault, expect: { success: true } }
  - { call: /motor_driver2/motor0/clear_fault, expect: { success: true } }
safe_stop: { repeats: 3, interval_ms: 10 }
"#;

/// `fcan monitor` once, text: its `joints:` lines (`None`: it failed), and all it said.
fn try_joints_lines(ep: &str) -> (Option<Vec<String>>, String) {
    let o = fcan_on(
        ep,
        None,
        &["monitor", "--count", "1", "--interval-ms", "100"],
    );
    if !o.status.success() {
        return (None, text(&o));
    }
    let lines = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("joints"))
        .map(str::to_string)
        .collect();
    (Some(lines), text(&o))
}

/// [`try_joints_lines`], which must succeed.
fn joints_lines(ep: &str) -> (Vec<String>, String) {
    let (lines, all) = try_joints_lines(ep);
    (lines.unwrap_or_else(|| panic!("{all}")), all)
}

/// Runs `fcan monitor` until its `joints:` line satisfies `ok` (bounded; the daemon may
/// still be starting).
fn monitor_until(ep: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let (lines, all) = try_joints_lines(ep);
        if let Some([line]) = lines.as_deref() {
            if ok(line) {
                return line.clone();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: not shown in 30 s; last:\n{all}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_shows_the_joints_fault_with_its_cause() {
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    let dir = std::env::temp_dir().join(format!("fcan-joints-monitor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("joints.yaml");
    std::fs::write(&file, JOINTS).unwrap();
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    // A domain of its own: no other test's DDS traffic.
    let domain = (100 + std::process::id() % 100).to_string();
    let cli = fcan_cli::serve::ServeCli::try_parse_from([
        "fcan serve",
        "--bus",
        "sim",
        "--no-cache",
        "--listen",
        &ep,
        "--ros2",
        "--ros2-domain",
        &domain,
        "--joints",
        file.to_str().unwrap(),
    ])
    .unwrap();
    let bus = w.bus.clone();
    let daemon = tokio::spawn(async move { fcan_cli::serve::serve(cli, Some(&bus)).await });

    let ep2 = ep.clone();
    let active = tokio::task::spawn_blocking(move || {
        monitor_until(&ep2, "joints active", |l| l == "joints: active")
    })
    .await
    .unwrap();
    assert_eq!(active, "joints: active");

    // A client of the key: every change is put.
    let client = SessionConfig::client()
        .connect([ep.clone()])
        .open()
        .await
        .unwrap()
        .session;
    let (tx, mut puts) = tokio::sync::mpsc::unbounded_channel::<Json>();
    let _sub = client
        .declare_subscriber("fcan/sim/joints/status")
        .callback(move |s| {
            if let Ok(j) = serde_json::from_slice(&s.payload().to_bytes()) {
                let _ = tx.send(j);
            }
        })
        .await
        .unwrap();
    // Queryable: the current value.
    let replies = client.get("fcan/sim/joints/status").await.unwrap();
    let now: Json = serde_json::from_slice(
        &replies
            .recv_async()
            .await
            .unwrap()
            .result()
            .unwrap()
            .payload()
            .to_bytes(),
    )
    .unwrap();
    assert_eq!(now["state"], "active", "{now}");
    assert_eq!((&now["cause"], &now["fault"]), (&Json::Null, &Json::Null));
    assert!(now["since"].as_f64().unwrap() > 1.7e9, "{now}");

    // motor_driver2 is pulled: its feedback stops.
    w.motor(MD2).stop();
    let ep2 = ep.clone();
    let faulted = tokio::task::spawn_blocking(move || {
        monitor_until(&ep2, "joints faulted", |l| l.starts_with("joints: faulted"))
    })
    .await
    .unwrap();
    assert!(
        faulted.starts_with("joints: faulted: feedback timeout (host side): state joint2/"),
        "{faulted}"
    );
    let put = tokio::time::timeout(Duration::from_secs(5), puts.recv())
        .await
        .expect("the fault put")
        .unwrap();
    assert_eq!(put["state"], "faulted", "{put}");
    assert_eq!(put["cause"], "feedback_timeout", "{put}");
    let fault = put["fault"].as_str().unwrap();
    assert_eq!(faulted, format!("joints: faulted: {fault}"));
    assert_eq!(put["text"], format!("faulted: {fault}"));

    let ep2 = ep.clone();
    let o = tokio::task::spawn_blocking(move || {
        fcan_on(
            &ep2,
            None,
            &["--json", "monitor", "--count", "1", "--interval-ms", "100"],
        )
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let j = &json_lines(&o)[0]["joints"];
    assert_eq!(j["state"], "faulted", "{j}");
    assert_eq!(j["cause"], "feedback_timeout", "{j}");
    assert_eq!(j["fault"], fault, "{j}");

    // Ctrl-C: the daemon stops the joints and puts their last status.
    let pid = std::process::id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let r = tokio::time::timeout(Duration::from_secs(20), daemon)
        .await
        .expect("the daemon stops")
        .unwrap();
    assert!(r.is_ok(), "{r:?}");
    let last = tokio::time::timeout(Duration::from_secs(5), puts.recv())
        .await
        .expect("the last put")
        .unwrap();
    assert_eq!(last["state"], "stopped", "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_joints_the_monitor_shows_none() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut child = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--bus", "sim", "--no-cache", "--listen", &ep])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (_stderr, _) = until_ready(&mut child.0);
    let (lines, all) = joints_lines(&ep);
    assert!(lines.is_empty(), "{all}");
    assert!(all.contains("fcan monitor — "), "{all}");
    let o = fcan_on(
        &ep,
        None,
        &["--json", "monitor", "--count", "1", "--interval-ms", "100"],
    );
    let j = json_lines(&o);
    assert_eq!(j.len(), 1, "{}", text(&o));
    assert!(j[0].get("joints").is_none(), "{}", j[0]);
    assert!(j[0].get("nodes").is_some(), "{}", j[0]);
}
