//! When a command names something the running nodes do not offer while a node has
//! announced but is not provisioned yet, the CLI says what did not happen, never "no
//! topic named …" for a name that may well be that node's (issue 10, item 7).

use std::time::Duration;

use clap::Parser;
use fcan_cli::{execute, Cli, Output};
use fcan_core::frame::Mtu;
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, Direction, NodeId};
use fcan_core::msg::{Announce, ConfigMessage, NodeState};
use fcan_core::segment::Segmenter;
use fcan_e2e::*;
use fcan_master::transport::Transport;

async fn unknown_name_while_a_node_is_unprovisioned(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_io(IO3);
    let m = w.start_master().await;
    wait_running(&m, &[IO3], Duration::from_secs(3)).await;
    // Node 9 announces a schema it will never deliver: the master stays "reading schema".
    let mut node9 = w.endpoint();
    let ann = ConfigMessage::Announce(Announce {
        protocol: fcan_core::PROTOCOL_VERSION,
        state: NodeState::Unprovisioned,
        caps: 0,
        boot_id: 0x1234_5678,
        blob_len: 900,
        hash: HashPrefix([7; 8]),
        counts: &[],
    });
    let mut buf = [0u8; 64];
    let n = ann.encode(&mut buf).unwrap();
    let id = ConfigId::single(
        ann.opcode(),
        Direction::ToMaster,
        NodeId::new(9).unwrap(),
        0,
    );
    for f in Segmenter::new(id, Mtu::Classic, &buf[..n], &[]).unwrap() {
        node9.send(&f).await.unwrap();
    }
    eventually("node 9 known", Duration::from_millis(100), || async {
        node_info(&m, 9)
            .await
            .filter(|n| n.phase != fcan_master::Phase::Running)
    })
    .await;

    let args = ["fcan", "topic", "echo", "/thing9/part/value", "-n", "1"];
    let cli = Cli::try_parse_from(args).unwrap();
    let mut out = Vec::new();
    let err = execute(&m, &cli.command, Output::default(), &mut out)
        .await
        .unwrap_err()
        .to_string();
    println!("{err}");
    assert!(!err.contains("no topic named"), "{err}");
    assert!(
        err.contains("node 9") && err.contains("provisioning did not finish"),
        "{err}"
    );
    assert!(err.contains("/thing9/part/value"), "{err}");

    // With every node running, an unknown name is reported as such.
    let (_w2, m2) = World::standard(mtu).await;
    let cli = Cli::try_parse_from(["fcan", "topic", "echo", "/io_board3/nope", "-n", "1"]).unwrap();
    let err = execute(&m2, &cli.command, Output::default(), &mut out)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no topic named `/io_board3/nope`"), "{err}");
}

both_links!(unknown_name_while_a_node_is_unprovisioned);
