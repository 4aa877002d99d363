//! The README's "Quickstart on vcan (Linux)", run for real over kernel SocketCAN.
//!
//! **This file mirrors the README.** [`QUICKSTART`] holds the quickstart's command lines
//! verbatim and in order; `readme_quickstart_is_what_the_vm_test_runs` (which runs in
//! every `cargo test`) fails when the README and this list drift apart. Change both.
//!
//! `foreign_traffic_on_vcan0` runs the nodes and `fcan` commands again while can-utils'
//! `cangen` fills about half the bus with random frames.
//!
//! `quickstart_on_vcan0` needs real SocketCAN with `vcan0` up, which the host here does
//! not have: it is `#[ignore]`d, as are `foreign_traffic_on_vcan0` and
//! `candump_capture_decodes_like_echo` (each fails when forced without `vcan0`), and
//! they run inside the VM of `../shared/tools/run-in-vm.sh`, started by `.ci/vm-e2e.sh`
//! with `--ignored`. There `quickstart_on_vcan0` spawns the example nodes and runs every
//! `fcan` command as separate processes, exactly as a user types them (binaries found on
//! `PATH`, or in `$FCAN_BIN_DIR`), and checks their exit codes and output. It adapts to
//! the interface: at MTU 72 (CAN FD) the nodes run in an FD mode, at MTU 16 in `classic`.
//!
//! The only differences from the README: the schema cache lives in a fresh temporary
//! directory (`FCAN_CACHE_DIR`, the default of `--cache-dir`), so the daemon starts cold
//! (schemas downloaded) and nothing is downloaded again; and after starting `fcan serve`
//! the test waits until the daemon has both nodes running, as a person would.

use std::collections::BTreeMap;

use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fcan_cli::Cli;
use fcan_core::frame::Mtu;
use fcan_examples::{io_board, motor_driver, run_node};
use fcan_master::transport::sim::{SimBus, SimConfig};
use serde_json::Value as Json;

/// The interface the quickstart uses.
const IFACE: &str = "vcan0";

/// One command line of the quickstart and what must come of it.
struct Step {
    /// The line as the README has it (a trailing `&` starts it in the background).
    line: &'static str,
    /// Checks a foreground command's result (background lines have none).
    check: Option<fn(&mut Ctx, &Run)>,
}

/// The quickstart's command lines, verbatim and in the README's order.
const QUICKSTART: &[Step] = &[
    Step {
        line: "motor-node --bus socketcan:vcan0 --node-id 1 &",
        check: None,
    },
    Step {
        line: "io-node --bus socketcan:vcan0 --node-id 2 &",
        check: None,
    },
    Step {
        line: "fcan serve --bus socketcan:vcan0 &",
        check: None,
    },
    Step {
        line: "fcan --bus socketcan:vcan0 nodes",
        check: Some(check_nodes_cold),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 topic echo /motor_driver1/motor0/feedback --count 3 --json",
        check: Some(check_feedback_at_rest),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 param set motor_driver1.motor0.velocity.kp 0.5",
        check: Some(check_param_set),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 param get motor_driver1.motor0.velocity.kp",
        check: Some(check_param_get),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 service call /io_board2/out0/set '{on: true}'",
        check: Some(check_service_call),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 topic echo /motor_driver1/motor0/feedback --json &",
        check: None,
    },
    Step {
        line: "fcan --bus socketcan:vcan0 topic pub /motor_driver1/motor0/target '{type: 1, value: 5}' --count 20 --rate 100",
        check: Some(check_pub),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 topic echo /motor_driver1/motor0/feedback --count 1 --json",
        check: Some(check_feedback_moved),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 param set motor_driver1.motor0.velocity.kp 500",
        check: Some(check_param_out_of_range),
    },
    Step {
        line: "fcan --bus socketcan:vcan0 --json nodes",
        check: Some(check_nodes_daemon),
    },
];

/// The background line that starts the daemon.
const SERVE: &str = "fcan serve --bus socketcan:vcan0 &";
/// The background line that echoes while the quickstart publishes.
const ECHO: &str = "fcan --bus socketcan:vcan0 topic echo /motor_driver1/motor0/feedback --json &";

/// The words a quickstart command line starts with.
const PROGRAMS: &[&str] = &["fcan", "motor-node", "io-node"];

/// What a foreground command did.
struct Run {
    /// Exit code (-1: killed by a signal).
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.code == 0
    }

    /// stdout as JSON lines.
    fn json_lines(&self) -> Vec<Json> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
            })
            .collect()
    }
}

/// State carried between steps.
struct Ctx {
    /// The interface is CAN FD capable (MTU 72).
    fd: bool,
    /// The schema cache directory.
    cache: PathBuf,
    /// The cache's files after the first (cold) command: name → (length, mtime).
    cache_after_cold: Option<BTreeMap<String, (u64, u64)>>,
    /// motor0's position before it was commanded.
    position_before: Option<f64>,
    /// Foreground commands run so far.
    steps_run: usize,
}

