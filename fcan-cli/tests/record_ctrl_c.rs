//! `fcan record` as a user runs it, attached to `fcan serve`: stopped with Ctrl-C
//! (SIGINT), it finishes the file, which an MCAP reader then opens whole (summary and
//! index included); progress and the size go to stderr meanwhile. The raw frames come
//! through the daemon's `frames` key.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigint(child: &Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
}

#[test]
fn ctrl_c_finishes_the_file() {
    let dir = std::env::temp_dir().join(format!("fcan-record-sigint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.mcap");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    // A daemon on an empty simulated bus: its master's heartbeats are the frames.
    let mut daemon = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--bus", "sim", "--no-cache", "--listen", &endpoint])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut log = BufReader::new(daemon.0.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "fcan serve exited");
    }
    let mut rec = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["--connect", &endpoint, "--bus", "sim", "--json"])
        .args(["record", path.to_str().unwrap()])
        .env_remove("FCAN_BUS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    sigint(&rec);
    let t = Instant::now();
    while rec.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = rec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("fcan record: ") && stderr.contains(" B"),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let frames = summary["frames"].as_u64().unwrap();
    assert!(frames >= 3, "{summary}\n{stderr}");

    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(summary["bytes"].as_u64(), Some(bytes.len() as u64));
    let s = mcap::Summary::read(&bytes)
        .unwrap()
        .expect("a finished file has a summary");
    assert!(s
        .metadata_indexes
        .iter()
        .any(|m| m.name == "fcan.recording"));
    let raw = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(|m| m.unwrap())
        .filter(|m| m.channel.topic == "/fcan/frames")
        .count() as u64;
    assert_eq!(raw, frames);
    sigint(&daemon.0);
    let _ = std::fs::remove_dir_all(&dir);
}
