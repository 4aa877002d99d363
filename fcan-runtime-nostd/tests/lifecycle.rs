//! Boot, announce, acknowledgement, heartbeats, schema download, master loss,
//! rediscovery and node-id collisions, through the public API with a scripted master.

mod common;
use common::*;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::SchemaDigest;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::Segmenter;
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

#[test]
fn blob_hash_matches_desc() {
    assert_eq!(SchemaDigest::of(&BLOB).prefix().0, BLOB_HASH);
}

#[test]
fn protocol_version_matches_core() {
    assert_eq!(PROTOCOL_VERSION as u32, fcan_core::ir::PROTOCOL_VERSION);
}

#[test]
fn silent_during_listen_window_then_announces_with_backoff() {
    let mut rig = Rig::new(false);
    let t0 = rig.now;
    rig.poll();
    // Silent for the whole window, even when asked.
    rig.send_broadcast(ConfigMessage::Discover(Discover { session: SESSION }));
    rig.advance(listen_end() - 1_000);
    assert!(rig.take().is_empty(), "spoke during the listen window");
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    // First ANNOUNCE at the end of the window, then 100, 200, 400, 800, 1600, 2000, 2000 ms.
    rig.advance(12_000_000);
    let ann: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Discover)
        .collect();
    let times: Vec<u32> = ann.iter().map(|m| m.at - t0).collect();
    let first = times[0];
    assert!(
        first >= listen_end() && first <= listen_end() + 1_000,
        "first announce at {first}"
    );
    let gaps: Vec<u32> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        &gaps[..7],
        &[100_000, 200_000, 400_000, 800_000, 1_600_000, 2_000_000, 2_000_000]
    );
    // The ANNOUNCE says who we are, on classic frames.
    let m = &ann[0];
    assert!(!m.fd);
    match m.decode() {
        ConfigMessage::Announce(a) => {
            assert_eq!(a.boot_id, BOOT_ID);
            assert_eq!(a.state, NodeState::Unprovisioned);
            assert_eq!(a.hash.0, BLOB_HASH);
            assert_eq!(a.blob_len as usize, BLOB_LEN);
            assert_eq!(a.counts, &COUNTS);
            assert_eq!(a.caps, 0);
            assert_eq!(a.protocol, PROTOCOL_VERSION);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ack_stops_announcing_and_starts_heartbeats() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    assert_eq!(rig.node.state(), NodeState::Provisioned);
    assert_eq!(rig.app.events, vec![Event::Acknowledged]);
    let t_ack = rig.now;
    rig.advance(3_500_000);
    let msgs = rig.take();
    assert!(
        msgs.iter().all(|m| m.id.opcode == Opcode::Heartbeat),
        "{msgs:#?}"
    );
    let times: Vec<u32> = msgs.iter().map(|m| m.at - t_ack).collect();
    assert_eq!(times, vec![1_000_000, 2_000_000, 3_000_000]);
    match msgs[0].decode() {
        ConfigMessage::NodeHeartbeat(h) => {
            assert_eq!(h.state, NodeState::Provisioned);
            assert_eq!(h.boot_id, BOOT_ID);
            assert_eq!(h.fault, FaultCode::None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ack_for_another_boot_is_ignored() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    rig.send(ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id: 1,
        session: SESSION,
        mode: BusMode::Classic,
    }));
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    assert!(rig.app.events.is_empty());
}

#[test]
fn fd_ack_on_classic_only_node_is_nakked() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    let r = rig.command(ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id: BOOT_ID,
        session: SESSION,
        mode: BusMode::FdBrs,
    }));
    assert_eq!(r.code, ResultCode::Unsupported);
    assert_eq!(r.opcode, Opcode::AnnounceAck);
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    assert_eq!(rig.node.counters().naks_sent, 1);
    // Still announcing.
    rig.advance(2_000_000);
    assert!(rig.take().iter().any(|m| m.id.opcode == Opcode::Discover));
}

