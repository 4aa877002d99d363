//! Text that came from the bus reaches the terminal inert (issue 10, item 8).
//!
//! Two hand-made nodes on the simulated bus serve blobs with hostile text in them — an
//! erase-screen escape sequence, a carriage return, a bidi override and isolate, DEL and
//! a C1 control:
//!
//! - node 20's blob names the node with it, so validation fails and the master's reason
//!   (shown as the node's phase and in the `Failed` event) quotes the name as it was;
//! - node 21's blob is valid but every topic's `ros.type` carries it (`ros.type` is free
//!   text), shown by `fcan topic info`.
//!
//! What `fcan` prints (text and `--json`, through `cli::execute`) must hold none of those
//! characters raw, yet still say what the node sent (escaped in text, the same value in
//! JSON).

use std::time::Duration;

use clap::Parser;
use fcan_cli::{describe_event, execute, Cli, CliError, Output};
use fcan_core::frame::{CanId, Mtu};
use fcan_core::hash::SchemaDigest;
use fcan_core::id::{ConfigId, Direction, NodeId};
use fcan_core::ir::Ros;
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_e2e::*;
use fcan_master::text::is_unsafe;
use fcan_master::transport::sim::SimEndpoint;
use fcan_master::transport::Transport;
use fcan_master::Master;
use fcan_master::MasterEvent;

const HOSTILE: &str = "\x1b[2J\r\u{202E}gnp.exe\u{2066}\u{7f}\u{9b}";
const BAD_NODE: u8 = 20;
const ROS_NODE: u8 = 21;

async fn run(m: &Master, args: &[&str]) -> Result<String, CliError> {
    let cli = Cli::try_parse_from(std::iter::once("fcan").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut out = Vec::new();
    execute(m, &cli.command, Output { json: cli.json }, &mut out).await?;
    Ok(String::from_utf8(out).unwrap())
}

/// No unsafe character but the output's own line ends.
fn assert_inert(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && is_unsafe(c))
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: raw {bad:?} reach the terminal:\n{text:?}"
    );
}

/// The two blobs: (invalid node name, valid with hostile `ros.type`s).
fn blobs() -> (Vec<u8>, Vec<u8>) {
    let io = fcan_example_io_board::gen::DESC.blob;
    let mut bad = fcan_core::blob::decode(io).unwrap();
    bad.node = format!("io{HOSTILE}");
    let mut ros = fcan_core::blob::decode(io).unwrap();
    for t in &mut ros.types {
        for tp in &mut t.topics {
            tp.ros = Some(Ros {
                ty: format!("std_msgs/{HOSTILE}"),
                map: vec![],
            });
        }
    }
    assert!(fcan_core::validate::validate(&ros).is_empty());
    assert!(!fcan_core::validate::validate(&bad).is_empty());
    (fcan_core::blob::encode(&bad), fcan_core::blob::encode(&ros))
}

/// A node made of raw frames: announces, serves its blob, acknowledges every command
/// and sends heartbeats.
struct RawNode {
    id: u8,
    blob: Vec<u8>,
    counts: Vec<u8>,
    boot_id: u32,
    mtu: Mtu,
}

async fn send(ep: &mut SimEndpoint, node: u8, transfer: u8, mtu: Mtu, msg: &ConfigMessage<'_>) {
    let mut buf = vec![0u8; 4096];
    let n = msg.encode(&mut buf).expect("encodes");
    let id = ConfigId::single(
        msg.opcode(),
        Direction::ToMaster,
        NodeId::new(node).unwrap(),
        transfer,
    );
    for f in Segmenter::new(id, mtu, &buf[..n], &[]).expect("fits") {
        let _ = ep.send(&f).await;
    }
}

