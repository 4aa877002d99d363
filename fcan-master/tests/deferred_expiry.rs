//! A node gives up a deferred service call its application never completed and answers
//! EXPIRED (issue 10, item 11): the master ends the call with that error at once,
//! instead of waiting for its own timeout.

#[path = "support/mod.rs"]
mod support;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{ConfigMessage, ServiceResponse, ServiceStatus};
use fcan_master::engine::{CallError, Event, NoSink};
use support::EngineWorld;

#[test]
fn an_expired_deferred_call_ends_with_an_error() {
    // One I/O board (node 1): block 0 is out0, whose service 0 (`set`) is deferred.
    let mut w = EngineWorld::new(Mtu::Classic, 0, 1);
    w.provision();
    while w.engine.pop_event().is_some() {}
    let now = w.now_us;
    let call = w
        .engine
        .call_service(fcan_core::id::NodeId::new(1).unwrap(), 0, 0, &[1], now)
        .unwrap();
    w.engine.poll(now);
    let mut transfer = None;
    while let Some(f) = w.engine.pop_frame() {
        if let Ok(id) = ConfigId::from_can_id(f.id()) {
            if id.opcode == Opcode::Service {
                transfer = Some(id.transfer);
            }
        }
    }
    let transfer = transfer.expect("the request went out");
    // The node (not stepped: its application never completes) answers ACCEPTED, then
    // EXPIRED when it gives the call up.
    let node = NodeId::new(1).unwrap();
    for status in [ServiceStatus::Accepted, ServiceStatus::Expired] {
        let msg = ConfigMessage::ServiceResponse(ServiceResponse {
            block: 0,
            service: 0,
            status,
            body: &[],
        });
        let mut buf = [0u8; 8];
        let n = msg.encode(&mut buf).unwrap();
        let id = ConfigId::single(Opcode::Service, Direction::ToMaster, node, transfer);
        let frame = Frame::classic(id.can_id(), &buf[..n]).unwrap();
        w.engine.handle_frame(&frame, now + 1_000, &mut NoSink);
    }
    let mut done = None;
    while let Some(e) = w.engine.pop_event() {
        if let Event::CallDone { id, result } = e {
            assert_eq!(id, call);
            done = Some(result);
        }
    }
    assert_eq!(
        done,
        Some(Err(CallError::Status(ServiceStatus::Expired))),
        "the call ends with the node's EXPIRED, long before the master's own timeout"
    );
}
