//! The `fcan serve` binary: starts on the endpoints given, serves its buses (a client
//! sees them), logs where it serves on stderr, and stops cleanly on Ctrl-C (SIGINT).
//! With `--foxglove`: one bus served as a Foxglove WebSocket (a handshake by hand here;
//! `.ci/foxglove-peer.sh` runs Foxglove's own client against the daemon with nodes), and
//! several buses refused.

use std::io::{BufRead, BufReader, Read, Write};
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
    sigint(&child);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(rest.contains("stopping"), "{rest}");
}

#[test]
fn foxglove_with_several_buses_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["serve", "--bus", "sim", "--bus", "second=sim:classic"])
        .args(["--listen", "tcp/127.0.0.1:1", "--foxglove", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--foxglove serves one bus")
            && err.contains("Run one `fcan serve --bus … --foxglove ADDR` per bus"),
        "{err}"
    );
    // Refused before anything is opened: no Zenoh session, no server.
    assert!(!err.contains("listening on"), "{err}");
    assert!(!err.contains("Foxglove: ws://"), "{err}");
}

/// The binary's `--foxglove`: it prints the URL, answers a Foxglove WebSocket handshake
/// with the `foxglove.sdk.v1` subprotocol and a `serverInfo` naming the bus, and frees
/// the port on Ctrl-C.
/// A Foxglove WebSocket handshake on 127.0.0.1:`fport` with the `foxglove.sdk.v1`
/// subprotocol (RFC 6455's sample key): what came back up to the `serverInfo` frame,
/// its response head checked.
fn foxglove_hello(fport: u16) -> String {
    let mut ws = std::net::TcpStream::connect(("127.0.0.1", fport)).unwrap();
    ws.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        ws,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{fport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n"
    )
    .unwrap();
    // The response head, then the first frame: serverInfo, a text frame.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let t0 = std::time::Instant::now();
    while !String::from_utf8_lossy(&got).contains("serverInfo") {
        let n = ws.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let head = text.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{text}");
    // RFC 6455's sample key and its accept value.
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{text}"
    );
    assert!(
        head.contains("sec-websocket-protocol: foxglove.sdk.v1"),
        "{text}"
    );
    text
}

/// Starts `command` (its log filter the default, whatever the test's environment says)
/// and reads its stderr up to its `ready` line: the child, the rest of its stderr, and
/// what it said until then.
fn until_ready(
    command: &mut Command,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
) {
    let mut child = command
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    while !log.contains("ready") {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("exited early: {log}");
        }
        log.push_str(&line);
    }
    (child, stderr, log)
}

/// Ctrl-C to `child`.
fn sigint(child: &std::process::Child) {
    let pid = child.id().to_string();
    let kill = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(kill.success());
}

/// The example motor driver's schema.
const MOTOR_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../schema/examples/motor_driver.yaml"
);

/// `fcan fake` takes the faces' flags `fcan serve` takes (one `FaceArgs`, one start
/// function): `--foxglove` serves its simulated bus, named as the fake's; on a bus it
/// does not own, the flag is refused, naming the command that owns it.
#[test]
fn fake_serves_the_faces_serve_does() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let fport = free_port();
    let (mut child, _stderr, log) = until_ready(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["fake", "--schema", MOTOR_SCHEMA, "--node-id", "3"])
            .args(["--no-cache", "--listen", &endpoint])
            .args(["--foxglove", &format!("127.0.0.1:{fport}")]),
    );
    assert!(
        log.contains(&format!("Foxglove: ws://127.0.0.1:{fport}")),
        "{log}"
    );
    let text = foxglove_hello(fport);
    assert!(text.contains("fcan fake (bus sim)"), "{text}");
    sigint(&child);
    assert!(child.wait().unwrap().success());

    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["fake", "--schema", MOTOR_SCHEMA, "--node-id", "3"])
        .args(["--bus", "socketcan:vcan9", "--ros2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--foxglove and --ros2 serve the master's bus")
            && err.contains("fcan serve --bus socketcan:vcan9"),
        "{err}"
    );
}

#[test]
fn foxglove_serves_the_bus_and_frees_the_port() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let fport = free_port();
    let (mut child, mut stderr, log) = until_ready(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--bus", "sim", "--no-cache", "--listen", &endpoint])
            .args(["--foxglove", &format!("127.0.0.1:{fport}")]),
    );
    assert!(
        log.contains(&format!("Foxglove: ws://127.0.0.1:{fport}")),
        "{log}"
    );
    // The face's own diagnostics are `tracing` events: the command's subscriber prints
    // them as the faces' lines always read, the bus in brackets.
    assert!(
        log.contains(&format!(
            "fcan serve [sim] foxglove: serving on ws://127.0.0.1:{fport}\n"
        )),
        "{log}"
    );

    let text = foxglove_hello(fport);
    assert!(text.contains("fcan serve (bus sim)"), "{text}");

    sigint(&child);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", fport)).is_ok(),
        "the Foxglove port is still held after the daemon stopped"
    );
}

