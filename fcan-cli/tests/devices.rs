//! Off-the-shelf devices as a user meets them (issue 24): `fcan fake --device` runs a
//! simulated RobStride motor and a simulated MIT motor on a served simulated bus, whose
//! master drives them; the real `fcan` binary, attached from other processes, lists
//! them, calls their services, sets parameters (a refusal names its bound), publishes
//! commands and echoes feedback — with nothing in the CLI that knows a driver. Also the
//! refusals of a bad `--device`, before anything is opened.

use std::io::BufReader;
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;
use serde_json::Value as Json;

mod common;
use common::{fcan_on, json_lines, text, until_ready, Kill};

/// No `--bus`: the daemon's only bus is the one meant.
fn fcan(ep: &str, args: &[&str]) -> Output {
    fcan_on(ep, None, args)
}

/// A served simulated bus with a RobStride RS03 (id 10) and an MIT motor (id 0x20):
/// `fcan fake` running, both nodes RUNNING. Each test starts its own, so one that
/// fails (or moves a motor) leaves the others' untouched.
struct Devices {
    ep: String,
    /// What `fcan fake` wrote on stderr up to its `ready` line.
    log: String,
    /// `fcan --json nodes` once both run.
    nodes: Vec<Json>,
    // Killed before its stderr closes (fields drop in order): the daemon goes on logging.
    _child: Kill,
    _stderr: BufReader<ChildStderr>,
}

