//! Faults from the command line (issue 33 item 6): the real `fcan fake` on a simulated
//! bus whose spec asks for faults at every endpoint, the master serving it as
//! `fcan serve` does, and the real `fcan` attached to it. Under loss and duplication the
//! node is still provisioned, a parameter still reads back what was set, and what the
//! master receives shows the faults: a 200 Hz feedback arrives at well above 200 Hz, which
//! no run without duplication can show. Also the refusals of a bad spec, through both
//! commands, and the help texts.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fcan_e2e::free_port;

mod common;
use common::{fcan, json_lines, text, until_ready, Kill};

fn schema() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schema/examples/motor_driver.yaml")
}

/// `fcan fake` of one motor driver (two motors wired) on `bus`, served on `ep`.
fn fake(ep: &str, bus: &str) -> Kill {
    Kill(
        Command::new(env!("CARGO_BIN_EXE_fcan"))
            .arg("fake")
            .arg("--schema")
            .arg(schema())
            .args(["--node-id", "1", "--count", "motor*=2", "--no-cache"])
            .args(["--listen", ep, "--bus", bus])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn a_node_is_provisioned_and_served_through_loss_and_duplicates() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    // 10 % of the frames each endpoint receives lost, half of them doubled.
    let mut child = fake(&ep, "sim:drop=10%,duplicate=50%,seed=1");
    let (mut stderr, log) = until_ready(&mut child.0);
    // Drained, so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    assert!(
        log.contains("serving sim:drop=10%,duplicate=50%,seed=1 as fcan/sim/"),
        "{log}"
    );

    let t0 = Instant::now();
    loop {
        let o = fcan(&ep, &["--json", "nodes"]);
        if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("\"running\"") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }

    // A parameter write and its read-back get through (the master retries what is
    // lost). The node may be re-provisioned meanwhile (its master heartbeats lost two in
    // a row): a write refused then is tried again, a few times.
    let param = "motor_driver1.motor0.velocity.kp";
    let mut tries = 0;
    loop {
        let o = fcan(&ep, &["param", "set", param, "2.5"]);
        if o.status.success() {
            break;
        }
        tries += 1;
        assert!(tries < 5, "{}", text(&o));
        std::thread::sleep(Duration::from_millis(500));
    }
    let o = fcan(&ep, &["--json", "param", "get", param]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json_lines(&o)[0]["value"], 2.5, "{}", text(&o));

    // The feedback is sent every 5 ms (200 Hz); duplicated at half the master's
    // receptions and 10 % lost, about 270 Hz arrive. Without the fault it cannot
    // exceed 200 Hz.
    let o = fcan(
        &ep,
        &["--json", "monitor", "--count", "1", "--interval-ms", "3000"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let m = &json_lines(&o)[0];
    let rate = m["rates_hz"]["/motor_driver1/motor0/feedback"]
        .as_f64()
        .unwrap_or_else(|| panic!("{m}"));
    assert!(rate > 225.0, "duplicates seen: {rate} Hz; {m}");
}

#[test]
fn without_a_seed_one_is_drawn_and_shown() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut child = fake(&ep, "sim:classic,drop=1%");
    let (_stderr, log) = until_ready(&mut child.0);
    let line = log
        .lines()
        .find(|l| l.contains("fcan serve [sim]: serving sim:classic,drop=1%,seed="))
        .unwrap_or_else(|| panic!("{log}"));
    // The same seed names the same spec for every endpoint: the node's line says it too.
    let seed = line
        .split("seed=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap();
    assert!(seed.parse::<u64>().is_ok(), "{line}");
    assert!(
        log.contains(&format!(
            "on sim:classic,drop=1%,seed={seed} (Classical CAN)"
        )),
        "{log}"
    );
}

#[test]
fn a_bad_fault_spec_is_refused_naming_the_option() {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let schema = schema();
    let schema = schema.to_str().unwrap();
    let err = run(&[
        "fake",
        "--schema",
        schema,
        "--node-id",
        "1",
        "--listen",
        "tcp/127.0.0.1:1",
        "--bus",
        "sim:dorp=1%",
    ]);
    assert!(
        err.contains(
            "bad transport spec `sim:dorp=1%`: unknown sim option `dorp=1%` (did you mean `drop`?)"
        ),
        "{err}"
    );
    assert!(err.contains("`bus_off=DURATION/DURATION`"), "{err}");
    assert!(!err.contains("listening"), "refused before serving: {err}");
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let err = run(&["serve", "--listen", &ep, "--bus", "sim:drop=0.01"]);
    assert!(
        err.contains("`drop=0.01`") && err.contains("did you mean `drop=1%`?"),
        "{err}"
    );
    assert!(!err.contains("listening"), "refused before serving: {err}");
    let err = run(&["serve", "--listen", &ep, "--bus", "lossy=sim:delay=2ms"]);
    assert!(err.contains("`delay_by=2ms`"), "{err}");
}

#[test]
fn help_says_how_to_ask_for_faults() {
    for cmd in ["serve", "fake"] {
        let o = Command::new(env!("CARGO_BIN_EXE_fcan"))
            .args([cmd, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("sim:drop=1%"), "{cmd}: {help}");
        assert!(help.contains("bus_off=100ms/60s"), "{cmd}: {help}");
    }
}