#[test]
fn discover_gets_an_announce_in_every_state() {
    let mut rig = running_rig();
    let t = rig.next_transfer();
    for f in rig.frames_for(
        NodeId::BROADCAST,
        &ConfigMessage::Discover(Discover { session: SESSION }),
        t,
    ) {
        rig.node.receive(&f, rig.now);
    }
    rig.poll();
    let m = rig.one();
    match m.decode() {
        ConfigMessage::Announce(a) => assert_eq!(a.state, NodeState::Running),
        other => panic!("{other:?}"),
    }
    // Addressed to us works too; addressed to another node does not.
    rig.send(ConfigMessage::Discover(Discover { session: SESSION }));
    assert_eq!(rig.one().id.opcode, Opcode::Discover);
    let other = NodeId::new(NODE + 1).unwrap();
    for f in rig.frames_for(
        other,
        &ConfigMessage::Discover(Discover { session: SESSION }),
        9,
    ) {
        rig.node.receive(&f, rig.now);
    }
    rig.poll();
    assert!(rig.take().is_empty());
}

#[test]
fn schema_read_of_whole_blob_matches_hash() {
    for fd in [false, true] {
        let mut rig = Rig::new(fd);
        if fd {
            rig.boot_and_ack(BusMode::FdBrs);
        } else {
            // Before any ack: classic frames.
            rig.poll();
            rig.advance(listen_end() + 1_000);
            rig.take();
        }
        let mut blob = Vec::new();
        let mut chunks = 0;
        loop {
            let t = rig.send(ConfigMessage::SchemaRead(SchemaRead {
                offset: blob.len() as u32,
                len: u16::MAX,
            }));
            let ms: Vec<_> = rig
                .take()
                .into_iter()
                .filter(|m| m.id.opcode == Opcode::Schema)
                .collect();
            assert_eq!(ms.len(), 1);
            assert_eq!(ms[0].id.transfer, t);
            assert_eq!(ms[0].fd, fd);
            let ConfigMessage::SchemaData(d) = ms[0].decode() else {
                panic!()
            };
            assert_eq!(d.offset as usize, blob.len());
            let max = SchemaData::max_chunk(if fd { 64 } else { 8 });
            assert!(d.data.len() <= max);
            if d.data.is_empty() {
                break;
            }
            blob.extend_from_slice(d.data);
            chunks += 1;
        }
        assert_eq!(blob.len(), BLOB_LEN);
        assert!(SchemaDigest::of(&blob).matches(DESC.hash));
        assert_eq!(chunks, if fd { 1 } else { 3 });
    }
}

#[test]
fn schema_read_short_range_and_past_end() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig.send(ConfigMessage::SchemaRead(SchemaRead {
        offset: 2990,
        len: 100,
    }));
    let m = rig.one();
    let ConfigMessage::SchemaData(d) = m.decode() else {
        panic!()
    };
    assert_eq!(d.data, &BLOB[2990..]);
    rig.send(ConfigMessage::SchemaRead(SchemaRead {
        offset: u32::MAX,
        len: 100,
    }));
    let m = rig.one();
    let ConfigMessage::SchemaData(d) = m.decode() else {
        panic!()
    };
    assert!(d.data.is_empty());
    rig.send(ConfigMessage::SchemaRead(SchemaRead { offset: 5, len: 3 }));
    let m = rig.one();
    let ConfigMessage::SchemaData(d) = m.decode() else {
        panic!()
    };
    assert_eq!(d.data, &BLOB[5..8]);
}

#[test]
fn stats_read_reports_counters() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig.inject(Frame::classic(CanId::Standard(0x050), &[1]).unwrap()); // not a data id
    let t = rig.send(ConfigMessage::StatsRead);
    let m = rig.one();
    assert_eq!(m.id.transfer, t);
    let ConfigMessage::Stats(c) = m.decode() else {
        panic!()
    };
    assert_eq!(c.rx_ignored, 1);
    assert!(c.tx_frames > 0);
    assert_eq!(c, {
        let mut now = rig.node.counters();
        // The STATS transfer itself went out after the snapshot.
        now.tx_frames = c.tx_frames;
        now.rx_handled = c.rx_handled;
        now
    });
}