fn mtu_of(iface: &str) -> u32 {
    let p = format!("/sys/class/net/{iface}/mtu");
    let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e} (is {iface} up?)"));
    s.trim().parse().unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Each cache file's size and inode. A download writes a temporary file and renames it
/// into place (a new inode); a cache hit only touches the modification time (the cache's
/// least-recently-used clock), which is therefore not compared.
fn cache_files(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                (m.len(), std::os::unix::fs::MetadataExt::ino(&m)),
            ))
        })
        .collect()
}

/// Splits a README line into argv and whether it runs in the background.
fn parse_line(line: &str) -> (Vec<String>, bool) {
    let (cmd, background) = match line.trim().strip_suffix('&') {
        Some(c) => (c.trim(), true),
        None => (line.trim(), false),
    };
    let argv = shlex::split(cmd).unwrap_or_else(|| panic!("bad shell quoting: {line}"));
    assert!(
        argv.first().is_some_and(|p| PROGRAMS.contains(&p.as_str())),
        "not a quickstart command: {line}"
    );
    (argv, background)
}

fn command(argv: &[String], cache: &Path) -> Command {
    let program = match std::env::var_os("FCAN_BIN_DIR") {
        Some(dir) => Path::new(&dir).join(&argv[0]),
        None => PathBuf::from(&argv[0]),
    };
    let mut c = Command::new(program);
    c.args(&argv[1..])
        .env("FCAN_CACHE_DIR", cache)
        .env_remove("FCAN_BUS")
        .stdin(Stdio::null());
    c
}

/// Background processes, killed when the test ends however it ends.
struct Background(Vec<(String, Child, PathBuf)>);

