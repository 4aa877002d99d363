//! A newcomer's first hour (issue 38), through the real `fcan` binary: nothing hangs
//! silently, every output reads back, the CLI is one tool.

use std::io::{BufRead, BufReader};
use std::process::{ChildStderr, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;

mod common;
use common::{fcan_on, json_lines, text, until_ready, Kill};

/// `fcan fake` serving a simulated bus on a free port, with `args`, once every node it
/// runs is RUNNING (`nodes` of them).
struct Fake {
    ep: String,
    // Killed before its stderr closes (fields drop in order).
    _child: Kill,
    _stderr: BufReader<ChildStderr>,
}

fn fake(args: &[&str], nodes: usize) -> Fake {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut child = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["fake", "--no-cache", "--listen", &ep])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (stderr, _) = until_ready(&mut child.0);
    let t0 = Instant::now();
    loop {
        let o = fcan_on(&ep, None, &["--json", "nodes"]);
        let n = if o.status.success() {
            json_lines(&o)
        } else {
            Vec::new()
        };
        if n.len() == nodes && n.iter().all(|n| n["phase"] == "running") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
    Fake {
        ep,
        _child: child,
        _stderr: stderr,
    }
}

/// `fcan --connect EP ARGS…` (the daemon's only bus).
fn fcan(ep: &str, args: &[&str]) -> Output {
    fcan_on(ep, None, args)
}

/// Item 1: `topic echo -n 2` on a topic a RobStride sends only in reply to a command,
/// right after enabling it, says on stderr within seconds why nothing comes — instead
/// of printing nothing for ever.
#[test]
fn echo_of_a_silent_topic_says_why_nothing_comes() {
    let f = fake(
        &[
            "--bus",
            "sim:classic",
            "--device",
            "robstride:id=10,model=RS03",
        ],
        1,
    );
    let o = fcan(
        &f.ep,
        &["service", "call", "/robstride10/motor/enable", "{}"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let mut echo = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args([
                "--connect",
                &f.ep,
                "topic",
                "echo",
                "/robstride10/motor/feedback",
            ])
            .args(["-n", "2"])
            .env_remove("FCAN_BUS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = echo.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let note = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a note on stderr while no sample comes");
    assert!(t0.elapsed() >= Duration::from_secs(1), "too early: {note}");
    assert!(
        note.starts_with("fcan: no sample on /robstride10/motor/feedback for 2 s"),
        "{note}"
    );
    // What the topic is, and what makes the node send it.
    assert!(note.contains("on commit, not periodically"), "{note}");
    assert!(note.contains("`robstride` driver"), "{note}");
    assert!(note.contains("/robstride10/motor/mit"), "{note}");
    assert!(note.contains("--timeout"), "{note}");
    // Still waiting (the user asked for two samples), not failed.
    assert!(echo.0.try_wait().unwrap().is_none());
}

/// Item 1: `topic hz -n N` stops after N messages, its window the time they took.
#[test]
fn hz_takes_a_count() {
    let f = fake(
        &[
            "--schema",
            "../schema/examples/motor_driver.yaml",
            "--node-id",
            "1",
        ],
        1,
    );
    let t0 = Instant::now();
    let o = fcan(
        &f.ep,
        &[
            "--json",
            "topic",
            "hz",
            "/motor_driver1/motor0/feedback",
            "-n",
            "5",
            "--window",
            "60",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(t0.elapsed() < Duration::from_secs(30));
    let v = &json_lines(&o)[0];
    assert_eq!(v["samples"], 5, "{v}");
    assert!(v["window_s"].as_f64().unwrap() < 60.0, "{v}");
}

/// The endpoint of the line `fcan fake|serve: serving bus NAME on EP — attach with
/// `fcan --connect EP …`` in `log`, if it printed one.
fn attach_line(log: &str) -> Option<String> {
    let line = log
        .lines()
        .find(|l| l.contains("— attach with `fcan --connect "))?;
    let ep = line.split("`fcan --connect ").nth(1)?.split(' ').next()?;
    assert!(
        (line.starts_with("fcan fake: serving bus ")
            || line.starts_with("fcan serve: serving bus "))
            && line.contains(&format!(" on {ep} — ")),
        "{line}"
    );
    Some(ep.to_string())
}

/// Item 2 and "What to build": a second bus owner beside a daemon that serves a bus of the
/// same name. On the default port (taken, so it joins the holder) it serves on a free port
/// of its own and prints the `fcan --connect` line to use; on an endpoint the user chose
/// it is refused, naming a free port and `--bus NAME=sim`; `--bus NAME=sim` serves the
/// fake nodes' bus as NAME beside the other.
#[test]
fn a_second_fake_beside_a_served_bus_serves_on_a_free_port() {
    let io = "../schema/examples/io_board.yaml";
    let first = fake(&["--schema", io, "--node-id", "5"], 1);
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["fake", "--no-cache", "--connect", &first.ep])
        .args(["--listen", &format!("tcp/127.0.0.1:{}", free_port())])
        .args(["--schema", io, "--node-id", "6"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("fcan fake: error: "), "{err}");
    assert!(last.contains("a bus `sim` is already served"), "{last}");
    assert!(
        last.contains("`fcan fake … --listen tcp/127.0.0.1:"),
        "{last}"
    );
    assert!(last.contains("`fcan --connect tcp/127.0.0.1:"), "{last}");
    assert!(last.contains("`--bus NAME=sim`"), "{last}");

    // `--bus NAME=sim`: served as NAME beside the first, through the same network.
    let mut named = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["fake", "--no-cache", "--connect", &first.ep])
            .args(["--listen", &format!("tcp/127.0.0.1:{}", free_port())])
            .args(["--bus", "mine=sim", "--schema", io, "--node-id", "6"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (_named_err, log) = until_ready(&mut named.0);
    assert!(log.contains("serving sim as fcan/mine/"), "{log}");
    let t0 = Instant::now();
    loop {
        let o = fcan_on(&first.ep, Some("mine"), &["--json", "nodes"]);
        let n = if o.status.success() {
            json_lines(&o)
        } else {
            Vec::new()
        };
        if n.len() == 1 && n[0]["id"] == 6 && n[0]["phase"] == "running" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
    // A name is for the simulated bus fake serves.
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args([
            "fake",
            "--bus",
            "mine=socketcan:vcan0",
            "--schema",
            io,
            "--node-id",
            "6",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("`fcan serve --bus mine=socketcan:vcan0`"),
        "{}",
        text(&o)
    );

    // The default port: the first of two fakes serving one name holds it (or joins its
    // holder); the second finds the name served there and moves to a free port.
    let name = format!("fh{}", std::process::id());
    let bus = format!("{name}=sim");
    let spawn = |id: &str| {
        let mut c = Kill(
            Command::new(env!("CARGO_BIN_EXE_fcan"))
                .args([
                    "fake",
                    "--no-cache",
                    "--bus",
                    &bus,
                    "--schema",
                    io,
                    "--node-id",
                    id,
                ])
                .env_remove("FCAN_CONNECT")
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let (err, log) = until_ready(&mut c.0);
        (c, err, log)
    };
    let (_a, _a_err, a_log) = spawn("7");
    let (_b, _b_err, b_log) = spawn("8");
    assert!(attach_line(&a_log).is_none(), "{a_log}");
    let ep = attach_line(&b_log).unwrap_or_else(|| panic!("no attach line: {b_log}"));
    assert!(
        b_log.contains(&format!(
            "serves a bus `{name}` too: serving on {ep} instead"
        )),
        "{b_log}"
    );
    let t0 = Instant::now();
    loop {
        // The line as printed: `fcan --connect EP …`, the daemon's only bus.
        let o = fcan(&ep, &["--json", "nodes"]);
        let n = if o.status.success() {
            json_lines(&o)
        } else {
            Vec::new()
        };
        if n.len() == 1 && n[0]["id"] == 8 && n[0]["phase"] == "running" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
    // `fcan serve` the same: a third owner of the name moves to a port of its own.
    let mut serve = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["serve", "--no-cache", "--bus", &bus])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (_serve_err, log) = until_ready(&mut serve.0);
    let own = attach_line(&log).unwrap_or_else(|| panic!("no attach line: {log}"));
    assert_ne!(own, ep, "{log}");
    let o = fcan(&own, &["--json", "nodes"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Item 3: `fcan schema show` of every example node — the two example firmwares' schemas
/// and the two drivers' — is a schema the codegen takes, and compiles to the blob the node
/// announced (the same SHA-256).
#[test]
fn schema_show_reads_back_through_the_codegen() {
    let boards = fake(
        &[
            "--bus",
            "sim:classic",
            "--schema",
            "../schema/examples/motor_driver.yaml",
            "--node-id",
            "1",
            "--count",
            "motor*=2",
            "--device",
            "robstride:id=10,model=RS03",
            "--device",
            "mit:id=0x20",
        ],
        3,
    );
    let io = fake(
        &[
            "--schema",
            "../schema/examples/io_board.yaml",
            "--node-id",
            "3",
        ],
        1,
    );
    let checked = schema_show_reads_back(&[&boards, &io], "examples");
    assert_eq!(
        checked,
        ["io_board3", "mit32", "motor_driver1", "robstride10"],
        "every example node"
    );
}

/// Every node `fcan schema show` shows on the fakes `fakes`: each shown schema, written to
/// a file, loaded and compiled by fcan-codegen's library (as `fcan-codegen check` does),
/// gives the blob the node announced (the same SHA-256). The nodes' names, sorted.
fn schema_show_reads_back(fakes: &[&Fake], what: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("fcan-schema-show-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = Vec::new();
    for f in fakes {
        let o = fcan(&f.ep, &["--json", "nodes"]);
        for n in json_lines(&o) {
            let name = n["name"].as_str().unwrap().to_string();
            let o = fcan(&f.ep, &["schema", "show", &name]);
            assert!(o.status.success(), "{}", text(&o));
            let path = dir.join(format!("{name}.yaml"));
            std::fs::write(&path, &o.stdout).unwrap();
            let loaded = fcan_codegen::load_files(std::slice::from_ref(&path))
                .unwrap_or_else(|d| panic!("{name}: the codegen refuses it:\n{d}\n{}", text(&o)));
            let out = fcan_codegen::generate(&loaded)
                .unwrap_or_else(|d| panic!("{name}: the codegen refuses it:\n{d}\n{}", text(&o)));
            assert_eq!(out.digest.to_string(), n["schema"], "{name}: another blob");
            checked.push(name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    checked.sort();
    checked
}

/// "Proof": `schema show` round-trips through the codegen for every ancestor schema too —
/// the three fibril nodes (`shared/compat/fibril`, read in place, each node's files
/// merged), served by `fcan fake --schema` and read back.
#[test]
#[ignore = "needs ../shared/compat/fibril beside the checkout (the ancestor's schemas, never copied in): .ci/run runs it with --ignored"]
fn schema_show_of_the_ancestor_schemas_reads_back_through_the_codegen() {
    let dir = fcan_e2e::fibril_dir()
        .expect("shared/compat/fibril beside the workspace (the ancestor's schemas)");
    let nodes = fcan_e2e::fibril_nodes(&dir);
    assert_eq!(nodes.len(), 3, "md, robstride, air");
    let fakes: Vec<Fake> = nodes
        .iter()
        .enumerate()
        .map(|(i, (_, files))| {
            let id = (i + 1).to_string();
            let mut args = vec!["--schema"];
            args.extend(files.iter().map(|f| f.to_str().unwrap()));
            args.extend(["--node-id", &id]);
            fake(&args, 1)
        })
        .collect();
    let checked = schema_show_reads_back(&fakes.iter().collect::<Vec<_>>(), "fibril");
    assert_eq!(
        checked,
        ["md_controller1", "rc26_air3", "rc26_robstride2"],
        "every ancestor node"
    );
}

/// Item 4: an f32 prints with the digits that read back as that f32, in text and JSON:
/// `param set … 0.7` then `param get` says 0.7, and `param list` shows no f64 digits.
#[test]
fn f32_values_print_as_the_f32_they_are() {
    let f = fake(
        &[
            "--schema",
            "../schema/examples/motor_driver.yaml",
            "--node-id",
            "1",
        ],
        1,
    );
    let kp = "motor_driver1.motor0.velocity.kp";
    let o = fcan(&f.ep, &["param", "set", kp, "0.7"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{kp} = 0.7\n"));
    let o = fcan(&f.ep, &["param", "get", kp]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "0.7\n", "{}", text(&o));
    let o = fcan(&f.ep, &["--json", "param", "get", kp]);
    let v = json_lines(&o)[0]["value"].as_f64().unwrap();
    assert_eq!(v as f32, 0.7f32);
    assert_eq!(v.to_string(), "0.7");
    let o = fcan(&f.ep, &["param", "list"]);
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.contains("default 0.9 "), "{list}");
    for word in list.split_whitespace() {
        let float = word.contains('.') && word.parse::<f64>().is_ok();
        assert!(!float || word.len() < 12, "{word} in\n{list}");
    }
}

/// Item 5: `fcan … | head`: the reader closing the pipe ends the command quietly,
/// status 0, no `Broken pipe` error.
#[test]
fn a_closed_pipe_ends_quietly() {
    let f = fake(
        &[
            "--schema",
            "../schema/examples/motor_driver.yaml",
            "--node-id",
            "1",
        ],
        1,
    );
    let mut echo = Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args([
                "--connect",
                &f.ep,
                "topic",
                "echo",
                "/motor_driver1/motor0/feedback",
            ])
            .args(["--timeout", "60"])
            .env_remove("FCAN_BUS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // `head -n 1`: one line read, then the pipe closed.
    let mut first = String::new();
    BufReader::new(echo.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("position"), "{first}");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = echo.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut echo.0.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

/// Item 6: `serve` and `fake` are commands of `fcan --help`, `fcan help serve` is their
/// help, and a prompt parsing `fcan` lines (the demo's) knows them instead of suggesting
/// `service`.
#[test]
fn serve_and_fake_are_part_of_the_one_tool() {
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.lines().any(|l| l.trim_start().starts_with("serve ")),
        "{help}"
    );
    assert!(
        help.lines().any(|l| l.trim_start().starts_with("fake ")),
        "{help}"
    );
    for (cmd, option) in [("serve", "--foxglove"), ("fake", "--mirror")] {
        let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(["help", cmd])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains(&format!("Usage: fcan {cmd}")), "{help}");
        assert!(help.contains(option), "{help}");
    }
    use clap::Parser;
    let cli = fcan_cli::Cli::try_parse_from(["fcan", "serve", "--bus", "socketcan:can0"])
        .expect("`serve` is a command");
    assert!(matches!(cli.command, fcan_cli::Command::Serve(_)));
}

/// Item 7: `fcan fake` prints a schema's diagnostics as lines, not as one line with
/// literal `\u{a}`.
#[test]
fn fake_prints_schema_errors_as_lines() {
    let dir = std::env::temp_dir().join(format!("fcan-bad-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "node: x{i}\nprotocol: 2\ntypes:\n  A:\n    topics:\n      t: {dir: m2s, period_us: 0, fields: {a: f32}}\ninstances:\n  - {type: A, max_count: 1, ns: a}\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["fake", "--node-id", "3", "--schema"])
        .arg(&bad)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("\\u{a}"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with(&format!("{}:6:", bad.display())) && l.contains("period_us")),
        "{err}"
    );
}

/// Item 8: first contact without a bus: the error says what to start, and `--bus sim`
/// is not refused as a spec its own message lists as accepted.
#[test]
fn without_a_bus_the_error_says_what_to_start() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .arg("--no-daemon")
            .args(args)
            .env_remove("FCAN_BUS")
            .env_remove("FCAN_CONNECT")
            .output()
            .unwrap()
    };
    let o = run(&["--bus", "socketcan:fcannone0", "nodes"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no CAN interface `fcannone0`"), "{err}");
    for says in [
        "--bin demo",
        "fcan fake",
        "fcan serve --bus socketcan:",
        "type vcan",
    ] {
        assert!(err.contains(says), "no `{says}` in {err}");
    }
    let o = run(&["--bus", "sim", "nodes"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--bin demo"), "{err}");
    assert!(!err.contains("accepted:"), "{err}");
    assert!(!err.contains("bad transport spec"), "{err}");
}

/// Item 10: the nodes table's columns say what they are: `PLANNED` (frames in the
/// plan, not traffic), and `fcan nodes --help` explains STATE against PHASE and what
/// ERRORS sums (STATS, docs/protocol.md). Item 11: `fcan schema NODE` is `schema show
/// NODE`; `topic hz -n` on a topic nobody sends stops at its window.
#[test]
fn nodes_columns_and_subcommands_say_what_they_are() {
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(["nodes", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for says in [
        "STATE    what the node itself last reported",
        "PHASE    where the master is with it",
        "PLANNED  data frames in the node's frame plan",
        "ERRORS   the error summary of the node's last heartbeat",
        "STATS, docs/protocol.md §3.12",
    ] {
        assert!(help.contains(says), "no `{says}` in\n{help}");
    }

    let f = fake(
        &[
            "--schema",
            "../schema/examples/motor_driver.yaml",
            "--node-id",
            "1",
        ],
        1,
    );
    let o = fcan(&f.ep, &["nodes"]);
    assert!(o.status.success(), "{}", text(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["ID", "NAME", "STATE", "PHASE", "MODE", "PLANNED", "ERRORS", "SCHEMA"]
    );
    // JSON keeps its field names.
    let n = &json_lines(&fcan(&f.ep, &["--json", "nodes"]))[0];
    assert!(n["frames"].as_u64().unwrap() > 0, "{n}");

    let show = fcan(&f.ep, &["schema", "show", "motor_driver1"]);
    assert!(show.status.success(), "{}", text(&show));
    let short = fcan(&f.ep, &["schema", "motor_driver1"]);
    assert!(short.status.success(), "{}", text(&short));
    assert_eq!(short.stdout, show.stdout);
    let o = fcan(&f.ep, &["schema", "motor_driver1", "io_board2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("fcan schema show NODE"),
        "{}",
        text(&o)
    );

    // Nobody publishes an m2s topic: `hz -n 5` stops at its window and says none came.
    let t0 = Instant::now();
    let o = fcan(
        &f.ep,
        &[
            "--json",
            "topic",
            "hz",
            "/motor_driver1/motor0/target",
            "-n",
            "5",
            "--window",
            "1",
        ],
    );
    assert!(t0.elapsed() < Duration::from_secs(15), "{}", text(&o));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(json_lines(&o)[0]["samples"], 0, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no message on /motor_driver1/motor0/target in 1 s"),
        "{err}"
    );
}

/// Item 12: `fcan update` without --version for a raw binary says so in a sentence.
#[test]
fn update_without_a_version_says_what_it_needs() {
    let dir = std::env::temp_dir().join(format!("fcan-update-version-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("firmware.bin");
    std::fs::write(&bin, b"not an image").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
        .arg("update")
        .arg(&bin)
        .args(["--schema", "../schema/examples/io_board.yaml"])
        .arg("--write-image")
        .arg(dir.join("out.fcimg"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("a raw firmware binary needs --version: the version string the new firmware reports (e.g. --version 2.1.0)"),
        "{err}"
    );
}

/// Item 9 and "What to build": the example motor's loops have gains that move it by
/// default (a velocity target does something before any `param set`), the README's
/// quickstart says what the gain is and its default before its first velocity target,
/// and says what `type: 1` is; the schema names the `type` values. Item 15: the README
/// describes the demo's nodes as the demo starts them.
#[test]
fn the_readme_sets_the_gain_before_the_target_and_names_the_mode() {
    let readme = std::fs::read_to_string("../README.md").unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let gain = lines
        .iter()
        .position(|l| l.contains("param set motor_driver1.motor0.velocity.kp 0.5"))
        .expect("the quickstart sets the velocity gain");
    assert!(lines[gain].contains("0.5 by default"), "{}", lines[gain]);
    let target = lines
        .iter()
        .position(|l| l.contains("topic pub /motor_driver1/motor0/target '{type: 1"))
        .expect("the quickstart commands a velocity");
    assert!(gain < target, "the target before the gain");
    assert!(
        lines[target].contains("type 1: velocity"),
        "{}",
        lines[target]
    );
    let schema = std::fs::read_to_string("../schema/examples/motor_driver.yaml").unwrap();
    assert!(schema.contains("1: a velocity"), "{schema}");
    // Gains that move the motor: the loops' kp are not 0 by default.
    for kp in [
        "velocity/kp: { type: f32, default: 0.5,",
        "position/kp: { type: f32, default: 2.0,",
    ] {
        assert!(schema.contains(kp), "no `{kp}` in {schema}");
    }
    assert!(!readme.contains("two eight-motor drivers"));
    assert!(readme.contains("`motor_driver2` with four"));
}
