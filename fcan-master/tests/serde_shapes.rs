//! The serde shapes of a node (`NodeInfo`) and an event (`MasterEvent`): what
//! `docs/remote.md` ("Node info", "Events") and `docs/cli.md` ("JSON output") promise,
//! the expected JSON written out by hand from those pages, never from the encoder. Each
//! value goes JSON → value → JSON and value → JSON → value unchanged, and the thin
//! wrappers of `fcan_master::json` (`NodeInfo::to_json`, `event_to_json` and their
//! inverses) give the same as serde.

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use fcan_core::msg::{BusMode, NodeState};
use fcan_master::api::{Progress, UpdateStep};
use fcan_master::json::{event_from_json, event_to_json};
use fcan_master::value::Value;
use fcan_master::{DeviceWatchdog, MasterEvent, NodeInfo, Phase, SchemaSource};
use serde_json::{json, Value as Json};

/// SHA-256 of `blob` (`printf blob | sha256sum`).
const BLOB: &str = "fa2c8cc4f28176bbeed4b736df569a34c79cd3723e9ec42f9674b4d46ac6b8b8";

/// A node with every field set, as one `fcan nodes --json` line: the fields in the order
/// docs/cli.md lists them (the order the CLI has always printed).
const FULL: &str = concat!(
    r#"{"id":5,"name":"rs5","phase":"failed: no room","state":"fault","boot_id":4294967295,"#,
    r#""mode":"fd","frames":3,"errors":258,"#,
    r#""schema":"fa2c8cc4f28176bbeed4b736df569a34c79cd3723e9ec42f9674b4d46ac6b8b8","#,
    r#""schema_source":"downloaded","driver":"robstride","watchdog":"200 ms","#,
    r#""firmware":"1.2.3","collision":3735928559}"#
);

/// A node with nothing optional known: every field present, `null` when absent.
const EMPTY: &str = concat!(
    r#"{"id":1,"name":"motor_driver1","phase":"reading schema","state":"unprovisioned","#,
    r#""boot_id":0,"mode":"classic","frames":0,"errors":0,"schema":null,"#,
    r#""schema_source":null,"driver":null,"watchdog":null,"firmware":null,"collision":null}"#
);

/// The example of docs/remote.md, "Node info", verbatim.
const DOCS_EXAMPLE: &str = r#"{"boot_id":3653463022,"errors":0,"frames":5,"id":1,"mode":"fd_brs","name":"motor_driver1","phase":"running","schema":"ec38e01467ce3ccaa319bc274fed1b292d0b53e2cbac5164d4f65e8a9517a5c5","schema_source":"cache","state":"running","driver":null,"watchdog":null,"firmware":null,"collision":null}"#;

/// Both ways, and the wrappers agree with serde.
fn node_round_trips(text: &str) -> NodeInfo {
    let n: NodeInfo = serde_json::from_str(text).expect("the documented line reads");
    // Value → JSON: the same text byte for byte (the CLI writes the struct's order).
    assert_eq!(serde_json::to_string(&n).unwrap(), text);
    // The JSON tree (the remote API's, written from a `serde_json::Value`) equals it too.
    let tree: Json = serde_json::from_str(text).unwrap();
    assert_eq!(n.to_json(), tree);
    assert_eq!(serde_json::to_value(&n).unwrap(), tree);
    // JSON → value → JSON → value.
    assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    assert_eq!(
        serde_json::from_str::<NodeInfo>(&serde_json::to_string(&n).unwrap()).unwrap(),
        n
    );
    n
}

#[test]
fn a_node_with_every_field_set_has_the_documented_shape() {
    assert_eq!(SchemaDigest::of(b"blob").to_string(), BLOB);
    let n = node_round_trips(FULL);
    assert_eq!(n.id, NodeId::new(5).unwrap());
    assert_eq!(n.name, "rs5");
    assert_eq!(n.phase, Phase::Failed("no room".into()));
    assert_eq!(n.state, NodeState::Fault);
    assert_eq!(n.boot_id, u32::MAX);
    assert_eq!(n.mode, BusMode::Fd);
    assert_eq!(n.frames, 3);
    assert_eq!(n.errors, 258);
    assert_eq!(n.digest, Some(SchemaDigest::of(b"blob")));
    assert_eq!(n.schema_source, Some(SchemaSource::Downloaded));
    assert_eq!(n.driver.as_deref(), Some("robstride"));
    assert_eq!(n.watchdog, Some(DeviceWatchdog::Armed { ms: 200 }));
    assert_eq!(n.firmware.as_deref(), Some("1.2.3"));
    assert_eq!(n.collision, Some(0xdead_beef));
}

