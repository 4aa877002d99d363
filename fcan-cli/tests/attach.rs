//! The `fcan` binary attached to a daemon (issue 12, item 4): a `fcan_remote::Server`
//! in this test process serves a simulated bus with the example firmwares over
//! loopback Zenoh (a free port, scouting off), and the real `fcan` binary runs against
//! it with `--connect`, several at once, as a user's terminals would.
//!
//! Also: the fallback to a one-shot master with its note on stderr when no daemon is
//! found, and a dead `--connect` endpoint failing with a clear message.
//!
//! Real time (Zenoh runs on its own threads: no paused clock); every wait is bounded
//! generously and nothing asserts on durations.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_e2e::{World, IO3, MD1, MD2};
use fcan_remote::{Server, ServerOptions, SessionConfig};
use serde_json::Value as Json;

/// An endpoint nobody listens on (yet): a port the kernel just handed out.
fn free_endpoint() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    format!("tcp/{}", l.local_addr().expect("its address"))
}

/// A daemon as `fcan serve` runs it: one Zenoh router session on loopback, one server
/// per bus (each a [`World`]: example firmwares and a master with them running).
struct Daemon {
    endpoint: String,
    _session: zenoh::Session,
    _servers: Vec<Server>,
    worlds: Vec<World>,
}

async fn daemon(buses: &[&str]) -> Daemon {
    let endpoint = free_endpoint();
    let opened = SessionConfig::daemon()
        .listen([endpoint.clone()])
        .open()
        .await
        .expect("daemon session");
    let mut servers = Vec::new();
    let mut worlds = Vec::new();
    for bus in buses {
        let mut w = World::new(Mtu::Fd);
        w.add_motor(MD1, 8);
        w.add_motor(MD2, 4);
        w.add_io(IO3);
        let m = w.start_master().await;
        fcan_e2e::wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(20)).await;
        servers.push(
            Server::start(m, &opened.session, bus, ServerOptions::default())
                .await
                .expect("server starts"),
        );
        worlds.push(w);
    }
    Daemon {
        endpoint,
        _session: opened.session,
        _servers: servers,
        worlds,
    }
}

/// `fcan` with `args`, no FCAN_* from the environment, no schema cache on disk.
fn fcan_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fcan"));
    c.args(args)
        .env_remove("FCAN_BUS")
        .env_remove("FCAN_CONNECT")
        .arg("--no-cache")
        .stdin(Stdio::null());
    c
}

