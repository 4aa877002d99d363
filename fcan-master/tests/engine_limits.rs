//! Hostile or unlucky input at the engine (issue 10): pending calls are bounded per node
//! and matched on everything a reply names, so every call ends with its own answer, a
//! timeout or an error (item 5); heartbeats from unknown nodes cannot make the master
//! flood the bus with DISCOVERs (item 6); frames of other devices that merely parse as
//! configuration identifiers are not taken for another master (item 7).

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{ConfigMessage, FaultCode, NodeHeartbeat, NodeState, ServiceResponse};
use fcan_core::msg::{MasterHeartbeat, ServiceStatus};
use fcan_core::segment::Segmenter;
use fcan_master::cache::MemoryStore;
use fcan_master::engine::{
    CallError, Engine, EngineConfig, Event, NoSink, DISCOVER_PER_SECOND, MAX_OUTSTANDING_REQUESTS,
};
use fcan_master::registry::Registry;
use support::EngineWorld;

/// The I/O board's `out0/set` service: (node, block, service).
fn out0_set(w: &EngineWorld) -> (NodeId, u8, u8) {
    let reg = Registry::of(&w.engine);
    let s = reg
        .services
        .iter()
        .find(|s| s.name.ends_with("/out0/set"))
        .expect("io board has out0/set");
    (s.node, s.block, s.service)
}

/// Frames of one configuration message from `node` to the master.
fn from_node(node: NodeId, transfer: u8, msg: &ConfigMessage, mtu: Mtu) -> Vec<Frame> {
    let mut buf = [0u8; 256];
    let n = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(msg.opcode(), Direction::ToMaster, node, transfer);
    Segmenter::new(id, mtu, &buf[..n], &[]).unwrap().collect()
}

/// The transfer id of every SERVICE request the engine queued since the last call
/// (the frames are taken, not delivered to any node).
fn service_requests(e: &mut Engine) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(f) = e.pop_frame() {
        if let Ok(id) = ConfigId::from_can_id(f.id()) {
            if id.opcode == Opcode::Service && id.dir == Direction::ToNode && id.segment == 0 {
                out.push(id.transfer);
            }
        }
    }
    out
}

fn call_done(e: &mut Engine) -> Vec<(u64, Result<Vec<u8>, CallError>)> {
    let mut out = Vec::new();
    while let Some(ev) = e.pop_event() {
        if let Event::CallDone { id, result } = ev {
            out.push((id, result));
        }
    }
    out
}

/// A response body carrying `tag` where `settle_ms` goes (after the `success` byte).
fn body(tag: u16) -> [u8; 8] {
    let t = tag.to_le_bytes();
    [1, t[0], t[1], 0, 0, 0, 0, 0]
}

fn respond(w: &mut EngineWorld, node: NodeId, block: u8, service: u8, transfer: u8, tag: u16) {
    let b = body(tag);
    let msg = ConfigMessage::ServiceResponse(ServiceResponse {
        block,
        service,
        status: ServiceStatus::Ok,
        body: &b,
    });
    for f in from_node(node, transfer, &msg, Mtu::Fd) {
        w.engine.handle_frame(&f, w.now_us, &mut NoSink);
    }
}

