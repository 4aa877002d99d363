//! The demo serves the remote API (README command 1, issue 12 item 5): the real `demo`
//! binary, started as a user would with `--serve` on a free loopback port, queried with
//! the `zenoh` crate directly — keys and JSON of docs/remote.md, no fcan client code.
//!
//! Also: the example Zenoh configs of docs/remote.md (TLS, ACL) parse with the Zenoh
//! version the daemon is built with.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fcan_core::hash::SchemaDigest;
use serde_json::Value as Json;

/// A free loopback port: bind port 0, read it back, let it go.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The demo process; killed when dropped, so a failed assertion leaves nothing behind.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A client session: connects to `endpoint` only, listens nowhere, no scouting.
async fn client(endpoint: &str) -> zenoh::Session {
    let conf = serde_json::json!({
        "mode": "peer",
        "connect": { "endpoints": [endpoint] },
        "listen": { "endpoints": [] },
        "scouting": { "multicast": { "enabled": false }, "gossip": { "enabled": false } },
    });
    let config = zenoh::Config::from_json5(&conf.to_string()).expect("client config");
    zenoh::open(config).await.expect("zenoh session")
}

/// Every OK reply to a GET on `selector` (with an optional payload): (key, payload bytes);
/// error replies as `Err(payload text)`.
async fn get(
    session: &zenoh::Session,
    selector: &str,
    payload: Option<&str>,
) -> Vec<Result<(String, Vec<u8>), String>> {
    let mut q = session.get(selector).timeout(Duration::from_secs(5));
    if let Some(p) = payload {
        q = q.payload(p.to_string());
    }
    let replies = q.await.expect("get");
    let mut out = Vec::new();
    while let Ok(reply) = replies.recv_async().await {
        out.push(match reply.result() {
            Ok(s) => Ok((s.key_expr().to_string(), s.payload().to_bytes().to_vec())),
            Err(e) => Err(String::from_utf8_lossy(&e.payload().to_bytes()).into_owned()),
        });
    }
    out
}

fn json(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes).expect("JSON payload")
}

