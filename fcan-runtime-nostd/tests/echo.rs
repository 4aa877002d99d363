//! Issue 10, item 10: a node hearing its own frames (a controller that loops transmitted
//! frames back, or a second controller on the same bus) must not take them for a node-id
//! collision. Only an ANNOUNCE or HEARTBEAT with another boot_id proves another node
//! holds the id.

mod common;
use common::*;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::Segmenter;
use fcan_runtime_nostd::*;

/// The frames of one node→master message under our node id.
fn node_frames(op: Opcode, msg: &ConfigMessage<'_>, transfer: u8) -> Vec<Frame> {
    let mut buf = vec![0u8; 4096];
    let n = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(op, Direction::ToMaster, node_id(), transfer);
    Segmenter::new(id, Mtu::Classic, &buf[..n], &[])
        .unwrap()
        .collect()
}

fn announce(boot_id: u32) -> Vec<Frame> {
    let counts = COUNTS;
    let msg = ConfigMessage::Announce(Announce {
        protocol: 2,
        state: NodeState::Unprovisioned,
        caps: 0,
        boot_id,
        blob_len: BLOB_LEN as u32,
        hash: DESC.hash,
        counts: &counts,
    });
    node_frames(Opcode::Discover, &msg, 7)
}

/// One message of every kind this node sends, as it would send them (our boot_id).
fn own_messages() -> Vec<Frame> {
    let mut out = announce(BOOT_ID);
    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: BOOT_ID,
        errors: 0,
    });
    out.extend(node_frames(Opcode::Heartbeat, &hb, 1));
    for op in [Opcode::FrameDefine, Opcode::ParamSet, Opcode::Start] {
        let r = ConfigMessage::Result(CommandResult {
            opcode: op,
            code: ResultCode::BadState,
            detail: 0,
        });
        out.extend(node_frames(Opcode::Result, &r, 2));
    }
    let chunk = [0x55u8; 40];
    let sd = ConfigMessage::SchemaData(SchemaData {
        offset: 0,
        data: &chunk,
    });
    out.extend(node_frames(Opcode::Schema, &sd, 3));
    let st = ConfigMessage::Stats(Counters::default());
    out.extend(node_frames(Opcode::Stats, &st, 4));
    let sr = ConfigMessage::ServiceResponse(ServiceResponse {
        block: 0,
        service: S_MOVE,
        status: ServiceStatus::Ok,
        body: &[1, 2, 3, 4],
    });
    out.extend(node_frames(Opcode::Service, &sr, 5));
    let pv = ConfigMessage::ParamValue(ParamValue {
        block: 0,
        param: P_GAIN,
        value: &[0, 0, 128, 63],
    });
    out.extend(node_frames(Opcode::ParamGet, &pv, 6));
    out
}

fn inject_all(rig: &mut Rig, frames: &[Frame]) {
    for f in frames {
        rig.node.receive(f, rig.now);
    }
    rig.poll();
}

/// Advances time like `Rig::advance`, feeding every frame the node sends back to it at
/// once, as an echoing controller does.
fn advance_echoing(rig: &mut Rig, us: u32) {
    let end = rig.now.wrapping_add(us);
    while rig.now != end {
        let step = end.wrapping_sub(rig.now).min(1_000);
        rig.now = rig.now.wrapping_add(step);
        let mut bus = Bus::default();
        rig.node.poll(rig.now, &mut bus, &mut rig.app);
        for f in &bus.sent {
            rig.node.receive(f, rig.now);
        }
        rig.bus.sent.extend(bus.sent);
        rig.collect();
    }
}

/// Sends a master message and lets the node answer, echoing its answer back.
fn send_echoing(rig: &mut Rig, msg: ConfigMessage<'_>) {
    let t = rig.next_transfer();
    for f in rig.frames_for(node_id(), &msg, t) {
        rig.node.receive(&f, rig.now);
    }
    advance_echoing(rig, 3_000);
}

#[test]
fn own_frames_in_the_listen_window_are_not_a_collision() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(50_000);
    let frames = own_messages();
    assert!(frames.len() >= 10);
    inject_all(&mut rig, &frames);
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    assert_eq!(rig.node.fault(), FaultCode::None);
    assert!(rig.app.events.is_empty());
    // The window closes as usual: the node announces.
    rig.advance(listen_end());
    assert!(rig.take().iter().any(|m| m.id.opcode == Opcode::Discover));
}

