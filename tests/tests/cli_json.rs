//! Every `fcan … --json` command prints JSON lines with exactly the fields `docs/cli.md`
//! documents, of the documented types, and enumerations as the documented lowercase
//! names, never a Rust `Debug` string (issue 11, item 4).

use std::collections::BTreeSet;

use clap::Parser;
use fcan_cli::{execute, Cli, CliError, Output};
use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::Master;
use serde_json::Value as Json;

/// The names docs/cli.md lists.
const STATES: &[&str] = &[
    "unprovisioned",
    "provisioned",
    "running",
    "suspended",
    "fault",
];
const MODES: &[&str] = &["classic", "fd", "fd_brs"];
const DIRS: &[&str] = &["m2s", "s2m"];
const EVENTS: &[&str] = &[
    "announced",
    "schema_ready",
    "online",
    "rebooted",
    "offline",
    "failed",
    "collision",
    "other_master",
    "classic_node_on_fd_link",
    "params_carried",
    "param_changed",
    "update_progress",
];

async fn json(m: &Master, args: &[&str]) -> Result<Vec<Json>, CliError> {
    let cli = Cli::try_parse_from(["fcan", "--json"].into_iter().chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(cli.json);
    let mut out = Vec::new();
    execute(m, &cli.command, Output { json: cli.json }, &mut out).await?;
    let text = String::from_utf8(out).unwrap();
    Ok(text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: not JSON: {l}: {e}")))
        .collect())
}

/// A JSON type as docs/cli.md names it.
#[derive(Clone, Copy, Debug)]
enum T {
    /// A non-negative integer.
    Uint,
    /// A number.
    Num,
    Str,
    Bool,
    /// A string or null.
    OptStr,
    /// An unsigned integer or null.
    OptUint,
    /// A value (any JSON).
    Value,
    Array,
    Object,
}

fn is(t: T, v: &Json) -> bool {
    match t {
        T::Uint => v.is_u64(),
        T::Num => v.is_number(),
        T::Str => v.is_string(),
        T::Bool => v.is_boolean(),
        T::OptStr => v.is_string() || v.is_null(),
        T::OptUint => v.is_u64() || v.is_null(),
        T::Value => true,
        T::Array => v.is_array(),
        T::Object => v.is_object(),
    }
}

/// `v` is an object with exactly these fields, of these types.
#[track_caller]
fn shape(what: &str, v: &Json, fields: &[(&str, T)]) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {v}"));
    let got: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = fields.iter().map(|f| f.0).collect();
    assert_eq!(got, want, "{what}: fields of {v}");
    for (name, t) in fields {
        assert!(is(*t, &obj[*name]), "{what}: `{name}` is not {t:?}: {v}");
    }
}

#[track_caller]
fn one_of(what: &str, v: &Json, names: &[&str]) {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {v}"));
    assert!(names.contains(&s), "{what}: `{s}` is not one of {names:?}");
}

/// What a `Debug` string would look like in a field that holds a name: braces,
/// parentheses, or an upper-case letter (`Running`, `FdBrs`, `Some(…)`, `Failed { … }`).
#[track_caller]
fn no_debug(what: &str, v: &Json) {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {v}"));
    assert!(
        !s.contains(['{', '(', '}', ')', '"']) && !s.chars().any(|c| c.is_ascii_uppercase()),
        "{what}: `{s}` looks like a Debug string"
    );
}

fn phase_ok(v: &Json) -> bool {
    v.as_str().is_some_and(|p| {
        matches!(p, "reading schema" | "provisioning" | "running" | "offline")
            || p.starts_with("failed: ")
    })
}

const FIELD: &[(&str, T)] = &[("name", T::Str), ("type", T::Str), ("len", T::OptUint)];