/// Runs `fcan --connect EP --bus sim ARGS` to completion (off the runtime's threads).
async fn fcan_on(ep: &str, args: &[&str]) -> Output {
    let mut all = vec!["--connect", ep, "--bus", "sim"];
    all.extend_from_slice(args);
    let all: Vec<String> = all.into_iter().map(str::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        fcan_cmd(&args).output().expect("runs fcan")
    })
    .await
    .expect("joins")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({}): {}",
        o.status,
        text(&o.stderr)
    );
    // Attached: no note about a one-shot master.
    assert!(
        !text(&o.stderr).contains("one-shot"),
        "{what}: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

fn json_lines(s: &str) -> Vec<Json> {
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A `topic echo` left running, its JSON lines read as they come.
struct Echo {
    child: Child,
    lines: std::sync::mpsc::Receiver<Json>,
}

impl Echo {
    fn start(ep: &str, topic: &str) -> Echo {
        let mut child = fcan_cmd(&[
            "--connect",
            ep,
            "--bus",
            "sim",
            "--json",
            "topic",
            "echo",
            topic,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts fcan topic echo");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let j = serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
                if tx.send(j).is_err() {
                    return;
                }
            }
        });
        Echo { child, lines }
    }

    /// The next sample, waiting at most `bound`.
    async fn next(&mut self, bound: Duration) -> Json {
        let deadline = Instant::now() + bound;
        loop {
            match self.lines.try_recv() {
                Ok(j) => return j,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    panic!("topic echo ended: {:?}", self.child.try_wait())
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            assert!(Instant::now() < deadline, "no sample in {bound:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn position(sample: &Json) -> f64 {
    assert_eq!(
        sample["topic"], "/motor_driver1/motor0/feedback",
        "{sample}"
    );
    sample["value"]["position"]
        .as_f64()
        .unwrap_or_else(|| panic!("no position: {sample}"))
}

// The commands a user runs in separate terminals, each a separate `fcan` process on a
// daemon of its own test (two masters were refused before the daemon: "another fcan
// master … is already running").

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_nodes_lists_the_running_nodes_as_json_and_as_the_table() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    let nodes = json_lines(&ok("nodes", &fcan_on(ep, &["--json", "nodes"]).await));
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["motor_driver1", "motor_driver2", "io_board3"]);
    assert!(nodes.iter().all(|n| n["phase"] == "running"), "{nodes:?}");
    let table = ok("nodes", &fcan_on(ep, &["nodes"]).await);
    assert!(
        table.trim_start().starts_with("ID") && table.contains("io_board3"),
        "{table}"
    );
}

/// `fcan param set motor_driver1.motor0.velocity.kp 0.5`, checked: its output line.
async fn set_kp(ep: &str) {
    let set = ok(
        "param set",
        &fcan_on(
            ep,
            &["param", "set", "motor_driver1.motor0.velocity.kp", "0.5"],
        )
        .await,
    );
    assert_eq!(set.trim(), "motor_driver1.motor0.velocity.kp = 0.5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_param_set_says_what_it_set_and_param_get_reads_it_back() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    set_kp(ep).await;
    let get = ok(
        "param get",
        &fcan_on(ep, &["param", "get", "motor_driver1.motor0.velocity.kp"]).await,
    );
    assert_eq!(get.trim().parse::<f64>().expect("a number"), 0.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_echo_keeps_running_and_sees_the_motor_turn_while_pub_commands_it() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    // The motor needs a gain to turn.
    set_kp(ep).await;
    // echo keeps running while pub runs to completion.
    let mut echo = Echo::start(ep, "/motor_driver1/motor0/feedback");
    let before = position(&echo.next(Duration::from_secs(30)).await);
    let publ = fcan_on(
        ep,
        &[
            "topic",
            "pub",
            "/motor_driver1/motor0/target",
            "{type: 1, value: 5}",
            "--count",
            "20",
            "--rate",
            "100",
        ],
    )
    .await;
    let out = ok("topic pub", &publ);
    assert!(
        out.starts_with("published 20 × /motor_driver1/motor0/target"),
        "{out}"
    );
    assert!(
        echo.child.try_wait().expect("try_wait").is_none(),
        "topic echo stopped while topic pub ran"
    );
    // The commands reached the motor: the echo (still the same process) sees it turn.
    let mut moved = None;
    for _ in 0..2_000 {
        let p = position(&echo.next(Duration::from_secs(30)).await);
        if (p - before).abs() > 0.1 {
            moved = Some(p);
            break;
        }
    }
    assert!(
        moved.is_some(),
        "the motor did not turn from {before} while echo and pub ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_param_beyond_its_bound_is_refused_naming_value_and_bound() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    let bad = fcan_on(
        ep,
        &["param", "set", "motor_driver1.motor0.velocity.kp", "500"],
    )
    .await;
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad.stdout));
    let err = text(&bad.stderr);
    assert!(
        err.starts_with("fcan: error: ") && err.contains("500") && err.contains("max 100"),
        "the error must name the value and the bound: {err}"
    );
    // --json: one error line, kind `master` like a local master's refusal.
    let bad = fcan_on(
        ep,
        &[
            "--json",
            "param",
            "set",
            "motor_driver1.motor0.velocity.kp",
            "500",
        ],
    )
    .await;
    let e: Json = serde_json::from_str(text(&bad.stderr).trim()).expect("one JSON line");
    assert_eq!(e["kind"], "master", "{e}");
}

/// A failed command: status 1 and its error line.
fn refused(what: &str, o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{what}: {}", text(&o.stderr));
    text(&o.stderr)
}

/// Issue 33 item 5, as a user sees it: `param set` prints the value the node holds (an
/// f32 as the f32 it is), refusals name the parameter or the topic's field and what it
/// takes, negative numbers are values, commands carry no NaN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_faces_report_what_the_node_holds() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    let kp = "motor_driver1.motor0.velocity.kp";
    // 1e-50 underflows the f32 the node stores: it holds 0, and that is what prints.
    let set = ok(
        "param set",
        &fcan_on(ep, &["param", "set", kp, "1e-50"]).await,
    );
    assert_eq!(set.trim(), format!("{kp} = 0.0"));
    let set = ok(
        "param set",
        &fcan_on(ep, &["--json", "param", "set", kp, "0.7"]).await,
    );
    assert_eq!(
        set.trim(),
        r#"{"name":"motor_driver1.motor0.velocity.kp","value":0.7,"set":true}"#
    );
    let get = ok("param get", &fcan_on(ep, &["param", "get", kp]).await);
    assert_eq!(get.trim(), "0.7");
    let list = ok(
        "param list",
        &fcan_on(ep, &["--json", "param", "list"]).await,
    );
    let alpha = json_lines(&list)
        .into_iter()
        .find(|p| p["name"] == "motor_driver1.motor0.filter_alpha")
        .expect("filter_alpha listed");
    assert_eq!(alpha["default"].to_string(), "0.9");

    // A string where a number belongs: the parameter, its type, what came.
    let e = refused(
        "param set x",
        &fcan_on(ep, &["param", "set", kp, "x"]).await,
    );
    assert_eq!(
        e.trim(),
        r#"fcan: error: bad value: motor_driver1.motor0.velocity.kp: expected a number (f32), got the string "x""#
    );
    // A negative number is a value, not an option: the node's bound refuses it.
    let e = refused(
        "param set -1",
        &fcan_on(ep, &["param", "set", kp, "-1"]).await,
    );
    assert!(e.contains("below its min 0"), "{e}");
    let e = refused(
        "topic pub -1",
        &fcan_on(ep, &["topic", "pub", "/motor_driver1/motor0/target", "-1"]).await,
    );
    assert!(
        e.contains(
            "/motor_driver1/motor0/target: expected {field: value, …} with type, value, got -1"
        ),
        "{e}"
    );
    let e = refused(
        "service call -1",
        &fcan_on(
            ep,
            &[
                "service",
                "call",
                "/motor_driver1/motor0/reset_encoder",
                "-1",
            ],
        )
        .await,
    );
    assert!(
        e.contains("/motor_driver1/motor0/reset_encoder: expected {field: value"),
        "{e}"
    );
    // A command field: the topic, the field, its type.
    let e = refused(
        "topic pub x",
        &fcan_on(
            ep,
            &[
                "topic",
                "pub",
                "/motor_driver1/motor0/target",
                "{type: 1, value: x}",
            ],
        )
        .await,
    );
    assert!(
        e.contains(
            r#"/motor_driver1/motor0/target.value: expected a number (f32), got the string "x""#
        ),
        "{e}"
    );
    // No NaN or infinity in a command.
    let e = refused(
        "topic pub .nan",
        &fcan_on(
            ep,
            &[
                "topic",
                "pub",
                "/motor_driver1/motor0/target",
                "{type: 1, value: .nan}",
            ],
        )
        .await,
    );
    assert!(
        e.contains("/motor_driver1/motor0/target.value: expected a finite number (f32), got NaN"),
        "{e}"
    );
    let e = refused(
        "service call -.inf",
        &fcan_on(
            ep,
            &[
                "service",
                "call",
                "/motor_driver1/motor0/reset_encoder",
                "{offset: true, value: -.inf}",
            ],
        )
        .await,
    );
    assert!(
        e.contains(
            "/motor_driver1/motor0/reset_encoder.value: expected a finite number (f32), got -inf"
        ),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_service_call_answers_with_the_nodes_response() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    let call = ok(
        "service call",
        &fcan_on(
            ep,
            &["service", "call", "/io_board3/out0/set", "{on: true}"],
        )
        .await,
    );
    let resp: Json = serde_json::from_str(call.trim()).expect("JSON response");
    assert_eq!(resp["success"], true, "{resp}");
    assert_eq!(d.worlds.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_param_of_a_name_no_node_offers_is_an_error_not_a_hang() {
    let d = daemon(&["sim"]).await;
    let ep = d.endpoint.as_str();
    let unknown = fcan_on(ep, &["param", "get", "motor_driver1.motor0.nope"]).await;
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        text(&unknown.stderr).contains("motor_driver1.motor0.nope"),
        "{}",
        text(&unknown.stderr)
    );
}

/// `fcan monitor` attached shows every bus the daemon serves, each named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_shows_every_bus_of_the_daemon() {
    let d = daemon(&["left", "right"]).await;
    let out = fcan_on(
        &d.endpoint,
        &["--json", "monitor", "--count", "2", "--interval-ms", "300"],
    )
    .await;
    // `--bus sim` is not served here: monitor shows the daemon's buses all the same.
    let lines = json_lines(&ok("monitor", &out));
    assert_eq!(lines.len(), 4, "two refreshes of two buses: {lines:?}");
    for pair in lines.chunks(2) {
        assert_eq!(pair[0]["bus"], "left", "{pair:?}");
        assert_eq!(pair[1]["bus"], "right", "{pair:?}");
        for l in pair {
            assert_eq!(l["nodes"].as_array().map(Vec::len), Some(3), "{l}");
        }
    }
    // Any other command needs the bus it names.
    let nodes = fcan_on(&d.endpoint, &["nodes"]).await;
    assert_eq!(nodes.status.code(), Some(1));
    let err = text(&nodes.stderr);
    assert!(
        err.contains("serves bus `left`, `right`, not bus `sim`"),
        "{err}"
    );
}

/// No `--bus`: a daemon that serves one bus is used as it is (the newcomer's `fcan
/// nodes` beside the demo), found by default or with `--connect`; a daemon that serves
/// several is an error naming them, never a one-shot master beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_bus_the_daemons_only_bus_is_used() {
    let one = daemon(&["robot"]).await;
    // The binary with --connect and no --bus.
    let ep = one.endpoint.clone();
    let o = tokio::task::spawn_blocking(move || {
        fcan_cmd(&["--connect", &ep, "--json", "nodes"])
            .output()
            .expect("runs fcan")
    })
    .await
    .expect("joins");
    let names: Vec<String> = json_lines(&ok("nodes", &o))
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["motor_driver1", "motor_driver2", "io_board3"]);

    // The default search (the local daemon), in-process, for `param get`.
    let cli =
        fcan_cli::Cli::try_parse_from(["fcan", "param", "get", "motor_driver2.motor1.velocity.kp"])
            .unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    fcan_cli::run_with(cli, None, Some(&one.endpoint), &mut out, &mut notes)
        .await
        .expect("runs on the daemon's bus");
    assert!(notes.is_empty(), "{}", text(&notes));
    assert!(text(&out).trim().parse::<f64>().is_ok(), "{}", text(&out));

    // Two buses: the error names both, by default and with --connect.
    let two = daemon(&["arm", "legs"]).await;
    let cli = fcan_cli::Cli::try_parse_from(["fcan", "nodes"]).unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let e = fcan_cli::run_with(cli, None, Some(&two.endpoint), &mut out, &mut notes)
        .await
        .expect_err("two buses, none chosen")
        .to_string();
    assert!(
        e.contains("serves bus `arm`, `legs`: choose one with --bus"),
        "{e}"
    );
    assert!(out.is_empty() && notes.is_empty(), "{}", text(&notes));
    let ep = two.endpoint.clone();
    let o = tokio::task::spawn_blocking(move || {
        fcan_cmd(&["--connect", &ep, "nodes"])
            .output()
            .expect("runs fcan")
    })
    .await
    .expect("joins");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("serves bus `arm`, `legs`: choose one with --bus"),
        "{}",
        text(&o.stderr)
    );
}