/// The demo with `--serve tcp/127.0.0.1:PORT`: its three nodes are listed, running, with
/// a liveliness token each; feedback samples arrive with the attachment of the contract;
/// the schema blob hashes to its key; a parameter reads back what was set through the
/// API; an out-of-range one is refused naming the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_the_remote_api_on_loopback() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let _demo = Demo(
        Command::new(env!("CARGO_BIN_EXE_demo"))
            .args(["--seconds", "120", "--no-repl", "--serve", &endpoint])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the demo"),
    );
    let session = client(&endpoint).await;

    // Nodes: wait (bounded) until the demo has discovered and started all three.
    let start = Instant::now();
    let nodes: Vec<Json> = loop {
        let nodes: Vec<Json> = get(&session, "fcan/*/node/*", None)
            .await
            .into_iter()
            .filter_map(Result::ok)
            .map(|(key, bytes)| {
                let info = json(&bytes);
                assert_eq!(
                    key,
                    format!("fcan/sim/node/{}", info["name"].as_str().unwrap())
                );
                info
            })
            .collect();
        if nodes.len() == 3 && nodes.iter().all(|n| n["phase"] == "running") {
            break nodes;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the demo's nodes never all ran: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["io_board3", "motor_driver1", "motor_driver2"]);
    let md1 = nodes.iter().find(|n| n["name"] == "motor_driver1").unwrap();

    // Liveliness: one token per running node.
    let alive = session
        .liveliness()
        .get("fcan/sim/alive/*")
        .timeout(Duration::from_secs(5))
        .await
        .expect("liveliness get");
    let mut tokens = Vec::new();
    while let Ok(reply) = alive.recv_async().await {
        if let Ok(s) = reply.result() {
            tokens.push(s.key_expr().to_string());
        }
    }
    tokens.sort();
    assert_eq!(
        tokens,
        [
            "fcan/sim/alive/io_board3",
            "fcan/sim/alive/motor_driver1",
            "fcan/sim/alive/motor_driver2"
        ]
    );

    // The schema blob, by digest.
    let digest = md1["schema"].as_str().expect("digest").to_string();
    let blob = get(&session, &format!("fcan/sim/schema/{digest}"), None).await;
    let [Ok((_, blob))] = blob.as_slice() else {
        panic!("one blob expected: {blob:?}");
    };
    assert_eq!(SchemaDigest::of(blob).to_string(), digest);

    // Feedback of the motor the demo drives, with the contract's attachment.
    let sub = session
        .declare_subscriber("fcan/sim/topic/motor_driver1/motor0/feedback")
        .await
        .expect("subscriber");
    let (mut first_t, mut last_t) = (None, None);
    for _ in 0..10 {
        let s = tokio::time::timeout(Duration::from_secs(10), sub.recv_async())
            .await
            .expect("a feedback sample within 10 s")
            .expect("subscriber open");
        let value = json(&s.payload().to_bytes());
        assert!(value["ready"].is_boolean(), "{value}");
        assert!(value["position"].is_number(), "{value}");
        let att = json(&s.attachment().expect("attachment").to_bytes());
        assert_eq!(att["boot_id"], md1["boot_id"], "{att}");
        assert_eq!(att["digest"], md1["schema"], "{att}");
        let t = att["t_us"].as_u64().expect("t_us, an integer");
        // Two samples read in one batch may share a receive time; never backwards.
        assert!(
            last_t.is_none_or(|l| t >= l),
            "t_us goes forward: {last_t:?} then {t}"
        );
        first_t.get_or_insert(t);
        last_t = Some(t);
    }

    assert!(
        last_t > first_t,
        "10 samples 5 ms apart: {first_t:?}..{last_t:?}"
    );

    // A parameter of a motor the demo leaves alone: set, read back, refused out of range.
    let key = "fcan/sim/param/motor_driver2/motor3/position/kp";
    let set = get(&session, key, Some("7.5")).await;
    assert!(matches!(set.as_slice(), [Ok(_)]), "{set:?}");
    assert_eq!(json(&set[0].as_ref().unwrap().1)["value"], 7.5);
    let read = get(&session, key, None).await;
    assert!(matches!(read.as_slice(), [Ok(_)]), "{read:?}");
    assert_eq!(json(&read[0].as_ref().unwrap().1)["value"], 7.5);
    let refused = get(&session, key, Some("500")).await;
    let [Err(text)] = refused.as_slice() else {
        panic!("an error reply expected: {refused:?}");
    };
    let err: Json = serde_json::from_str(text).expect("error JSON");
    assert!(
        matches!(err["error"].as_str(), Some("bad_value" | "refused")),
        "{err}"
    );
    assert!(err["message"].as_str().unwrap().contains("100"), "{err}");
    session.close().await.expect("close");
}

/// The worked example configs of docs/remote.md parse with this build's Zenoh (an unknown
/// field or a syntax error fails).
#[test]
fn example_zenoh_configs_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zenoh");
    let mut parsed = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/zenoh") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json5") {
            zenoh::Config::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            parsed += 1;
        }
    }
    assert_eq!(parsed, 2, "serve-tls-acl.json5 and client-tls.json5");
}

/// `--no-serve`: the demo runs as before (nodes, live data, exit 0 with `--no-repl`) and
/// serves nothing, so it says nothing about a remote API.
#[test]
fn demo_without_serving_runs_as_before() {
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--no-serve", "--seconds", "0.5", "--no-repl"])
        .stdin(Stdio::null())
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in ["motor_driver1", "motor_driver2", "io_board3", "live:"] {
        assert!(stdout.contains(expected), "no `{expected}` in:\n{stdout}");
    }
    assert!(!stdout.contains("remote API"), "{stdout}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("fcan serve"),
        "no server log lines"
    );
}