async fn every_json_command_has_its_documented_shape(mtu: Mtu) {
    let (_w, m) = World::standard(mtu).await;

    // nodes
    let nodes = json(&m, &["nodes"]).await.unwrap();
    assert_eq!(nodes.len(), 3);
    for n in &nodes {
        shape(
            "nodes",
            n,
            &[
                ("id", T::Uint),
                ("name", T::Str),
                ("phase", T::Str),
                ("state", T::Str),
                ("boot_id", T::Uint),
                ("mode", T::Str),
                ("frames", T::Uint),
                ("errors", T::Uint),
                ("schema", T::OptStr),
                ("schema_source", T::OptStr),
                ("driver", T::OptStr),
                ("watchdog", T::OptStr),
                ("firmware", T::OptStr),
                ("collision", T::OptUint),
            ],
        );
        // One board per id: no collision to report.
        assert_eq!(n["collision"], Json::Null, "{n}");
        // Boards all: no driver presents them.
        assert_eq!(n["driver"], Json::Null, "{n}");
        assert_eq!(n["watchdog"], Json::Null, "{n}");
        // The example firmwares take no updates: no version to report.
        assert_eq!(n["firmware"], Json::Null, "{n}");
        one_of("nodes.state", &n["state"], STATES);
        one_of("nodes.mode", &n["mode"], MODES);
        one_of(
            "nodes.schema_source",
            &n["schema_source"],
            &["downloaded", "cache"],
        );
        assert!(phase_ok(&n["phase"]), "{n}");
        for f in ["name", "phase", "state", "mode", "schema", "schema_source"] {
            no_debug(&format!("nodes.{f}"), &n[f]);
        }
        assert_eq!(n["state"], "running", "{n}");
        let want = if mtu == Mtu::Classic {
            "classic"
        } else {
            "fd_brs"
        };
        assert_eq!(n["mode"], want, "{n}");
        let digest = n["schema"].as_str().unwrap();
        assert!(digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()));
    }

    // topic list / info / echo / pub / hz
    let topics = json(&m, &["topic", "list"]).await.unwrap();
    assert_eq!(topics.len(), 24 + 12 + 18);
    for t in &topics {
        shape(
            "topic list",
            t,
            &[
                ("name", T::Str),
                ("dir", T::Str),
                ("period_us", T::Uint),
                ("fields", T::Str),
            ],
        );
        one_of("topic list.dir", &t["dir"], DIRS);
        assert!(t["fields"].as_str().unwrap().starts_with('{'), "{t}");
    }
    let info = json(&m, &["topic", "info", "/motor_driver1/motor0/feedback"])
        .await
        .unwrap();
    assert_eq!(info.len(), 1);
    shape(
        "topic info",
        &info[0],
        &[
            ("name", T::Str),
            ("dir", T::Str),
            ("period_us", T::Uint),
            ("size_bytes", T::Uint),
            ("ros_type", T::OptStr),
            ("fields", T::Array),
        ],
    );
    assert_eq!(info[0]["dir"], "s2m");
    assert_eq!(info[0]["period_us"], 5000);
    for f in info[0]["fields"].as_array().unwrap() {
        shape("topic info.fields[]", f, FIELD);
    }
    assert!(info[0]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == "position" && f["type"] == "f32"));
    let echo = json(
        &m,
        &["topic", "echo", "/motor_driver1/motor0/feedback", "-n", "2"],
    )
    .await
    .unwrap();
    assert_eq!(echo.len(), 2);
    for s in &echo {
        shape(
            "topic echo",
            s,
            &[("topic", T::Str), ("t", T::Num), ("value", T::Object)],
        );
    }
    let published = json(
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
    shape(
        "topic pub",
        &published[0],
        &[
            ("topic", T::Str),
            ("published", T::Uint),
            ("value", T::Value),
        ],
    );
    assert_eq!(published[0]["value"]["value"], 0.25);
    let hz = json(
        &m,
        &["topic", "hz", "/motor_driver1/motor0/feedback", "-w", "0.5"],
    )
    .await
    .unwrap();
    shape(
        "topic hz",
        &hz[0],
        &[
            ("topic", T::Str),
            ("samples", T::Uint),
            ("rate_hz", T::Num),
            ("min_gap_s", T::Num),
            ("max_gap_s", T::Num),
            ("window_s", T::Num),
        ],
    );

    // service list / call
    let services = json(&m, &["service", "list"]).await.unwrap();
    assert!(!services.is_empty());
    for s in &services {
        shape(
            "service list",
            s,
            &[("name", T::Str), ("request", T::Str), ("response", T::Str)],
        );
    }
    let call = json(
        &m,
        &["service", "call", "/io_board3/out0/set", "{on: true}"],
    )
    .await
    .unwrap();
    shape(
        "service call",
        &call[0],
        &[("service", T::Str), ("response", T::Object)],
    );

    // param list / get / set / dump / load
    let params = json(&m, &["param", "list"]).await.unwrap();
    assert!(!params.is_empty());
    for p in &params {
        shape(
            "param list",
            p,
            &[
                ("name", T::Str),
                ("type", T::Str),
                ("default", T::Value),
                ("min", T::Value),
                ("max", T::Value),
            ],
        );
        no_debug("param list.type", &p["type"]);
    }
    let kp = "motor_driver1.motor0.velocity.kp";
    let set = json(&m, &["param", "set", kp, "0.5"]).await.unwrap();
    shape(
        "param set",
        &set[0],
        &[("name", T::Str), ("value", T::Value), ("set", T::Bool)],
    );
    let get = json(&m, &["param", "get", kp]).await.unwrap();
    shape(
        "param get",
        &get[0],
        &[("name", T::Str), ("value", T::Value)],
    );
    assert_eq!(get[0]["value"], 0.5);
    let dump = json(&m, &["param", "dump", "motor_driver1.motor0."])
        .await
        .unwrap();
    assert_eq!(dump.len(), 12);
    for d in &dump {
        shape("param dump", d, &[("name", T::Str), ("value", T::Value)]);
    }
    let file =
        std::env::temp_dir().join(format!("fcan-cli-json-{}-{mtu:?}.yaml", std::process::id()));
    std::fs::write(&file, format!("{kp}: 0.25\n{kp}x: 1\n")).unwrap();
    let mut out = Vec::new();
    let cli =
        Cli::try_parse_from(["fcan", "--json", "param", "load", file.to_str().unwrap()]).unwrap();
    let r = execute(&m, &cli.command, Output { json: true }, &mut out).await;
    let _ = std::fs::remove_file(&file);
    assert!(r.is_err(), "one of the two names does not exist");
    let load: Vec<Json> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(load.len(), 2);
    for l in &load {
        shape(
            "param load",
            l,
            &[("name", T::Str), ("ok", T::Bool), ("error", T::OptStr)],
        );
    }
    assert_eq!(load[0]["ok"], true);
    assert_eq!(load[1]["ok"], false);
    assert!(
        load[1]["error"].as_str().unwrap().contains("kpx"),
        "{}",
        load[1]
    );

    // schema show
    let schema = json(&m, &["schema", "show", "motor_driver1"])
        .await
        .unwrap();
    assert_eq!(schema.len(), 1);
    let s = &schema[0];
    shape(
        "schema show",
        s,
        &[
            ("digest", T::Str),
            ("node", T::Str),
            ("protocol", T::Uint),
            ("allocation", T::Str),
            ("limits", T::Object),
            ("types", T::Array),
            ("instances", T::Array),
        ],
    );
    assert_eq!(s["digest"], nodes[0]["schema"]);
    for t in s["types"].as_array().unwrap() {
        shape(
            "schema.types[]",
            t,
            &[
                ("name", T::Str),
                ("params", T::Array),
                ("topics", T::Array),
                ("services", T::Array),
            ],
        );
        for tp in t["topics"].as_array().unwrap() {
            shape(
                "schema topic",
                tp,
                &[
                    ("name", T::Str),
                    ("dir", T::Str),
                    ("period_us", T::Uint),
                    ("fields", T::Array),
                    ("ros", T::Value),
                ],
            );
            one_of("schema topic.dir", &tp["dir"], DIRS);
            if !tp["ros"].is_null() {
                shape(
                    "schema topic.ros",
                    &tp["ros"],
                    &[("type", T::Str), ("map", T::Object)],
                );
            }
        }
        for p in t["params"].as_array().unwrap() {
            shape(
                "schema param",
                p,
                &[
                    ("name", T::Str),
                    ("type", T::Str),
                    ("default", T::Value),
                    ("min", T::Value),
                    ("max", T::Value),
                    ("len", T::OptUint),
                ],
            );
        }
        for sv in t["services"].as_array().unwrap() {
            shape(
                "schema service",
                sv,
                &[
                    ("name", T::Str),
                    ("request", T::Array),
                    ("response", T::Array),
                    ("ros", T::Value),
                ],
            );
        }
    }
    for a in s["instances"].as_array().unwrap() {
        shape(
            "schema.instances[]",
            a,
            &[("type", T::Str), ("max_count", T::Uint), ("ns", T::Str)],
        );
    }

    // monitor
    let mon = json(&m, &["monitor", "-n", "2", "--interval-ms", "200"])
        .await
        .unwrap();
    assert_eq!(mon.len(), 2);
    for r in &mon {
        shape(
            "monitor",
            r,
            &[
                ("nodes", T::Array),
                ("rates_hz", T::Object),
                ("bus_load", T::Num),
                ("rx_frames", T::Uint),
                ("tx_frames", T::Uint),
                ("rx_per_s", T::Num),
                ("tx_per_s", T::Num),
                ("retries", T::Uint),
                ("rx_malformed", T::Uint),
                ("events", T::Array),
            ],
        );
        for n in r["nodes"].as_array().unwrap() {
            shape(
                "monitor.nodes[]",
                n,
                &[
                    ("id", T::Uint),
                    ("name", T::Str),
                    ("phase", T::Str),
                    ("mode", T::Str),
                    ("errors", T::Uint),
                ],
            );
            one_of("monitor.nodes[].mode", &n["mode"], MODES);
            no_debug("monitor.nodes[].phase", &n["phase"]);
        }
        for e in r["events"].as_array().unwrap() {
            shape(
                "monitor.events[]",
                e,
                &[("kind", T::Str), ("node", T::OptUint), ("text", T::Str)],
            );
            one_of("monitor.events[].kind", &e["kind"], EVENTS);
        }
        let rate = r["rates_hz"]["/motor_driver1/motor0/feedback"]
            .as_f64()
            .unwrap();
        assert!(rate > 100.0, "{r}");
    }
}