impl Background {
    /// Fails if a node process has exited.
    fn check_alive(&mut self) {
        for (line, child, log) in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                let out = std::fs::read_to_string(&*log).unwrap_or_default();
                panic!("`{line}` exited ({status}):\n{out}");
            }
        }
    }

    fn print_logs(&self) {
        for (line, _, log) in &self.0 {
            let out = std::fs::read_to_string(log).unwrap_or_default();
            println!("--- output of `{line}`:\n{}", out.trim_end());
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a foreground command with a time limit, output captured through files (no pipe
/// can fill up and stall it).
fn run_foreground(argv: &[String], cache: &Path, dir: &Path, n: usize) -> Run {
    let out_path = dir.join(format!("step{n}.out"));
    let err_path = dir.join(format!("step{n}.err"));
    let mut child = command(argv, cache)
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", argv[0]));
    let limit = Duration::from_secs(60);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`{}` did not finish in {limit:?}", argv.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// A row of the `fcan nodes` table: ID NAME STATE PHASE MODE FRAMES ERRORS SCHEMA (SOURCE).
fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    let mut lines = stdout.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.split_whitespace().next() == Some("ID") && header.contains("SCHEMA"),
        "no `fcan nodes` table header:\n{stdout}"
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn mode_ok(ctx: &Ctx, mode: &str) -> bool {
    if ctx.fd {
        mode == "fd" || mode == "fd_brs"
    } else {
        mode == "classic"
    }
}

/// The expected nodes: id → name.
const NODES: &[(u8, &str)] = &[(1, "motor_driver1"), (2, "io_board2")];

fn check_nodes_cold(ctx: &mut Ctx, r: &Run) {
    assert!(r.ok(), "fcan nodes failed: {}", r.stderr);
    let rows = table_rows(&r.stdout);
    assert_eq!(rows.len(), NODES.len(), "two nodes expected:\n{}", r.stdout);
    for ((id, name), row) in NODES.iter().zip(&rows) {
        // ID NAME STATE PHASE MODE FRAMES ERRORS DIGEST (SOURCE)
        assert_eq!(row.len(), 9, "unexpected row: {row:?}");
        assert_eq!(row[0], id.to_string(), "{row:?}");
        assert_eq!(row[1], *name, "{row:?}");
        assert_eq!(row[2], "running", "{row:?}");
        assert_eq!(row[3], "running", "{row:?}");
        assert!(mode_ok(ctx, &row[4]), "mode {} at fd={}", row[4], ctx.fd);
        assert!(row[5].parse::<u32>().unwrap_or(0) > 0, "no frames: {row:?}");
        // A cold cache: this master downloaded both schemas…
        assert_eq!(row[8], "(downloaded)", "{row:?}");
    }
    // …and kept them, one verified blob per schema, named by its SHA-256.
    let files = cache_files(&ctx.cache);
    assert_eq!(files.len(), 2, "two cached blobs expected: {files:?}");
    for row in &rows {
        assert!(
            files
                .keys()
                .any(|f| f.starts_with(&row[7]) && f.ends_with(".bin") && f.len() == 64 + 4),
            "no cached blob for schema {}: {files:?}",
            row[7]
        );
    }
    ctx.cache_after_cold = Some(files);
}

fn feedback(r: &Run, count: usize) -> Vec<Json> {
    assert!(r.ok(), "topic echo failed: {}", r.stderr);
    let lines = r.json_lines();
    assert_eq!(
        lines.len(),
        count,
        "{count} samples expected:\n{}",
        r.stdout
    );
    let mut last_t = 0.0;
    for l in &lines {
        assert_eq!(l["topic"], "/motor_driver1/motor0/feedback", "{l}");
        let t = l["t"].as_f64().expect("t");
        assert!(t >= last_t, "times go back: {t} after {last_t}");
        last_t = t;
        let v = &l["value"];
        assert!(v["ready"].is_boolean(), "{l}");
        for f in ["position", "velocity", "current"] {
            assert!(v[f].as_f64().is_some_and(f64::is_finite), "{f} in {l}");
        }
    }
    lines
}

fn check_feedback_at_rest(ctx: &mut Ctx, r: &Run) {
    let lines = feedback(r, 3);
    let v = &lines[2]["value"];
    // Nothing commanded yet: the motor is stopped and says so.
    assert_eq!(v["ready"], false, "{v}");
    assert!(v["velocity"].as_f64().unwrap().abs() < 0.01, "{v}");
    ctx.position_before = v["position"].as_f64();
}

fn check_param_set(_: &mut Ctx, r: &Run) {
    assert!(r.ok(), "param set failed: {}", r.stderr);
    assert_eq!(r.stdout.trim(), "motor_driver1.motor0.velocity.kp = 0.5");
}

fn check_param_get(_: &mut Ctx, r: &Run) {
    // Another fcan process: the daemon's node kept the value the previous one set.
    assert!(r.ok(), "param get failed: {}", r.stderr);
    let v: f64 = r.stdout.trim().parse().expect("a number");
    assert_eq!(v, 0.5);
}

fn check_service_call(_: &mut Ctx, r: &Run) {
    assert!(r.ok(), "service call failed: {}", r.stderr);
    let resp: Json = serde_json::from_str(r.stdout.trim()).expect("JSON response");
    assert_eq!(resp["success"], true, "{resp}");
    assert!(resp["settle_ms"].is_u64(), "{resp}");
}

fn check_pub(_: &mut Ctx, r: &Run) {
    assert!(r.ok(), "topic pub failed: {}", r.stderr);
    assert!(
        r.stdout
            .starts_with("published 20 × /motor_driver1/motor0/target"),
        "{}",
        r.stdout
    );
}

fn check_feedback_moved(ctx: &mut Ctx, r: &Run) {
    let lines = feedback(r, 1);
    let v = &lines[0]["value"];
    let before = ctx.position_before.expect("position before");
    let after = v["position"].as_f64().unwrap();
    // 200 ms of "velocity 5 rev/s" with kp 0.5 turned the shaft (about 0.4 rev)…
    assert!(
        after - before > 0.1,
        "the motor did not turn: {before} → {after}"
    );
    // That it stopped once commands ended (command_timeout_ms) shows in the background
    // echo, at the end (`check_background_echo`): this echo attaches at once, within the
    // timeout of the last command.
}

/// The background `topic echo` ran all along (the foreground `topic pub` beside it): its
/// samples show the motor turning. Returns whether its latest sample shows the motor
/// stopped by itself (`ready: false`, at rest); callers wait for that, bounded.
fn check_background_echo(ctx: &Ctx, stdout: &str) -> bool {
    let lines: Vec<Json> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(lines.len() > 10, "the echo printed {} samples", lines.len());
    let pos = |l: &Json| l["value"]["position"].as_f64().expect("position");
    let before = ctx.position_before.expect("position before");
    assert!(
        lines.iter().any(|l| pos(l) - before > 0.1),
        "the echo never saw the motor turn from {before}"
    );
    let last = &lines[lines.len() - 1]["value"];
    last["ready"] == false && last["velocity"].as_f64().is_some_and(|v| v.abs() < 0.01)
}

/// How long the motor may take to come to rest after the last command, at most.
const STOP_BOUND: Duration = Duration::from_secs(30);

fn check_param_out_of_range(_: &mut Ctx, r: &Run) {
    assert!(!r.ok(), "an out-of-range value was accepted: {}", r.stdout);
    assert!(
        r.stderr.contains("500") && r.stderr.contains("max 100"),
        "the error must name the value and the bound: {}",
        r.stderr
    );
}

fn check_nodes_warm(ctx: &mut Ctx, r: &Run) {
    assert!(r.ok(), "fcan --json nodes failed: {}", r.stderr);
    let lines = r.json_lines();
    assert_eq!(lines.len(), NODES.len(), "{}", r.stdout);
    for ((id, name), n) in NODES.iter().zip(&lines) {
        assert_eq!(n["id"], *id, "{n}");
        assert_eq!(n["name"], *name, "{n}");
        assert_eq!(n["state"], "running", "{n}");
        assert_eq!(n["phase"], "running", "{n}");
        assert!(mode_ok(ctx, n["mode"].as_str().unwrap_or("")), "{n}");
        // A warm start: the schema came from the cache, nothing was downloaded.
        assert_eq!(n["schema_source"], "cache", "{n}");
        let digest = n["schema"].as_str().expect("digest");
        assert!(ctx.cache.join(format!("{digest}.bin")).is_file(), "{n}");
    }
}

/// The quickstart's last `nodes`, on the daemon that downloaded the schemas at the start
/// (the cache-unchanged check of `check_step` shows nothing was downloaded again).
fn check_nodes_daemon(ctx: &mut Ctx, r: &Run) {
    assert!(r.ok(), "fcan --json nodes failed: {}", r.stderr);
    let lines = r.json_lines();
    assert_eq!(lines.len(), NODES.len(), "{}", r.stdout);
    for ((id, name), n) in NODES.iter().zip(&lines) {
        assert_eq!(n["id"], *id, "{n}");
        assert_eq!(n["name"], *name, "{n}");
        assert_eq!(n["state"], "running", "{n}");
        assert_eq!(n["phase"], "running", "{n}");
        assert!(mode_ok(ctx, n["mode"].as_str().unwrap_or("")), "{n}");
        assert_eq!(n["schema_source"], "downloaded", "{n}");
        let digest = n["schema"].as_str().expect("digest");
        assert!(ctx.cache.join(format!("{digest}.bin")).is_file(), "{n}");
    }
    // Attached, so no one-shot master and no note about one.
    assert!(!r.stderr.contains("one-shot"), "{}", r.stderr);
}

/// Runs a step's check, then checks that warm starts left the cache alone.
fn check_step(ctx: &mut Ctx, step: &Step, r: &Run) {
    let check = step.check.expect("a foreground line has a check");
    check(ctx, r);
    if let Some(cold) = &ctx.cache_after_cold {
        if ctx.steps_run > 0 {
            // Warm starts read the cache and never write it.
            assert_eq!(
                &cache_files(&ctx.cache),
                cold,
                "the schema cache changed: something was downloaded again"
            );
        }
    }
    ctx.steps_run += 1;
}

/// Harness set-up, not a README line: waits (bounded) for the daemon just started in
/// the background to say "ready" and to have both nodes running, as a person waits for
/// its log before typing on. Asks with `--connect`, so it never starts a master itself.
fn wait_for_daemon(bg: &mut Background, cache: &Path, dir: &Path) {
    let limit = Duration::from_secs(60);
    let start = Instant::now();
    let log = bg.0.last().expect("the daemon").2.clone();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("fcan serve: ready")
    {
        bg.check_alive();
        assert!(start.elapsed() < limit, "fcan serve not ready in {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let argv: Vec<String> = [
        "fcan",
        "--connect",
        "tcp/127.0.0.1:7447",
        "--bus",
        "socketcan:vcan0",
        "--json",
        "nodes",
    ]
    .map(String::from)
    .to_vec();
    for i in 0.. {
        let r = run_foreground(&argv, cache, dir, 1000 + i);
        if r.ok() && running(&r.json_lines()) == NODES.len() {
            println!("(the daemon has both nodes running)");
            return;
        }
        bg.check_alive();
        assert!(
            start.elapsed() < limit,
            "the daemon's nodes not running in {limit:?}: {}{}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How many of `fcan --json nodes`' lines are running.
fn running(nodes: &[Json]) -> usize {
    nodes.iter().filter(|n| n["phase"] == "running").count()
}

#[test]
#[ignore = "needs SocketCAN: .ci/vm-e2e.sh runs it in a VM"]
fn quickstart_on_vcan0() {
    let mtu = mtu_of(IFACE);
    let fd = match mtu {
        72 => true,
        16 => false,
        other => panic!("{IFACE} has MTU {other}: expected 72 (CAN FD) or 16 (Classical CAN)"),
    };
    println!(
        "vm quickstart: {IFACE} MTU {mtu} ({})",
        if fd { "CAN FD" } else { "Classical CAN" }
    );
    let dir = std::env::temp_dir().join(format!("fcan-vm-quickstart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut ctx = Ctx {
        fd,
        cache: cache.clone(),
        cache_after_cold: None,
        position_before: None,
        steps_run: 0,
    };
    let mut bg = Background(Vec::new());
    for (n, step) in QUICKSTART.iter().enumerate() {
        let (argv, background) = parse_line(step.line);
        println!("\n$ {}", step.line);
        if background {
            assert!(step.check.is_none(), "a background line has no check");
            let log = dir.join(format!("step{n}.log"));
            let f = std::fs::File::create(&log).expect("log file");
            let child = command(&argv, &cache)
                .stdout(f.try_clone().expect("log file"))
                .stderr(f)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", argv[0]));
            bg.0.push((step.line.to_string(), child, log));
            if step.line == SERVE {
                wait_for_daemon(&mut bg, &cache, &dir);
            }
            continue;
        }
        let t = Instant::now();
        let r = run_foreground(&argv, &cache, &dir, n);
        print!("{}", r.stdout);
        eprint!("{}", r.stderr);
        println!("[exit {}, {:.1} s]", r.code, t.elapsed().as_secs_f64());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_step(&mut ctx, step, &r);
            bg.check_alive();
        }));
        if let Err(e) = result {
            bg.print_logs();
            std::panic::resume_unwind(e);
        }
    }
    bg.check_alive();
    bg.print_logs();
    let echo =
        bg.0.iter()
            .find(|b| b.0 == ECHO)
            .expect("the background echo")
            .2
            .clone();
    let t = Instant::now();
    while !check_background_echo(&ctx, &std::fs::read_to_string(&echo).unwrap_or_default()) {
        assert!(t.elapsed() < STOP_BOUND, "the motor did not stop by itself");
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "\nvm quickstart: all {} commands behaved as the README says (MTU {mtu})",
        QUICKSTART.len()
    );
    drop(bg);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Foreign traffic at about half the bus while the quickstart's nodes are provisioned
/// and used (issue 10, item 7): can-utils' `cangen` (on `PATH` in the VM, `--with
/// cangen`) fills vcan0 with random standard and extended frames — random identifiers
/// (half of the extended ones with bit 28 set, so they parse as configuration-plane
/// identifiers), lengths and payloads; on a CAN FD interface also FD frames (`-m`). vcan
/// has no bit rate, so cangen is paced: two generators, each a burst of 3 frames per
/// millisecond, 6,000 frames/s in all at most. Half of a 1 Mbit/s bus is ~5,000 of these
/// ~100-bit frames per second. (Bursts of 10 per ms, 15,000 frames/s measured, is 1.5×
/// what a real 1 Mbit/s bus can carry; under an emulated VM's CPU the single-frame
/// socket I/O of every process then falls behind and frames are lost in socket queues,
/// which tests the VM, not the protocol.) The test requires more than 3,000 frames/s
/// from the generators alone. Every `fcan` command is a
/// new master (cold first, then warm), each must succeed — several times over, since
/// before the fix most runs failed.
#[test]
#[ignore = "needs SocketCAN: .ci/vm-e2e.sh runs it in a VM"]
fn foreign_traffic_on_vcan0() {
    let fd = mtu_of(IFACE) == 72;
    let dir = std::env::temp_dir().join(format!("fcan-vm-foreign-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut ctx = Ctx {
        fd,
        cache: cache.clone(),
        cache_after_cold: None,
        position_before: None,
        steps_run: 0,
    };
    let mut bg = Background(Vec::new());
    let ext = if fd { "-m" } else { "-e" };
    let generators = [
        format!("cangen {IFACE} -g 1 -c 3 -I r -L r -D r"),
        format!("cangen {IFACE} -g 1 -c 3 -I r -L r -D r {ext}"),
    ];
    let nodes = [
        "motor-node --bus socketcan:vcan0 --node-id 1".to_string(),
        "io-node --bus socketcan:vcan0 --node-id 2".to_string(),
    ];
    // The generators first, alone for a second, to measure their rate.
    let spawn = |bg: &mut Background, n: usize, line: &str| {
        let argv = shlex::split(line).expect("argv");
        let log = dir.join(format!("bg{n}.log"));
        let f = std::fs::File::create(&log).expect("log file");
        let mut c = if argv[0] == "cangen" {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]).stdin(Stdio::null());
            c
        } else {
            command(&argv, &cache)
        };
        let child = c
            .stdout(f.try_clone().expect("log file"))
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{line}`: {e}"));
        bg.0.push((line.to_string(), child, log));
    };
    for (n, line) in generators.iter().enumerate() {
        spawn(&mut bg, n, line);
    }
    std::thread::sleep(Duration::from_millis(300));
    let (c0, t) = (frames_carried(IFACE), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let foreign = (frames_carried(IFACE) - c0) as f64 / t.elapsed().as_secs_f64();
    for (n, line) in nodes.iter().enumerate() {
        spawn(&mut bg, generators.len() + n, line);
    }
    std::thread::sleep(Duration::from_millis(300));
    let rx_before = frames_carried(IFACE);
    let t0 = Instant::now();
    type Check = fn(&mut Ctx, &Run);
    let mut lines: Vec<(&str, Check)> = vec![(
        "fcan --bus socketcan:vcan0 nodes",
        check_nodes_cold as Check,
    )];
    for _ in 0..5 {
        lines.push((
            "fcan --bus socketcan:vcan0 topic echo /motor_driver1/motor0/feedback --count 3 --json",
            |_, r| {
                feedback(r, 3);
            },
        ));
    }
    lines.push((
        "fcan --bus socketcan:vcan0 param set motor_driver1.motor0.velocity.kp 0.5",
        check_param_set,
    ));
    lines.push((
        "fcan --bus socketcan:vcan0 param get motor_driver1.motor0.velocity.kp",
        check_param_get,
    ));
    lines.push((
        "fcan --bus socketcan:vcan0 service call /io_board2/out0/set '{on: true}'",
        check_service_call,
    ));
    lines.push(("fcan --bus socketcan:vcan0 --json nodes", check_nodes_warm));
    for (n, (line, check)) in lines.iter().enumerate() {
        let (argv, _) = parse_line(line);
        println!("\n$ {line}   (with cangen running)");
        let t = Instant::now();
        let r = run_foreground(&argv, &cache, &dir, n);
        print!("{}", r.stdout);
        eprint!("{}", r.stderr);
        println!("[exit {}, {:.1} s]", r.code, t.elapsed().as_secs_f64());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&mut ctx, &r);
            bg.check_alive();
        }));
        if let Err(e) = result {
            bg.print_logs();
            std::panic::resume_unwind(e);
        }
    }
    // The generators really loaded the bus (vcan has no bit rate: frames per second).
    let rate = (frames_carried(IFACE) - rx_before) as f64 / t0.elapsed().as_secs_f64();
    println!(
        "\nvm foreign traffic: {} commands passed; cangen alone {foreign:.0} frames/s, \
         {rate:.0} frames/s on {IFACE} during the commands",
        lines.len()
    );
    assert!(
        foreign > 3_000.0,
        "cangen produced only {foreign:.0} frames/s"
    );
    drop(bg);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Frames the interface has carried (vcan counts each frame sent once).
fn frames_carried(iface: &str) -> u64 {
    let p = format!("/sys/class/net/{iface}/statistics/tx_packets");
    std::fs::read_to_string(&p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("cannot read {p}"))
}

/// Runs one `fcan` command line in-process as the binary does (`fcan_cli::run`), with
/// `bus` as the simulated bus `sim` names.
async fn fcan_in_process(argv: &[String], bus: &SimBus) -> Run {
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            return Run {
                code: 2,
                stdout: String::new(),
                stderr: e.to_string(),
            }
        }
    };
    let mut out = Vec::new();
    let r = fcan_cli::run_to(cli, Some(bus), &mut out).await;
    Run {
        code: if r.is_ok() { 0 } else { 1 },
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: r
            .err()
            .map_or(String::new(), |e| format!("fcan: error: {e}\n")),
    }
}

/// A background program of the simulated quickstart: a thread with its own runtime (as
/// a process has), stopped when dropped.
struct BackgroundTask {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// What it wrote to stdout.
    out: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

/// A `Write` into a shared buffer.
struct SharedOut(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl BackgroundTask {
    /// Runs `fcan serve` (`serve`) or another `fcan` command line (`argv`) until stopped.
    fn start(argv: Vec<String>, bus: SimBus) -> BackgroundTask {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut w = SharedOut(out.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let os: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
                let run = async {
                    let r = match fcan_cli::serve::serve_argv(&os) {
                        Some(args) => {
                            let cli = fcan_cli::serve::ServeCli::try_parse_from(args)
                                .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                            fcan_cli::serve::serve(cli, Some(&bus)).await
                        }
                        None => {
                            let cli = Cli::try_parse_from(&argv)
                                .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                            fcan_cli::run_to(cli, Some(&bus), &mut w).await
                        }
                    };
                    if let Err(e) = r {
                        panic!("{argv:?} failed: {e}");
                    }
                };
                tokio::select! {
                    _ = run => {}
                    _ = stopped => {}
                }
            });
        });
        BackgroundTask {
            stop: Some(stop),
            thread: Some(thread),
            out,
        }
    }

    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for BackgroundTask {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The quickstart on the in-process simulated bus, in every `cargo test` (no VM needed):
/// the nodes run as tasks, `fcan serve` and the background echo as threads with their
/// own runtimes (processes, in the README), every `fcan` line through the real argument
/// parsers, with `--bus socketcan:vcan0` swapped for the simulated bus, the daemon on a
/// free loopback port (`--listen`, and `--connect` for the commands) and `--cache-dir`
/// added. Same checks as over SocketCAN. Real time: Zenoh runs on its own threads.
async fn quickstart_on_the_simulated_bus(mtu: Mtu) {
    let fd = mtu == Mtu::Fd;
    let kind = if fd { "fd" } else { "classic" };
    let bus = SimBus::new(SimConfig::default());
    let dir =
        std::env::temp_dir().join(format!("fcan-sim-quickstart-{}-{kind}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    let endpoint = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        format!("tcp/{}", l.local_addr().expect("its address"))
    };
    let mut ctx = Ctx {
        fd,
        cache: cache.clone(),
        cache_after_cold: None,
        position_before: None,
        steps_run: 0,
    };
    let mut nodes = Vec::new();
    let mut background: Vec<(&str, BackgroundTask)> = Vec::new();
    for step in QUICKSTART {
        let (mut argv, is_background) = parse_line(step.line);
        for a in &mut argv {
            if a == "socketcan:vcan0" {
                *a = format!("sim:{kind}");
            }
        }
        if is_background && argv[0] != "fcan" {
            let id: u8 = argv
                .iter()
                .position(|a| a == "--node-id")
                .and_then(|i| argv.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no --node-id in `{}`", step.line));
            let task = match argv[0].as_str() {
                "motor-node" => run_node(bus.endpoint(mtu), motor_driver(id, 8, fd)).abort_handle(),
                "io-node" => run_node(bus.endpoint(mtu), io_board(id, fd)).abort_handle(),
                other => panic!("unknown node program {other}"),
            };
            nodes.push(task);
            continue;
        }
        if step.line == SERVE {
            argv.extend([
                "--listen".to_string(),
                endpoint.clone(),
                format!("--cache-dir={}", cache.display()),
            ]);
            background.push((step.line, BackgroundTask::start(argv, bus.clone())));
            // As over SocketCAN: wait for the daemon to have both nodes running.
            let ask: Vec<String> = ["fcan", "--bus", "sim", "--json", "nodes"]
                .map(String::from)
                .to_vec();
            let mut ask = ask;
            ask.insert(1, format!("--connect={endpoint}"));
            let start = Instant::now();
            loop {
                let r = fcan_in_process(&ask, &bus).await;
                if r.ok() && running(&r.json_lines()) == NODES.len() {
                    break;
                }
                assert!(background[0].1.running(), "fcan serve stopped");
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "the daemon's nodes not running: {}{}",
                    r.stdout,
                    r.stderr
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        }
        argv.insert(1, format!("--connect={endpoint}"));
        if is_background {
            background.push((step.line, BackgroundTask::start(argv, bus.clone())));
            continue;
        }
        let r = fcan_in_process(&argv, &bus).await;
        println!("\n[{kind}] $ {}\n{}{}", step.line, r.stdout, r.stderr);
        check_step(&mut ctx, step, &r);
        for (line, b) in &background {
            assert!(b.running(), "`{line}` stopped");
        }
        // The next command is another process: it starts a little later.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, echo) = background
        .iter()
        .find(|(l, _)| *l == ECHO)
        .expect("the background echo");
    let t = Instant::now();
    loop {
        let out = String::from_utf8_lossy(&echo.out.lock().unwrap()).into_owned();
        if check_background_echo(&ctx, &out) {
            break;
        }
        assert!(echo.running(), "the background echo stopped");
        assert!(t.elapsed() < STOP_BOUND, "the motor did not stop by itself");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(background);
    for n in nodes {
        n.abort();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_on_the_simulated_bus_fd() {
    quickstart_on_the_simulated_bus(Mtu::Fd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_on_the_simulated_bus_classic() {
    quickstart_on_the_simulated_bus(Mtu::Classic).await;
}

/// The `fcan` / `motor-node` / `io-node` lines of the README's quickstart section, with
/// trailing comments (`  # …`) removed.
fn readme_quickstart_lines(readme: &str) -> Vec<String> {
    let start = readme
        .find("## Quickstart on vcan (Linux)")
        .expect("README has a `## Quickstart on vcan (Linux)` section");
    let section = &readme[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    let mut in_code = false;
    let mut lines = Vec::new();
    for l in section[..end].lines() {
        if l.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        let l = l.split("  #").next().unwrap_or("").trim();
        if PROGRAMS
            .iter()
            .any(|p| l.split_whitespace().next() == Some(p))
        {
            lines.push(l.to_string());
        }
    }
    lines
}

#[test]
fn readme_quickstart_is_what_the_vm_test_runs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let ours: Vec<&str> = QUICKSTART.iter().map(|s| s.line).collect();
    assert_eq!(
        readme_quickstart_lines(&readme),
        ours,
        "README.md's quickstart and examples/host/tests/vm_quickstart.rs differ: keep them in sync"
    );
    // The interface set-up the VM does for us, in the README for people.
    let start = readme.find("## Quickstart on vcan (Linux)").unwrap_or(0);
    for setup in [
        "sudo modprobe vcan",
        "sudo ip link add dev vcan0 type vcan",
        "sudo ip link set vcan0 mtu 72 && sudo ip link set up vcan0",
        "sudo ip link set vcan0 mtu 16 && sudo ip link set up vcan0",
        "cargo build --release -p fcan-examples -p fcan-cli",
    ] {
        assert!(
            readme[start..].contains(setup),
            "README quickstart lacks `{setup}`"
        );
    }
    for step in QUICKSTART {
        parse_line(step.line);
    }
}

/// `fcan decode` on a capture made by can-utils' `candump -L` (copied in with `--with
/// candump`) over real SocketCAN, started before the nodes: the values it decodes equal
/// what `fcan topic echo` printed during the capture (feedback; the I/O board's analog
/// samples, a five-frame group on Classical CAN), and the command published is in it.
#[test]
#[ignore = "needs SocketCAN: .ci/vm-e2e.sh runs it in a VM"]
fn candump_capture_decodes_like_echo() {
    let mtu = mtu_of(IFACE);
    let dir = std::env::temp_dir().join(format!("fcan-vm-decode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("cache");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let capture = dir.join("capture.log");
    let mut candump = Command::new("candump")
        .args(["-L", IFACE])
        .stdout(std::fs::File::create(&capture).expect("capture file"))
        .stderr(Stdio::null())
        .spawn()
        .expect("candump on PATH (--with candump)");
    std::thread::sleep(Duration::from_millis(300));
    let mut bg = Background(Vec::new());
    for line in [QUICKSTART[0].line, QUICKSTART[1].line, SERVE] {
        let (argv, _) = parse_line(line);
        let log = dir.join(format!("{}.log", argv[0]));
        let f = std::fs::File::create(&log).expect("log file");
        let child = command(&argv, &cache)
            .stdout(f.try_clone().expect("log file"))
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {line}: {e}"));
        bg.0.push((line.to_string(), child, log));
    }
    wait_for_daemon(&mut bg, &cache, &dir);
    let fcan = |n: usize, args: &str| {
        // Attached to the daemon by name: a one-shot master beside it would fight it.
        let argv = shlex::split(&format!(
            "fcan --connect tcp/127.0.0.1:7447 --bus socketcan:vcan0 {args}"
        ))
        .unwrap();
        let r = run_foreground(&argv, &cache, &dir, n);
        assert!(r.ok(), "fcan {args}: {}{}", r.stdout, r.stderr);
        r
    };
    const FEEDBACK: &str = "/motor_driver1/motor0/feedback";
    const SAMPLES: &str = "/io_board2/analog/samples";
    const TARGET: &str = "/motor_driver1/motor0/target";
    let echoed_fb = fcan(1, &format!("topic echo {FEEDBACK} --count 30 --json")).json_lines();
    let echoed_samples = fcan(2, &format!("topic echo {SAMPLES} --count 10 --json")).json_lines();
    fcan(
        3,
        &format!("topic pub {TARGET} '{{type: 1, value: 2.5}}' --count 3 --rate 50"),
    );
    std::thread::sleep(Duration::from_millis(200));
    // SIGINT: candump flushes its log and exits.
    // SAFETY: kill(2) on a child process id we own; no memory is touched.
    unsafe { libc::kill(candump.id() as i32, libc::SIGINT) };
    let _ = candump.wait();
    drop(bg);

    let decode_argv: Vec<String> = ["fcan", "--no-cache", "decode", capture.to_str().unwrap()]
        .map(String::from)
        .to_vec();
    let r = run_foreground(&decode_argv, &cache, &dir, 10);
    print!("{}", r.stderr);
    assert!(r.ok(), "fcan decode: {}", r.stderr);
    // A node's old-plan frames still on the bus while the master re-plans it (after a
    // reboot or a provisioning retry) have no definition any more: a handful at most.
    let count = |what: &str| -> u64 {
        r.stderr
            .lines()
            .filter(|l| l.contains(what))
            .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
            .sum()
    };
    let undecoded = count("data frames not decoded");
    let data: u64 = r
        .stderr
        .lines()
        .find(|l| l.contains(" data), "))
        .and_then(|l| l.split('(').nth(1)?.split_whitespace().next()?.parse().ok())
        .expect("the summary line");
    assert!(
        undecoded * 100 <= data,
        "{undecoded} of {data} data frames not decoded"
    );
    let decoded = r.json_lines();
    let of = |topic: &str| -> Vec<Json> {
        decoded
            .iter()
            .filter(|l| l["topic"] == topic)
            .map(|l| l["value"].clone())
            .collect()
    };
    let values =
        |lines: &[Json]| -> Vec<Json> { lines.iter().map(|l| l["value"].clone()).collect() };
    for (topic, echoed) in [(FEEDBACK, &echoed_fb), (SAMPLES, &echoed_samples)] {
        let want = values(echoed);
        let got = of(topic);
        assert!(
            !want.is_empty() && got.windows(want.len()).any(|w| w == want.as_slice()),
            "{topic}: the {} echoed values are not a run of the {} decoded",
            want.len(),
            got.len()
        );
    }
    // The command published (the daemon may merge values of one topic that reach it in
    // one wake-up into one frame, so at least one).
    let targets = of(TARGET);
    assert!(
        targets.iter().any(|v| v["value"] == 2.5 && v["type"] == 1),
        "{targets:?}"
    );
    println!(
        "\nvm decode: candump capture (MTU {mtu}) decoded: {} values; echo's feedback and samples found in it",
        decoded.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
