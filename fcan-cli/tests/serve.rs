//! The `fcan serve` binary: starts on the endpoints given, serves its buses (a client
//! sees them), logs where it serves on stderr, and stops cleanly on Ctrl-C (SIGINT).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use fcan_e2e::free_port;
use fcan_remote::session::SessionConfig;

#[test]
fn serve_help_has_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("fcan serve --bus socketcan:can0 --bus socketcan:can1"),
        "{help}"
    );
    assert!(help.contains("--listen <ENDPOINT>"), "{help}");
    assert!(help.contains("127.0.0.1:7447"), "{help}");
}

#[test]
fn bad_bus_names_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args([
            "serve",
            "--bus",
            "sim",
            "--bus",
            "sim",
            "--listen",
            "tcp/127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("two buses named `sim`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_two_buses_and_stops_on_ctrl_c() {
    let port = free_port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args([
            "serve",
            "--bus",
            "sim",
            "--bus",
            "second=sim:classic",
            "--no-cache",
        ])
        .args(["--listen", &endpoint])
        .stderr(Stdio::piped())
        .spawn()
        .expect("fcan serve starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    while !log.contains("ready") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "fcan serve exited early: {log}"
        );
        log.push_str(&line);
    }
    assert!(log.contains(&format!("listening on {endpoint}")), "{log}");
    assert!(
        log.contains("[second]: serving sim:classic as fcan/second/"),
        "{log}"
    );

    let client = SessionConfig::client()
        .connect([endpoint])
        .open()
        .await
        .unwrap()
        .session;
    let t0 = std::time::Instant::now();
    let buses = loop {
        let b = fcan_remote::client::buses(&client, Duration::from_secs(2))
            .await
            .unwrap();
        if b.len() == 2 || t0.elapsed() > Duration::from_secs(60) {
            break b;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(buses, ["second", "sim"]);

    // Ctrl-C: a clean stop, exit status 0.
    let pid = child.id().to_string();
    let kill = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(rest.contains("stopping"), "{rest}");
}
