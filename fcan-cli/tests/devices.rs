//! Off-the-shelf devices as a user meets them (issue 24): `fcan fake --device` runs a
//! simulated RobStride motor and a simulated MIT motor on a served simulated bus, whose
//! master drives them; the real `fcan` binary, attached from other processes, lists
//! them, calls their services, sets parameters (a refusal names its bound), publishes
//! commands and echoes feedback — with nothing in the CLI that knows a driver. Also the
//! refusals of a bad `--device`, before anything is opened.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;
use serde_json::Value as Json;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fcan(ep: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["--connect", ep])
        .args(args)
        .env_remove("FCAN_BUS")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_lines(o: &Output) -> Vec<Json> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn simulated_devices_served_and_driven_by_the_cli() {
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
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let mut log = String::new();
    while !log.contains("ready") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "fcan fake exited early: {log}"
        );
        log.push_str(&line);
    }
    assert!(log.contains("simulated robstride"), "{log}");

    // Both listed once running, each with its driver (no --bus: the daemon's only bus).
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
    let by_id = |id: u64| nodes.iter().find(|n| n["id"] == id).unwrap();
    assert_eq!(by_id(10)["name"], "robstride10");
    assert_eq!(by_id(10)["driver"], "robstride");
    assert_eq!(by_id(32)["name"], "mit32");
    assert_eq!(by_id(32)["driver"], "mit");
    let table = fcan(&ep, &["nodes"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("driver: robstride"),
        "{}",
        text(&table)
    );

    // Services: enable, confirmed by the motor's feedback.
    let o = fcan(
        &ep,
        &[
            "--json",
            "service",
            "call",
            "/robstride10/motor/enable",
            "{}",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"success\":true"),
        "{}",
        text(&o)
    );

    // Parameters: beyond RS03's torque range refused naming the bound; in range taken.
    let o = fcan(
        &ep,
        &["param", "set", "robstride10.motor.limit_torque", "1000"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("60"),
        "{}",
        text(&o)
    );
    let o = fcan(
        &ep,
        &["param", "set", "robstride10.motor.limit_torque", "12.5"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = fcan(&ep, &["param", "get", "robstride10.motor.limit_torque"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "12.5",
        "{}",
        text(&o)
    );

    // Commands move the motor: its feedback (one frame per command) shows it, to an echo
    // running while the commands go out.
    let echo = spawn_echo(&ep, "/robstride10/motor/feedback", 50);
    std::thread::sleep(Duration::from_millis(500));
    let o = fcan(
        &ep,
        &[
            "topic",
            "pub",
            "/robstride10/motor/mit",
            "{position: 1.0, velocity: 0, kp: 30, kd: 1.5, torque: 0}",
            "--count",
            "100",
            "--rate",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = echo.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let samples = json_lines(&o);
    let v = &samples.last().unwrap()["value"];
    let p = v["position"].as_f64().unwrap();
    assert!((p - 1.0).abs() < 0.1, "moved to 1 rad: {v}");
    assert_eq!(v["mode"], 2, "running: {v}");

    // The MIT motor the same way.
    let o = fcan(
        &ep,
        &["--json", "service", "call", "/mit32/motor/enable", "{}"],
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"success\":true"),
        "{}",
        text(&o)
    );
    let echo = spawn_echo(&ep, "/mit32/motor/feedback", 50);
    std::thread::sleep(Duration::from_millis(500));
    let o = fcan(
        &ep,
        &[
            "topic",
            "pub",
            "/mit32/motor/mit",
            "{position: -0.5, velocity: 0, kp: 20, kd: 1, torque: 0}",
            "--count",
            "100",
            "--rate",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = echo.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let samples = json_lines(&o);
    let v = &samples.last().unwrap()["value"];
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