fn devices() -> Devices {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut child = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args([
                "fake",
                "--bus",
                "sim:classic",
                "--no-cache",
                "--listen",
                &ep,
            ])
            .args(["--device", "robstride:id=10,model=RS03"])
            .args(["--device", "mit:id=0x20"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (stderr, log) = until_ready(&mut child.0);
    // No --bus: the daemon's only bus.
    let t0 = Instant::now();
    let nodes = loop {
        let o = fcan(&ep, &["--json", "nodes"]);
        let n = if o.status.success() {
            json_lines(&o)
        } else {
            Vec::new()
        };
        if n.len() == 2 && n.iter().all(|n| n["phase"] == "running") {
            break n;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    };
    Devices {
        ep,
        log,
        nodes,
        _child: child,
        _stderr: stderr,
    }
}

/// `fcan --json service call /<node>/motor/enable {}`, checked to say `success: true`.
fn enable(ep: &str, node: &str) {
    let o = fcan(
        ep,
        &[
            "--json",
            "service",
            "call",
            &format!("/{node}/motor/enable"),
            "{}",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"success\":true"),
        "{}",
        text(&o)
    );
}

/// Publishes 100 `mit` commands at 100 Hz to `/<node>/motor/mit` while an echo of its
/// feedback (one frame per command) runs, and returns the last feedback value.
fn drive(ep: &str, node: &str, command: &str) -> Json {
    let echo = spawn_echo(ep, &format!("/{node}/motor/feedback"), 50);
    std::thread::sleep(Duration::from_millis(500));
    let o = fcan(
        ep,
        &[
            "topic",
            "pub",
            &format!("/{node}/motor/mit"),
            command,
            "--count",
            "100",
            "--rate",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = echo.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    json_lines(&o).last().unwrap()["value"].clone()
}

#[test]
fn fcan_fake_lists_both_devices_running_with_their_driver() {
    let d = devices();
    assert!(d.log.contains("simulated robstride"), "{}", d.log);
    let by_id = |id: u64| d.nodes.iter().find(|n| n["id"] == id).unwrap();
    assert_eq!(by_id(10)["name"], "robstride10");
    assert_eq!(by_id(10)["driver"], "robstride");
    assert_eq!(by_id(32)["name"], "mit32");
    assert_eq!(by_id(32)["driver"], "mit");
    let table = fcan(&d.ep, &["nodes"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("driver: robstride"),
        "{}",
        text(&table)
    );
}

#[test]
fn a_robstride_torque_limit_is_refused_beyond_the_models_range_and_taken_within() {
    let d = devices();
    // Beyond RS03's torque range: refused naming the bound.
    let o = fcan(
        &d.ep,
        &["param", "set", "robstride10.motor.limit_torque", "1000"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("60"),
        "{}",
        text(&o)
    );
    // In range: taken and read back.
    let o = fcan(
        &d.ep,
        &["param", "set", "robstride10.motor.limit_torque", "12.5"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = fcan(&d.ep, &["param", "get", "robstride10.motor.limit_torque"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "12.5",
        "{}",
        text(&o)
    );
}

#[test]
fn a_robstride_motor_is_enabled_by_its_service_and_moved_by_commands() {
    let d = devices();
    enable(&d.ep, "robstride10");
    let v = drive(
        &d.ep,
        "robstride10",
        "{position: 1.0, velocity: 0, kp: 30, kd: 1.5, torque: 0}",
    );
    let p = v["position"].as_f64().unwrap();
    assert!((p - 1.0).abs() < 0.1, "moved to 1 rad: {v}");
    assert_eq!(v["mode"], 2, "running: {v}");
}

#[test]
fn an_mit_motor_is_enabled_by_its_service_and_moved_by_commands() {
    let d = devices();
    enable(&d.ep, "mit32");
    let v = drive(
        &d.ep,
        "mit32",
        "{position: -0.5, velocity: 0, kp: 20, kd: 1, torque: 0}",
    );
    assert!(
        (v["position"].as_f64().unwrap() + 0.5).abs() < 0.1,
        "moved to -0.5 rad: {v}"
    );
}

/// `fcan topic echo TOPIC --json --count N` in the background, bounded to 30 s.
fn spawn_echo(ep: &str, topic: &str, count: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["--connect", ep, "--json", "topic", "echo", topic])
        .args(["--count", &count.to_string(), "--timeout", "30"])
        .env_remove("FCAN_BUS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_bad_device_is_refused_naming_the_key() {
    for (args, says) in [
        (
            &[
                "fake",
                "--device",
                "robstride:id=1,modle=RS03",
                "--listen",
                "tcp/127.0.0.1:1",
            ][..],
            "`modle`",
        ),
        (
            &[
                "serve",
                "--bus",
                "sim",
                "--device",
                "robstride:id=1,model=RS9",
                "--listen",
                "tcp/127.0.0.1:1",
            ][..],
            "model",
        ),
        (
            &[
                "serve",
                "--bus",
                "sim",
                "--device",
                "mit:id=0x300",
                "--listen",
                "tcp/127.0.0.1:1",
            ][..],
            "`id`",
        ),
        (
            &[
                "serve",
                "--bus",
                "a=sim",
                "--bus",
                "b=sim:classic",
                "--device",
                "mit:id=3",
                "--listen",
                "tcp/127.0.0.1:1",
            ][..],
            "name one",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("listening"), "refused before serving: {err}");
    }
}

/// `fcan decode --device cia402:…` of a capture written by hand from CiA 301 / CiA 402:
/// TPDO A (0x485: statusword 0x0237 — Operation enabled, CiA 402-2's statusword table —
/// and position actual 1,000 increments), TPDO B (0x685: velocity actual 500 increments/s,
/// mode display 8 = CSP, torque actual 200 ‰), an EMCY (0x085: 0x2310 overcurrent, error
/// register 0x03, manufacturer bytes A1…A5) and a heartbeat (0x705, operational). With
/// `counts=1000` one revolution is 1,000 increments: 2π rad, and π rad/s.
#[test]
fn decode_reads_a_cia402_capture() {
    let log = std::env::temp_dir().join(format!("fcan-cia402-{}.log", std::process::id()));
    std::fs::write(
        &log,
        "(0.000100) can0 485#3702E8030000\n\
         (0.000200) can0 685#F401000008C800\n\
         (0.000300) can0 085#102303A1A2A3A4A5\n\
         (0.000400) can0 705#05\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["decode", "--device", "cia402:id=5,counts=1000"])
        .arg(&log)
        .env_remove("FCAN_BUS")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<Json> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", text(&o));
    assert_eq!(lines[0]["topic"], "/drive5/cia402/status");
    let s = &lines[0]["value"];
    assert_eq!(s["statusword"], 0x0237);
    assert_eq!(s["state"], 4, "operation enabled");
    assert_eq!(s["mode"], 8, "csp");
    let tau = std::f64::consts::TAU;
    assert!((s["position"].as_f64().unwrap() - tau).abs() < 1e-9, "{s}");
    assert!(
        (s["velocity"].as_f64().unwrap() - tau / 2.0).abs() < 1e-6,
        "{s}"
    );
    assert_eq!(s["torque"], 200.0);
    assert_eq!(lines[1]["topic"], "/drive5/cia402/emcy");
    let e = &lines[1]["value"];
    assert_eq!(e["code"], 0x2310);
    assert_eq!(e["register"], 3);
    assert_eq!(e["data"], 0xA5_A4A3_A2A1u64);
}