#[test]
fn master_loss_suspends_tells_app_and_rediscovers() {
    let mut rig = running_rig();
    assert_eq!(rig.node.state(), NodeState::Running);
    // Heartbeats keep it alive.
    for _ in 0..10 {
        rig.advance(100_000);
        rig.master_heartbeat();
    }
    assert_eq!(rig.node.state(), NodeState::Running);
    // A heartbeat from another session does not feed the watchdog... (tested below)
    rig.app.events.clear();
    rig.advance(301_000);
    assert_eq!(rig.node.state(), NodeState::Suspended);
    assert_eq!(rig.app.events, vec![Event::MasterLost]);
    assert_eq!(rig.node.counters().master_lost, 1);
    // Data stops: no feedback frames after the loss.
    let lost_at = rig.now;
    rig.data.clear();
    rig.node.publish(0, T_FEEDBACK, &[1; 6]).unwrap();
    rig.advance(50_000);
    assert!(rig.data.is_empty(), "data still flowing while suspended");
    // m2s frames are not applied while suspended: ignored, like any data frame outside
    // RUNNING (not an error: the node cannot tell them from other nodes' data).
    let before = rig.node.counters();
    let gen = rig.node.topic(0, T_CMD).unwrap().generation;
    rig.inject(rig.data_frame(0x120, &[1, 2, 3, 4, 5]));
    assert_eq!(rig.node.counters().rx_ignored, before.rx_ignored + 1);
    assert_eq!(rig.node.counters().error_summary(), before.error_summary());
    assert_eq!(rig.node.topic(0, T_CMD).unwrap().generation, gen);
    // Rediscovery: announces again with state Suspended.
    let ann: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Discover)
        .collect();
    assert!(!ann.is_empty());
    assert!(ann[0].at - lost_at <= 1_000);
    match ann[0].decode() {
        ConfigMessage::Announce(a) => assert_eq!(a.state, NodeState::Suspended),
        other => panic!("{other:?}"),
    }
    // Re-ack → Provisioned with the plan kept; START resumes.
    rig.ack(BusMode::Classic);
    assert_eq!(rig.node.state(), NodeState::Provisioned);
    assert!(rig.start(5, 300).is_ack());
    assert_eq!(rig.node.state(), NodeState::Running);
    assert_eq!(rig.app.events.last(), Some(&Event::Started));
    rig.advance(20_000);
    assert!(
        !rig.data_with_id(0x200).is_empty(),
        "feedback resumes after START"
    );
}

#[test]
fn start_from_suspended_resumes_without_reack() {
    let mut rig = running_rig();
    rig.advance(301_000);
    assert_eq!(rig.node.state(), NodeState::Suspended);
    let t = rig.send(ConfigMessage::Start(Start {
        frame_count: 5,
        master_timeout_ms: 300,
    }));
    let r: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Result)
        .collect();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].id.transfer, t);
    assert!(r[0].result().is_ack());
    assert_eq!(rig.node.state(), NodeState::Running);
    // No more announcing once running again (with the master alive).
    for _ in 0..30 {
        rig.advance(100_000);
        rig.master_heartbeat();
    }
    assert_eq!(rig.node.state(), NodeState::Running);
    assert!(rig.take().iter().all(|m| m.id.opcode != Opcode::Discover));
}

#[test]
fn watchdog_off_with_zero_timeout() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    assert!(rig.start(5, 0).is_ack());
    rig.advance(2_000_000);
    assert_eq!(rig.node.state(), NodeState::Running);
}

#[test]
fn new_master_session_clears_ack_and_reannounces() {
    let mut rig = running_rig();
    rig.send_broadcast(ConfigMessage::MasterHeartbeat(MasterHeartbeat {
        session: 0xDEAD,
    }));
    // State and plan kept, but commands need a new ack.
    assert_eq!(rig.node.state(), NodeState::Running);
    let ann: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Discover)
        .collect();
    assert_eq!(ann.len(), 1);
    let r = rig.command(ConfigMessage::ParamGet(ParamGet { block: 0, param: 0 }));
    assert_eq!(r.code, ResultCode::BadState);
    rig.ack(BusMode::Classic);
    assert_eq!(
        rig.node.state(),
        NodeState::Running,
        "a re-ack in the same mode keeps running"
    );
}