#[test]
fn three_hundred_calls_each_end_with_their_own_answer() {
    let mut w = EngineWorld::new(Mtu::Fd, 0, 1);
    w.provision();
    call_done(&mut w.engine);
    let (node, block, service) = out0_set(&w);
    // Calls in flight: request id → (transfer id, tag its answer will carry).
    let mut pending: BTreeMap<u64, (u8, u16)> = BTreeMap::new();
    let mut answers: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut refused = 0;
    for tag in 0..300u16 {
        match w.engine.call_service(node, block, service, &[1], w.now_us) {
            Ok(id) => {
                let t = service_requests(&mut w.engine);
                assert_eq!(t.len(), 1);
                // Never a transfer id another pending call still waits on.
                assert!(
                    pending.values().all(|(pt, _)| *pt != t[0]),
                    "call {tag}: transfer {} reused while pending",
                    t[0]
                );
                pending.insert(id, (t[0], tag));
            }
            Err(CallError::TooManyRequests { node: n, limit }) => {
                assert_eq!((n, limit), (node, MAX_OUTSTANDING_REQUESTS));
                assert_eq!(pending.len(), MAX_OUTSTANDING_REQUESTS);
                assert!(service_requests(&mut w.engine).is_empty(), "nothing sent");
                refused += 1;
                // Answer the oldest half, then go on calling.
                let oldest: Vec<(u64, (u8, u16))> = pending
                    .iter()
                    .take(MAX_OUTSTANDING_REQUESTS / 2)
                    .map(|(k, v)| (*k, *v))
                    .collect();
                for (_, (t, tag)) in &oldest {
                    respond(&mut w, node, block, service, *t, *tag);
                }
                for (id, r) in call_done(&mut w.engine) {
                    answers.insert(id, r.expect("answered OK"));
                    let (_, tag) = pending.remove(&id).expect("a pending call completed");
                    let got = u16::from_le_bytes([answers[&id][1], answers[&id][2]]);
                    assert_eq!(got, tag, "call {id} completed by another call's answer");
                }
                assert_eq!(pending.len(), MAX_OUTSTANDING_REQUESTS / 2);
            }
            Err(e) => panic!("call {tag}: {e}"),
        }
    }
    assert!(refused > 0, "the limit was reached");
    assert!(answers.len() + pending.len() + refused == 300);
    // The rest end by timeout: nothing waits for ever.
    let still: Vec<u64> = pending.keys().copied().collect();
    let end = w.now_us + 10_000_000;
    while w.now_us < end {
        w.now_us += 100_000;
        w.engine.poll(w.now_us);
        for (id, r) in call_done(&mut w.engine) {
            assert_eq!(r, Err(CallError::Timeout(node)));
            assert!(pending.remove(&id).is_some());
        }
    }
    assert!(
        pending.is_empty(),
        "{} of {still:?} never ended",
        pending.len()
    );
}

#[test]
fn a_reply_naming_another_service_does_not_complete_a_call() {
    let mut w = EngineWorld::new(Mtu::Fd, 0, 1);
    w.provision();
    call_done(&mut w.engine);
    let (node, block, service) = out0_set(&w);
    let id = w
        .engine
        .call_service(node, block, service, &[1], w.now_us)
        .unwrap();
    let t = service_requests(&mut w.engine)[0];
    // Same node and transfer id, another service; another block; another node.
    respond(&mut w, node, block, service.wrapping_add(1), t, 1);
    respond(&mut w, node, block.wrapping_add(1), service, t, 2);
    respond(
        &mut w,
        NodeId::new(node.get() + 1).unwrap(),
        block,
        service,
        t,
        3,
    );
    assert!(
        call_done(&mut w.engine).is_empty(),
        "completed by a wrong reply"
    );
    respond(&mut w, node, block, service, t, 4);
    let done = call_done(&mut w.engine);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].0, id);
    let bytes = done[0].1.clone().unwrap();
    assert_eq!(u16::from_le_bytes([bytes[1], bytes[2]]), 4);
}

#[test]
fn repeated_accepted_cannot_hold_a_call_open() {
    let mut w = EngineWorld::new(Mtu::Fd, 0, 1);
    w.provision();
    call_done(&mut w.engine);
    let (node, block, service) = out0_set(&w);
    let id = w
        .engine
        .call_service(node, block, service, &[1], w.now_us)
        .unwrap();
    let t = service_requests(&mut w.engine)[0];
    let accepted = ConfigMessage::ServiceResponse(ServiceResponse {
        block,
        service,
        status: ServiceStatus::Accepted,
        body: &[],
    });
    let frames = from_node(node, t, &accepted, Mtu::Fd);
    // ACCEPTED every 100 ms for 60 s.
    let mut done = Vec::new();
    for _ in 0..600 {
        w.now_us += 100_000;
        for f in &frames {
            w.engine.handle_frame(f, w.now_us, &mut NoSink);
        }
        w.engine.poll(w.now_us);
        done.extend(call_done(&mut w.engine));
        if !done.is_empty() {
            break;
        }
    }
    assert_eq!(done, vec![(id, Err(CallError::Timeout(node)))]);
}

fn heartbeat(node: u8, boot_id: u32) -> Frame {
    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id,
        errors: 0,
    });
    from_node(NodeId::new(node).unwrap(), 0, &hb, Mtu::Classic)[0]
}

fn discovers_sent(e: &mut Engine) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(f) = e.pop_frame() {
        if let Ok(id) = ConfigId::from_can_id(f.id()) {
            if id.opcode == Opcode::Discover && id.dir == Direction::ToNode {
                out.push(id.node.get());
            }
        }
    }
    out
}

