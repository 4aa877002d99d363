//! `fcan record`: a live bus into an MCAP file, through the in-process master; read back
//! with the `mcap` crate. Through the daemon: `tests/tests/remote.rs`.
//!
//! With `FCAN_RECORD_ARTIFACTS=DIR`, the file (`record.mcap`) is left in DIR with
//! `live.json`: the master's topics (fields and types), every value it delivered live to
//! a subscriber of each topic while the recording ran, the commands published, the nodes
//! and the command's summary, for the Python `mcap` package to check the file against
//! (`.ci/files-peer.sh`, `tests/peers/check_files.py`).

use std::collections::BTreeMap;
use std::time::Duration;

use std::sync::{Arc, Mutex};

use clap::Parser;
use fcan_cli::{execute, Cli, Output};
use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::json_schema::ViewerJson;
use serde_json::json;

/// What an MCAP file holds: messages per topic, attachments, metadata names.
pub struct Read {
    pub per_topic: BTreeMap<String, Vec<serde_json::Value>>,
    pub schemas: BTreeMap<String, (String, String)>,
    pub attachments: Vec<String>,
    pub metadata: Vec<String>,
}

pub fn read_mcap(path: &std::path::Path) -> Read {
    let bytes = std::fs::read(path).unwrap();
    let mut per_topic: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&m.data).unwrap();
        let s = m.channel.schema.as_ref().unwrap();
        schemas.insert(
            m.channel.topic.clone(),
            (s.encoding.clone(), m.channel.message_encoding.clone()),
        );
        per_topic
            .entry(m.channel.topic.clone())
            .or_default()
            .push(v);
    }
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    let attachments = summary
        .attachment_indexes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    let metadata = summary
        .metadata_indexes
        .iter()
        .map(|m| m.name.clone())
        .collect();
    Read {
        per_topic,
        schemas,
        attachments,
        metadata,
    }
}

#[tokio::test(start_paused = true)]
async fn records_every_topic_the_frames_and_what_describes_them() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dir = std::env::temp_dir().join(format!("fcan-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.mcap");
    let args = [
        "fcan",
        "record",
        path.to_str().unwrap(),
        "--duration",
        "0.5",
    ];
    let cli = Cli::try_parse_from(args).unwrap();
    // What the master delivers live to a subscriber of each topic, from before the
    // recording starts to after it ends: the file must hold a run of it.
    let registry = m.registry().await.unwrap();
    let live: Arc<Mutex<BTreeMap<String, Vec<serde_json::Value>>>> = Default::default();
    let mut watchers = Vec::new();
    for t in &registry.topics {
        let mut sub = m.subscribe(&t.name).await.unwrap();
        let live = live.clone();
        watchers.push(tokio::spawn(async move {
            while let Some(s) = sub.recv().await {
                let v = serde_json::to_value(ViewerJson(&s.value)).unwrap();
                live.lock()
                    .unwrap()
                    .entry(s.name.to_string())
                    .or_default()
                    .push(v);
            }
        }));
    }
    // Commands while it records: they must be in the file as the m2s topic's values.
    let pm = m.clone();
    let pub_task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for k in 0..5 {
            let v = val(&format!("{{type: 2, value: {k}.5}}"));
            pm.publish("/motor_driver2/motor3/target", v).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut out = Vec::new();
    execute(&m, &cli.command, Output { json: true }, &mut out)
        .await
        .unwrap();
    pub_task.await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for w in watchers {
        w.abort();
    }
    let live = std::mem::take(&mut *live.lock().unwrap());
    let summary: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(summary["nodes"], 3, "{summary}");
    assert_eq!(summary["frames_lost"], 0, "{summary}");

    let r = read_mcap(&path);
    // Every topic has a channel with a JSON Schema; every s2m periodic topic has values.
    let feedback = &r.per_topic["/motor_driver1/motor7/feedback"];
    // 200 Hz for 0.5 s.
    assert!((90..=110).contains(&feedback.len()), "{}", feedback.len());
    assert!(feedback.iter().all(|v| v["position"].is_number()));
    let targets: Vec<f64> = r.per_topic["/motor_driver2/motor3/target"]
        .iter()
        .map(|v| v["value"].as_f64().unwrap())
        .collect();
    assert_eq!(targets, [0.5, 1.5, 2.5, 3.5, 4.5]);
    for t in registry.topics.iter().filter(|t| t.period_us > 0) {
        assert!(r.per_topic.contains_key(&t.name), "no values of {}", t.name);
        assert_eq!(
            r.schemas[&t.name],
            ("jsonschema".to_string(), "json".to_string())
        );
    }
    let frames = &r.per_topic["/fcan/frames"];
    assert_eq!(frames.len() as u64, summary["frames"].as_u64().unwrap());
    assert!(frames.len() > 300, "{}", frames.len());
    assert_eq!(r.attachments.len(), 2, "{:?}", r.attachments);
    for id in [MD1, MD2, IO3] {
        assert!(
            r.metadata.contains(&format!("fcan.plan.{id}")),
            "{:?}",
            r.metadata
        );
        assert!(r.metadata.contains(&format!("fcan.node.{id}")));
    }
    // Each topic's values in the file are a run of what the master delivered live.
    for (topic, values) in r.per_topic.iter().filter(|(t, _)| *t != "/fcan/frames") {
        let all = live.get(topic).map_or(&[][..], Vec::as_slice);
        assert!(
            all.windows(values.len()).any(|w| w == values.as_slice()),
            "{topic}: the {} recorded values are not a run of the {} delivered live",
            values.len(),
            all.len()
        );
    }

    if let Some(out_dir) = std::env::var_os("FCAN_RECORD_ARTIFACTS") {
        let out_dir = std::path::PathBuf::from(out_dir);
        std::fs::create_dir_all(&out_dir).unwrap();
        std::fs::copy(&path, out_dir.join("record.mcap")).unwrap();
        let topics: serde_json::Map<String, serde_json::Value> = registry
            .topics
            .iter()
            .map(|t| {
                let fields: Vec<_> = t
                    .fields
                    .iter()
                    .map(|f| json!({"name": f.name, "type": f.ty.name(), "len": f.len}))
                    .collect();
                let dir = fcan_master::json::direction_name(t.dir);
                let info = json!({
                    "node": t.node.get(), "dir": dir, "period_us": t.period_us, "fields": fields,
                });
                (t.name.clone(), info)
            })
            .collect();
        let nodes: BTreeMap<String, String> = m
            .nodes()
            .await
            .unwrap()
            .iter()
            .map(|n| (n.id.get().to_string(), n.name.clone()))
            .collect();
        let expected = json!({
            "summary": summary,
            "topics": topics,
            "live": live,
            "published": {
                "/motor_driver2/motor3/target":
                    (0..5).map(|k| json!({"type": 2, "value": k as f64 + 0.5})).collect::<Vec<_>>(),
            },
            "nodes": nodes,
        });
        std::fs::write(out_dir.join("live.json"), expected.to_string()).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
