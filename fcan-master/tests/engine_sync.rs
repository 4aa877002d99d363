//! The engine against real example firmwares in one thread (no bus timing): unit-level
//! checks of provisioning behaviours the end-to-end suite found broken once.

#[path = "support/mod.rs"]
mod support;

use fcan_core::frame::{CanId, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{Announce, ConfigMessage, NodeState, SchemaData};
use fcan_core::segment::ReassemblyPool;
use fcan_core::segment::Segmenter;
use fcan_master::engine::{NoSink, Phase};
use support::EngineWorld;

/// Decodes every configuration message the master sent.
fn master_messages(w: &EngineWorld) -> Vec<(ConfigId, Vec<u8>)> {
    let mut pool: Box<ReassemblyPool<8, 8192>> = Box::new(ReassemblyPool::new());
    let mut out = Vec::new();
    for f in &w.master_sent {
        let Ok(id) = ConfigId::from_can_id(f.id()) else {
            continue;
        };
        if let Ok(Some(p)) = pool.push(id, f.data(), 0) {
            out.push((id, p.to_vec()));
        }
    }
    out
}

fn running(w: &EngineWorld) -> usize {
    w.engine
        .nodes()
        .filter(|n| n.phase == Phase::Running)
        .count()
}

#[test]
fn a_repeated_announce_does_not_restart_provisioning() {
    for mtu in [Mtu::Fd, Mtu::Classic] {
        let mut w = EngineWorld::new(mtu, 1, 0);
        w.engine.discover();
        // Step until the first FRAME_DEFINE went out, then make the node announce again
        // (as it does when it answers DISCOVER while its back-off also fires).
        while !master_messages(&w)
            .iter()
            .any(|(id, _)| id.opcode == Opcode::FrameDefine)
        {
            w.step(100, &mut NoSink);
            assert!(w.now_us < 2_000_000);
        }
        w.engine.discover();
        while running(&w) < 1 {
            w.step(100, &mut NoSink);
            assert!(w.now_us < 5_000_000, "{mtu:?}: node never ran");
        }
        // Plan index 0 (which clears the node's plan) was sent once, not once per announce.
        let index0 = master_messages(&w)
            .iter()
            .filter(|(id, p)| id.opcode == Opcode::FrameDefine && p.first() == Some(&0))
            .count();
        assert_eq!(index0, 1, "{mtu:?}");
    }
}

#[test]
fn schema_reads_ask_for_small_chunks() {
    // A lost frame costs a whole transfer: the master asks for at most 16 frames' worth.
    let mut w = EngineWorld::new(Mtu::Classic, 1, 0);
    w.provision();
    let reads: Vec<u16> = master_messages(&w)
        .iter()
        .filter_map(
            |(id, p)| match ConfigMessage::decode(id.opcode, id.dir, p) {
                Ok(ConfigMessage::SchemaRead(r)) => Some(r.len),
                _ => None,
            },
        )
        .collect();
    assert!(
        reads.len() > 1,
        "the 979-byte blob takes several chunks on Classical CAN"
    );
    let max = 16 * Mtu::Classic.payload() - SchemaData::HEADER_LEN;
    assert!(reads.iter().all(|&l| l as usize <= max), "{reads:?}");
}

#[test]
fn staged_publications_share_their_frame() {
    let mut w = EngineWorld::new(Mtu::Fd, 1, 0);
    w.provision();
    let sent_before = w.master_sent.len();
    // Stage the target of all 8 motors (block b, topic 0), then flush once.
    for block in 0..8u8 {
        let bytes = [1u8, 0, 0, 0, 0];
        w.engine
            .stage_publish(
                NodeId::new(1).unwrap(),
                block,
                0,
                &bytes,
                w.now_us,
                &mut NoSink,
            )
            .unwrap();
    }
    w.engine.flush_published();
    w.step(1_000, &mut NoSink);
    let data: Vec<_> = w.master_sent[sent_before..]
        .iter()
        .filter(|f| matches!(f.id(), CanId::Standard(_)))
        .collect();
    // Eight 5-byte targets share (at most two) 64-byte frames with the trajectories.
    assert!((1..=2).contains(&data.len()), "{} frames", data.len());
    let plan_frames = w
        .engine
        .node(NodeId::new(1).unwrap())
        .unwrap()
        .plan
        .as_ref()
        .unwrap()
        .frames
        .len();
    assert!(data.len() < plan_frames);
}

/// The configuration messages the master sent from index `from` of `master_sent` on.
fn master_messages_since(w: &EngineWorld, from: usize) -> Vec<(ConfigId, Vec<u8>)> {
    let mut pool: Box<ReassemblyPool<8, 8192>> = Box::new(ReassemblyPool::new());
    let mut out = Vec::new();
    for f in &w.master_sent[from..] {
        let Ok(id) = ConfigId::from_can_id(f.id()) else {
            continue;
        };
        if let Ok(Some(p)) = pool.push(id, f.data(), 0) {
            out.push((id, p.to_vec()));
        }
    }
    out
}

#[test]
fn a_discover_leaves_running_nodes_alone() {
    // Every node answers DISCOVER, also while running; a DISCOVER may come from us (a
    // user's `discover()`) or from another device on a shared bus. A running node that
    // answers with the boot and schema we know must not be re-provisioned: FRAME_DEFINE
    // index 0 clears its plan and its outputs stop until START.
    for mtu in [Mtu::Fd, Mtu::Classic] {
        let mut w = EngineWorld::new(mtu, 1, 1);
        w.provision();
        let from = w.master_sent.len();
        w.engine.discover();
        for _ in 0..5000 {
            w.step(100, &mut NoSink);
        }
        let again: Vec<_> = master_messages_since(&w, from)
            .into_iter()
            .filter(|(id, _)| {
                matches!(
                    id.opcode,
                    Opcode::FrameDefine | Opcode::Start | Opcode::AnnounceAck
                )
            })
            .map(|(id, _)| id.opcode)
            .collect();
        assert!(
            again.is_empty(),
            "{mtu:?}: re-provisioned after DISCOVER: {again:?}"
        );
        assert_eq!(running(&w), 2, "{mtu:?}");
    }
}

#[test]
fn a_node_back_in_another_frame_mode_gets_a_new_plan() {
    // A node planned for CAN FD announces again (same boot, same schema) without the FD
    // capability, as it does behind a router that masks FD for a classic downlink. The
    // old plan has 64-byte frames the node can no longer receive: the master must plan
    // again for 8-byte frames rather than resend the old one.
    let mut w = EngineWorld::new(Mtu::Fd, 1, 0);
    w.provision();
    let rec = w.engine.node(NodeId::new(1).unwrap()).unwrap();
    let longest = |w: &EngineWorld| {
        w.engine
            .node(NodeId::new(1).unwrap())
            .unwrap()
            .plan
            .as_ref()
            .unwrap()
            .frames
            .iter()
            .map(|f| f.header.len)
            .max()
            .unwrap()
    };
    assert!(longest(&w) > 8, "the FD plan uses long frames");
    let msg = ConfigMessage::Announce(Announce {
        protocol: fcan_core::PROTOCOL_VERSION,
        state: NodeState::Running,
        caps: 0,
        boot_id: rec.announce.boot_id,
        blob_len: rec.announce.blob_len,
        hash: rec.announce.hash,
        counts: &rec.announce.counts.clone(),
    });
    let mut buf = vec![0u8; 64];
    let len = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(
        Opcode::Discover,
        Direction::ToMaster,
        NodeId::new(1).unwrap(),
        0x55,
    );
    let from = w.master_sent.len();
    for f in Segmenter::new(id, Mtu::Classic, &buf[..len], &[]).unwrap() {
        w.engine.handle_frame(&f, w.now_us, &mut NoSink);
    }
    while running(&w) < 1 || w.master_sent.len() == from {
        w.step(100, &mut NoSink);
        assert!(w.now_us < 10_000_000, "never running again");
    }
    assert!(longest(&w) <= 8, "the new plan fits Classical frames");
    let defines: Vec<_> = master_messages_since(&w, from)
        .into_iter()
        .filter(|(id, _)| id.opcode == Opcode::FrameDefine)
        .collect();
    assert!(!defines.is_empty(), "the node was given the new plan");
}

#[test]
fn a_node_without_brs_gets_no_switched_frames() {
    // An FD node that does not announce BRS is acknowledged in plain FD mode; a frame with
    // bit-rate switching would be an error frame to it. The real firmware can do BRS, so
    // its ANNOUNCE is rewritten on the way to the master with the BRS capability cleared
    // (the first ANNOUNCE segment carries the capabilities in byte 2).
    let mut w = EngineWorld::new(Mtu::Fd, 1, 0);
    w.engine.discover();
    let mut to_node = Vec::new();
    while running(&w) < 1 {
        w.now_us += 100;
        let now = w.now_us;
        w.engine.poll(now);
        while let Some(f) = w.engine.pop_frame() {
            w.nodes[0].receive(&f, now as u32);
            to_node.push(f);
        }
        let mut tx = support::Collect::default();
        w.nodes[0].poll(now as u32, &mut tx);
        for f in tx.0 {
            let f = match ConfigId::from_can_id(f.id()) {
                Ok(id) if id.opcode == Opcode::Discover && id.segment == 0 => {
                    let mut d = f.data().to_vec();
                    d[2] &= !fcan_core::msg::caps::BRS;
                    fcan_core::frame::Frame::classic(f.id(), &d).unwrap()
                }
                _ => f,
            };
            w.engine.handle_frame(&f, now, &mut NoSink);
        }
        assert!(w.now_us < 5_000_000, "the node never ran");
    }
    // Publish a command: data frames must not switch either.
    w.engine
        .stage_publish(
            NodeId::new(1).unwrap(),
            0,
            0,
            &[1, 0, 0, 0, 0],
            w.now_us,
            &mut NoSink,
        )
        .unwrap();
    w.engine.flush_published();
    while let Some(f) = w.engine.pop_frame() {
        to_node.push(f);
    }
    let fd: Vec<_> = to_node.iter().filter(|f| f.is_fd()).collect();
    assert!(!fd.is_empty(), "the node was run in an FD mode");
    assert!(
        fd.iter().all(|f| !f.is_brs()),
        "{} of {} FD frames switch bit rate",
        fd.iter().filter(|f| f.is_brs()).count(),
        fd.len()
    );
}

#[test]
fn bus_time_counts_every_frame_sent_and_taken_in() {
    let mut w = EngineWorld::new(Mtu::Fd, 1, 0);
    assert_eq!(w.engine.bus_busy(), std::time::Duration::ZERO);
    w.provision();
    let rates = w.engine.config().rates;
    let sent: std::time::Duration = w.master_sent.iter().map(|f| rates.frame_time(f)).sum();
    // The master's own frames, plus every frame the node sent that the engine took in.
    assert!(
        w.engine.bus_busy() > sent,
        "{:?} vs {sent:?}",
        w.engine.bus_busy()
    );
}