/// `--connect` to an endpoint where nothing listens: a clear error naming it, no
/// fallback to a master of its own.
#[test]
fn connect_to_a_dead_endpoint_fails_clearly() {
    let ep = free_endpoint();
    let t = Instant::now();
    let o = fcan_cmd(&["--connect", &ep, "--bus", "sim", "nodes"])
        .output()
        .expect("runs fcan");
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!("fcan: error: cannot reach fcan daemon at {ep}")),
        "{err}"
    );
    assert!(!err.contains("one-shot"), "{err}");
    println!("fcan --connect {ep} (nothing there): failed in {took:?}");
    // The same through FCAN_CONNECT.
    let o = fcan_cmd(&["--bus", "sim", "nodes"])
        .env("FCAN_CONNECT", &ep)
        .output()
        .expect("runs fcan");
    assert!(
        text(&o.stderr).contains(&format!("cannot reach fcan daemon at {ep}")),
        "{}",
        text(&o.stderr)
    );
    // --no-daemon wins over FCAN_CONNECT: a one-shot master (failing on the missing
    // interface), no daemon looked for, no note.
    let o = fcan_cmd(&["--no-daemon", "--bus", "socketcan:fcan-nosuch0", "nodes"])
        .env("FCAN_CONNECT", &ep)
        .output()
        .expect("runs fcan");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.starts_with("fcan: error: ")
            && err.contains("fcan-nosuch0")
            && err.lines().count() == 1,
        "{err}"
    );
}