#[test]
fn a_node_with_no_optional_field_has_every_key_null() {
    let n = node_round_trips(EMPTY);
    assert_eq!(n.phase, Phase::Reading);
    assert_eq!(n.state, NodeState::Unprovisioned);
    assert_eq!(n.mode, BusMode::Classic);
    assert_eq!(
        (n.digest, n.schema_source, &n.driver, n.watchdog),
        (None, None, &None, None)
    );
    assert_eq!((&n.firmware, n.collision), (&None, None));
}

#[test]
fn the_docs_example_reads_back_to_itself() {
    let n: NodeInfo = serde_json::from_str(DOCS_EXAMPLE).unwrap();
    assert_eq!(n.mode, BusMode::FdBrs);
    assert_eq!(n.schema_source, Some(SchemaSource::Cache));
    assert_eq!(
        n.to_json(),
        serde_json::from_str::<Json>(DOCS_EXAMPLE).unwrap()
    );
}

#[test]
fn every_name_of_every_enumeration_is_the_documented_one() {
    let mut n: NodeInfo = serde_json::from_str(EMPTY).unwrap();
    // docs/cli.md, "JSON output": `state`, `mode`, `phase`, `schema_source`, `watchdog`.
    let states = [
        (NodeState::Unprovisioned, "unprovisioned"),
        (NodeState::Provisioned, "provisioned"),
        (NodeState::Running, "running"),
        (NodeState::Suspended, "suspended"),
        (NodeState::Fault, "fault"),
    ];
    for (s, name) in states {
        n.state = s;
        assert_eq!(n.to_json()["state"], name);
        assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    }
    for (m, name) in [
        (BusMode::Classic, "classic"),
        (BusMode::Fd, "fd"),
        (BusMode::FdBrs, "fd_brs"),
    ] {
        n.mode = m;
        assert_eq!(n.to_json()["mode"], name);
        assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    }
    for (p, name) in [
        (Phase::Reading, "reading schema"),
        (Phase::Provisioning, "provisioning"),
        (Phase::Running, "running"),
        (Phase::Offline, "offline"),
        (Phase::Failed("x: y".into()), "failed: x: y"),
    ] {
        n.phase = p;
        assert_eq!(n.to_json()["phase"], name);
        assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    }
    for (s, name) in [
        (SchemaSource::Downloaded, "downloaded"),
        (SchemaSource::Cache, "cache"),
    ] {
        n.schema_source = Some(s);
        assert_eq!(n.to_json()["schema_source"], name);
        assert_eq!(s.as_str(), name);
        assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    }
    for (w, name) in [
        (DeviceWatchdog::Armed { ms: 200 }, "200 ms"),
        (DeviceWatchdog::Off, "off"),
        (DeviceWatchdog::None, "none"),
    ] {
        n.watchdog = Some(w);
        assert_eq!(n.to_json()["watchdog"], name);
        assert_eq!(NodeInfo::from_json(&n.to_json()).unwrap(), n);
    }
}

#[test]
fn node_info_from_an_older_daemon_or_a_hostile_one() {
    let empty: Json = serde_json::from_str(EMPTY).unwrap();
    // Daemons that predate drivers, watchdogs, firmware and collisions: the keys absent.
    let mut old = empty.clone();
    for k in ["driver", "watchdog", "firmware", "collision"] {
        old.as_object_mut().unwrap().remove(k);
    }
    assert_eq!(
        NodeInfo::from_json(&old).unwrap(),
        NodeInfo::from_json(&empty).unwrap()
    );
    // Every other key is required; every value is checked.
    for k in [
        "id",
        "name",
        "phase",
        "state",
        "boot_id",
        "mode",
        "frames",
        "errors",
        "schema",
        "schema_source",
    ] {
        let mut v = empty.clone();
        v.as_object_mut().unwrap().remove(k);
        let e = NodeInfo::from_json(&v).unwrap_err();
        assert!(e.contains(&format!("missing field `{k}`")), "{k}: {e}");
    }
    for (k, bad) in [
        ("id", json!(127)),
        ("id", json!(128)),
        ("id", json!(300)),
        ("id", json!("1")),
        ("phase", json!("sleeping")),
        ("state", json!("Running")),
        ("mode", json!("FdBrs")),
        ("boot_id", json!(1u64 << 32)),
        ("errors", json!(70000)),
        ("schema", json!("abc")),
        ("schema", json!(5)),
        ("schema_source", json!("disk")),
        ("driver", json!(7)),
        ("watchdog", json!("0 ms")),
        ("watchdog", json!(200)),
        ("firmware", json!(true)),
        ("collision", json!(-1)),
        ("collision", json!(1u64 << 32)),
    ] {
        let mut v = empty.clone();
        v[k] = bad.clone();
        assert!(NodeInfo::from_json(&v).is_err(), "{k}: {bad}");
    }
    // Fields a newer daemon adds are ignored.
    let mut newer = empty.clone();
    newer["temperature_c"] = json!(41);
    assert!(NodeInfo::from_json(&newer).is_ok());
}