#[test]
fn heartbeats_from_unknown_nodes_do_not_flood_discovers() {
    let mut e = Engine::new(
        EngineConfig::new(0xBEEF, Mtu::Classic),
        Box::new(MemoryStore::new()),
    );
    // One unknown node, heartbeating (or something looking like it) every millisecond.
    let mut t = 1_000;
    let mut sent = Vec::new();
    for _ in 0..400 {
        e.handle_frame(&heartbeat(5, 7), t, &mut NoSink);
        sent.extend(discovers_sent(&mut e));
        t += 1_000;
    }
    assert_eq!(sent, vec![5], "one DISCOVER for 400 heartbeats in 0.4 s");
    // A second later it is asked again (a node that missed it must still be found).
    t += 1_000_000;
    e.handle_frame(&heartbeat(5, 7), t, &mut NoSink);
    assert_eq!(discovers_sent(&mut e), vec![5]);
    // 120 unknown node ids at once: a bounded number of DISCOVERs per second in all.
    t += 10_000_000;
    let mut sent = Vec::new();
    for round in 0..3 {
        for node in 1..=120u8 {
            e.handle_frame(&heartbeat(node, 9), t + round * 1000, &mut NoSink);
        }
        sent.extend(discovers_sent(&mut e));
    }
    assert_eq!(sent.len(), DISCOVER_PER_SECOND as usize, "{sent:?}");
    assert!(e.stats().discovers_limited > 0);
}

#[test]
fn only_a_real_master_heartbeat_means_another_master() {
    let mut e = Engine::new(
        EngineConfig::new(0xBEEF, Mtu::Classic),
        Box::new(MemoryStore::new()),
    );
    let other = |node: NodeId, len: usize| {
        let id = ConfigId::single(Opcode::Heartbeat, Direction::ToNode, node, 0);
        let data = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
        Frame::classic(id.can_id(), &data[..len]).unwrap()
    };
    // What a foreign device's random identifiers can look like: a "heartbeat" to one
    // node, or one of the wrong length.
    e.handle_frame(&other(NodeId::new(3).unwrap(), 4), 0, &mut NoSink);
    e.handle_frame(&other(NodeId::BROADCAST, 8), 0, &mut NoSink);
    e.handle_frame(&other(NodeId::BROADCAST, 5), 0, &mut NoSink);
    let mut events = Vec::new();
    while let Some(ev) = e.pop_event() {
        events.push(ev);
    }
    assert!(events.is_empty(), "{events:?}");
    // A master's heartbeat, exactly as a master sends it.
    assert_eq!(MasterHeartbeat::LEN, 4);
    e.handle_frame(&other(NodeId::BROADCAST, 4), 0, &mut NoSink);
    assert_eq!(
        e.pop_event(),
        Some(Event::OtherMaster {
            session: 0x4433_2211
        })
    );
}

#[test]
fn foreign_transfer_starts_do_not_starve_a_schema_download() {
    // Classical CAN: the blob comes in many multi-frame chunks, each needing a slot.
    let mut w = EngineWorld::new(Mtu::Classic, 1, 0);
    w.engine.discover();
    let mut rng = fastrand::Rng::with_seed(3);
    // Every 100 µs, 8 first segments of transfers nobody asked for (each would hold a
    // reassembly slot for 100 ms), from any node id, with the opcodes of answers.
    let ops = [
        Opcode::Schema,
        Opcode::Service,
        Opcode::ParamGet,
        Opcode::Stats,
    ];
    while w
        .engine
        .nodes()
        .all(|n| n.phase != fcan_master::engine::Phase::Running)
    {
        for _ in 0..8 {
            let id = ConfigId::single(
                ops[rng.usize(..ops.len())],
                Direction::ToMaster,
                NodeId::new(rng.u8(1..=126)).unwrap(),
                rng.u8(..),
            )
            .with_segment(0, false);
            let f = Frame::classic(id.can_id(), &[rng.u8(..); 8]).unwrap();
            w.engine.handle_frame(&f, w.now_us, &mut NoSink);
        }
        w.step(100, &mut NoSink);
        assert!(
            w.now_us < 5_000_000,
            "not provisioned under foreign traffic: {:?}",
            w.engine
                .node(NodeId::new(1).unwrap())
                .map(|n| n.phase.clone())
        );
    }
    assert!(w.engine.stats().rx_ignored > 0);
}
