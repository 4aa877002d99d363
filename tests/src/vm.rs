//! What the tests on real kernel SocketCAN (`*_vm.rs`, run in a VM by `.ci/vm-e2e.sh`)
//! share: background processes that die with the test, and `fcan` commands run as a user
//! runs them, against a daemon's Zenoh endpoint.

use std::io::Read;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// A background process, killed when the test ends, however it ends; the name is for
/// messages.
pub struct Bg(pub Child, pub &'static str);

impl Bg {
    /// SIGINT (Ctrl-C), then its exit status and stderr.
    pub fn interrupt(mut self) -> (std::process::ExitStatus, String) {
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

/// The `fcan` binary: `$FCAN_BIN`, or `fcan` on the `PATH`.
pub fn fcan_bin() -> String {
    std::env::var("FCAN_BIN").unwrap_or_else(|_| "fcan".into())
}

/// Runs `fcan --connect EP --bus socketcan:vcan0 ARGS…` to completion, echoing the
/// command and its output (the test's log reads as a session).
pub fn fcan(ep: &str, args: &[&str]) -> Output {
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

/// A command's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `fcan --json nodes` every 300 ms until the node named `name` satisfies `ok`, 60 s at
/// most (a slow emulated machine provisions slowly); its JSON object.
pub fn node_when(
    ep: &str,
    name: &str,
    ok: &dyn Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let o = fcan(ep, &["--json", "nodes"]);
        if o.status.success() {
            if let Some(n) = stdout(&o)
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|n| n["name"] == name && ok(n))
            {
                return n;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{name} never as wanted: {}",
            stdout(&o)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
