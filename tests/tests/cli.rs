//! The `fcan` CLI against a running master (`cli::execute`), asserting on what the user
//! sees: text and `--json` lines.

use std::time::Duration;

use clap::Parser;
use fcan_cli::{execute, Cli, CliError, Output};
use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::Master;

async fn run(m: &Master, args: &[&str]) -> Result<String, CliError> {
    let cli = Cli::try_parse_from(std::iter::once("fcan").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut out = Vec::new();
    execute(m, &cli.command, Output { json: cli.json }, &mut out).await?;
    Ok(String::from_utf8(out).unwrap())
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

async fn cli_end_to_end(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;

    let nodes = json_lines(&run(&m, &["nodes", "--json"]).await.unwrap());
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n["phase"] == "running"));
    assert_eq!(nodes[0]["name"], "motor_driver1");
    let text = run(&m, &["nodes"]).await.unwrap();
    assert!(
        text.contains("io_board3") && text.contains("running"),
        "{text}"
    );

    // topic echo -n 3 --json: three JSON lines of the topic.
    let echo = run(
        &m,
        &[
            "topic",
            "echo",
            "/motor_driver1/motor0/feedback",
            "-n",
            "3",
            "--json",
        ],
    )
    .await
    .unwrap();
    let lines = json_lines(&echo);
    assert_eq!(lines.len(), 3, "{echo}");
    for l in &lines {
        assert_eq!(l["topic"], "/motor_driver1/motor0/feedback");
        assert!(l["value"]["position"].is_number(), "{l}");
        assert!(l["value"]["ready"].is_boolean(), "{l}");
    }
    let ts: Vec<f64> = lines.iter().map(|l| l["t"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|p| p[1] > p[0]), "{ts:?}");

    // topic pub reaches the firmware.
    run(
        &m,
        &[
            "topic",
            "pub",
            "/motor_driver2/motor1/target",
            "{type: 0, value: 0.25}",
        ],
    )
    .await
    .unwrap();
    eventually(
        "pub reaches the motor",
        Duration::from_millis(5),
        || async { (w.motor(MD2).with(|f| f.axis(1).unwrap().duty) == 0.25).then_some(()) },
    )
    .await;

    // param set out of range: an error naming the param and the bound.
    let e = run(
        &m,
        &["param", "set", "motor_driver1.motor0.velocity.kp", "200"],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("kp") && e.contains("100"), "{e}");
    let e = run(
        &m,
        &["param", "set", "motor_driver1.motor0.velocity.kp", ".nan"],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("finite"), "{e}");
    let out = run(
        &m,
        &["param", "set", "motor_driver1.motor0.velocity.kp", "0.5"],
    )
    .await
    .unwrap();
    assert!(
        out.contains("motor_driver1.motor0.velocity.kp = 0.5"),
        "{out}"
    );
    let out = run(
        &m,
        &["param", "get", "motor_driver1.motor0.velocity.kp", "--json"],
    )
    .await
    .unwrap();
    assert_eq!(json_lines(&out)[0]["value"], 0.5);
    let e = run(&m, &["param", "get", "motor_driver1.motor0.velocity.kpp"])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("did you mean `motor_driver1.motor0.velocity.kp`"),
        "{e}"
    );
    let dump = run(&m, &["param", "dump", "motor_driver1.motor0."])
        .await
        .unwrap();
    assert_eq!(dump.lines().count(), 12, "{dump}");
    assert!(
        dump.contains("motor_driver1.motor0.velocity.kp: 0.5"),
        "{dump}"
    );

    // service call, deferred, JSON.
    let out = run(
        &m,
        &[
            "service",
            "call",
            "/io_board3/out0/set",
            "{on: true}",
            "--json",
        ],
    )
    .await
    .unwrap();
    let r = &json_lines(&out)[0];
    assert_eq!(r["response"]["success"], true);
    assert_eq!(r["response"]["settle_ms"], 20);
    assert_eq!(w.io(IO3).with(|f| f.output(0)), Some(true));

    // Lists and schema.
    let topics = run(&m, &["topic", "list"]).await.unwrap();
    assert_eq!(topics.lines().count(), 24 + 12 + 18);
    let services = run(&m, &["service", "list"]).await.unwrap();
    assert!(services.contains("/io_board3/out7/set"), "{services}");
    let schema = run(&m, &["schema", "show", "motor_driver1"]).await.unwrap();
    assert!(schema.contains("node: motor_driver{i}"), "{schema}");
    // topic hz: the feedback period is 5 ms.
    let hz = run(
        &m,
        &[
            "topic",
            "hz",
            "/motor_driver1/motor0/feedback",
            "-w",
            "1",
            "--json",
        ],
    )
    .await
    .unwrap();
    let rate = json_lines(&hz)[0]["rate_hz"].as_f64().unwrap();
    assert!((rate - 200.0).abs() < 2.0, "{rate}");
}

both_links!(cli_end_to_end);