#[test]
fn collision_before_ack_faults_and_goes_silent() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(100_000);
    // Another node with our id heartbeats (it was there first).
    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: 0x0BAD_0BAD,
        errors: 0,
    });
    let mut buf = [0u8; 8];
    hb.encode(&mut buf).unwrap();
    let id = ConfigId::single(Opcode::Heartbeat, Direction::ToMaster, node_id(), 3);
    rig.inject(Frame::classic(id.can_id(), &buf).unwrap());
    assert_eq!(rig.node.state(), NodeState::Fault);
    assert_eq!(rig.node.fault(), FaultCode::IdCollision);
    assert_eq!(rig.app.events, vec![Event::IdCollision]);
    // Silent for good, whatever happens.
    rig.send_broadcast(ConfigMessage::Discover(Discover { session: SESSION }));
    rig.advance(5_000_000);
    rig.send(ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id: BOOT_ID,
        session: SESSION,
        mode: BusMode::Classic,
    }));
    assert!(rig.take().is_empty());
    assert!(rig.data.is_empty());
    assert_eq!(rig.node.state(), NodeState::Fault);
}

#[test]
fn only_a_frame_naming_another_boot_is_a_collision_while_unprovisioned() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    // Frames a foreign CAN device may send whose 29-bit identifiers parse as node →
    // master frames under our id: a RESULT, a "heartbeat" of the wrong length or with an
    // invalid state, a later ANNOUNCE segment, an ANNOUNCE head of another protocol.
    let at = |op, seg: u8, eot| {
        ConfigId::single(op, Direction::ToMaster, node_id(), 1)
            .with_segment(seg, eot)
            .can_id()
    };
    let foreign = [
        Frame::classic(at(Opcode::Result, 0, true), &[2, 0, 0, 0]).unwrap(),
        Frame::classic(at(Opcode::Heartbeat, 0, true), &[2, 0, 1, 2, 3, 4]).unwrap(),
        Frame::classic(at(Opcode::Heartbeat, 0, true), &[0xEE, 0, 1, 2, 3, 4, 5, 6]).unwrap(),
        Frame::classic(at(Opcode::Discover, 1, false), &[7; 8]).unwrap(),
        Frame::classic(at(Opcode::Discover, 0, false), &[0x7F, 0, 0, 0, 1, 2, 3, 4]).unwrap(),
        Frame::classic(at(Opcode::Schema, 0, false), &[9; 8]).unwrap(),
    ];
    for f in foreign {
        rig.inject(f);
        assert_eq!(rig.node.state(), NodeState::Unprovisioned, "{f:?}");
    }
    // Another node's real HEARTBEAT under our id does.
    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: 0x0BAD_0BAD,
        errors: 0,
    });
    let mut buf = [0u8; 8];
    hb.encode(&mut buf).unwrap();
    rig.inject(Frame::classic(at(Opcode::Heartbeat, 0, true), &buf).unwrap());
    assert_eq!(rig.node.state(), NodeState::Fault);
}

#[test]
fn own_echo_is_not_a_collision() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    let ann = rig
        .take()
        .into_iter()
        .find(|m| m.id.opcode == Opcode::Discover)
        .unwrap();
    // Loop our own ANNOUNCE back (some controllers echo).
    let seg = Segmenter::new(ann.id, Mtu::Classic, &ann.payload, &[]).unwrap();
    for f in seg {
        rig.node.receive(&f, rig.now);
    }
    rig.poll();
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
}

#[test]
fn collision_after_ack_asserts_the_id_with_a_heartbeat() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig.take();
    // A newcomer with our id announces (segment 0 of its ANNOUNCE).
    let counts = [1u8, 0];
    let ann = ConfigMessage::Announce(Announce {
        protocol: 2,
        state: NodeState::Unprovisioned,
        caps: 0,
        boot_id: 0x0BAD_0BAD,
        blob_len: 10,
        hash: DESC.hash,
        counts: &counts,
    });
    let mut buf = [0u8; 64];
    let n = ann.encode(&mut buf).unwrap();
    let id = ConfigId::single(Opcode::Discover, Direction::ToMaster, node_id(), 0);
    for f in Segmenter::new(id, Mtu::Classic, &buf[..n], &[]).unwrap() {
        rig.node.receive(&f, rig.now);
    }
    rig.poll();
    assert_eq!(rig.node.state(), NodeState::Provisioned);
    let m = rig.one();
    match m.decode() {
        ConfigMessage::NodeHeartbeat(h) => assert_eq!(h.boot_id, BOOT_ID),
        other => panic!("{other:?}"),
    }
}