/// No daemon serving the bus: the command runs a one-shot master on it, and says so on
/// stderr (the bus here is an in-process simulated one, so `run_with` is called as the
/// binary's `run` would be, with a dead endpoint as the local daemon's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_daemon_a_one_shot_master_runs_and_says_so() {
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_io(IO3);
    let dead = free_endpoint();
    let cli =
        fcan_cli::Cli::try_parse_from(["fcan", "--bus", "sim", "--no-cache", "--json", "nodes"])
            .unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    fcan_cli::run_with(cli, Some(&w.bus), Some(&dead), &mut out, &mut notes)
        .await
        .expect("the one-shot master runs the command");
    let notes = text(&notes);
    assert_eq!(
        notes.trim(),
        format!(
            "fcan: no fcan daemon on {dead}: running a one-shot master \
             (start `fcan serve` to share the bus)"
        )
    );
    let nodes = json_lines(&text(&out));
    assert_eq!(nodes.len(), 2, "{nodes:?}");

    // A daemon that serves other buses: the same fallback, naming what it serves.
    let d = daemon(&["other"]).await;
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_io(IO3);
    let cli =
        fcan_cli::Cli::try_parse_from(["fcan", "--bus", "sim", "--no-cache", "nodes"]).unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    fcan_cli::run_with(cli, Some(&w.bus), Some(&d.endpoint), &mut out, &mut notes)
        .await
        .expect("the one-shot master runs the command");
    assert!(
        text(&notes).contains("serves bus `other`, not bus `sim`: running a one-shot master"),
        "{}",
        text(&notes)
    );
    assert!(text(&out).contains("io_board3"), "{}", text(&out));

    // --no-daemon: no daemon looked for, no note (a bus of its own: this test is about
    // the note, not about one master taking over from the previous one).
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    let cli = fcan_cli::Cli::try_parse_from([
        "fcan",
        "--bus",
        "sim",
        "--no-cache",
        "--no-daemon",
        "nodes",
    ])
    .unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    fcan_cli::run_with(cli, Some(&w.bus), Some(&d.endpoint), &mut out, &mut notes)
        .await
        .expect("runs");
    assert!(notes.is_empty(), "{}", text(&notes));
    assert!(text(&out).contains("motor_driver1"), "{}", text(&out));
}

