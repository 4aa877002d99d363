//! Discovery and provisioning of several nodes: cold (every distinct schema blob read from
//! a node and verified) and warm (a new master with the same cache reads no blob).

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Opcode};
use fcan_core::msg::{BusMode, NodeState};
use fcan_e2e::*;
use fcan_master::transport::sim::SimBus;
use fcan_master::MasterEvent;

/// Frames with configuration opcode `op` on the bus since `since`.
fn count_opcode(bus: &SimBus, op: Opcode, since: Duration) -> usize {
    bus.history()
        .iter()
        .filter(|r| r.start >= since)
        .filter(|r| ConfigId::from_can_id(r.frame.id()).is_ok_and(|id| id.opcode == op))
        .count()
}

async fn cold_then_warm(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    w.add_io(IO3);

    // Cold: empty cache.
    let master = w.start_master().await;
    let mut events = master.events();
    let cold = wait_running(&master, &[MD1, MD2, IO3], Duration::from_secs(3)).await;
    let mut downloaded = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::SchemaReady { node, cached, .. } = e {
            downloaded.push((node.get(), cached));
        }
    }
    // The I/O board's schema and at least one motor driver's were read over the bus.
    assert!(downloaded.contains(&(IO3, false)), "{downloaded:?}");
    assert!(
        downloaded.contains(&(MD1, false)) || downloaded.contains(&(MD2, false)),
        "{downloaded:?}"
    );
    let status = master.status().await.unwrap();
    let blobs: u64 = [MD1, IO3]
        .iter()
        .map(|id| {
            w.motors
                .get(id)
                .map(|m| m.with(|f| f.node.raw().desc().blob.len()))
                .unwrap_or_else(|| w.io(*id).with(|f| f.node.raw().desc().blob.len()))
                as u64
        })
        .sum();
    assert!(
        status.stats.schema_bytes_read >= blobs && status.stats.schema_bytes_read <= 2 * blobs,
        "read {} schema bytes for {blobs} bytes of distinct blobs",
        status.stats.schema_bytes_read
    );
    assert_eq!(w.store.len(), 2, "both distinct blobs cached");
    let cold_schema_frames = count_opcode(&w.bus, Opcode::Schema, Duration::ZERO);
    assert!(cold_schema_frames > 0);

    // What the master and the nodes agree on.
    let nodes = master.nodes().await.unwrap();
    let want_mode = if mtu == Mtu::Fd {
        BusMode::FdBrs
    } else {
        BusMode::Classic
    };
    for (id, name) in [
        (MD1, "motor_driver1"),
        (MD2, "motor_driver2"),
        (IO3, "io_board3"),
    ] {
        let n = nodes.iter().find(|n| n.id.get() == id).unwrap();
        assert_eq!(n.name, name);
        assert_eq!(n.phase, fcan_master::Phase::Running);
        assert_eq!(n.state, NodeState::Running);
        assert_eq!(n.mode, want_mode);
        assert!(n.frames > 0);
        assert!(n.digest.is_some());
        assert_eq!(w.node_state(id), NodeState::Running, "{name} itself");
    }
    let md1 = w.motor(MD1).with(|f| (f.node.boot_id(), f.node.bus_mode()));
    assert_eq!(md1.1, want_mode);
    assert_eq!(
        nodes.iter().find(|n| n.id.get() == MD1).unwrap().boot_id,
        md1.0,
        "the master knows this boot"
    );
    // 8 + 4 motors × 3 topics, 8 outputs + 8 inputs + 2 analog topics.
    let reg = master.registry().await.unwrap();
    assert_eq!(reg.topics.len(), 24 + 12 + 18);
    assert!(reg
        .topics
        .iter()
        .any(|t| t.name == "/motor_driver2/motor3/feedback"));
    assert!(!reg
        .topics
        .iter()
        .any(|t| t.name == "/motor_driver2/motor4/feedback"));

    // Warm: a new master, same cache.
    drop(events);
    drop(master);
    let t_warm = w.bus.now();
    let master = w.start_master().await;
    let mut events = master.events();
    let warm = wait_running(&master, &[MD1, MD2, IO3], Duration::from_secs(3)).await;
    let mut ready = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let MasterEvent::SchemaReady { node, cached, .. } = e {
            ready.push((node.get(), cached));
        }
    }
    assert!(ready.iter().all(|(_, cached)| *cached), "{ready:?}");
    for id in [MD1, MD2, IO3] {
        assert!(ready.iter().any(|(n, _)| *n == id), "{id}: {ready:?}");
    }
    assert_eq!(master.status().await.unwrap().stats.schema_bytes_read, 0);
    assert_eq!(
        count_opcode(&w.bus, Opcode::Schema, t_warm),
        0,
        "a warm start transfers no schema"
    );
    println!("{mtu:?}: cold provisioning {cold:?}, warm {warm:?}");
}

both_links!(cold_then_warm);

/// Nodes that boot after the master started are found and provisioned too.
async fn late_nodes_join(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 2);
    let master = w.start_master().await;
    wait_running(&master, &[MD1], Duration::from_secs(2)).await;
    w.add_io(IO3);
    w.add_motor(MD2, 4);
    wait_running(&master, &[MD1, MD2, IO3], Duration::from_secs(2)).await;
    // Data identifiers never overlap between nodes.
    let reg = master.registry().await.unwrap();
    assert_eq!(reg.topics.len(), 6 + 12 + 18);
    for id in [MD1, MD2, IO3] {
        assert_eq!(w.node_state(id), NodeState::Running);
    }
}

both_links!(late_nodes_join);