#[test]
fn frames_for_other_nodes_and_bad_ids_are_counted() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    let c0 = rig.node.counters();
    let other = ConfigId::single(Opcode::Start, Direction::ToNode, NodeId::new(9).unwrap(), 0);
    rig.inject(Frame::classic(other.can_id(), &[0, 0, 0]).unwrap());
    // Extended, but not configuration plane.
    rig.inject(Frame::classic(CanId::Extended(0x0123_4567), &[]).unwrap());
    // Reserved opcode.
    rig.inject(
        Frame::classic(
            CanId::Extended(0x1F00_0000 | (NODE as u32) << 16 | 0x80),
            &[],
        )
        .unwrap(),
    );
    let c = rig.node.counters();
    assert_eq!(c.rx_ignored, c0.rx_ignored + 2);
    assert_eq!(c.rx_malformed, c0.rx_malformed + 1);
    assert!(rig.take().is_empty());
}

#[test]
fn rx_queue_overflow_is_counted_not_fatal() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    let t = rig.next_transfer();
    let frames = rig.frames_for(node_id(), &ConfigMessage::StatsRead, t);
    for _ in 0..(RX_QUEUE_LEN + 5) {
        rig.node.receive(&frames[0], rig.now);
    }
    assert_eq!(rig.node.rx_overflows(), 5);
    // Everything queued gets answered over a few polls, in order.
    for _ in 0..10 {
        rig.poll();
    }
    assert_eq!(rig.take().len(), RX_QUEUE_LEN);
}

#[test]
fn config_errors() {
    let mk = |counts: &'static [u8]| {
        Node::new(
            &DESC,
            TestBuffers::new(),
            NodeConfig {
                node_id: node_id(),
                boot_id: 1,
                counts,
                controller: Controller::Classic,
            },
        )
        .err()
    };
    assert_eq!(mk(&[1]), Some(ConfigError::CountsLength));
    assert_eq!(mk(&[4, 0]), Some(ConfigError::CountTooLarge { array: 0 }));
    assert_eq!(mk(&[3, 2]), None);
    let cfg = NodeConfig {
        node_id: node_id(),
        boot_id: 1,
        counts: &COUNTS,
        controller: Controller::Classic,
    };
    fn too_small<B: Storage>(buffers: B) -> Option<ConfigError> {
        let cfg = NodeConfig {
            node_id: node_id(),
            boot_id: 1,
            counts: &COUNTS,
            controller: Controller::Classic,
        };
        Node::new(&DESC, buffers, cfg).err()
    }
    assert_eq!(
        too_small(Buffers::<134, 60, 25, 5, 20, 8, 16, 2, 16>::new()),
        Some(ConfigError::TopicBytes)
    );
    assert_eq!(
        too_small(Buffers::<135, 59, 25, 5, 20, 8, 16, 2, 16>::new()),
        Some(ConfigError::StageBytes)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 24, 5, 20, 8, 16, 2, 16>::new()),
        Some(ConfigError::ParamBytes)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 4, 20, 8, 16, 2, 16>::new()),
        Some(ConfigError::Blocks)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 5, 19, 8, 16, 2, 16>::new()),
        Some(ConfigError::TopicSlots)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 5, 20, 7, 16, 2, 16>::new()),
        Some(ConfigError::Frames)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 5, 20, 8, 15, 2, 16>::new()),
        Some(ConfigError::Entries)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 5, 20, 8, 16, 1, 16>::new()),
        Some(ConfigError::ServiceSlots)
    );
    assert_eq!(
        too_small(Buffers::<135, 60, 25, 5, 20, 8, 16, 2, 15>::new()),
        Some(ConfigError::ServiceBuffer)
    );
    // The schema's `service_buffer` (16) is above its largest request + response (11):
    // the rule codegen sizes buffers by (`fcan_core::limits::service_slot_bytes`).
    assert_eq!(DESC.required_service_buffer(), 16);
    // Buffers in a static, borrowed.
    static mut _UNUSED: u8 = 0;
    let mut big: Box<Buffers<200, 80, 40, 6, 24, 10, 20, 3, 16>> = Box::new(Buffers::new());
    let node = Node::new(&DESC, &mut *big, cfg).unwrap();
    assert!(
        node.is_wired(0)
            && node.is_wired(1)
            && !node.is_wired(2)
            && node.is_wired(3)
            && !node.is_wired(4)
    );
    assert!(!node.is_wired(200));
    assert_eq!(node.node_id(), node_id());
}