/// `--ros2` and its options: taught in `--help`; an option without `--ros2`, an unknown
/// framing or range, or a `ROS_DOMAIN_ID` that is not a number are refused before
/// anything starts (no DDS traffic: these all fail at parsing).
#[test]
fn ros2_options_are_taught_and_checked() {
    let help = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for words in [
        "--ros2",
        "--ros2-domain <N>",
        "--ros2-range <localhost|subnet>",
        "--ros2-rmw <cyclonedds|fastdds>",
        "--ros2-distro <RELEASE>",
        "fcan serve --bus socketcan:can0 --ros2",
    ] {
        assert!(help.contains(words), "{words}: {help}");
    }
    for (args, words) in [
        (&["--ros2-domain", "3"][..], "--ros2"),
        (
            &["--ros2", "--ros2-rmw", "zenoh"][..],
            "expected cyclonedds or fastdds",
        ),
        (
            &["--ros2", "--ros2-range", "lan"][..],
            "expected localhost or subnet",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--bus", "sim", "--listen", "tcp/127.0.0.1:1"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(words), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args([
            "serve",
            "--bus",
            "sim",
            "--listen",
            "tcp/127.0.0.1:1",
            "--ros2",
        ])
        .env("ROS_DOMAIN_ID", "seven")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("ROS_DOMAIN_ID=seven is not a domain number"),
        "{err}"
    );
}

/// The example configuration of `--joints` (docs/ros2.md).
const JOINTS_EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/host/config/joints.yaml"
);

/// `--joints` and its options: taught in `--help`; refused without `--ros2` (and its
/// topics without `--joints`); a missing or bad file, or a topic that is not a ROS name,
/// refused naming what is wrong before anything starts (no DDS traffic: these fail
/// before the bus or DDS opens).
#[test]
fn joints_options_are_taught_and_checked() {
    let help = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for words in [
        "--joints <[BUS=]FILE>",
        "--joints-states-topic <TOPIC>",
        "[default: /robot_joint_states]",
        "--joints-commands-topic <TOPIC>",
        "[default: /robot_joint_commands]",
        "--joints-command-timeout <MS>",
        "/fcan_joints/clear_fault",
        "fcan serve --bus socketcan:can0 --ros2 --joints robot.yaml",
    ] {
        assert!(help.contains(words), "{words}: {help}");
    }
    let serve = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--bus", "sim", "--listen", "tcp/127.0.0.1:1"])
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    for (args, words) in [
        (&["--joints", JOINTS_EXAMPLE][..], "--ros2"),
        (&["--ros2", "--joints-states-topic", "/a"][..], "--joints"),
        (
            &[
                "--ros2",
                "--joints",
                JOINTS_EXAMPLE,
                "--joints-command-timeout",
                "soon",
            ][..],
            "soon",
        ),
    ] {
        let (code, err) = serve(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
    let dir = std::env::temp_dir().join(format!("fcan-joints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "rate_hz: 0\njoints: []\n").unwrap();
    let typo = dir.join("typo.yaml");
    std::fs::write(&typo, "rate_hz: 100\njoint: []\n").unwrap();
    let missing = dir.join("missing.yaml");
    let (bad, typo, missing) = (
        bad.to_str().unwrap(),
        typo.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    for (args, words) in [
        (
            vec!["--ros2", "--joints", missing],
            format!("--joints {missing}: "),
        ),
        (
            vec!["--ros2", "--joints", bad],
            "rate_hz: 0 is not a rate".into(),
        ),
        (
            vec!["--ros2", "--joints", typo],
            "unknown field `joint`".into(),
        ),
        (
            vec![
                "--ros2",
                "--joints",
                JOINTS_EXAMPLE,
                "--joints-states-topic",
                "states",
            ],
            "`states`: a topic name starts with `/`".into(),
        ),
        (
            vec!["--ros2", "--joints", &format!("arm={JOINTS_EXAMPLE}")],
            "--joints arm=".into(),
        ),
    ] {
        let (code, err) = serve(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(&words), "{args:?}: {words}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--joints [BUS=]FILE` with one bus or several: the example configuration loads, with
/// several buses only when one is named.
#[test]
fn joints_config_names_its_bus() {
    use fcan_cli::serve::joints_config;
    let one = vec![("can0".to_string(), "socketcan:can0".to_string())];
    let (bus, config) = joints_config(JOINTS_EXAMPLE, &one).unwrap();
    assert_eq!(bus, "can0");
    let names: Vec<&str> = config.joints.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["joint1", "joint2"]);
    assert_eq!(config.rate_hz, 100.0);
    let two = vec![
        ("arm".to_string(), "socketcan:can0".to_string()),
        ("legs".to_string(), "socketcan:can1".to_string()),
    ];
    let e = joints_config(JOINTS_EXAMPLE, &two).unwrap_err().to_string();
    assert!(e.contains("several buses (arm, legs): name one"), "{e}");
    let (bus, _) = joints_config(&format!("legs={JOINTS_EXAMPLE}"), &two).unwrap();
    assert_eq!(bus, "legs");
    let e = joints_config(&format!("feet={JOINTS_EXAMPLE}"), &two)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no bus `feet` (buses: arm, legs)"), "{e}");
}