/// Every event with its JSON as docs/remote.md ("Events") lists it: `kind`, `node` (id,
/// `null` for a bus-wide event), `text` for people, then the kind's own fields.
fn events() -> Vec<(MasterEvent, Json)> {
    let n = NodeId::new(3).unwrap();
    vec![
        (
            MasterEvent::Announced {
                node: n,
                boot_id: 7,
            },
            json!({"kind": "announced", "node": 3, "text": "node 3 announced (boot 0x00000007)",
                   "boot_id": 7}),
        ),
        (
            MasterEvent::SchemaReady {
                node: n,
                digest: SchemaDigest::of(b"blob"),
                cached: true,
            },
            json!({"kind": "schema_ready", "node": 3,
                   "text": "node 3: schema fa2c8cc4f28176bb from cache",
                   "digest": BLOB, "cached": true}),
        ),
        (
            MasterEvent::SchemaReady {
                node: n,
                digest: SchemaDigest::of(b"blob"),
                cached: false,
            },
            json!({"kind": "schema_ready", "node": 3,
                   "text": "node 3: schema fa2c8cc4f28176bb downloaded and verified",
                   "digest": BLOB, "cached": false}),
        ),
        (
            MasterEvent::Online { node: n },
            json!({"kind": "online", "node": 3, "text": "node 3 running"}),
        ),
        (
            MasterEvent::Rebooted {
                node: n,
                old: 1,
                new: 2,
            },
            json!({"kind": "rebooted", "node": 3,
                   "text": "node 3 rebooted: re-provisioning, restoring parameters",
                   "old": 1, "new": 2}),
        ),
        (
            MasterEvent::Offline { node: n },
            json!({"kind": "offline", "node": 3, "text": "node 3 offline"}),
        ),
        (
            // The reason as the node gave it; the text for people escaped.
            MasterEvent::Failed {
                node: n,
                reason: "why\u{1b}".into(),
            },
            json!({"kind": "failed", "node": 3, "text": "node 3 failed: why\\u{1b}",
                   "reason": "why\u{1b}"}),
        ),
        (
            MasterEvent::Collision {
                node: n,
                boot_ids: (4, 5),
            },
            json!({"kind": "collision", "node": 3,
                   "text": "node id 3 is used by two nodes (boot ids 0x00000004, 0x00000005)",
                   "boot_ids": [4, 5]}),
        ),
        (
            MasterEvent::OtherMaster { session: 9 },
            json!({"kind": "other_master", "node": null,
                   "text": "another master (session 0x00000009) is on this bus",
                   "session": 9}),
        ),
        (
            MasterEvent::ClassicNodeOnFdLink { node: n },
            json!({"kind": "classic_node_on_fd_link", "node": 3,
                   "text": "node 3 cannot do CAN FD: using Classical CAN frames with it"}),
        ),
        (
            MasterEvent::ParamsCarried {
                node: n,
                restored: vec!["io_board3.out0.settle_ms".into()],
                dropped: vec![],
            },
            json!({"kind": "params_carried", "node": 3,
                   "text": "node 3 has another schema: parameters restored: io_board3.out0.settle_ms; not in it (dropped): none",
                   "restored": ["io_board3.out0.settle_ms"], "dropped": []}),
        ),
        (
            MasterEvent::ParamChanged {
                node: n,
                name: "io_board3.out1.min_on_ms".into(),
                value: Value::UInt(250),
            },
            json!({"kind": "param_changed", "node": 3,
                   "text": "node 3: io_board3.out1.min_on_ms = 250",
                   "name": "io_board3.out1.min_on_ms", "value": 250}),
        ),
        (
            MasterEvent::ParamChanged {
                node: n,
                name: "motor_driver2.motor1.velocity.kp".into(),
                value: Value::Float(2.5),
            },
            json!({"kind": "param_changed", "node": 3,
                   "text": "node 3: motor_driver2.motor1.velocity.kp = 2.5",
                   "name": "motor_driver2.motor1.velocity.kp", "value": 2.5}),
        ),
        (
            MasterEvent::UpdateProgress {
                id: 1 << 40,
                node: n,
                step: UpdateStep::Sending,
                progress: Progress {
                    acked: 1024,
                    size: 4096,
                    rate: 2048.0,
                    eta_s: Some(3.0),
                    resent: 64,
                },
            },
            json!({"kind": "update_progress", "node": 3,
                   "text": "node 3 update sending: 1024 of 4096 bytes, 2.0 KiB/s, 3 s left",
                   "id": 1u64 << 40, "step": "sending", "acked": 1024, "size": 4096,
                   "rate": 2048.0, "eta_s": 3.0, "resent": 64}),
        ),
        (
            MasterEvent::UpdateProgress {
                id: 2,
                node: n,
                step: UpdateStep::Offering,
                progress: Progress {
                    acked: 0,
                    size: 4096,
                    rate: 0.5,
                    eta_s: None,
                    resent: 0,
                },
            },
            json!({"kind": "update_progress", "node": 3,
                   "text": "node 3 update offering: 0 of 4096 bytes, 0.0 KiB/s",
                   "id": 2, "step": "offering", "acked": 0, "size": 4096,
                   "rate": 0.5, "eta_s": null, "resent": 0}),
        ),
    ]
}