/// The binary itself with no daemon for its bus: the note on stderr, then the one-shot
/// master's own error (no such interface here). Holds whether or not something runs on
/// this machine's default endpoint: either way no daemon serves this bus.
#[test]
fn the_binary_says_when_it_falls_back() {
    let o = fcan_cmd(&["--bus", "socketcan:fcan-nosuch0", "nodes"])
        .output()
        .expect("runs fcan");
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("fcan: ") && lines[0].contains("running a one-shot master"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("fcan: error: ") && lines[1].contains("fcan-nosuch0"),
        "{err}"
    );
}

/// Wall-clock figures for docs/performance.md (not a test: `--ignored` runs it):
/// `fcan param get` as a process attached to a daemon, the probe a command pays when no
/// daemon runs, and a dead `--connect`.
///
/// `cargo test -p fcan-cli --test attach -- --ignored --nocapture attach_figures`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for docs/performance.md: run by hand, --ignored --nocapture attach_figures"]
async fn attach_figures() {
    fn stats(what: &str, mut ms: Vec<f64>) {
        ms.sort_by(f64::total_cmp);
        println!(
            "{what}: n={} min {:.1} ms, p50 {:.1} ms, max {:.1} ms",
            ms.len(),
            ms[0],
            ms[ms.len() / 2],
            ms[ms.len() - 1]
        );
    }
    async fn timed(args: Vec<String>, env: Option<(&'static str, String)>) -> (f64, Output) {
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut c = fcan_cmd(&a);
            if let Some((k, v)) = env {
                c.env(k, v);
            }
            let t = Instant::now();
            let o = c.output().expect("runs fcan");
            (t.elapsed().as_secs_f64() * 1e3, o)
        })
        .await
        .unwrap()
    }
    let d = daemon(&["sim"]).await;
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut attached = Vec::new();
    for _ in 0..20 {
        let (ms, o) = timed(
            args(&[
                "--connect",
                &d.endpoint,
                "--bus",
                "sim",
                "param",
                "get",
                "motor_driver1.motor0.velocity.kp",
            ]),
            None,
        )
        .await;
        ok("param get", &o);
        attached.push(ms);
    }
    stats("fcan param get, attached (process start to exit)", attached);
    let dead = free_endpoint();
    let mut probe = Vec::new();
    let mut none = Vec::new();
    let mut connect = Vec::new();
    for _ in 0..10 {
        // No daemon at the local endpoint (FCAN_CONNECT unset): probe, note, then the
        // one-shot master fails at once on a missing interface.
        let (ms, _) = timed(args(&["--bus", "socketcan:fcan-nosuch0", "nodes"]), None).await;
        probe.push(ms);
        let (ms, _) = timed(
            args(&["--no-daemon", "--bus", "socketcan:fcan-nosuch0", "nodes"]),
            None,
        )
        .await;
        none.push(ms);
        let (ms, _) = timed(args(&["--connect", &dead, "--bus", "sim", "nodes"]), None).await;
        connect.push(ms);
    }
    // The same `param get` as a one-shot master (in-process, on a bus of its own: the
    // binary has no simulated nodes), discovery included (--discover-ms 2000).
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_io(IO3);
    let mut one_shot = Vec::new();
    for _ in 0..3 {
        let cli = fcan_cli::Cli::try_parse_from([
            "fcan",
            "--no-daemon",
            "--no-cache",
            "--bus",
            "sim",
            "param",
            "get",
            "motor_driver1.motor0.velocity.kp",
        ])
        .unwrap();
        let t = Instant::now();
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        fcan_cli::run_with(cli, Some(&w.bus), None, &mut out, &mut notes)
            .await
            .expect("one-shot param get");
        one_shot.push(t.elapsed().as_secs_f64() * 1e3);
    }
    stats("fcan param get, one-shot master (in-process)", one_shot);
    stats("no daemon: probe + note + failing one-shot", probe);
    stats("--no-daemon: failing one-shot alone", none);
    stats("--connect to a dead loopback endpoint", connect);
}
