//! `fcan fake` on real kernel SocketCAN: the ancestor's motor-driver node
//! (`shared/compat/fibril`, copied into the VM as it is) faked on `vcan0`, owned by a
//! separate `fcan serve`, and driven by `fcan nodes`, `topic echo`, `topic pub`,
//! `param set` and `service call` as separate processes, as a user would. The node
//! follows the interface: CAN FD at MTU 72, Classical CAN at MTU 16.
//!
//! Needs SocketCAN with `vcan0` up, which a host may not have: the test is `#[ignore]`d
//! (and fails when forced without it), and `.ci/vm-e2e.sh` runs it with `--ignored`
//! inside its VM, which puts `fcan` on `PATH` and the fibril files in `$FCAN_FIBRIL_DIR`.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::{fibril_dir, fibril_nodes, free_port};

/// Kills a background process when the test ends, however it ends.
struct Bg(Child, &'static str);
impl Bg {
    /// SIGINT (Ctrl-C), then its exit status and stderr.
    fn interrupt(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.0.id().to_string();
        assert!(Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{} ignored SIGINT",
                self.1
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        (status, err)
    }
}
impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fcan_bin() -> String {
    std::env::var("FCAN_BIN").unwrap_or_else(|_| "fcan".into())
}

fn fcan(ep: &str, args: &[&str]) -> Output {
    let o = Command::new(fcan_bin())
        .args(["--connect", ep, "--bus", "socketcan:vcan0"])
        .args(args)
        .output()
        .unwrap();
    println!(
        "$ fcan {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[ignore = "needs SocketCAN: .ci/vm-e2e.sh runs it in a VM"]
fn fake_fibril_node_on_vcan0() {
    let mtu = std::fs::read_to_string("/sys/class/net/vcan0/mtu")
        .unwrap_or_else(|e| panic!("vcan0: {e} (this test needs SocketCAN with vcan0 up)"));
    let dir = fibril_dir().expect("FCAN_FIBRIL_DIR holds the fibril schemas");
    let (_, files) = fibril_nodes(&dir)
        .into_iter()
        .find(|(n, _)| *n == "md")
        .unwrap();
    let fd = match mtu.trim() {
        "72" => true,
        "16" => false,
        other => panic!("vcan0 MTU {other}: 72 or 16 expected"),
    };
    println!("vcan0: {}", if fd { "CAN FD" } else { "Classical CAN" });

    let fake = Bg(
        Command::new(fcan_bin())
            .arg("fake")
            .arg("--schema")
            .args(&files)
            .args(["--node-id", "3", "--bus", "socketcan:vcan0"])
            .args(["--mirror", "motor*/target.value=motor*/feedback.position"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("fcan fake starts"),
        "fcan fake",
    );
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let cache = std::env::temp_dir().join("fcan-fake-vm-cache");
    let serve = Bg(
        Command::new(fcan_bin())
            .args(["serve", "--bus", "socketcan:vcan0", "--listen", &ep])
            .arg("--cache-dir")
            .arg(&cache)
            .stderr(Stdio::piped())
            .spawn()
            .expect("fcan serve starts"),
        "fcan serve",
    );

    // The fake node is discovered, its blob downloaded, and it runs in the link's mode.
    let t0 = Instant::now();
    let node = loop {
        let o = fcan(&ep, &["--json", "nodes"]);
        if o.status.success() && stdout(&o).contains("\"running\"") {
            break serde_json::from_str::<serde_json::Value>(stdout(&o).lines().next().unwrap())
                .unwrap();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the fake node never ran"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(node["name"], "md_controller3");
    assert_eq!(node["schema_source"], "downloaded");
    let mode = node["mode"].as_str().unwrap();
    assert_eq!(mode.starts_with("fd"), fd, "bus mode {mode}");

    let o = fcan(
        &ep,
        &[
            "--json",
            "topic",
            "echo",
            "/md_controller3/motor0/feedback",
            "--count",
            "3",
        ],
    );
    assert!(o.status.success());
    assert_eq!(stdout(&o).lines().count(), 3);

    let o = fcan(
        &ep,
        &[
            "topic",
            "pub",
            "/md_controller3/motor4/target",
            "{type: 1, value: 3.5}",
            "--count",
            "3",
            "--rate",
            "20",
        ],
    );
    assert!(o.status.success());
    let o = fcan(
        &ep,
        &[
            "--json",
            "topic",
            "echo",
            "/md_controller3/motor4/feedback",
            "--count",
            "1",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["value"]["position"], 3.5, "the command mirrored");

    let o = fcan(
        &ep,
        &[
            "param",
            "set",
            "md_controller3.motor0.velocity.filter_coe",
            "0.5",
        ],
    );
    assert!(o.status.success());
    let o = fcan(
        &ep,
        &[
            "param",
            "set",
            "md_controller3.motor0.velocity.filter_coe",
            "1.5",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("max 1"));

    let o = fcan(
        &ep,
        &[
            "--json",
            "service",
            "call",
            "/md_controller3/motor2/reset_encoder",
            "{offset: false, value: 0}",
        ],
    );
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["response"]["success"], false);

    let (status, log) = serve.interrupt();
    assert!(status.success(), "fcan serve: {log}");
    let (status, log) = fake.interrupt();
    println!("fcan fake's log:\n{log}");
    assert!(status.success(), "{log}");
    assert!(log.contains("ready; Ctrl-C stops"), "{log}");
    assert!(log.contains("reset_encoder called"), "{log}");
    // At least once each: on a slow emulated machine the master may repeat a PARAM_SET
    // whose RESULT came late, and the node takes the same value again.
    assert!(
        log.contains("params set: md_controller3.motor0.velocity.filter_coe"),
        "{log}"
    );
    assert!(!log.contains(" 0 service calls answered"), "{log}");
}