#[test]
fn every_event_has_the_documented_shape_and_reads_back() {
    let events = events();
    // Every kind of docs/remote.md's table at least once.
    let kinds: std::collections::BTreeSet<&str> = events
        .iter()
        .map(|(_, j)| j["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 12, "{kinds:?}");
    for (e, want) in events {
        assert_eq!(serde_json::to_value(&e).unwrap(), want, "{e:?}");
        assert_eq!(event_to_json(&e).as_ref(), Some(&want), "{e:?}");
        // Both ways from the documented JSON, and from the encoder's text.
        assert_eq!(
            serde_json::from_value::<MasterEvent>(want.clone()).unwrap(),
            e
        );
        assert_eq!(event_from_json(&want).unwrap(), e);
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            serde_json::from_str::<MasterEvent>(&text).unwrap(),
            e,
            "{text}"
        );
        assert_eq!(
            e.node().map(|n| json!(n.get())).unwrap_or(Json::Null),
            want["node"]
        );
    }
}

#[test]
fn the_remote_wire_text_of_an_event_is_its_json_tree() {
    // The daemon puts `event_to_json(e).to_string()`: a `serde_json` map, keys sorted.
    let e = MasterEvent::Rebooted {
        node: NodeId::new(3).unwrap(),
        old: 1,
        new: 2,
    };
    assert_eq!(
        event_to_json(&e).unwrap().to_string(),
        r#"{"kind":"rebooted","new":2,"node":3,"old":1,"text":"node 3 rebooted: re-provisioning, restoring parameters"}"#
    );
}

#[test]
fn an_update_end_has_no_json() {
    let report = fcan_master::api::UpdateReport::from_json(&json!({
        "version": "1.0", "schema": BLOB, "schema_changed": false,
        "restored": [], "dropped": [],
    }))
    .unwrap();
    let e = MasterEvent::UpdateDone {
        id: 1,
        node: NodeId::new(3).unwrap(),
        result: Ok(report),
    };
    assert_eq!(event_to_json(&e), None);
    assert!(serde_json::to_value(&e).is_err());
    assert!(event_from_json(&json!({"kind": "update_done", "node": 3, "id": 1})).is_err());
}

#[test]
fn hostile_or_unknown_events_are_refused_and_extra_fields_ignored() {
    for bad in [
        json!({"kind": "online", "node": 200}),
        json!({"kind": "online", "node": 127}),
        json!({"kind": "online"}),
        json!({"node": 3}),
        json!({"kind": "sleeping", "node": 3}),
        json!({"kind": "announced", "node": 3, "boot_id": 1u64 << 32}),
        json!({"kind": "schema_ready", "node": 3, "digest": "abc", "cached": true}),
        json!({"kind": "collision", "node": 3, "boot_ids": [1, 2, 3]}),
        json!({"kind": "param_changed", "node": 3, "name": "a.b.c", "value": null}),
        json!({"kind": "update_progress", "node": 3, "id": 1, "step": "dancing",
               "acked": 0, "size": 1, "rate": 0.0, "eta_s": null, "resent": 0}),
        json!({"kind": "params_carried", "node": 3, "restored": [1], "dropped": []}),
    ] {
        assert!(event_from_json(&bad).is_err(), "{bad}");
    }
    // A newer daemon's additions do not break an older reader.
    let e = event_from_json(&json!({"kind": "online", "node": 3, "text": "whatever",
                                    "since_us": 5}))
    .unwrap();
    assert_eq!(
        e,
        MasterEvent::Online {
            node: NodeId::new(3).unwrap()
        }
    );
}