both_links!(every_json_command_has_its_documented_shape);

/// A node's monitor events, as JSON: a reboot shows as `rebooted`, with the node's id;
/// a parameter write as `param_changed`, its text naming the parameter and value.
async fn monitor_events_have_documented_kinds(mtu: Mtu) {
    let (mut w, m) = World::standard(mtu).await;
    let (lines, _) = tokio::join!(
        json(&m, &["monitor", "-n", "3", "--interval-ms", "500"]),
        async {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            m.param_set(
                "io_board3.out1.min_on_ms",
                fcan_master::value::Value::UInt(250),
            )
            .await
            .unwrap();
            w.reboot_motor(MD2)
        }
    );
    let lines = lines.unwrap();
    let kinds: Vec<&str> = lines
        .iter()
        .flat_map(|l| l["events"].as_array().unwrap())
        .inspect(|e| one_of("events[].kind", &e["kind"], EVENTS))
        .filter(|e| e["node"] == MD2)
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"rebooted"), "{kinds:?}");
    let changed: Vec<&str> = lines
        .iter()
        .flat_map(|l| l["events"].as_array().unwrap())
        .filter(|e| e["kind"] == "param_changed" && e["node"] == IO3)
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0].contains("io_board3.out1.min_on_ms") && changed[0].contains("250"),
        "{changed:?}"
    );
}

both_links!(monitor_events_have_documented_kinds);
