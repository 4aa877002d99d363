//! What the CLI's integration tests share: the real `fcan` binary run as a user runs it,
//! attached to a daemon, and a child process that cannot outlive its test.
//!
//! Each test file is its own crate and uses some of these, hence `dead_code` allowed.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, Command, Output};

use serde_json::Value as Json;

/// A child process killed (and reaped) when the test ends, passed or not.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `fcan --connect EP [--bus BUS] ARGS…`, with `FCAN_BUS` unset so the environment the
/// tests run in cannot choose a bus for them.
pub fn fcan_on(ep: &str, bus: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fcan"));
    c.args(["--connect", ep]);
    if let Some(bus) = bus {
        c.args(["--bus", bus]);
    }
    c.args(args).env_remove("FCAN_BUS").output().unwrap()
}

/// [`fcan_on`] the simulated bus.
pub fn fcan(ep: &str, args: &[&str]) -> Output {
    fcan_on(ep, Some("sim"), args)
}

/// A command's status and both outputs, for a failed assertion.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `--json` output: one value per non-empty line.
pub fn json_lines(o: &Output) -> Vec<Json> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Reads `child`'s piped stderr up to the line that says `ready`: returns the reader,
/// still open (keep it or drain it, so the child never blocks on a full pipe), and what
/// it read. Panics with that if the child exits first.
pub fn until_ready(child: &mut Child) -> (BufReader<ChildStderr>, String) {
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut log = String::new();
    while !log.contains("ready") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "exited before it was ready: {log}"
        );
        log.push_str(&line);
    }
    (stderr, log)
}