#[test]
fn own_frames_while_unacknowledged_are_not_a_collision() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    // Every kind, crafted.
    let frames = own_messages();
    inject_all(&mut rig, &frames);
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    // And the node's real answers, echoed: ANNOUNCE (with back-off), SCHEMA_DATA, STATS,
    // RESULT NAK BAD_STATE.
    advance_echoing(&mut rig, 500_000);
    send_echoing(
        &mut rig,
        ConfigMessage::SchemaRead(SchemaRead {
            offset: 0,
            len: 200,
        }),
    );
    send_echoing(&mut rig, ConfigMessage::StatsRead);
    send_echoing(
        &mut rig,
        ConfigMessage::Start(Start {
            frame_count: 0,
            master_timeout_ms: 0,
        }),
    );
    let kinds: Vec<Opcode> = rig.take().iter().map(|m| m.id.opcode).collect();
    for op in [
        Opcode::Discover,
        Opcode::Schema,
        Opcode::Stats,
        Opcode::Result,
    ] {
        assert!(kinds.contains(&op), "the node sent no {op:?}: {kinds:?}");
    }
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    assert_eq!(rig.node.fault(), FaultCode::None);
    // Still a node a master can take: it acknowledges normally.
    rig.ack(BusMode::Classic);
    assert_eq!(rig.node.state(), NodeState::Provisioned);
}

#[test]
fn own_frames_while_running_are_not_a_collision() {
    let mut rig = running_rig();
    rig.app.handler = Handler::Echo;
    inject_all(&mut rig, &own_messages());
    rig.node.publish(0, T_EVENT, &[1, 2, 3, 4]).unwrap();
    for _ in 0..5 {
        rig.master_heartbeat();
        advance_echoing(&mut rig, 50_000);
    }
    send_echoing(&mut rig, ConfigMessage::StatsRead);
    send_echoing(
        &mut rig,
        ConfigMessage::ParamGet(ParamGet {
            block: 0,
            param: P_GAIN,
        }),
    );
    send_echoing(
        &mut rig,
        ConfigMessage::ServiceRequest(ServiceRequest {
            block: 0,
            service: S_MOVE,
            body: &[1, 2, 3, 4, 5, 6, 7],
        }),
    );
    send_echoing(
        &mut rig,
        ConfigMessage::SchemaRead(SchemaRead {
            offset: 0,
            len: 100,
        }),
    );
    // Past a node heartbeat (1 s), the master's heartbeats keeping the watchdog fed.
    for _ in 0..11 {
        rig.master_heartbeat();
        advance_echoing(&mut rig, 100_000);
    }
    let kinds: Vec<Opcode> = rig.take().iter().map(|m| m.id.opcode).collect();
    for op in [
        Opcode::Heartbeat,
        Opcode::Stats,
        Opcode::ParamGet,
        Opcode::Service,
        Opcode::Schema,
    ] {
        assert!(kinds.contains(&op), "the node sent no {op:?}: {kinds:?}");
    }
    assert_eq!(rig.node.state(), NodeState::Running);
    assert_eq!(rig.node.fault(), FaultCode::None);
    assert!(!rig.app.events.contains(&Event::IdCollision));
}

#[test]
fn a_foreign_announce_with_another_boot_id_still_faults_an_unacknowledged_node() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    // Our own ANNOUNCE: nothing.
    inject_all(&mut rig, &announce(BOOT_ID));
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    // Another node's: FAULT, silent.
    inject_all(&mut rig, &announce(BOOT_ID ^ 1));
    assert_eq!(rig.node.state(), NodeState::Fault);
    assert_eq!(rig.node.fault(), FaultCode::IdCollision);
    assert_eq!(rig.app.events, vec![Event::IdCollision]);
}

#[test]
fn a_foreign_announce_in_the_listen_window_faults() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(10_000);
    inject_all(&mut rig, &announce(0x0BAD_0BAD));
    assert_eq!(rig.node.state(), NodeState::Fault);
}