async fn serve(mut ep: SimEndpoint, mut nodes: Vec<RawNode>) {
    let mut pool: Box<ReassemblyPool<8, 4096>> = Box::new(ReassemblyPool::new());
    let mut beat = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = beat.tick() => {
                for n in &nodes {
                    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
                        state: NodeState::Running,
                        fault: FaultCode::None,
                        boot_id: n.boot_id,
                        errors: 0,
                    });
                    send(&mut ep, n.id, 0, Mtu::Classic, &hb).await;
                }
            }
            rx = ep.recv() => {
                let Ok(rx) = rx else { continue };
                let f = rx.frame;
                let CanId::Extended(_) = f.id() else { continue };
                let Ok(cid) = ConfigId::from_can_id(f.id()) else { continue };
                if cid.dir != Direction::ToNode {
                    continue;
                }
                let Ok(Some(p)) = pool.push(cid, f.data(), 0) else { continue };
                let p = p.to_vec();
                let Ok(msg) = ConfigMessage::decode(cid.opcode, cid.dir, &p) else { continue };
                for n in &mut nodes {
                    if !(cid.node == NodeId::BROADCAST || cid.node.get() == n.id) {
                        continue;
                    }
                    let t = cid.transfer;
                    match msg {
                        ConfigMessage::Discover(_) => {
                            let a = ConfigMessage::Announce(Announce {
                                protocol: fcan_core::ir::PROTOCOL_VERSION as u8,
                                state: NodeState::Unprovisioned,
                                caps: caps::FD | caps::BRS,
                                boot_id: n.boot_id,
                                blob_len: n.blob.len() as u32,
                                hash: SchemaDigest::of(&n.blob).prefix(),
                                counts: &n.counts,
                            });
                            send(&mut ep, n.id, 0, Mtu::Classic, &a).await;
                        }
                        ConfigMessage::AnnounceAck(a) => n.mtu = a.mode.mtu(),
                        ConfigMessage::SchemaRead(r) => {
                            let start = (r.offset as usize).min(n.blob.len());
                            let end = (start + r.len as usize).min(n.blob.len());
                            let d = ConfigMessage::SchemaData(SchemaData {
                                offset: r.offset,
                                data: &n.blob[start..end],
                            });
                            send(&mut ep, n.id, t, n.mtu, &d).await;
                        }
                        ConfigMessage::FrameDefine(_)
                        | ConfigMessage::Start(_)
                        | ConfigMessage::ParamSet(_) => {
                            let r = ConfigMessage::Result(CommandResult {
                                opcode: cid.opcode,
                                code: ResultCode::Ok,
                                detail: 0,
                            });
                            send(&mut ep, n.id, t, n.mtu, &r).await;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

both_links!(node_strings_reach_the_terminal_escaped);

async fn node_strings_reach_the_terminal_escaped(mtu: Mtu) {
    let w = World::new(mtu);
    let (bad, ros) = blobs();
    let counts = |b: &[u8]| -> Vec<u8> {
        fcan_core::blob::decode(b)
            .unwrap()
            .instances
            .iter()
            .map(|a| a.max_count as u8)
            .collect()
    };
    let nodes = vec![
        RawNode {
            id: BAD_NODE,
            counts: counts(&bad),
            blob: bad,
            boot_id: 0xBAD,
            mtu: Mtu::Classic,
        },
        RawNode {
            id: ROS_NODE,
            counts: counts(&ros),
            blob: ros,
            boot_id: 0x205,
            mtu: Mtu::Classic,
        },
    ];
    tokio::spawn(serve(w.endpoint(), nodes));
    let m = w.start_master().await;
    wait_running(&m, &[ROS_NODE], Duration::from_secs(3)).await;
    let (phase, _) = eventually("node 20 fails validation", Duration::from_secs(3), || {
        let m = &m;
        async move {
            let n = node_info(m, BAD_NODE).await?;
            match n.phase {
                fcan_master::Phase::Failed(reason) => Some(reason),
                _ => None,
            }
        }
    })
    .await;
    assert!(
        phase.contains(HOSTILE),
        "the reason quotes the name: {phase:?}"
    );

    // `fcan nodes`: the reason is there, escaped.
    let text = run(&m, &["nodes"]).await.unwrap();
    assert_inert("nodes", &text);
    assert!(
        text.contains("io\\u{1b}[2J\\u{d}\\u{202e}gnp.exe"),
        "{text}"
    );

    // `fcan nodes --json`: nothing raw in the text, the same value once parsed.
    let json = run(&m, &["nodes", "--json"]).await.unwrap();
    assert_inert("nodes --json", &json);
    let parsed: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bad = parsed.iter().find(|n| n["id"] == BAD_NODE).unwrap();
    assert_eq!(
        bad["phase"].as_str(),
        Some(format!("failed: {phase}").as_str())
    );

    // `fcan topic info`: the free-text ros type, escaped.
    let list = run(&m, &["topic", "list"]).await.unwrap();
    assert_inert("topic list", &list);
    let topic = list
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .find(|t| t.contains(&format!("{ROS_NODE}/")))
        .unwrap_or_else(|| panic!("a topic of node {ROS_NODE}: {list}"));
    let info = run(&m, &["topic", "info", topic]).await.unwrap();
    assert_inert("topic info", &info);
    assert!(info.contains("ros type:  std_msgs/\\u{1b}[2J"), "{info}");
    // `--json`: the same text inert, and the node's string once parsed.
    let info = run(&m, &["topic", "info", topic, "--json"]).await.unwrap();
    assert_inert("topic info --json", &info);
    let parsed: serde_json::Value = serde_json::from_str(info.trim()).unwrap();
    assert_eq!(
        parsed["ros_type"].as_str(),
        Some(format!("std_msgs/{HOSTILE}").as_str())
    );

    // `fcan schema show` and the monitor's event line.
    let show = run(&m, &["schema", "show", &ROS_NODE.to_string()])
        .await
        .unwrap();
    assert_inert("schema show", &show);
    let show = run(&m, &["schema", "show", &ROS_NODE.to_string(), "--json"])
        .await
        .unwrap();
    assert_inert("schema show --json", &show);
    let mon = run(
        &m,
        &["monitor", "-n", "1", "--interval-ms", "100", "--json"],
    )
    .await
    .unwrap();
    assert_inert("monitor --json", &mon);
    let line = describe_event(&MasterEvent::Failed {
        node: fcan_core::id::NodeId::new(BAD_NODE).unwrap(),
        reason: phase.clone(),
    })
    .unwrap();
    assert_inert("event", &line);
    let mon = run(&m, &["monitor", "-n", "1", "--interval-ms", "100"])
        .await
        .unwrap();
    assert_inert("monitor", &mon);
}
