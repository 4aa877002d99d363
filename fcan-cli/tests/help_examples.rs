//! Issue 38, "Proof": every example in `fcan --help` and in each command's help runs as
//! pasted. Each line of a help text that starts with `fcan ` (or `Example: fcan `) is run
//! by `sh` with the real binary first on PATH, in a directory of its own, beside a daemon:
//! `fcan fake` of the example motor driver (`schema/examples/motor_driver.yaml`, node 1,
//! so `motor_driver1`), served as bus `can0` (the examples' `--bus socketcan:can0`) and,
//! through it, a second one as bus `sim` (the fake's `fcan --bus sim …`). FCAN_CONNECT
//! points at it as the default port would; FCAN_BUS=sim answers the examples without
//! `--bus` (two buses are served). Each must exit 0. Those that cannot run here are
//! skipped with their reason, listed, and the list is checked: a new example either runs
//! or is given a reason.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;

mod common;
use common::{fcan_on, json_lines, text, until_ready, Kill};

/// `fcan ARGS…` as a user types it, its standard output.
fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(args)
        .env_remove("FCAN_BUS")
        .env_remove("FCAN_CONNECT")
        .output()
        .unwrap();
    assert!(o.status.success(), "fcan {args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// The example command lines of a help text: a line starting with `fcan ` (after
/// `Example: `), joined with the next when it ends with `\`, without the explanation
/// in parentheses that follows it after two spaces or more.
fn examples(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = help.lines();
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        let t = t.strip_prefix("Example: ").unwrap_or(t);
        if !t.starts_with("fcan ") {
            continue;
        }
        let mut cmd = t.trim_end().to_string();
        while let Some(head) = cmd.strip_suffix('\\') {
            cmd = head.trim_end().to_string();
            if let Some(next) = lines.next() {
                cmd.push(' ');
                cmd.push_str(next.trim());
            }
        }
        if let Some(i) = cmd.find("  (") {
            cmd.truncate(i);
        }
        out.push(cmd.trim_end().to_string());
    }
    out
}

/// Why an example is not run here, if it is not.
fn skip_reason(cmd: &str) -> Option<&'static str> {
    if cmd.starts_with("fcan serve") {
        Some("a daemon owning a CAN interface, until Ctrl-C (fcan-cli/tests/serve.rs)")
    } else if cmd.starts_with("fcan fake") {
        Some("a daemon, until Ctrl-C: this test runs one (and first_hour.rs others)")
    } else if cmd.starts_with("fcan update") {
        Some(
            "needs a firmware image or binary and a node taking updates (fcan-cli/tests/update.rs)",
        )
    } else if cmd.starts_with("fcan decode") {
        Some("needs a candump capture, run.log (tests/tests/decode.rs)")
    } else if cmd.starts_with("fcan record") && !cmd.contains("--duration") {
        Some("records until Ctrl-C, as it says (fcan-cli/tests/record_ctrl_c.rs)")
    } else {
        None
    }
}

/// Waits until `ep` serves `bus` with `motor_driver1` running.
fn until_running(ep: &str, bus: &str) {
    let t0 = Instant::now();
    loop {
        let o = fcan_on(ep, Some(bus), &["--json", "nodes"]);
        let n = if o.status.success() {
            json_lines(&o)
        } else {
            Vec::new()
        };
        if n.len() == 1 && n[0]["phase"] == "running" {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn every_help_example_runs_as_pasted() {
    // Every help text with examples: the tool's, each command's, each subcommand's.
    let mut helps = vec![help(&["--help"])];
    for cmd in [
        &["nodes"][..],
        &["topic"],
        &["topic", "list"],
        &["topic", "info"],
        &["topic", "echo"],
        &["topic", "pub"],
        &["topic", "hz"],
        &["service"],
        &["service", "list"],
        &["service", "call"],
        &["param"],
        &["param", "list"],
        &["param", "get"],
        &["param", "set"],
        &["param", "dump"],
        &["param", "load"],
        &["schema"],
        &["schema", "show"],
        &["monitor"],
        &["decode"],
        &["plan"],
        &["record"],
        &["update"],
        &["serve"],
        &["fake"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        helps.push(help(&args));
        // `fcan help serve` is `fcan serve --help`; the command's own entry too.
        if cmd.len() == 1 {
            helps.push(help(&["help", cmd[0]]));
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for h in &helps {
        for e in examples(h) {
            if !lines.contains(&e) {
                lines.push(e);
            }
        }
    }
    assert!(lines.len() > 30, "{lines:#?}");

    let schema = std::fs::canonicalize("../schema/examples/motor_driver.yaml").unwrap();
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let spawn = |args: &[&str]| {
        let mut c = Kill(
            Command::new(env!("CARGO_BIN_EXE_fcan"))
                .args(["fake", "--no-cache", "--node-id", "1", "--schema"])
                .arg(&schema)
                .args(args)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let (err, _) = until_ready(&mut c.0);
        (c, err)
    };
    let _can0 = spawn(&["--bus", "can0=sim", "--listen", &ep]);
    let other = format!("tcp/127.0.0.1:{}", free_port());
    let _sim = spawn(&["--connect", &ep, "--listen", &other]);
    until_running(&ep, "can0");
    until_running(&ep, "sim");

    // Where the examples run: the repository's root, as the paths in them say, with the
    // files they write going to a directory of their own.
    let dir = std::env::temp_dir().join(format!("fcan-help-examples-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("schema/examples")).unwrap();
    std::fs::copy(&schema, dir.join("schema/examples/motor_driver.yaml")).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_fcan"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for line in &lines {
        if let Some(why) = skip_reason(line) {
            skipped.push(format!("{line}  -- {why}"));
            continue;
        }
        let t0 = Instant::now();
        let o = Command::new("sh")
            .args(["-c", line])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("FCAN_CONNECT", &ep)
            .env("FCAN_BUS", "sim")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "`{line}` failed:\n{}", text(&o));
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "`{line}` took {:?}",
            t0.elapsed()
        );
        ran.push(line.clone());
    }
    eprintln!(
        "ran:\n  {}\nskipped:\n  {}",
        ran.join("\n  "),
        skipped.join("\n  ")
    );
    // What it wrote is what the examples say.
    assert!(
        dir.join("motor0.yaml").is_file(),
        "param dump > motor0.yaml"
    );
    assert!(dir.join("robot.dbc").is_file(), "plan --dbc robot.dbc");
    assert!(dir.join("run.mcap").is_file(), "record run.mcap --duration");
    let _ = std::fs::remove_dir_all(&dir);
    // Only daemons, updates, captures and endless recordings are skipped.
    for s in &skipped {
        assert!(
            [
                "fcan serve",
                "fcan fake",
                "fcan update",
                "fcan decode",
                "fcan record run.mcap  "
            ]
            .iter()
            .any(|p| s.starts_with(p)),
            "{s}"
        );
    }
    assert!(ran.len() >= 20, "{ran:#?}");
}
